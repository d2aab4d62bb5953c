"""The rows every Shoal reader produces: Kafka's columns plus `deliveryCount`.

Records travel to the executors column by column (`Columns`, plain lists: cheap to pickle) and
leave `read()` as one Arrow record batch, so Spark does no per-row conversion.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from pyspark.sql.types import ArrayType
from pyspark.sql.types import BinaryType
from pyspark.sql.types import IntegerType
from pyspark.sql.types import LongType
from pyspark.sql.types import StringType
from pyspark.sql.types import StructField
from pyspark.sql.types import StructType
from pyspark.sql.types import TimestampType

from client.records import ConsumerRecord

# key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
# timestampType int, headers array<struct<key:string,value:binary>>, deliveryCount int
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
        StructField("deliveryCount", IntegerType()),
    ]
)


def schema_of(*, include_headers: bool = True) -> StructType:
    """SCHEMA, without `headers` when the reader was given includeHeaders=false."""
    if include_headers:
        return SCHEMA
    return StructType([f for f in SCHEMA.fields if f.name != "headers"])


def without_headers(batches: Iterable[Any]) -> Iterator[Any]:
    """Arrow record batches of SCHEMA without their `headers` column (no copy of the rest)."""
    for batch in batches:
        keep = [i for i, name in enumerate(batch.schema.names) if name != "headers"]
        yield batch.select(keep)


@dataclass
class Columns:
    """Records as columns; `delivery_count` holds None for reads outside a share group."""

    key: list[bytes | None] = field(default_factory=list)
    value: list[bytes | None] = field(default_factory=list)
    topic: list[str] = field(default_factory=list)
    partition: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    timestamp_ms: list[int] = field(default_factory=list)
    timestamp_type: list[int] = field(default_factory=list)
    headers: list[list[tuple[str, bytes | None]]] = field(default_factory=list)
    delivery_count: list[int | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offset)

    @classmethod
    def of(cls, records: Iterable[ConsumerRecord], *, shared: bool = True) -> Columns:
        out = cls()
        for r in records:
            out.append(r, shared=shared)
        return out

    def append(self, r: ConsumerRecord, *, shared: bool = True) -> None:
        self.key.append(r.key)
        self.value.append(r.value)
        self.topic.append(r.topic)
        self.partition.append(r.partition)
        self.offset.append(r.offset)
        self.timestamp_ms.append(r.timestamp_ms)
        self.timestamp_type.append(r.timestamp_type)
        self.headers.append(list(r.headers))
        self.delivery_count.append(r.delivery_count if shared else None)

    def to_arrow(self) -> Any:
        """One `pyarrow.RecordBatch` with exactly the Arrow schema Spark expects for SCHEMA."""
        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(SCHEMA, timezone="UTC")
        t = schema.field("timestamp").type
        arrays = [
            pa.array(self.key, schema.field("key").type),
            pa.array(self.value, schema.field("value").type),
            pa.array(self.topic, schema.field("topic").type),
            pa.array(self.partition, schema.field("partition").type),
            pa.array(self.offset, schema.field("offset").type),
            pa.array([None if ms < 0 else ms * 1000 for ms in self.timestamp_ms], pa.int64()).cast(
                t
            ),
            pa.array(self.timestamp_type, schema.field("timestampType").type),
            pa.array(
                [[{"key": k, "value": v} for k, v in hs] for hs in self.headers],
                schema.field("headers").type,
            ),
            pa.array(self.delivery_count, schema.field("deliveryCount").type),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
