"""Shoal's PySpark data source (Spark 4 Python Data Source API) over `client/`.

`spark.dataSource.register(ShoalDataSource)`, then `spark.readStream.format("shoal")` (a share
group), `spark.read.format("shoal")` (plain fetch by offsets or time) and `df.write` /
`df.writeStream` `.format("shoal")`. `shoal_ack` marks records of a micro-batch to be rejected
or released instead of accepted. See spark/README.md.

Importing this package before the SparkSession starts also makes Spark's Python workers run
this interpreter when `PYSPARK_PYTHON` is not set (Spark's default is `python3` from PATH,
which outside an activated venv lacks Shoal and its dependencies: `No module named 'kio'`).
"""

import os
import sys

from spark.acks import shoal_ack
from spark.source import ShoalDataSource

DefaultSource = ShoalDataSource  # the name Spark's automatic lookup of pyspark_* modules wants

# Read by PySpark when the SparkContext starts, and by the JVM (inherited) for the workers that
# look up and run Python data sources; an explicit setting wins.
if sys.executable:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

__all__ = ["DefaultSource", "ShoalDataSource", "shoal_ack"]
