"""A group member that commits, for the exactly-once accounting of consumer groups.

`python -m tests.compat.committing_worker BOOTSTRAP GROUP TOPIC OUT PROTOCOL` subscribes with
`group.protocol=PROTOCOL` (classic or consumer) and `enable.auto.commit=False`, and after
each `consume()` batch commits synchronously. It appends to OUT, flushed as written, each line
ending in `time.monotonic()` (one clock for every process on the machine):
"A <partitions> t" assigned, "V <partitions> t" revoked, "L <partitions> t" lost,
"R <partition> <offset> <value> t" per record (written before its commit is sent), and
"C <partition> <offset> t" per partition once its commit was acknowledged. SIGTERM closes it
(leaving the group).
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any
from typing import TextIO

from confluent_kafka import Consumer
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition


def _line(out: TextIO, tag: str, partitions: list[TopicPartition]) -> None:
    out.write(f"{tag} {','.join(str(tp.partition) for tp in partitions)} {time.monotonic()}\n")


def _commit(consumer: Consumer, out: TextIO) -> None:
    try:
        done = consumer.commit(asynchronous=False) or []
    except KafkaException as e:  # e.g. a rebalance under way: those records stay uncommitted
        out.write(f"E {e.args[0].name()} {time.monotonic()}\n")
        return
    at = time.monotonic()
    for tp in done:
        if tp.error is None and tp.offset >= 0:
            out.write(f"C {tp.partition} {tp.offset} {at}\n")


def main(bootstrap: str, group: str, topic: str, out_path: str, protocol: str) -> None:
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "reconnect.backoff.max.ms": 500,  # back soon after the broker restarts
        "log_level": 0,
    }
    if protocol == "classic":  # KIP-848 takes both from the broker
        settings |= {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    consumer = Consumer(settings)
    with open(out_path, "a", buffering=1) as out:
        consumer.subscribe(
            [topic],
            on_assign=lambda _c, ps: _line(out, "A", ps),
            on_revoke=lambda _c, ps: _line(out, "V", ps),
            on_lost=lambda _c, ps: _line(out, "L", ps),
        )
        while not stopping:
            records = [m for m in consumer.consume(100, 0.2) if m.error() is None]
            for m in records:
                out.write(
                    f"R {m.partition()} {m.offset()} {m.value().decode()} {time.monotonic()}\n"
                )
            if records:
                _commit(consumer, out)
        consumer.close()
        out.write("CLOSED\n")


if __name__ == "__main__":
    main(*sys.argv[1:6])
