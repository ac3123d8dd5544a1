"""``rocketq dashboard`` command-line failures, and the time parser behind search and reset."""

from __future__ import annotations

import datetime as dt
import socket

import pytest

from rocketq.cli.main import main
from rocketq.dashboard.pages import parse_time
from rocketq.errors import InvalidArgument


def test_no_name_server_is_a_usage_error(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    assert main(["dashboard"]) == 2
    err = capsys.readouterr().err
    assert "no name server" in err and "Traceback" not in err


def test_bad_port_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard", "-n", "127.0.0.1:9876", "--port", "70000"]) == 2
    assert "port out of range" in capsys.readouterr().err


def test_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        assert main(["dashboard", "-n", "127.0.0.1:1", "--port", str(port), "--log-level", "ERROR"]) == 1
    err = capsys.readouterr().err
    assert "failed to start" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_parse_time() -> None:
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("0") == 0
    local = dt.datetime(2024, 5, 1, 12, 30)
    assert parse_time("2024-05-01T12:30") == int(local.timestamp() * 1000)
    assert abs(parse_time("now") - parse_time("")) < 5_000
    with pytest.raises(InvalidArgument):
        parse_time("yesterday")


async def test_cluster_down_is_an_error_box_not_a_crash() -> None:
    import aiohttp

    from rocketq.dashboard import start_dashboard

    with socket.create_server(("127.0.0.1", 0)) as closed:
        dead = f"127.0.0.1:{closed.getsockname()[1]}"
    server = await start_dashboard(dead, "127.0.0.1", 0, timeout=2.0)
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(2):  # the server survives the failure and answers again
                async with http.get(server.url + "/") as response:
                    text = await response.text()
                    assert response.status == 502
                    assert 'id="error"' in text and "Remoting" in text
            async with http.get(server.url + "/api/group?name=g") as response:
                assert response.status == 502 and "error" in await response.json()
    finally:
        await server.close()
