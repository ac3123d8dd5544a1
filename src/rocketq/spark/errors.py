"""Errors of the Spark connector: branches of rocketq's one error tree, raised at load()/start()."""

from __future__ import annotations

from rocketq.errors import ConfigError, RocketQError


class SparkOptionError(ConfigError):
    """An option of the "rocketq" format that is unknown, missing or malformed; names the option."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"option {option!r}: {message}")
        self.option = option


class DataLossError(RocketQError):
    """Messages the query was asked to read are gone (retention deleted them, or a queue vanished).

    Raised only with failOnDataLoss=true (the default), as Spark's Kafka source does.
    """


class SourceUnavailableError(RocketQError):
    """The name server, a broker or a store directory could not be reached or read."""

    retriable = True


class WorkerPythonError(ConfigError):
    """Spark's Python workers run an interpreter that cannot import rocketq (``PYSPARK_PYTHON``)."""
