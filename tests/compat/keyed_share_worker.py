"""A share consumer process for the key-ordering tests.

`python -m tests.compat.keyed_share_worker BOOTSTRAP GROUP TOPIC OUT [RELEASE_EVERY]` polls in
explicit mode, RELEASEs a record on its first delivery when `offset % RELEASE_EVERY == 0`
(never, if 0) and ACCEPTs everything else, then commits. Lines, flushed as written, each with
the wall-clock time:
  D <key> <offset> <delivery count> <t>   the record was returned by a poll
  A <key> <offset> <ack type> <t>          its acknowledgement is about to be committed
  C <key> <offset> <ack type> <t>          the broker confirmed that commit
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import AcknowledgeType
from confluent_kafka import KafkaException
from confluent_kafka import ShareConsumer


def decide(offset: int, delivery_count: int, release_every: int) -> AcknowledgeType:
    if release_every and delivery_count == 1 and offset % release_every == 0:
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


def main(bootstrap: str, group: str, topic: str, out_path: str, release_every: int) -> None:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    with open(out_path, "a", buffering=1) as out:
        while True:
            try:
                polled = [m for m in consumer.poll(0.2) if m.error() is None]
            except KafkaException:
                continue
            if not polled:
                continue
            now = time.time()
            acks = []
            for m in polled:
                key = (m.key() or b"-").decode()
                out.write(f"D {key} {m.offset()} {m.delivery_count()} {now:.6f}\n")
                ack = decide(m.offset(), m.delivery_count() or 1, release_every)
                consumer.acknowledge(m, ack)
                acks.append((key, m.offset(), ack.name))
            time.sleep(0.002)  # the work
            now = time.time()
            for key, offset, ack_name in acks:
                out.write(f"A {key} {offset} {ack_name} {now:.6f}\n")
            try:
                results = consumer.commit_sync()
            except KafkaException:
                continue
            now = time.time()
            if any(tp.error is None for tp in results):
                for key, offset, ack_name in acks:
                    out.write(f"C {key} {offset} {ack_name} {now:.6f}\n")


if __name__ == "__main__":
    every = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    main(*sys.argv[1:5], release_every=every)
