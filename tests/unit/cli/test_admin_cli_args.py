"""`rocketq admin` without a cluster: the command table, usage errors, the one-line failure contract,
and the helpers that turn arguments and values into text."""

from __future__ import annotations

import argparse
from datetime import datetime

import pytest
from tests.harness import free_port

from rocketq.cli.admin import _common
from rocketq.cli.admin._common import bool_arg, cell, format_ts, parse_timestamp, table
from rocketq.cli.main import build_parser, main

MQADMIN_COMMANDS = (
    "updateTopic",
    "deleteTopic",
    "topicList",
    "topicRoute",
    "topicStatus",
    "topicClusterList",
    "updateTopicPerm",
    "updateSubGroup",
    "deleteSubGroup",
    "consumerProgress",
    "consumerConnection",
    "producerConnection",
    "consumerStatus",
    "getConsumerStatus",
    "resetOffsetByTime",
    "skipAccumulatedMessage",
    "cloneGroupOffset",
    "queryMsgById",
    "queryMsgByKey",
    "queryMsgByUniqueKey",
    "queryMsgByOffset",
    "queryMsgTraceById",
    "printMsg",
    "sendMessage",
    "consumeMessage",
    "checkMsgSendRT",
    "clusterList",
    "clusterRT",
    "brokerStatus",
    "brokerConsumeStats",
    "getBrokerConfig",
    "updateBrokerConfig",
    "wipeWritePerm",
    "addWritePerm",
    "cleanExpiredCQ",
    "statsAll",
    "getNamesrvConfig",
    "updateKvConfig",
    "deleteKvConfig",
)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rocketq: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_every_mqadmin_command_is_there_with_its_option_letters() -> None:
    parser = build_parser()
    for name in MQADMIN_COMMANDS:
        args = parser.parse_args(["admin", name, *_minimal(name)])
        assert args.admin_command == name and callable(args.admin_handler)
    a = parser.parse_args(
        [
            "admin",
            "updateTopic",
            "-t",
            "T",
            "-c",
            "C",
            "-r",
            "3",
            "-w",
            "5",
            "-p",
            "4",
            "-o",
            "true",
            "-n",
            "h:1",
        ]
    )
    assert (a.topic, a.cluster, a.read, a.write, a.perm, a.order, a.namesrv_addr) == (
        "T",
        "C",
        3,
        5,
        4,
        True,
        "h:1",
    )
    a = parser.parse_args(["admin", "queryMsgByKey", "-t", "T", "-k", "K", "-m", "7"])
    assert (a.topic, a.key, a.max_num) == ("T", "K", 7)
    a = parser.parse_args(
        ["admin", "resetOffsetByTime", "-g", "G", "-t", "T", "-s", "1700000000000", "-f", "false"]
    )
    assert (a.group, a.topic, a.timestamp, a.force) == ("G", "T", 1700000000000, False)


def _minimal(name: str) -> list[str]:
    """The required options of each command, with placeholder values."""
    required = {
        "updateTopic": ["-t", "T", "-c", "C"],
        "deleteTopic": ["-t", "T", "-c", "C"],
        "topicRoute": ["-t", "T"],
        "topicStatus": ["-t", "T"],
        "topicClusterList": ["-t", "T"],
        "updateTopicPerm": ["-t", "T", "-p", "6"],
        "updateSubGroup": ["-g", "G"],
        "deleteSubGroup": ["-g", "G"],
        "consumerConnection": ["-g", "G"],
        "producerConnection": ["-g", "G", "-t", "T"],
        "consumerStatus": ["-g", "G"],
        "getConsumerStatus": ["-g", "G", "-t", "T"],
        "resetOffsetByTime": ["-g", "G", "-t", "T", "-s", "now"],
        "skipAccumulatedMessage": ["-g", "G", "-t", "T"],
        "cloneGroupOffset": ["-s", "A", "-d", "B", "-t", "T"],
        "queryMsgById": ["-i", "X"],
        "queryMsgByKey": ["-t", "T", "-k", "K"],
        "queryMsgByUniqueKey": ["-t", "T", "-i", "X"],
        "queryMsgByOffset": ["-t", "T", "-b", "B", "-i", "0", "-o", "0"],
        "queryMsgTraceById": ["-i", "X"],
        "printMsg": ["-t", "T"],
        "sendMessage": ["-t", "T", "-p", "x"],
        "consumeMessage": ["-t", "T"],
        "checkMsgSendRT": ["-t", "T"],
        "brokerConsumeStats": ["-b", "h:1"],
        "updateBrokerConfig": ["-k", "k", "-v", "v"],
        "wipeWritePerm": ["-b", "B"],
        "addWritePerm": ["-b", "B"],
        "updateKvConfig": ["-s", "N", "-k", "k", "-v", "v"],
        "deleteKvConfig": ["-s", "N", "-k", "k"],
    }
    return required.get(name, [])


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["admin"], "a command is required"),
        (["admin", "noSuchCommand"], "invalid choice: 'noSuchCommand'"),
        (["admin", "topicRoute", "-n", "h:1"], "the following arguments are required: -t/--topic"),
        (["admin", "topicList", "--bogus"], "unrecognized arguments: --bogus"),
        (["admin", "updateTopic", "-t", "T", "-c", "C", "-p", "5"], "'5' is not a permission"),
        (["admin", "updateTopic", "-t", "T", "-c", "C", "-b", "h:1"], "not allowed with argument"),
        (["admin", "resetOffsetByTime", "-g", "G", "-t", "T", "-s", "soon"], "'soon' is not a time"),
        (["admin", "topicList", "--timeout", "0"], "timeout must be > 0"),
        (["admin", "updateTopic", "-t", "T", "-n", "h:1"], "-b/--brokerAddr or -c/--clusterName is required"),
        (
            ["admin", "updateBrokerConfig", "-b", "h:1", "-k", "rocketmqHome", "-v", "/x", "-n", "h:1"],
            "path or command",
        ),
        (["admin", "topicList", "-n", "nonsense"], "bad name server address"),
    ],
)
def test_usage_errors_exit_2_in_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert needle in _one_line(err)


def test_no_name_server_anywhere_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    code, out, err = _run(capsys, "admin", "topicList")
    assert code == 2 and out == "" and "NAMESRV_ADDR" in _one_line(err)


def test_cluster_down_is_one_line_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", f"127.0.0.1:{free_port()}")
    for command in (["clusterList"], ["topicStatus", "-t", "T"], ["consumerProgress", "-g", "G"]):
        code, out, err = _run(capsys, "admin", *command)
        assert code == 1 and out == ""
        line = _one_line(err)
        assert f"{command[0]}: cannot connect" in line and "NAMESRV_ADDR" in line


def test_time_and_flag_arguments() -> None:
    assert parse_timestamp("1700000000123") == 1700000000123
    assert parse_timestamp("-1") == -1
    expected = int(datetime(2024, 1, 2, 3, 4, 5, 6000).timestamp() * 1000)
    assert parse_timestamp("2024-01-02#03:04:05:006") == expected
    assert parse_timestamp("2024-01-02T03:04:05.006") == expected
    assert abs(parse_timestamp("now") - int(datetime.now().timestamp() * 1000)) < 5000
    with pytest.raises(argparse.ArgumentTypeError):
        parse_timestamp("2024-13-45")
    assert format_ts(expected) == "2024-01-02 03:04:05.006" and format_ts(0) == ""
    assert [bool_arg(v) for v in ("true", "FALSE", "1", "no")] == [True, False, True, False]
    with pytest.raises(argparse.ArgumentTypeError):
        bool_arg("maybe")


def test_cells_are_literal_text() -> None:
    from rich.console import Console

    t = table(("Topic", "Body"), [("[red]T[/red]", "a\x1b[2Jb\x07"), (None, True)])
    console = Console(width=80, force_terminal=False, record=True)
    console.print(t)
    text = console.export_text()
    assert "[red]T[/red]" in text and "\\x1b[2Jb\\x07" in text and "true" in text
    assert "\x1b" not in text and "\x07" not in text
    assert cell("line\nbreak").plain == "line\nbreak"
    assert _common.printable("ok\t") == "ok\t"
