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
from collections.abc import Mapping
from typing import TypeVar

from pyspark.sql.datasource import DataSource
from pyspark.sql.datasource import DataSourceReader
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.datasource import DataSourceStreamWriter
from pyspark.sql.datasource import DataSourceWriter
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

        return ShoalStreamReader(_checked(StreamOptions.parse, self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from spark.writer import ShoalWriter

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
