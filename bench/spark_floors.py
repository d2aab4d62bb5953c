"""The floors of the Spark phase: trivial Python data sources with the `shoal` source's schema.

`shoal_floor` reads nothing: each task yields slices of one Arrow batch built once per Python
worker, so a run costs only what Spark itself charges a Python data source (planning, task
launch, Arrow transfer, the sink). Streaming plans micro-batches of `perBatch` rows split into
`numPartitions` tasks, as the `shoal` stream reader with `maxRecordsPerTrigger` does; batch
plans `numPartitions` tasks. Options: `records`, `perBatch`, `numPartitions`, `valueSize`.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.datasource import DataSourceReader
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.streaming.datasource import ReadMaxRows
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from spark.rows import SCHEMA

_CHUNK = 100_000  # rows of the one pre-built batch; tasks yield slices of it
_BUILT: dict[int, Any] = {}


def _prebuilt(value_size: int) -> Any:
    """One Arrow batch of `_CHUNK` rows, made once per worker process."""
    if value_size not in _BUILT:
        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

        from client.arrow_batches import SCHEMA as ARROW

        n = _CHUNK
        value = pa.array([b"x" * value_size] * n, pa.binary())
        _BUILT[value_size] = pa.RecordBatch.from_arrays(
            [
                pa.nulls(n, pa.binary()),
                value,
                pa.repeat(pa.scalar("floor", pa.string()), n),
                pa.repeat(pa.scalar(0, pa.int32()), n),
                pa.array(range(n), pa.int64()),
                pa.repeat(pa.scalar(1_700_000_000_000_000, pa.int64()), n).cast(
                    ARROW.field("timestamp").type
                ),
                pa.repeat(pa.scalar(0, pa.int32()), n),
                pa.array([[]] * n, ARROW.field("headers").type),
                pa.repeat(pa.scalar(1, pa.int32()), n),
            ],
            schema=ARROW,
        )
    return _BUILT[value_size]


def _rows(count: int, value_size: int) -> Iterator[Any]:
    batch = _prebuilt(value_size)
    while count > 0:
        n = min(count, batch.num_rows)
        yield batch.slice(0, n)
        count -= n


def _split(total: int, pieces: int) -> list[int]:
    size, extra = divmod(total, pieces)
    return [size + (1 if i < extra else 0) for i in range(pieces) if size or i < extra]


class _Opts:
    def __init__(self, options: dict[str, str]) -> None:
        # Spark hands the options with lower-cased names: "perBatch" arrives as "perbatch".
        options = {k.lower(): v for k, v in options.items()}
        self.records = int(options.get("records", "1000000"))
        self.per_batch = int(options.get("perbatch", "100000"))
        self.pieces = int(options.get("numpartitions", "1"))
        self.value_size = int(options.get("valuesize", "100"))


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "shoal_floor"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _FloorBatch(_Opts(dict(self.options)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _FloorStream(_Opts(dict(self.options)))


class _FloorBatch(DataSourceReader):
    def __init__(self, opts: _Opts) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(n) for n in _split(self.opts.records, self.opts.pieces)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _rows(int(partition.value), self.opts.value_size)


class _FloorStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: _Opts) -> None:
        self.opts = opts

    def initialOffset(self) -> dict[str, int]:
        return {"n": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.opts.per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        step = limit.max_rows if isinstance(limit, ReadMaxRows) else self.opts.records
        return {"n": min(self.opts.records, int(start["n"]) + step)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        total = int(end["n"]) - int(start["n"])
        return [InputPartition(n) for n in _split(total, self.opts.pieces)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _rows(int(partition.value), self.opts.value_size)

    def commit(self, end: dict[str, int]) -> None:
        pass
