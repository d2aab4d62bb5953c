"""The `shoal` data source: batch and streaming reads, batch and streaming writes.

Register it once per session with `spark.dataSource.register(ShoalDataSource)`, then use
`format("shoal")`. (Spark 4 also registers, without a call, every `DataSource` named
`DefaultSource` in a top-level module whose name starts with `pyspark_`: see spark/README.md.)
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.datasource import DataSourceReader
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.datasource import DataSourceStreamWriter
from pyspark.sql.datasource import DataSourceWriter
from pyspark.sql.types import StructType

from spark.batch import ShoalBatchReader
from spark.options import BatchOptions
from spark.options import StreamOptions
from spark.options import WriteOptions
from spark.rows import SCHEMA
from spark.stream import ShoalStreamReader
from spark.writer import ShoalStreamWriter
from spark.writer import ShoalWriter


class ShoalDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "shoal"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return ShoalBatchReader(BatchOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ShoalStreamReader(StreamOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return ShoalWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return ShoalStreamWriter(WriteOptions.parse(self.options), schema)
