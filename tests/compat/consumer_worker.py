"""A KIP-848 group consumer process (`group.protocol=consumer`) for the consumer-group tests.

`python -m tests.compat.consumer_worker BOOTSTRAP GROUP TOPIC OUT` subscribes and polls until
SIGTERM, then closes (leaving the group). It appends "A <partitions>" when partitions are
assigned, "R <partitions>" when revoked, "L <partitions>" when lost, and "M <partition>
<offset> <value>" per record, flushed as written, so the file records what happened however
the process ends.
"""

from __future__ import annotations

import signal
import sys
from typing import Any
from typing import TextIO

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition


def _line(out: TextIO, tag: str, partitions: list[TopicPartition]) -> None:
    out.write(f"{tag} {','.join(str(tp.partition) for tp in partitions)}\n")


def main(bootstrap: str, group: str, topic: str, out_path: str) -> None:
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    with open(out_path, "a", buffering=1) as out:
        consumer.subscribe(
            [topic],
            on_assign=lambda _c, ps: _line(out, "A", ps),
            on_revoke=lambda _c, ps: _line(out, "R", ps),
            on_lost=lambda _c, ps: _line(out, "L", ps),
        )
        while not stopping:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                out.write(f"M {m.partition()} {m.offset()} {m.value().decode()}\n")
        consumer.close()
        out.write("CLOSED\n")


if __name__ == "__main__":
    main(*sys.argv[1:5])
