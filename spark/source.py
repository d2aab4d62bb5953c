"""The `shoal` data source: batch and streaming reads, batch and streaming writes.

Register it once per session with `spark.dataSource.register(ShoalDataSource)`, then use
`format("shoal")`. (Spark 4 also registers, without a call, every `DataSource` named
`DefaultSource` in a top-level module whose name starts with `pyspark_`: see spark/README.md.)

Spark runs many short Python workers (one to look data sources up, one to create this object,
one to plan each read, ...), and each imports this module afresh: the readers and writers, and
the client modules they need, are imported by the method that makes them.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import NoReturn
from typing import TypeVar

from pyspark.sql.datasource import DataSource
from pyspark.sql.datasource import DataSourceReader
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.datasource import DataSourceStreamWriter
from pyspark.sql.datasource import DataSourceWriter
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from spark.options import BatchOptions
from spark.options import OptionError
from spark.options import StreamOptions
from spark.options import WriteOptions
from spark.options import check_at_load
from spark.options import include_headers_of
from spark.rows import schema_of

T = TypeVar("T")


class ShoalDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "shoal"

    # Spark calls schema() at load(): options are checked there, so a wrong one fails when the
    # query is defined, not at its first trigger.

    def schema(self) -> StructType:
        _checked(check_at_load, self.options)
        return schema_of(include_headers=include_headers_of(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        from spark.batch import ShoalBatchReader

        return ShoalBatchReader(_checked(BatchOptions.parse, self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from spark.stream import ShoalStreamReader

        try:
            return ShoalStreamReader(_checked(StreamOptions.parse, self.options))
        except OptionError as e:
            return RefusedStreamReader(e)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from spark.writer import ShoalWriter

        if overwrite:  # as Spark's Kafka sink: a topic cannot be emptied and rewritten
            raise OptionError(
                "save mode Overwrite is not allowed for the shoal sink (as for Spark's Kafka "
                'sink): records are appended to a topic; use mode("append")'
            )
        return ShoalWriter(_checked(WriteOptions.parse, self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from spark.writer import ShoalStreamWriter

        return ShoalStreamWriter(_checked(WriteOptions.parse, self.options), schema)


def _checked(parse: Callable[[Mapping[str, str]], T], options: Mapping[str, str]) -> T:
    """`parse(options)`; its OptionError raised again from here, without the frames of the
    parser, so the traceback Spark shows in PYTHON_DATA_SOURCE_ERROR stays two lines long and
    the message is what the user reads."""
    try:
        return parse(options)
    except OptionError as e:
        raise OptionError(str(e)) from None


class RefusedStreamReader(DataSourceStreamReader):
    """A stream whose options are wrong: every call raises why. `streamReader()` must not raise
    itself: PySpark 4's streaming runner then calls `stop()` on a reader it never got, and its
    UnboundLocalError buries the message."""

    def __init__(self, error: OptionError) -> None:
        self.error = error

    def _refuse(self) -> NoReturn:
        raise OptionError(str(self.error)) from None

    def initialOffset(self) -> dict[str, Any]:
        self._refuse()

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        self._refuse()

    def getDefaultReadLimit(self) -> Any:
        self._refuse()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self._refuse()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        self._refuse()

    def commit(self, end: dict[str, Any]) -> None:
        self._refuse()

    def stop(self) -> None:
        """Nothing was opened."""
