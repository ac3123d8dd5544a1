"""The row shape of the "rocketq" format, in Spark DDL and in Arrow.

Spark hands a Python data source the schema the user asked for (``.schema(...)``) or the one
``DataSource.schema()`` returned; readers build exactly those columns, in that order. A user
schema may pick and reorder the standard columns and may ask for ``body`` as ``string`` (UTF-8);
bodies that are not UTF-8 then read as null and, when the schema has a ``_corrupt_body binary``
column (Spark's ``columnNameOfCorruptRecord`` convention), keep their raw bytes there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pyarrow as pa

from rocketq.spark.errors import SparkOptionError

# (name, Spark DDL type, Arrow type) of every column a reader can produce.
_TS: Final = pa.timestamp("us", tz="UTC")
_COLUMNS: Final[tuple[tuple[str, str, pa.DataType], ...]] = (
    ("topic", "string", pa.string()),
    ("broker", "string", pa.string()),
    ("queue_id", "int", pa.int32()),
    ("queue_offset", "bigint", pa.int64()),
    ("msg_id", "string", pa.string()),
    ("keys", "string", pa.string()),
    ("tags", "string", pa.string()),
    ("body", "binary", pa.binary()),
    ("properties", "map<string,string>", pa.map_(pa.string(), pa.string())),
    ("born_timestamp", "timestamp", _TS),
    ("store_timestamp", "timestamp", _TS),
    ("born_host", "string", pa.string()),
    ("reconsume_times", "int", pa.int32()),
)
COLUMN_NAMES: Final = tuple(c[0] for c in _COLUMNS)
CORRUPT_BODY: Final = "_corrupt_body"
DEFAULT_DDL: Final = ", ".join(f"{name} {ddl}" for name, ddl, _ in _COLUMNS)
_ARROW_BY_NAME: Final = {name: typ for name, _, typ in _COLUMNS}

# Spark's simpleString() of each accepted type (what a StructType field reports).
_SPARK_TYPES: Final = {
    "topic": ("string",),
    "broker": ("string",),
    "queue_id": ("int", "bigint"),
    "queue_offset": ("bigint",),
    "msg_id": ("string",),
    "keys": ("string",),
    "tags": ("string",),
    "body": ("binary", "string"),
    "properties": ("map<string,string>",),
    "born_timestamp": ("timestamp", "bigint"),
    "store_timestamp": ("timestamp", "bigint"),
    "born_host": ("string",),
    "reconsume_times": ("int", "bigint"),
    CORRUPT_BODY: ("binary",),
}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    spark_type: str  # simpleString of the requested type

    @property
    def arrow_type(self) -> pa.DataType:
        if self.name == CORRUPT_BODY:
            return pa.binary()
        if self.spark_type == "string" and self.name == "body":
            return pa.string()
        if self.spark_type == "bigint":
            return pa.int64()
        return _ARROW_BY_NAME[self.name]


@dataclass(frozen=True, slots=True)
class RowSchema:
    """The columns one read produces (picklable: it travels to every executor)."""

    columns: tuple[Column, ...]

    @classmethod
    def default(cls) -> RowSchema:
        return cls(tuple(Column(name, ddl) for name, ddl, _ in _COLUMNS))

    @classmethod
    def from_fields(cls, fields: list[tuple[str, str]]) -> RowSchema:
        """From (name, simpleString type) pairs of a Spark StructType; rejects what we can't fill."""
        cols: list[Column] = []
        for name, spark_type in fields:
            accepted = _SPARK_TYPES.get(name)
            if accepted is None:
                raise SparkOptionError(
                    "schema", f"unknown column {name!r}; columns are {', '.join(COLUMN_NAMES)}"
                    f" and {CORRUPT_BODY}"
                )
            if spark_type not in accepted:
                raise SparkOptionError(
                    "schema", f"column {name!r} cannot be {spark_type}; use {' or '.join(accepted)}"
                )
            cols.append(Column(name, spark_type))
        return cls(tuple(cols))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.arrow_type) for c in self.columns])

    def has(self, name: str) -> bool:
        return any(c.name == name for c in self.columns)

    @property
    def body_as_string(self) -> bool:
        return any(c.name == "body" and c.spark_type == "string" for c in self.columns)
