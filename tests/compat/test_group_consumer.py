"""A librdkafka `Consumer` with a `group.id` against Shoal, before consumer groups exist.

Such a consumer that calls `assign()` without offsets asks OffsetFetch for its committed
offsets; with OffsetFetch unserved, librdkafka crashed the whole process (exit 139). Shoal
answers "no committed offset" (-1) for every partition, so it starts from
`auto.offset.reset`. The consumer runs in a child process, so a crash fails the test rather
than the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.compat.support import create_topic
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

CONSUMER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({
        "bootstrap.servers": sys.argv[1], "group.id": "assigning-group",
        "auto.offset.reset": "earliest", "enable.auto.commit": sys.argv[2] == "commit",
        "log_level": 0,
    })
    consumer.assign([TopicPartition("assigned", 0)])
    got = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(got) < 3:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value().decode())
    consumer.close()
    print(",".join(got))
    """
)


@pytest.mark.parametrize("commit", ["commit", "no-commit"])
def test_assign_without_offsets_reads_from_auto_offset_reset(tmp_path: Path, commit: str) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        create_topic(broker.bootstrap, "assigned", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        for value in ("a", "b", "c"):
            producer.produce("assigned", value=value.encode(), partition=0)
        assert producer.flush(10) == 0
        run = subprocess.run(
            [sys.executable, "-c", CONSUMER, broker.bootstrap, commit],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        broker.stop()
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert run.stdout.split() == ["a,b,c"]
