"""The rows every Shoal reader produces: Kafka's columns plus `deliveryCount`.

Readers yield Arrow record batches of this schema (`client.arrow_batches.SCHEMA` is its Arrow
form), decoded on the executors, so Spark does no per-row conversion.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any

from pyspark.sql.types import ArrayType
from pyspark.sql.types import BinaryType
from pyspark.sql.types import IntegerType
from pyspark.sql.types import LongType
from pyspark.sql.types import StringType
from pyspark.sql.types import StructField
from pyspark.sql.types import StructType
from pyspark.sql.types import TimestampType

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
