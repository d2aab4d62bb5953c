"""`python -m bench.migrate_copy [N]`: `shoal migrate`'s record copy against a plain
consume-and-produce loop with confluent-kafka, same brokers, same run.

Two broker processes (source and target); N records (default 200,000, 200 bytes, keys and
two headers) in a 3-partition topic on the source. The plain loop reads them with a
`Consumer` and writes them with a `Producer` (lz4, linger 20 ms) to a second topic on the
target; then `shoal migrate --topics orders` copies them (its map, checkpoints and reports
included). Prints records/s and MB/s (key + value + header bytes) for each.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic

from bench.broker import BrokerProcess

RECORD_BYTES = 200


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the result is in
    admin.create_topics([NewTopic(topic, 3)])[topic].result(30)


def _fill(bootstrap: str, n: int) -> int:
    _create(bootstrap, "orders")
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    value = b"x" * RECORD_BYTES
    for i in range(n):
        while True:
            try:
                p.produce("orders", value, key=b"k%d" % i, headers=[("n", b"1"), ("s", b"b")])
                break
            except BufferError:
                p.poll(0.05)
    p.flush(60)
    return n * (RECORD_BYTES + len(b"k%d" % (n // 2)) + 2)


def _plain_loop(src: str, dst: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": src, "group.id": "plain", "enable.auto.commit": False})
    c.assign([TopicPartition("orders", p, 0) for p in range(3)])
    p = Producer({"bootstrap.servers": dst, "linger.ms": 20, "compression.type": "lz4",
                  "enable.idempotence": True, "batch.size": 1_000_000})  # fmt: skip
    start = time.perf_counter()
    seen = 0
    while seen < n:
        for m in c.consume(1000, timeout=0.5):
            if m.error() is None:
                while True:
                    try:
                        p.produce(
                            "plain",
                            m.value(),
                            key=m.key(),
                            headers=m.headers(),
                            partition=m.partition() or 0,
                            timestamp=m.timestamp()[1],
                        )
                        break
                    except BufferError:
                        p.poll(0.05)
                seen += 1
        p.poll(0)
    p.flush(60)
    c.close()
    return time.perf_counter() - start


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    with tempfile.TemporaryDirectory() as d:
        src_dir, dst_dir = Path(d) / "src", Path(d) / "dst"
        with (
            BrokerProcess(src_dir, log_level="warning") as src,
            BrokerProcess(dst_dir, log_level="warning") as dst,
        ):
            nbytes = _fill(src.bootstrap, n)
            _create(dst.bootstrap, "plain")
            plain = _plain_loop(src.bootstrap, dst.bootstrap, n)
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "cli", "migrate", "--from", src.bootstrap, "--to",
                 dst.bootstrap, "--topics", "orders", "--state-dir", str(Path(d) / "st")],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            migrate = time.perf_counter() - start
    for name, secs in (("plain confluent loop", plain), ("shoal migrate", migrate)):
        print(
            f"{name:22} {n / secs:10,.0f} records/s {nbytes / secs / 1e6:8.1f} MB/s ({secs:.1f} s)"
        )


if __name__ == "__main__":
    main()
