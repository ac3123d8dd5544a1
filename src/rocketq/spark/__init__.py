"""PySpark data source for rocketq / RocketMQ: ``spark.read.format("rocketq")``.

Needs the ``spark`` extra (``pip install 'rocketq[spark]'``: pyspark >= 4.2 and pyarrow)::

    from rocketq.spark import register
    register(spark)
    df = spark.read.format("rocketq").option("namesrv", "127.0.0.1:9876").option("topic", "T").load()
"""

from __future__ import annotations

from typing import Any

from rocketq.spark._session import configure_workers, preset_runner_env
from rocketq.spark.errors import DataLossError, SourceUnavailableError, SparkOptionError, WorkerPythonError
from rocketq.spark.progress import queue_lag
from rocketq.spark.source import RocketQDataSource


def register(spark: Any) -> None:
    """Register the "rocketq" format with a SparkSession (once per session).

    On a local master whose user did not set ``PYSPARK_PYTHON``, Spark's Python workers are set to
    run this interpreter (the one rocketq is installed in); a ``PYSPARK_PYTHON`` that cannot import
    rocketq raises ``WorkerPythonError`` saying what to set.
    """
    configure_workers(spark)
    spark.dataSource.register(RocketQDataSource)
    preset_runner_env(spark, RocketQDataSource.name())


__all__ = [
    "DataLossError",
    "RocketQDataSource",
    "SourceUnavailableError",
    "SparkOptionError",
    "WorkerPythonError",
    "queue_lag",
    "register",
]
