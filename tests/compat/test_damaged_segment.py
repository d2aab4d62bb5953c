"""A damaged sealed segment under a real broker and confluent-kafka's clients (issue 9).

16 bytes flipped in the middle of an old segment used to make every ShareFetch on the
partition fail with a traceback (0 of 3,000 records delivered) while the log grew by megabytes.
Now the damage is logged once, counted, plain Fetch answers CORRUPT_MESSAGE for its offsets,
and a share group gets every intact record, before and after it.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.request import FetchTopic

from client.connection import Connection
from protocol.messages import build
from protocol.record_batch import iter_batch_headers
from tests.brokers import BrokerProcess
from tests.brokers import free_port
from tests.compat.support import QUIET
from tests.compat.support import create_topic
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer

pytestmark = pytest.mark.compat

TOPIC, GROUP, RECORDS = "damaged", "damaged-group", 3000


def _fetch_error(port: int, offset: int) -> int:
    async def fetch() -> int:
        conn = await Connection.open("127.0.0.1", port)
        try:
            partition = build(
                FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20,
            )  # fmt: skip
            response = await conn.request(
                build(
                    FetchRequest, replica_id=-1, max_wait=datetime.timedelta(milliseconds=10),
                    min_bytes=1, max_bytes=1 << 20, session_epoch=-1, rack_id="",
                    topics=(FetchTopic(topic=TOPIC, partitions=(partition,)),),  # type: ignore[arg-type]
                )
            )  # fmt: skip
            return int(response.responses[0].partitions[0].error_code)
        finally:
            await conn.close()

    return asyncio.run(fetch())


def _damage_a_sealed_segment(partition_dir: Path) -> tuple[int, int]:
    """Flip 16 bytes inside a batch in the middle of the second segment; its offsets."""
    second = sorted(partition_dir.glob("*.log"))[1]
    data = bytearray(second.read_bytes())
    batches = list(iter_batch_headers(bytes(data)))
    pos, header = batches[len(batches) // 2]
    data[pos + 70 : pos + 86] = bytes(b ^ 0xFF for b in data[pos + 70 : pos + 86])
    second.write_bytes(bytes(data))
    return header.base_offset, header.last_offset


def test_a_damaged_segment_costs_only_its_damaged_batch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    props = tmp_path / "broker.properties"
    props.write_text("log.segment.bytes=16384\n")
    metrics_port = free_port()
    broker = BrokerProcess(data, extra=["--config", str(props)])
    with broker:
        create_topic(broker.bootstrap, TOPIC, 1)
        set_group_configs(broker.bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})
        p = Producer({"bootstrap.servers": broker.bootstrap, "batch.num.messages": 20, **QUIET})
        for i in range(RECORDS):
            p.produce(TOPIC, value=b"record-%06d" % i, partition=0)
            if i % 20 == 19:
                p.flush(10)
        assert p.flush(10) == 0
        assert broker.stop() == 0
    first, last = _damage_a_sealed_segment(data / f"{TOPIC}-0")
    assert 0 < first <= last < RECORDS - 1

    extra = ["--config", str(props), "--metrics-port", str(metrics_port)]
    with BrokerProcess(data, port=broker.port, extra=extra) as broker:
        consumer = share_consumer(broker.bootstrap, GROUP)
        consumer.subscribe([TOPIC])
        got: set[int] = set()
        for _ in range(60):
            got.update(m.offset() for m in poll_records(consumer))
            if len(got) >= RECORDS - (last - first + 1):
                break
        consumer.close()
        assert got == set(range(RECORDS)) - set(range(first, last + 1))
        assert _fetch_error(broker.port, first) == ErrorCode.corrupt_message
        assert _fetch_error(broker.port, last + 1) == ErrorCode.none
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as page:
            metrics = page.read().decode()
        assert f"shoal_log_damaged_records {float(last - first + 1)}" in metrics
        broker.kill()
    lines = [json.loads(x) for x in broker.log_path.read_text().splitlines() if x.startswith("{")]
    damage = [e for e in lines if e.get("event") == "damaged record batches stepped over"]
    assert [d["offsets"] for d in damage] == [[first, last]]  # once, however often it was read
    assert not [e for e in lines if e.get("exception")]  # no traceback
