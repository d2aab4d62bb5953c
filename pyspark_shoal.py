"""Lets `spark.read/readStream.format("shoal")` work without registering the data source.

Spark 4 registers the `DefaultSource` of every importable top-level module named `pyspark_*`.
"""

from spark import DefaultSource

__all__ = ["DefaultSource"]
