"""A classic consumer-group member (librdkafka `Consumer.subscribe`) in its own process.

`python -m tests.compat.group_worker BOOTSTRAP GROUP TOPIC OUT SESSION_MS` subscribes with
`enable.auto.commit=False` and appends to OUT, flushed as written: "A <partitions>" after each
assignment (comma-separated, maybe empty), "V" when partitions are revoked, and
"R <partition> <offset> <value>" for every record. It closes (LeaveGroup) when OUT.stop
appears; a test that kills it instead leaves the broker to notice the session timeout.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition


def _on_assign(out: TextIO) -> object:
    def on_assign(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        out.write(f"A {','.join(str(p.partition) for p in partitions)}\n")

    return on_assign


def _on_revoke(out: TextIO) -> object:
    def on_revoke(_consumer: Consumer, _partitions: list[TopicPartition]) -> None:
        out.write("V\n")

    return on_revoke


def main(bootstrap: str, group: str, topic: str, out_path: str, session_ms: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": int(session_ms),
            "heartbeat.interval.ms": 500,
            "log_level": 0,
        }
    )
    stop = Path(out_path + ".stop")
    with open(out_path, "a", buffering=1) as out:
        consumer.subscribe([topic], on_assign=_on_assign(out), on_revoke=_on_revoke(out))
        while not stop.exists():
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                value = (m.value() or b"").decode()
                out.write(f"R {m.partition()} {m.offset()} {value}\n")
        consumer.close()
        out.write("CLOSED\n")


if __name__ == "__main__":
    main(*sys.argv[1:6])
