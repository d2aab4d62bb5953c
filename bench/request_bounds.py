"""The cost of the bounds check (`protocol.request_bounds`) per request, next to kio's decode
of the same frame: `python -m bench.request_bounds`.

`--requests N` instead drives N one-record Produce v10 requests (after 1,000 to warm up)
through a `KafkaConnection` of a real broker's services on a null transport, for counting
instructions: run it under `valgrind --tool=callgrind` for two N and divide the difference
of the totals by the difference of the N's (start-up and imports cancel out). It is
`bench/opcount.py --cpu --requests N`; for a checkout without the check, run that file by its
path from inside the checkout.

Frames of the hot path, shaped as librdkafka sends them: a one-partition Produce v10 with a
1 KiB batch, a ShareFetch v1 carrying a few acknowledgement ranges, a ShareAcknowledge v1 of
500 ranges (a `commit_sync` after a poll of 1,000 records acknowledged alternately), a
one-partition Fetch v12. In process, no broker; timeit, best of many short runs (the machine
may be shared).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import struct
import sys
import timeit
import uuid
from collections.abc import Callable

from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.produce.v10 import request as produce_v10
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.share_fetch.v1 import request as share_fetch_v1
from kio.serial import entity_reader
from kio.static.primitive import i32

from protocol.messages import build
from protocol.messages import encode_request
from protocol.messages import request_type
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch

TOPIC_ID = uuid.UUID(int=0x5EA1)
MS = datetime.timedelta(milliseconds=1)


def produce() -> bytes:
    """A Produce v10 of one batch of one record (a 1 KiB value) to one partition."""
    batch = build_batch([NewRecord(b"key", os.urandom(1024))], timestamp_ms=1_700_000_000_000)
    m = produce_v10
    body = build(
        m.ProduceRequest,
        transactional_id=None,
        acks=-1,
        timeout=30_000 * MS,
        topic_data=(
            m.TopicProduceData(
                name="bench",  # type: ignore[arg-type]
                partition_data=(m.PartitionProduceData(index=i32(0), records=batch),),  # type: ignore[arg-type]
            ),
        ),
    )
    return encode_request(body, 1, "rdkafka")


def _ack_batches(m: object, count: int) -> tuple[object, ...]:
    batch = m.AcknowledgementBatch  # type: ignore[attr-defined]
    return tuple(
        batch(first_offset=2 * i, last_offset=2 * i, acknowledge_types=(1 + i % 2,))
        for i in range(count)
    )


def share_fetch() -> bytes:
    m = share_fetch_v1
    body = build(
        m.ShareFetchRequest,
        group_id="bench-group",
        member_id="m" * 22,
        share_session_epoch=3,
        max_wait=500 * MS,
        min_bytes=1,
        max_bytes=50 << 20,
        max_records=500,
        batch_size=500,
        topics=(
            m.FetchTopic(
                topic_id=TOPIC_ID,
                partitions=(
                    m.FetchPartition(
                        partition_index=i32(0),
                        acknowledgement_batches=_ack_batches(m, 3),  # type: ignore[arg-type]
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    return encode_request(body, 1, "rdkafka")


def share_acknowledge(ranges: int = 500) -> bytes:
    m = ack_v1
    body = build(
        m.ShareAcknowledgeRequest,
        group_id="bench-group",
        member_id="m" * 22,
        share_session_epoch=4,
        topics=(
            m.AcknowledgeTopic(
                topic_id=TOPIC_ID,
                partitions=(
                    m.AcknowledgePartition(
                        partition_index=i32(0),
                        acknowledgement_batches=_ack_batches(m, ranges),  # type: ignore[arg-type]
                    ),
                ),
            ),
        ),
    )
    return encode_request(body, 1, "rdkafka")


def fetch() -> bytes:
    m = fetch_v12
    partition = build(
        m.FetchPartition,
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=100,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    body = build(
        m.FetchRequest,
        replica_id=-1,
        max_wait=500 * MS,
        min_bytes=1,
        max_bytes=50 << 20,
        session_epoch=-1,
        topics=(m.FetchTopic(topic="bench", partitions=(partition,)),),  # type: ignore[arg-type]
        forgotten_topics_data=(),
        rack_id="",
    )
    return encode_request(body, 1, "rdkafka")


FRAMES: dict[str, Callable[[], bytes]] = {
    "Produce v10, 1 KiB batch": produce,
    "ShareFetch v1, 3 ack ranges": share_fetch,
    "ShareAcknowledge v1, 500 ranges": share_acknowledge,
    "Fetch v12, 1 partition": fetch,
}


def _best(run: Callable[[], object], number: int, rounds: int = 40) -> float:
    """Seconds per call: the best of `rounds` short runs."""
    return min(timeit.timeit(run, number=number) for _ in range(rounds)) / number


def measure(frame: bytes) -> tuple[float, float]:
    """Seconds per request of the bounds check and of kio's decode (header and body)."""
    from protocol.request_bounds import request_walker  # here: `--requests` runs without it

    key, version = struct.unpack_from(">hh", frame)
    body_type = request_type(key, version)
    walk = request_walker(body_type)
    read_header = entity_reader(body_type.__header_schema__)
    read_body = entity_reader(body_type)

    def decode() -> None:
        _, pos = read_header(frame, 0)
        read_body(frame, pos)

    number = max(20, 200_000 // len(frame))
    return _best(lambda: walk(frame), number), _best(decode, number)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--requests":
        # The one harness that drives a real broker's connection (`bench/opcount.py`, which
        # runs from any tree since 753420f: use it by its path for a checkout without the check).
        from bench.opcount import count

        asyncio.run(count(int(sys.argv[2]), cpu=True))
        return
    print(f"{'frame':34} {'bytes':>7} {'check µs':>9} {'kio µs':>8} {'check/kio':>9}")
    for name, make in FRAMES.items():
        frame = make()
        check, decode = measure(frame)
        print(
            f"{name:34} {len(frame):7d} {check * 1e6:9.2f} {decode * 1e6:8.2f} "
            f"{check / decode:9.2f}"
        )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
