"""A share consumer process for crash tests.

`python -m tests.compat.share_worker BOOTSTRAP GROUP TOPIC OUT [reject]` polls in explicit mode
(100 records a poll, a short pause standing for the work), ACCEPTs everything (or REJECTs
everything, with `reject`: the dead-letter crash test), and after each
commit_sync that the broker
confirmed for a partition appends "C <partition> <offset>" lines for it; every delivery is
written first as "D <partition> <offset> <delivery count>". Lines are flushed as written, so
the file is a faithful record however the process or the broker dies.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import AcknowledgeType
from confluent_kafka import KafkaException
from confluent_kafka import ShareConsumer


def main(bootstrap: str, group: str, topic: str, out_path: str, mode: str = "accept") -> None:
    ack = AcknowledgeType.REJECT if mode == "reject" else AcknowledgeType.ACCEPT
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": 100,
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    with open(out_path, "a", buffering=1) as out:
        while True:
            try:
                polled = [m for m in consumer.poll(0.5) if m.error() is None]
            except KafkaException:
                continue
            for m in polled:
                out.write(f"D {m.partition()} {m.offset()} {m.delivery_count()}\n")
                consumer.acknowledge(m, ack)
            if not polled:
                continue
            time.sleep(0.05)  # the work: a kill often lands between delivery and commit
            try:
                results = consumer.commit_sync()
            except KafkaException:
                continue
            confirmed = {tp.partition for tp in results if tp.error is None}
            for m in polled:
                if m.partition() in confirmed:
                    out.write(f"C {m.partition()} {m.offset()}\n")


if __name__ == "__main__":
    main(*sys.argv[1:6])
