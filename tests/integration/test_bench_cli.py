"""`rocketq bench producer | consumer | e2e` against a real `rocketq up`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.harness import Cluster, rocketq_command, run_process, start_cluster, unique_name

pytestmark = [pytest.mark.timeout(90)]

SEND_LINE = re.compile(
    r"^Current Time: [\d-]+ [\d:]+ \| Send TPS: (?P<tps>\d+) \| Max RT\(ms\): [\d.]+ \| "
    r"Average RT\(ms\): [\d.]+ \| Send Failed: (?P<failed>\d+) \| Response Failed: \d+ \| "
    r"p50\(ms\): [\d.]+ \| p99\(ms\): [\d.]+$", re.MULTILINE)
CONSUME_LINE = re.compile(
    r"^Current Time: [\d-]+ [\d:]+ \| Consume TPS: (?P<tps>\d+) \| AVG\(B2C\) RT\(ms\): [\d.]+ \| .*"
    r"p99\(B2C ms\): [\d.]+$", re.MULTILINE)
SUMMARY = re.compile(r"^\[(?P<side>Send|Consume) summary\] total: (?P<total>\d+) \| failed: (?P<failed>\d+)",
                     re.MULTILINE)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("bench"))
    try:
        yield c
    finally:
        assert c.stop(20.0) == 0, c.describe()


def _bench(*args: str, timeout: float = 40.0):  # type: ignore[no-untyped-def]
    return run_process([*rocketq_command(), "bench", *args], timeout=timeout)


def _summaries(text: str) -> dict[str, tuple[int, int]]:
    return {m["side"]: (int(m["total"]), int(m["failed"])) for m in SUMMARY.finditer(text)}


def test_producer_prints_a_line_per_second_and_exits_0(cluster: Cluster) -> None:
    run = _bench("producer", "-n", cluster.namesrv, "-t", unique_name("BenchP"), "-d", "2", "--threads", "4")
    assert run.returncode == 0, run.describe()
    lines = SEND_LINE.findall(run.stdout)
    assert len(lines) >= 2, run.stdout
    assert all(int(m.group("failed")) == 0 for m in SEND_LINE.finditer(run.stdout))
    assert sum(int(m.group("tps")) for m in SEND_LINE.finditer(run.stdout)) > 0
    total, failed = _summaries(run.stdout)["Send"]
    assert total > 0 and failed == 0
    assert "Traceback" not in run.stderr


def test_async_batch_with_plot(cluster: Cluster, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    run = _bench("producer", "-n", cluster.namesrv, "-t", unique_name("BenchA"), "-d", "1", "--async",
                 "--threads", "2", "--window", "16", "--batch", "8", "-s", "64", "--plot", str(png))
    assert run.returncode == 0, run.describe()
    total, failed = _summaries(run.stdout)["Send"]
    assert total > 0 and total % 8 == 0 and failed == 0  # whole batches only
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_e2e_reports_both_sides(cluster: Cluster) -> None:
    run = _bench("e2e", "-n", cluster.namesrv, "-t", unique_name("BenchE"), "-d", "2", "--threads", "2")
    assert run.returncode == 0, run.describe()
    assert SEND_LINE.search(run.stdout) and CONSUME_LINE.search(run.stdout), run.stdout
    sums = _summaries(run.stdout)
    sent, consumed = sums["Send"][0], sums["Consume"][0]
    assert sent > 0 and 0 < consumed <= sent + 1  # +1: the warm-up message may be consumed too


def test_e2e_at_a_fixed_rate_times_send_to_listener(cluster: Cluster) -> None:
    run = _bench("e2e", "-n", cluster.namesrv, "-t", unique_name("BenchR"), "-d", "2", "--rate", "200")
    assert run.returncode == 0, run.describe()
    sent, failed = _summaries(run.stdout)["Send"]
    # one paced sender: about 400 in 2 s, not the thousands of free-running senders
    assert 100 <= sent <= 500 and failed == 0, run.stdout
    consumed = _summaries(run.stdout)["Consume"][0]
    assert 0 < consumed <= sent + 1, run.stdout
    # timed from the body's ns stamp: sub-millisecond figures, not whole broker milliseconds
    p50s = [float(v) for v in re.findall(r"p50\(B2C ms\): ([\d.]+)", run.stdout)]
    assert p50s and any(0 < v != round(v) for v in p50s), run.stdout


def test_consumer_reads_a_backlog_from_the_first_offset(cluster: Cluster) -> None:
    topic = unique_name("BenchC")
    produced = _bench("producer", "-n", cluster.namesrv, "-t", topic, "-d", "1", "--threads", "2")
    assert produced.returncode == 0, produced.describe()
    sent = _summaries(produced.stdout)["Send"][0] + 1  # and the warm-up message
    run = _bench("consumer", "-n", cluster.namesrv, "-t", topic, "-d", "2", "--from-first")
    assert run.returncode == 0, run.describe()
    assert CONSUME_LINE.search(run.stdout), run.stdout
    assert _summaries(run.stdout)["Consume"][0] == sent


CPU_LINE = re.compile(r"^\[CPU summary\] messages: (?P<n>\d+) \| CPU client [\d.]+ us/msg \(\d+% of a core\)"
                      r"(?P<broker> \| broker [\d.]+ us/msg)?", re.MULTILINE)


def test_consumer_drains_a_backlog_in_batches_and_stops_at_its_count(cluster: Cluster) -> None:
    topic = unique_name("BenchD")
    produced = _bench("producer", "-n", cluster.namesrv, "-t", topic, "-d", "1", "--threads", "2",
                      "--batch", "10")
    assert produced.returncode == 0, produced.describe()
    sent = _summaries(produced.stdout)["Send"][0] + 1  # and the warm-up message
    assert CPU_LINE.search(produced.stdout), produced.stdout
    # -m stops the run once the backlog is in, long before -d: the run's rate is the drain's own
    run = _bench("consumer", "-n", cluster.namesrv, "-t", topic, "-d", "60", "--from-first",
                 "--batch-max-size", "32", "--pull-batch-size", "64", "-m", str(sent),
                 "--broker-pid", str(cluster.proc.pid), timeout=80.0)
    assert run.returncode == 0, run.describe()
    assert _summaries(run.stdout)["Consume"] == (sent, 0)
    cpu = CPU_LINE.search(run.stdout)
    assert cpu is not None and int(cpu["n"]) == sent and cpu["broker"], run.stdout


def test_cluster_down_and_bad_options(tmp_path: Path) -> None:
    down = _bench("producer", "-n", "127.0.0.1:1", "-d", "1")
    assert down.returncode == 1
    assert down.stderr.strip().count("\n") == 0 and "no name server reachable" in down.stderr
    assert "Traceback" not in down.stderr
    for args in (["producer", "--bogus"], ["producer", "-s", "0"]):
        bad = _bench(*args, "-n", "127.0.0.1:1")
        assert bad.returncode == 2, bad.describe()
        assert "Traceback" not in bad.stderr and "error" in bad.stderr
