"""``RocketQDataSource``: the PySpark data source registered as format "rocketq".

Options are validated when Spark asks for the schema (at ``load()``) and again when it builds
a reader or writer, so a typo, a malformed offsets JSON, an unknown topic or an unreachable
name server fail there with an error naming the option, not later inside a task.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from rocketq.spark.options import ReadOptions, WriteOptions
from rocketq.spark.planning import check_queues, discover
from rocketq.spark.reader import RocketQBatchReader, RocketQStreamReader, close_source, open_source
from rocketq.spark.schema import DEFAULT_DDL, RowSchema


def row_schema(schema: StructType) -> RowSchema:
    return RowSchema.from_fields([(f.name, f.dataType.simpleString()) for f in schema.fields])


class RocketQDataSource(DataSource):
    """Read topics (batch or streaming) from a RocketMQ-compatible cluster or a store directory,
    and write DataFrames to topics. See docs/spark.md for the options."""

    @classmethod
    def name(cls) -> str:
        return "rocketq"


    def schema(self) -> str:
        opts = ReadOptions.parse(self.options, streaming=None)
        source = open_source(opts)
        try:
            refs = discover(source, opts)  # unknown topic / unreachable name server: fail at load()
            check_queues("startingOffsetsByTimestamp", refs, opts.starting_by_timestamp)
            check_queues("endingOffsetsByTimestamp", refs, opts.ending_by_timestamp)
        finally:
            close_source(source)
        return DEFAULT_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketQBatchReader(ReadOptions.parse(self.options), row_schema(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - PySpark API name
        return RocketQStreamReader(ReadOptions.parse(self.options, streaming=True), row_schema(schema))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from rocketq.spark.writer import RocketQBatchWriter

        return RocketQBatchWriter(WriteOptions.parse(self.options), schema.simpleString())

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:  # noqa: N802 - PySpark API name
        from rocketq.spark.writer import RocketQStreamWriter

        return RocketQStreamWriter(WriteOptions.parse(self.options), schema.simpleString())
