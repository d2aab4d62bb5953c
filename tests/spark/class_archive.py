"""The training driver of the class-data archive (see jvm.py): what the Spark tests do, once,
so that its JVM has loaded their classes when it exits and writes them out.

Run by `jvm.class_archive()` with SPARK_SUBMIT_OPTS naming the archive. It waits for its JVM
to exit: the archive is written then, after Spark's own shutdown.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.brokers import BrokerProcess
from tests.spark.conftest import configure_group
from tests.spark.conftest import create_topic
from tests.spark.conftest import produce
from tests.spark.conftest import session_builder


def main() -> None:
    from pyspark.sql import functions as F

    tmp = Path(tempfile.mkdtemp(prefix="shoal-cds-"))
    with BrokerProcess(tmp / "data") as broker:
        create_topic(broker.bootstrap, "train", 2)
        produce(broker.bootstrap, "train", 400, partitions=2)
        configure_group(broker.bootstrap, "train-group")
        spark = session_builder().getOrCreate()
        jvm = spark.sparkContext._gateway.proc  # type: ignore[attr-defined]
        read = spark.read.format("shoal").option("kafka.bootstrap.servers", broker.bootstrap)
        assert read.option("subscribe", "train").load().count() == 400
        stream = (
            spark.readStream.format("shoal")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "train")
            .option("group", "train-group")
            .option("maxRecordsPerTrigger", "300")
            .load()
        )
        flagged = stream.withColumn("ok", F.udf(lambda o: o >= 0, "boolean")(F.col("offset")))
        query = (
            flagged.writeStream.foreachBatch(lambda df, _: df.select("offset", "ok").collect())
            .trigger(availableNow=True)
            .option("checkpointLocation", str(tmp / "ck"))
            .start()
        )
        query.awaitTermination(240)
        rows = spark.createDataFrame([(b"k", b"v", 0)], "key binary, value binary, partition int")
        rows.write.format("shoal").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", "train"
        ).mode("append").save()
        spark.stop()
    jvm.stdin.close()  # Spark's gateway exits on EOF, writing the archive
    sys.exit(jvm.wait(240))


if __name__ == "__main__":
    main()
