"""The first minutes of a newcomer, against a real ``rocketq up``: the README quickstart run as
a script prints the message it consumed, and the server announces READY exactly once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.harness import Cluster, grpc_address, module_cluster

import rocketq

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(rocketq.__file__).resolve().parents[1]

cluster = module_cluster("newcomer", also_as_4_9=True, slow_as_4_9=True)


def _quickstart() -> str:
    """The first Python block under README's "## Quickstart", as written there."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split("## Quickstart", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "README.md has no python block under ## Quickstart"
    return match.group(1)


def test_readme_quickstart_prints_the_consumed_message(cluster: Cluster, tmp_path: Path) -> None:
    code = _quickstart()
    assert code.count('"127.0.0.1:9876"') == 2, code
    script = tmp_path / "quickstart.py"
    script.write_text(code.replace('"127.0.0.1:9876"', repr(cluster.namesrv)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines and lines[0].startswith("SendStatus.SEND_OK"), done.stdout
    assert "consumed TopicTest A order-1 b'hello'" in lines, done.stdout + done.stderr[-3000:]


def test_ready_is_announced_once(cluster: Cluster) -> None:
    stdout = cluster.proc.stdout()
    stderr = cluster.proc.stderr_path.read_text("utf-8", "replace")
    announced = [ln for ln in (stdout + stderr).splitlines() if "READY" in ln]
    assert len(announced) == 1, announced
    expected = f"READY namesrv={cluster.namesrv} broker={cluster.broker} grpc={grpc_address(cluster)}"
    assert announced[0] == expected
