"""What ``register()`` does to a SparkSession besides registering the format.

Two things the documented snippet (a SparkSession built in a script run as ``.venv/bin/python``)
would otherwise trip over:

* Spark's Python workers are started with ``PYSPARK_PYTHON``, else the ``python3`` found on PATH,
  which is usually not the interpreter that has rocketq installed. On a local master the driver's
  own interpreter is the right one (Spark wants the same Python version on both sides anyway),
  so a session whose user chose nothing gets it; an explicit choice that cannot import rocketq
  fails at ``register()`` in one line saying what to set.
* Spark's streaming source runner (``PythonStreamingSourceRunner.init``) puts four keys into
  the environment map of the registered data source function: the map object every plan of
  that data source shares. A second streaming query starting while the first one's task binary
  is serialized therefore changes the map's size in the middle of ``HashMap.writeObject``,
  and the task fails to deserialize (``java.io.OptionalDataException`` in a ShuffleMapTask,
  then ``[STREAM_FAILED]``). With the keys present from the start, those puts only replace
  values and the map's layout never changes under the serializer.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from typing import Any

from rocketq.spark.errors import WorkerPythonError

log = logging.getLogger("rocketq.spark")

# The keys PythonStreamingSourceRunner.init (Spark 4.x) puts into the shared map.
_RUNNER_KEYS = ("SPARK_LOCAL_DIRS", "SPARK_AUTH_SOCKET_TIMEOUT", "SPARK_BUFFER_SIZE", "SPARK_PYTHON_RUNTIME")
_PROBE_TIMEOUT = 120.0


def configure_workers(spark: Any) -> None:
    """Point the workers of a local session at this interpreter unless the user chose one, and
    check that the chosen one can import rocketq (only a local master's workers are on this host)."""
    sc = _spark_context(spark)
    if sc is None:  # Spark Connect: the server starts the workers, nothing to configure here
        return
    master = str(sc.master)
    if not master.startswith("local"):
        return
    chosen = os.environ.get("PYSPARK_PYTHON") or _conf(sc, "spark.pyspark.python")
    if not chosen:
        if sc.pythonExec != sys.executable:
            log.info("Spark Python workers will run %s (PYSPARK_PYTHON is not set)", sys.executable)
            sc.pythonExec = sys.executable
        return
    check_worker_python(sc.pythonExec)


def check_worker_python(python: str) -> None:
    """Raise ``WorkerPythonError`` when ``python`` cannot import rocketq's Spark connector."""
    if python == sys.executable:
        return
    try:
        probe = subprocess.run([python, "-c", "import rocketq.spark"], capture_output=True,
                               timeout=_PROBE_TIMEOUT, check=False)
        ok = probe.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        raise WorkerPythonError(
            f"Spark's Python workers run {python!r}, which cannot import rocketq.spark: "
            f"set PYSPARK_PYTHON={sys.executable} (or unset it) before the SparkSession starts")


def preset_runner_env(spark: Any, name: str) -> None:
    """Give the registered data source's env map every key the streaming runner puts into it."""
    sc = _spark_context(spark)
    if sc is None:
        return
    try:
        registered = spark._jsparkSession.sessionState().dataSourceManager().lookupDataSource(name)
        env = registered.dataSourceCls().envVars()
    except Exception as exc:  # another Spark build: the race stays, the format still works
        log.debug("cannot preset the data source environment: %s", exc)
        return
    values = {
        # Every runner puts the block manager's dirs here before it starts a worker, so this value
        # is never what a worker sees; it only has to make the key exist. (Asking the JVM for the
        # real dirs through SparkEnv makes py4j load classes PySpark does not ship.)
        "SPARK_LOCAL_DIRS": sc.getConf().get("spark.local.dir") or tempfile.gettempdir(),
        "SPARK_AUTH_SOCKET_TIMEOUT": os.environ.get("SPARK_AUTH_SOCKET_TIMEOUT"),
        "SPARK_BUFFER_SIZE": os.environ.get("SPARK_BUFFER_SIZE"),
        "SPARK_PYTHON_RUNTIME": "PYTHON_WORKER",
    }
    for key in _RUNNER_KEYS:
        value = values[key]
        if value is not None and not env.containsKey(key):
            env.put(key, value)


def _spark_context(spark: Any) -> Any:
    try:
        return spark.sparkContext
    except Exception:  # Connect sessions have no SparkContext
        return None


def _conf(sc: Any, key: str) -> str | None:
    value = sc.getConf().get(key)
    return str(value) if value else None
