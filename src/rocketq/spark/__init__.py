"""PySpark data source for rocketq / RocketMQ: ``spark.read.format("rocketq")``.

Needs the ``spark`` extra (``pip install 'rocketq[spark]'``: pyspark >= 4.2 and pyarrow)::

    from rocketq.spark import register
    register(spark)
    df = spark.read.format("rocketq").option("namesrv", "127.0.0.1:9876").option("topic", "T").load()
"""

from __future__ import annotations

from typing import Any

from rocketq.spark.errors import DataLossError, SourceUnavailableError, SparkOptionError
from rocketq.spark.source import RocketQDataSource


def register(spark: Any) -> None:
    """Register the "rocketq" format with a SparkSession (once per session)."""
    spark.dataSource.register(RocketQDataSource)


__all__ = ["DataLossError", "RocketQDataSource", "SourceUnavailableError", "SparkOptionError", "register"]
