"""docs/spark.md's first snippet as a newcomer runs it: ``.venv/bin/python script.py`` with no
PYSPARK_PYTHON and a ``python3`` on PATH that has never heard of rocketq; and the guard that
keeps two streaming queries of one session from corrupting each other's task binaries."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.harness import Cluster
from tests.spark.conftest import make_topic, seed

import rocketq
from rocketq.spark import WorkerPythonError
from rocketq.spark._session import check_worker_python

SRC = Path(rocketq.__file__).resolve().parents[1]


@pytest.fixture()
def foreign_python3(tmp_path: Path) -> Path:
    """A directory whose ``python3`` is this Python version without the virtualenv (no rocketq)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    python3 = bindir / "python3"
    python3.symlink_to(os.path.realpath(sys.executable))
    probe = subprocess.run([str(python3), "-c", "import rocketq"], capture_output=True,
                           env=_env_without_spark())
    assert probe.returncode != 0, f"{python3} imports rocketq, so it cannot stand for a foreign python3"
    return bindir


def _env_without_spark() -> dict[str, str]:
    # conftest.py sets PYSPARK_PYTHON for the in-process session; a newcomer has none of these.
    drop = {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def test_documented_snippet_runs_with_a_foreign_python3_on_path(
        cluster: Cluster, foreign_python3: Path, tmp_path: Path) -> None:
    topic = make_topic(cluster, queues=2, prefix="SparkDoc")
    seed(cluster, topic, [{"body": b"m%d" % i} for i in range(10)], queues=2, batch=5)
    script = tmp_path / "first_snippet.py"
    # The driver finds this checkout's rocketq through sys.path, not PYTHONPATH, so nothing in
    # the environment tells the workers where rocketq is.
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(SRC)!r})
        from pyspark.sql import SparkSession
        from rocketq.spark import register

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
                 .getOrCreate())
        register(spark)                      # once per session

        df = (spark.read.format("rocketq")
              .option("namesrv", {cluster.namesrv!r})
              .option("topic", {topic!r})
              .load())
        print("ROWS", df.count(), flush=True)
        spark.stop()
        """))
    env = _env_without_spark()
    env["PATH"] = f"{foreign_python3}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "ROWS 10" in done.stdout, done.stdout


def test_a_pyspark_python_without_rocketq_fails_in_one_line(foreign_python3: Path) -> None:
    with pytest.raises(WorkerPythonError) as err:
        check_worker_python(str(foreign_python3 / "python3"))
    message = str(err.value)
    assert "\n" not in message
    assert f"PYSPARK_PYTHON={sys.executable}" in message
    check_worker_python(sys.executable)  # the driver's own interpreter passes without a probe


def test_streaming_runner_keys_are_in_the_shared_env_before_any_query(spark: SparkSession) -> None:
    # PythonStreamingSourceRunner puts these into the data source's env map; a key added while
    # another query serializes a task is what corrupted the task binary (OptionalDataException).
    registered = spark._jsparkSession.sessionState().dataSourceManager().lookupDataSource("rocketq")
    env = registered.dataSourceCls().envVars()
    for key in ("SPARK_LOCAL_DIRS", "SPARK_AUTH_SOCKET_TIMEOUT", "SPARK_BUFFER_SIZE", "SPARK_PYTHON_RUNTIME"):
        assert env.containsKey(key), key
