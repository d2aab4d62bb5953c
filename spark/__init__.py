"""Shoal's PySpark data source (Spark 4 Python Data Source API) over `client/`.

`spark.dataSource.register(ShoalDataSource)`, then `spark.readStream.format("shoal")` (a share
group), `spark.read.format("shoal")` (plain fetch by offsets or time) and `df.write` /
`df.writeStream` `.format("shoal")`. `shoal_ack` marks records of a micro-batch to be rejected
or released instead of accepted. See spark/README.md.

Importing this package before the SparkSession starts also makes Spark's Python workers run
this interpreter when `PYSPARK_PYTHON` is not set (Spark's default is `python3` from PATH,
which outside an activated venv lacks Shoal and its dependencies: `No module named 'kio'`).

Where the records are decoded (issue 14)
----------------------------------------
The driver plans by ranges and never decodes a record: a micro-batch is its acquired ranges plus
the stored batches the ShareFetches brought (`spark.stream`, `spark.ranges`). The executors
decode into Arrow with `client.arrow_batches` (numpy over the varints, no per-record Python
objects). Two ways to get the bytes to them were built and measured (`dataPath`):

- `ship` (default): the driver hands each task the stored batches it already holds, cut between
  batches; they travel pickled through Spark's task serialisation (~130 B per 100 B record).
- `fetch`: each task gets only its ranges and reads them with a plain Fetch by offset, as
  Spark's own Kafka source reads offset ranges; the data crosses the loopback twice.

Measured without Spark (400,000 records of 100 B, 4 partitions, stored batches of 500,
micro-batches of 100,000, process CPU time, 2-core development machine shared with other
work): the driver spends 0.22 us per record to acquire, plan and keep a batch (it spent ~12 us
decoding before) and 0.08 us pickling a `ship` batch; a task decodes shipped bytes at 1.2-1.4 us
per record, and spends 1.5-1.6 us per record when it fetches them itself (the broker serving
every record a second time on top). Through Spark (`make bench`'s spark phase, 1M records,
`python -m bench --only spark --repeat 1`, two runs): `ship` at 4 tasks 165k-167k records/s
with 0.18-0.21 s of broker CPU, `fetch` 136k-148k records/s with 0.93-1.00 s. So `ship` is
the default; `fetch` stays for drivers that should not carry the bytes (very large micro-batches
on a small driver).

Where a batch read's time goes at numPartitions=4 (CPU-bound across the JVM, the Python workers
and the broker; the task's decode was the largest part) is profiled, with figures, in
spark/README.md.
"""

import os
import sys

from spark.acks import shoal_ack
from spark.progress import shoal_metrics
from spark.source import ShoalDataSource

DefaultSource = ShoalDataSource  # the name Spark's automatic lookup of pyspark_* modules wants

# Read by PySpark when the SparkContext starts, and by the JVM (inherited) for the workers that
# look up and run Python data sources; an explicit setting wins.
if sys.executable:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

__all__ = ["DefaultSource", "ShoalDataSource", "shoal_ack", "shoal_metrics"]
