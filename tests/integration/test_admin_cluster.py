"""`rocketq admin` cluster, broker and name-server commands against a real `rocketq up`: clusterList,
clusterRT, brokerStatus, brokerConsumeStats, getBrokerConfig, updateBrokerConfig (safe-key rule),
cleanExpiredCQ, statsAll, wipeWritePerm/addWritePerm, getNamesrvConfig, updateKvConfig, deleteKvConfig;
and what a user sees when the cluster is down or the command line is wrong (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests.harness import (
    SMALL_STORE,
    AdminRun,
    Cluster,
    eventually,
    module_cluster,
    rocketq_command,
    unique_name,
)
from tests.java_4_9_8 import JAVA_4_9_8_KEYS, JAVA_NULL_BY_DEFAULT

from rocketq.admin import SyncAdminClient
from rocketq.errors import NoPermission

pytestmark = [pytest.mark.timeout(60)]

CLUSTER = "DefaultCluster"


cluster = module_cluster("admin-cluster", *SMALL_STORE, also_as_4_9=True, slow_as_4_9=True)


def _broker_name(admin: AdminRun) -> str:
    rows = admin.json("clusterList")
    return str(rows[0]["brokerName"])


def test_cluster_list_status_and_rt(cluster: Cluster, admin: AdminRun) -> None:
    rows = admin.json("clusterList", "-m")
    assert [(r["clusterName"], r["brokerId"], r["addr"], r["error"]) for r in rows] == [
        (CLUSTER, 0, cluster.broker, None)
    ]
    assert rows[0]["version"] and "putTps" in rows[0]["runtime"]
    assert admin.json("clusterList", "-c", CLUSTER) and "not found" in admin.fails(
        "clusterList", "-c", "Nope", code=2
    )

    status = admin.json("brokerStatus", "-b", cluster.broker)
    assert status[cluster.broker]["brokerVersionDesc"] and "msgPutTotalTodayNow" in status[cluster.broker]
    assert list(admin.json("brokerStatus", "-c", CLUSTER)) == [cluster.broker]

    rt = admin.json("clusterRT", "-a", "5")
    assert [(r["cluster"], r["sent"], r["failed"]) for r in rt] == [(CLUSTER, 5, 0)]


def test_broker_config_get_update_and_the_safe_key_rule(cluster: Cluster, admin: AdminRun) -> None:
    config = admin.json("getBrokerConfig", "-b", cluster.broker)[cluster.broker]
    assert config["brokerClusterName"] == CLUSTER and "defaultQueryMaxNum" in config
    # key for key what Java 4.9.8's broker answers, and the port it really listens on
    assert sorted(set(JAVA_4_9_8_KEYS) - JAVA_NULL_BY_DEFAULT - set(config)) == []
    assert cluster.broker.endswith(":" + config["listenPort"])
    out = admin.json("updateBrokerConfig", "-b", cluster.broker, "-k", "defaultQueryMaxNum", "-v", "77")
    assert out["brokers"] == [cluster.broker]
    assert admin.json("getBrokerConfig", "-c", CLUSTER)[cluster.broker]["defaultQueryMaxNum"] == "77"

    # Keys naming a path or command are refused by the CLI ...
    line = admin.fails(
        "updateBrokerConfig", "-b", cluster.broker, "-k", "storePathRootDir", "-v", "/tmp/x", code=2
    )
    assert "path or command" in line
    assert (
        "unknown"
        in admin.fails("updateBrokerConfig", "-c", CLUSTER, "-k", "noSuchKey", "-v", "1", code=2).lower()
    )
    # ... and by the broker itself, whatever client asks (CVE-2023-33246).
    with SyncAdminClient(cluster.namesrv) as a, pytest.raises(NoPermission):
        a.update_broker_config(cluster.broker, {"rocketmqHome": "/tmp/evil"})
    assert (
        admin.json("getBrokerConfig", "-b", cluster.broker)[cluster.broker].get("rocketmqHome", "")
        != "/tmp/evil"
    )


def test_consume_stats_clean_cq_and_stats_all(cluster: Cluster, admin: AdminRun) -> None:
    topic, group = unique_name("AdmStat"), unique_name("sg")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "2", "-w", "2")
    eventually(lambda: admin.json("topicRoute", "-t", topic))
    for i in range(4):
        admin.json("sendMessage", "-t", topic, "-p", f"s{i}", "-i", str(i % 2))
    admin.json("updateSubGroup", "-g", group, "-c", CLUSTER)
    admin.json("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
    admin.json(
        "resetOffsetByTime", "-g", group, "-t", topic, "-s", "now", "-b", cluster.broker, "-q", "0", "-o", "2"
    )

    stats = admin.json("brokerConsumeStats", "-b", cluster.broker)
    mine = sorted(
        (q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"])
        for q in stats["queues"]
        if q["group"] == group
    )
    assert mine == [(0, 2, 2, 0), (1, 2, 0, 2)]
    assert stats["totalDiff"] >= 2
    assert [
        q
        for q in admin.json("brokerConsumeStats", "-b", cluster.broker, "-l", "1")["queues"]
        if q["group"] == group
    ] == [q for q in stats["queues"] if q["group"] == group and q["diff"] >= 1]

    assert admin.json("cleanExpiredCQ", "-c", CLUSTER) == {"brokers": [cluster.broker], "success": True}
    assert admin.json("topicStatus", "-t", topic)[0]["maxOffset"] == 2  # nothing live was dropped

    rows = {r["topic"]: r for r in admin.json("statsAll")}
    row = rows[topic]
    # The group's offsets were only ever set by resets: it got nothing by consuming.
    assert (row["consumerGroup"], row["accumulation"], row["inMsg24Hour"], row["outMsg24Hour"]) == (
        group,
        2,
        4,
        0,
    )
    assert row["inTps"] > 0
    assert rows["TBW102"]["noConsumer"] and rows[CLUSTER]["noConsumer"]  # listed, as mqadmin does
    only = admin.json("statsAll", "-t", topic, "-a")
    assert [r["topic"] for r in only] == [topic]


def test_write_perm_and_namesrv_config(cluster: Cluster, admin: AdminRun) -> None:
    topic = unique_name("AdmPerm")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER)
    eventually(lambda: admin.json("topicRoute", "-t", topic))
    name = _broker_name(admin)
    wiped = admin.json("wipeWritePerm", "-b", name)
    assert wiped["namesrvs"][0]["namesrvAddr"] == cluster.namesrv and wiped["namesrvs"][0]["topicCount"] > 0
    assert admin.json("topicRoute", "-t", topic)["queueDatas"][0]["perm"] == 4
    added = admin.json("addWritePerm", "-b", name)
    assert added["namesrvs"][0]["topicCount"] > 0
    assert admin.json("topicRoute", "-t", topic)["queueDatas"][0]["perm"] == 6

    config = admin.json("getNamesrvConfig")[cluster.namesrv]
    assert "orderMessageEnable" in config
    admin.json("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert admin.json("getNamesrvConfig")[cluster.namesrv]["orderMessageEnable"] == "true"
    assert "path or command" in admin.fails(
        "updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x", code=2
    )

    ns = unique_name("NS")
    assert admin.json("updateKvConfig", "-s", ns, "-k", "k1", "-v", "v1") == {
        "namespace": ns,
        "key": "k1",
        "value": "v1",
    }
    with SyncAdminClient(cluster.namesrv) as a:
        assert a.get_kv_config(ns, "k1") == "v1"
        admin.json("deleteKvConfig", "-s", ns, "-k", "k1")
        assert a.get_kv_config(ns, "k1") is None


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    full_env.update(env or {})
    return subprocess.run(
        [*rocketq_command(), "admin", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=full_env,
        stdin=subprocess.DEVNULL,
    )


def test_errors_are_one_line_without_traceback(cluster: Cluster) -> None:
    down = _run("clusterList", "-n", "127.0.0.1:1")
    assert down.returncode == 1 and down.stdout == ""
    assert down.stderr.count("\n") == 1 and "cannot connect" in down.stderr and "Traceback" not in down.stderr

    unknown = _run("noSuchCommand")
    assert (
        unknown.returncode == 2 and "invalid choice" in unknown.stderr and "Traceback" not in unknown.stderr
    )
    typo = _run("topiclist")
    assert typo.returncode == 2 and "did you mean topicList?" in typo.stderr

    # A value a server refuses is a bad command line too (exit 2), not a failed operation.
    bad = _run(
        "updateTopic", "-n", cluster.namesrv, "-t", unique_name("Bad"), "-b", cluster.broker, "-r", "5000"
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr


def test_broken_pipe_exits_quietly(cluster: Cluster) -> None:
    # The reader is gone before the command prints anything (it takes a while to import and ask);
    # the writer must neither print a traceback nor an error line.
    for output in ("--json", "--log-level=ERROR"):  # JSON, and rich tables
        cmd = [*rocketq_command(), "admin", "getBrokerConfig", "-n", cluster.namesrv, "-b", cluster.broker]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "stdin": subprocess.DEVNULL}
        with subprocess.Popen([*cmd, output], **pipes) as p:  # type: ignore[call-overload]
            assert p.stdout is not None and p.stderr is not None
            p.stdout.close()
            err = p.stderr.read().decode()
            code = p.wait(timeout=30)
        assert (code, err) == (141, ""), output


def test_broker_status_takes_a_broker_name(cluster: Cluster, admin: AdminRun) -> None:
    name = _broker_name(admin)
    assert list(admin.json("brokerStatus", "-b", name)) == [cluster.broker]
    assert list(admin.json("getBrokerConfig", "-b", name)) == [cluster.broker]
    assert "not found" in admin.fails("brokerStatus", "-b", "noSuchBroker", code=2)


def test_human_output_is_tables(cluster: Cluster, admin: AdminRun) -> None:
    topic, group = unique_name("AdmHuman"), unique_name("hg")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "2", "-w", "2")
    eventually(lambda: admin.json("topicRoute", "-t", topic))
    sent = admin.json("sendMessage", "-t", topic, "-p", "human", "-k", "hk")
    admin.json("updateSubGroup", "-g", group, "-c", CLUSTER)
    admin.json("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
    eventually(lambda: admin.json("queryMsgByKey", "-t", topic, "-k", "hk"))
    expected = {
        ("clusterList", "-m"): "Broker Name",
        ("brokerStatus", "-b", cluster.broker): "brokerVersionDesc",
        ("topicStatus", "-t", topic): "Max Offset",
        ("topicRoute", "-t", topic): "brokerDatas",
        ("consumerProgress", "-g", group): "Diff Total: 1",
        ("consumerProgress",): group,
        ("brokerConsumeStats", "-b", cluster.broker): "ConsumerOffset",
        ("queryMsgById", "-i", sent["offsetMsgId"]): "Message Body",
        ("printMsg", "-t", topic): "human",
        ("statsAll", "-t", topic): "InMsg24Hour",
        ("getNamesrvConfig",): "listenPort",
        ("wipeWritePerm", "-b", _broker_name(admin)): "Topics Changed",
        ("addWritePerm", "-b", _broker_name(admin)): "Topics Changed",
    }
    for args, needle in expected.items():
        code, out, err = admin.raw(*args)
        assert code == 0 and err == "", f"{args}: {err}"
        assert needle in out and ("┃" in out or "│" in out or "success" in out), f"{args}:\n{out}"


def test_clean_unused_topic_and_delete_expired_commit_log(cluster: Cluster, admin: AdminRun) -> None:
    topic = unique_name("AdmClean")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "1", "-w", "1")
    admin.json("sendMessage", "-t", topic, "-p", "kept", "-i", "0")
    for command in ("cleanUnusedTopic", "deleteExpiredCommitLog"):
        assert admin.json(command, "-c", CLUSTER) == {"brokers": [cluster.broker], "success": True}
        assert admin.json(command, "-b", cluster.broker)["success"] is True
    # A topic still configured keeps its queue, and young commit-log files stay.
    assert admin.json("topicStatus", "-t", topic)[0]["maxOffset"] == 1
    assert admin.json("queryMsgByOffset", "-t", topic, "-b", _broker_name(admin), "-i", "0", "-o", "0")


def test_export_configs_and_metadata(cluster: Cluster, admin: AdminRun, tmp_path: Path) -> None:
    configs = admin.json("exportConfigs", "-c", CLUSTER, "-f", str(tmp_path))
    assert json.loads((tmp_path / "configs.json").read_text()) == configs
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    (props,) = configs["brokerConfigs"].values()
    assert props["brokerClusterName"] == CLUSTER and props["useTLS"] == "false" and len(props) == 16

    topic, group = unique_name("AdmExport"), unique_name("eg")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "3", "-w", "3")
    admin.json("updateSubGroup", "-g", group, "-c", CLUSTER)
    meta = admin.json("exportMetadata", "-c", CLUSTER, "-f", str(tmp_path))
    assert json.loads((tmp_path / "metadata.json").read_text()) == meta
    assert meta["topicConfigTable"][topic]["writeQueueNums"] == 3 and group in meta["subscriptionGroupTable"]
    assert not {"TBW102", CLUSTER, "SCHEDULE_TOPIC_XXXX"} & set(meta["topicConfigTable"])
    assert not [t for t in meta["topicConfigTable"] if t.startswith("%")]
    assert "TOOLS_CONSUMER" not in meta["subscriptionGroupTable"]
    only = admin.json("exportMetadata", "-b", cluster.broker, "-t", "-f", str(tmp_path))
    assert set(only) == {"topicConfigTable", "exportTime"} and (tmp_path / "topic.json").exists()


def test_send_msg_status_sends_to_the_broker_topic(admin: AdminRun) -> None:
    name = _broker_name(admin)
    rows = admin.json("sendMsgStatus", "-b", name, "-c", "3", "-s", "64")
    assert [r["sendStatus"] for r in rows] == ["SEND_OK"] * 3 and all(r["rt"] > 0 for r in rows)
    assert len({(r["queueId"], r["queueOffset"]) for r in rows}) == 3  # three stored messages


def test_export_metrics(cluster: Cluster, admin: AdminRun, tmp_path: Path) -> None:
    topic = unique_name("AdmMetrics")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "1", "-w", "1")
    admin.json("sendMessage", "-t", topic, "-p", "m" * 100)
    metrics = admin.json("exportMetrics", "-c", CLUSTER, "-f", str(tmp_path))
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics
    (report,) = metrics["evaluateReport"].values()
    quota = report["runtimeQuota"]
    assert quota["topicSize"] >= 1 and float(quota["messageAverageSize"]) > 100
    assert 0 <= float(quota["diskRatio"]["consumeQueueDiskRatio"]) <= 1
    assert int(report["runtimeEnv"]["totalMemKBytes"]) > 0
    assert report["runtimeVersion"]["rocketmqVersion"]
    assert set(metrics["totalData"]["totalTps"]) == {
        "totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps"
    }
