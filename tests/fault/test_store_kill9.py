"""kill -9 a process that owns a bare message store (no broker around it): every put that returned
PUT_OK under SYNC_FLUSH is there after recovery. The broker-level campaign is test_kill9_sync_flush."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.unit.store.store_testlib import bodies, small_config

from rocketq.store import MessageStore

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(60)
def test_kill_9_never_loses_an_acknowledged_sync_flush_message(tmp_path: Path) -> None:
    root = tmp_path / "store"
    script = textwrap.dedent(f"""
        import asyncio, os, signal, sys
        sys.path.insert(0, {str(REPO)!r})
        from tests.unit.store.store_testlib import msg, small_config
        from rocketq.store import MessageStore

        async def main():
            s = MessageStore(small_config({str(root)!r}, flush_disk_type="SYNC_FLUSH"))
            s.load()
            await s.start()
            for i in range(300):
                r = await s.put_message(msg(body=b"acked-%d" % i))
                assert r.status.name == "PUT_OK"
                print(i, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=50)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acked = len(proc.stdout.split())
    assert acked == 300
    s = MessageStore(small_config(root))
    s.load()
    try:
        assert s.recovery_report is not None and s.recovery_report.abnormal
        assert bodies(s) == [b"acked-%d" % i for i in range(acked)]
    finally:
        s.close()
