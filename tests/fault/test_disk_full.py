"""A full disk never crashes the broker nor stores a send it refused (issue 9 item 6).

Each test makes a small ext4 filesystem of its own (a loop mount; the suite runs as root), puts
the broker's data directory on it, leaves only some room free with a filler file, and sends
until the broker refuses. Then: the process is still up, sends get SERVICE_NOT_AVAILABLE with
RocketMQ's disk-full remark, every acknowledged message reads back with its body, no refused
one is stored, and once the filler is deleted sends succeed again. Forcible clean-up is off
(`cleanFileForciblyEnable=false`): with it, RocketMQ deletes unexpired segments on a full
disk by design, which would make "nothing acknowledged is lost" untestable.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from faultlib import broker_config, read_topic, stop
from tests.harness import Cluster, start_cluster
from tests.wire import batch_body, create_topic, message_properties, new_uniq_key, send_header

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(180)

TOPIC = "DiskFullT"
QUEUES = 4
FS_BYTES = 64 << 20
SMALL_SEGMENT = 8 << 20
# A partition whose directory does not exist yet reads -1, as Java's getDiskPartitionSpaceUsedPercent.
DISK_FULL_REMARK = r"the broker's disk is full \[CL: +-?[01]\.\d\d CQ: +-?[01]\.\d\d INDEX: +-?[01]\.\d\d\]"
# Small index and consume-queue files: their size is not what this test is about.
STORE = (
    "--set", "mappedFileSizeConsumeQueue=60000",
    "--set", "maxHashSlotNum=4000",
    "--set", "maxIndexNum=16000",
    "--set", "cleanFileForciblyEnable=false",
)
# How often retention re-checks disk usage (and clears a disk-full refusal): a fast fill must
# meet a failed reservation before that check sees 90 %, a slow one meets the check first.
FAST_CHECK = ("--set", "cleanResourceInterval=10000")
SLOW_CHECK = ("--set", "cleanResourceInterval=500")


@dataclass
class Ledger:
    """What the producers were told: acknowledged (uniq -> body) and refused sends."""

    acked: dict[str, bytes] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)
    remarks: set[str] = field(default_factory=set)
    unexpected: list[str] = field(default_factory=list)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB ext4 mounted at tmp_path/mnt for this test only; always unmounted."""
    image, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    mnt.mkdir()
    with image.open("wb") as f:
        f.truncate(FS_BYTES)
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        pytest.fail(f"the disk-full tests need a loop-mounted ext4 (root, mkfs.ext4, loop devices): {e} "
                    f"{detail.decode(errors='replace')}")
    try:
        yield mnt
    finally:
        for _ in range(50):
            if subprocess.run(["umount", str(mnt)], capture_output=True).returncode == 0:
                break
            time.sleep(0.2)  # a broker still letting go of its files
        else:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
        image.unlink(missing_ok=True)


def fill(mnt: Path, leave: int) -> Path:
    """A filler file taking all but `leave` bytes of the filesystem (really allocated)."""
    filler = mnt / "filler"
    st = os.statvfs(mnt)
    size = st.f_bavail * st.f_frsize - leave
    assert size > 0, f"only {st.f_bavail * st.f_frsize} bytes free, wanted to leave {leave}"
    fd = os.open(filler, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    return filler


async def up(tmp_path: Path, mnt: Path, segment: int, *extra: str) -> Cluster:
    """`rocketq up` with its data on the small filesystem and its logs off it."""
    data = tmp_path / "data"
    if not data.exists():
        (mnt / "data").mkdir()
        data.symlink_to(mnt / "data")
    # faulthandler: a bus error would otherwise end the process without a word
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    return await asyncio.to_thread(start_cluster, tmp_path, "--set", f"mappedFileSizeCommitLog={segment}",
                                   *STORE, *extra, env=env)


def _single(queue_id: int, body: bytes) -> tuple[RemotingCommand, list[str]]:
    uniq = new_uniq_key()
    ext = send_header(TOPIC, queue_id=queue_id, properties=message_properties(uniq_key=uniq))
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body), [uniq]


def _batch(queue_id: int, bodies: list[bytes]) -> tuple[RemotingCommand, list[str]]:
    data, uniqs = batch_body(bodies)
    ext = send_header(TOPIC, queue_id=queue_id, batch=True, properties=message_properties())
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, data), uniqs


async def send_until_refused(client: RemotingClient, addr: str, ledger: Ledger, *, senders: int,
                             body_size: int, pause: float = 0.0, deadline: float = 60.0) -> None:
    """Senders (one in four sending batches of 4) until each was refused a few times in a row."""
    stop_at = time.monotonic() + deadline

    async def sender(n: int) -> None:
        refused_in_a_row = 0
        i = 0
        while refused_in_a_row < 5 and time.monotonic() < stop_at:
            bodies = [f"{n}:{i + k}:".encode().ljust(body_size, b"x") for k in range(4 if n % 4 == 3 else 1)]
            i += len(bodies)
            queue_id = n % QUEUES
            request, uniqs = _single(queue_id, bodies[0]) if len(bodies) == 1 else _batch(queue_id, bodies)
            resp = await client.invoke(addr, request, 10.0)
            if resp.code == ResponseCode.SUCCESS:
                refused_in_a_row = 0
                ledger.acked.update(zip(uniqs, bodies, strict=True))
            elif resp.code == ResponseCode.SERVICE_NOT_AVAILABLE:
                refused_in_a_row += 1
                ledger.refused.update(uniqs)
                ledger.remarks.add(resp.remark or "")
            else:
                ledger.unexpected.append(f"{resp.code} {resp.remark}")
                return
            if pause:
                await asyncio.sleep(pause)

    await asyncio.gather(*(sender(n) for n in range(senders)))


async def assert_stored_exactly_the_acked(client: RemotingClient, addr: str, ledger: Ledger) -> None:
    stored = [m for msgs in (await read_topic(client, addr, TOPIC, range(QUEUES))).values() for m in msgs]
    by_uniq: dict[str, bytes] = {}
    for m in stored:
        uniq = m.properties.get("UNIQ_KEY", "")
        assert uniq not in by_uniq, f"{uniq} stored twice"
        by_uniq[uniq] = m.body
    lost = [u for u in ledger.acked if u not in by_uniq]
    assert not lost, f"{len(lost)} of {len(ledger.acked)} acknowledged messages are missing"
    assert all(by_uniq[u] == body for u, body in ledger.acked.items()), "an acknowledged body changed"
    kept = ledger.refused & by_uniq.keys()
    assert not kept, f"{len(kept)} refused sends were stored anyway"


async def wait_for_success(client: RemotingClient, addr: str, ledger: Ledger, timeout: float = 45.0) -> None:
    """Send until the broker takes a message again (it re-checks the disk every cleanResourceInterval)."""
    end = time.monotonic() + timeout
    while True:
        body = b"after-space-returned"
        request, uniqs = _single(0, body)
        resp = await client.invoke(addr, request, 10.0)
        if resp.code == ResponseCode.SUCCESS:
            ledger.acked[uniqs[0]] = body
            return
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE, (resp.code, resp.remark)
        ledger.refused.update(uniqs)
        assert time.monotonic() < end, "sends still refused long after space returned"
        await asyncio.sleep(0.25)


def assert_store_logged_each_failure_once(tmp_path: Path) -> None:
    """The store says it is full once (and once more when usable), never a traceback a second
    per service; nothing dies on a bus error. (Broker metadata writers log on their own.)"""
    logs = tmp_path / "logs"
    text = (logs / "rocketq-up.err").read_text() + (logs / "rocketq-up.out").read_text()
    assert "Fatal Python error" not in text, text[-4000:]
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d )", text)
    store_tracebacks = [r.splitlines()[0] for r in records if " rocketq.store " in r and "Traceback" in r]
    heads = [line.split(" - ", 1)[-1] for line in store_tracebacks]
    assert len(heads) == len(set(heads)), store_tracebacks
    marked = [r for r in records if "store marked full" in r or "store full, puts refused" in r]
    assert marked, "the store never said it was full"


async def fill_refuse_recover(tmp_path: Path, mnt: Path, *, segment: int, leave: int, senders: int,
                              body_size: int, pause: float = 0.0) -> None:
    cluster = await up(tmp_path, mnt, segment, *(SLOW_CHECK if pause else FAST_CHECK))
    try:
        async with RemotingClient() as client:
            addr = cluster.broker
            assert (await broker_config(client, addr))["mappedFileSizeCommitLog"] == str(segment)
            assert (await create_topic(client, addr, TOPIC, read=QUEUES, write=QUEUES)).code == 0
            filler = fill(mnt, leave)
            ledger = Ledger()
            await send_until_refused(client, addr, ledger, senders=senders, body_size=body_size, pause=pause)
            assert not ledger.unexpected, ledger.unexpected[:5]
            assert ledger.acked and ledger.refused, (len(ledger.acked), len(ledger.refused))
            assert all(re.search(DISK_FULL_REMARK, r) for r in ledger.remarks), ledger.remarks
            assert cluster.alive(), cluster.describe()
            await assert_stored_exactly_the_acked(client, addr, ledger)

            filler.unlink()
            await wait_for_success(client, addr, ledger)
            for i in range(20):
                body = f"resumed-{i}".encode()
                request, uniqs = _single(i % QUEUES, body)
                resp = await client.invoke(addr, request, 10.0)
                assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
                ledger.acked[uniqs[0]] = body
            await assert_stored_exactly_the_acked(client, addr, ledger)
        assert cluster.alive(), cluster.describe()
        assert_store_logged_each_failure_once(tmp_path)
    finally:
        code = await stop(cluster)
    assert code == 0, cluster.describe()


async def test_fast_fill_small_segments(tmp_path: Path, small_fs: Path) -> None:
    """The bounded variant of the default run: 8 MiB segments, 16 senders flat out, ~20 MiB free."""
    await fill_refuse_recover(tmp_path, small_fs, segment=SMALL_SEGMENT, leave=20 << 20, senders=16,
                              body_size=1024)


async def test_restart_on_a_full_disk_starts_read_only(tmp_path: Path, small_fs: Path) -> None:
    """A broker restarted on a full disk comes up, serves what it holds, refuses sends, and takes
    them again once space returns."""
    cluster = await up(tmp_path, small_fs, SMALL_SEGMENT)
    ledger = Ledger()
    try:
        async with RemotingClient() as client:
            assert (await create_topic(client, cluster.broker, TOPIC, read=QUEUES, write=QUEUES)).code == 0
            filler = fill(small_fs, 12 << 20)
            await send_until_refused(client, cluster.broker, ledger, senders=8, body_size=1024)
            assert not ledger.unexpected and ledger.acked, ledger.unexpected[:5]
    finally:
        await stop(cluster)
    # whatever the stop freed (a temporary file, a last flush) is taken as well
    with filler.open("ab") as f:
        try:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        except OSError:
            pass
    cluster = await up(tmp_path, small_fs, SMALL_SEGMENT)
    try:
        async with RemotingClient() as client:
            request, uniqs = _single(1, b"refused-at-start")
            resp = await client.invoke(cluster.broker, request, 10.0)
            assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE, (resp.code, resp.remark)
            assert re.search(DISK_FULL_REMARK, resp.remark or ""), resp.remark
            ledger.refused.update(uniqs)
            await assert_stored_exactly_the_acked(client, cluster.broker, ledger)
            filler.unlink()
            await wait_for_success(client, cluster.broker, ledger)
            await assert_stored_exactly_the_acked(client, cluster.broker, ledger)
        assert cluster.alive(), cluster.describe()
    finally:
        code = await stop(cluster)
    assert code == 0, cluster.describe()


@pytest.mark.slow
async def test_fast_fill_default_segments(tmp_path: Path, small_fs: Path) -> None:
    """1 GiB segments on a 55 MiB filesystem: the segment never fills, the disk does."""
    await fill_refuse_recover(tmp_path, small_fs, segment=1 << 30, leave=40 << 20, senders=16, body_size=1024)


@pytest.mark.slow
async def test_slow_fill_small_segments(tmp_path: Path, small_fs: Path) -> None:
    """A trickle of sends: the disk-usage check (90 %) or the reservation refuses first."""
    await fill_refuse_recover(tmp_path, small_fs, segment=SMALL_SEGMENT, leave=4 << 20, senders=4,
                              body_size=4096, pause=0.002)


@pytest.mark.slow
async def test_slow_fill_default_segments(tmp_path: Path, small_fs: Path) -> None:
    await fill_refuse_recover(tmp_path, small_fs, segment=1 << 30, leave=36 << 20, senders=4, body_size=4096,
                              pause=0.002)


def test_loop_tools_exist() -> None:
    """The tests above need these; a machine without them fails here, loudly, rather than skip."""
    assert shutil.which("mkfs.ext4") and shutil.which("mount"), "mkfs.ext4 and mount are required"
