"""`rocketq namesrv` as a real process: READY line, answers over TCP, SIGTERM exits 0."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from tests.harness import rocketq_command, start_process

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import RemotingClient

READY = re.compile(r"^READY namesrv=(?P<addr>127\.0\.0\.1:\d+)\s*$", re.MULTILINE)


@pytest.mark.timeout(60)
async def test_namesrv_process(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    proc = start_process(
        [*rocketq_command(), "namesrv", "--data-dir", str(data_dir), "--namesrv-port", "0"],
        name="rocketq-namesrv",
        log_dir=tmp_path / "logs",
    )
    try:
        match = await asyncio.to_thread(proc.wait_for, READY, 30.0)
        addr = match["addr"]
        async with RemotingClient() as client:
            put = RemotingCommand.request(
                RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}
            )
            assert (await client.invoke(addr, put, 5.0)).code == ResponseCode.SUCCESS
            get = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
            resp = await client.invoke(addr, get, 5.0)
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST, proc.describe()
        # The KV store lives under the data dir, not in the user's home.
        assert (data_dir / "namesrv" / "kvConfig.json").exists(), proc.describe()
        assert await asyncio.to_thread(proc.stop, 20.0) == 0, proc.describe()
    finally:
        proc.kill()
