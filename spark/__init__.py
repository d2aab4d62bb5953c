"""Shoal's PySpark data source (Spark 4 Python Data Source API) over `client/`.

`spark.dataSource.register(ShoalDataSource)`, then `spark.readStream.format("shoal")` (a share
group), `spark.read.format("shoal")` (plain fetch by offsets or time) and `df.write` /
`df.writeStream` `.format("shoal")`. `shoal_ack` marks records of a micro-batch to be rejected
or released instead of accepted. See spark/README.md.
"""

from spark.acks import shoal_ack
from spark.source import ShoalDataSource

DefaultSource = ShoalDataSource  # the name Spark's automatic lookup of pyspark_* modules wants

__all__ = ["DefaultSource", "ShoalDataSource", "shoal_ack"]
