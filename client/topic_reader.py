"""Plain Fetch of partitions from given positions, decoded into records: the reading half of
a classic consumer, without a group (positions are the caller's).

One Fetch per leader per call, with `max_wait` so an idle topic long-polls at the broker
instead of the reader spinning. Records come back in offset order per partition; control
batches are dropped (`client.records`), and with read_committed the records of aborted
transactions too (`client.read_committed`), and nothing at or past the last stable offset.
Each partition's next position comes back as well: past every whole batch read, kept or not,
as Kafka's consumer moves past control batches and aborted ones.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field

from kio.schema.errors import ErrorCode

from client.cluster import Cluster
from client.errors import error_for
from client.fetch import NO_TOP_LEVEL_ERROR
from client.fetched_batches import corrupt
from client.kio_apis import FETCH
from client.read_committed import READ_UNCOMMITTED
from client.read_committed import aborted_of
from client.read_committed import committed_batches
from client.records import AcquiredRange
from client.records import ConsumerRecord
from client.records import decode_acquired
from protocol import api_keys
from protocol.messages import build
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import iter_batch_headers

TopicPartition = tuple[str, int]
_MAX_BYTES = 8 << 20
_LAST = 2**63 - 1


@dataclass(slots=True)
class Fetched:
    """What one round of Fetches brought: the records, and each partition's position after
    the whole batches read (control batches and aborted transactions included)."""

    records: list[ConsumerRecord] = field(default_factory=list)
    next_offsets: dict[TopicPartition, int] = field(default_factory=dict)


async def fetch_records(
    cluster: Cluster,
    positions: dict[TopicPartition, int],
    max_wait_ms: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> Fetched:
    """The records at and after each partition's position (at least one batch where there is
    one), waiting up to `max_wait_ms` at the broker when there is none; read_committed (1):
    only those of committed transactions (and non-transactional ones) below the LSO.

    :raises KafkaError: the broker refused a partition (OFFSET_OUT_OF_RANGE, unknown...).
    """
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for topic, partition in positions:
        info = await cluster.topic(topic)
        by_leader[info.partitions[partition].leader_id].append((topic, partition))
    out = Fetched()
    for leader, tps in by_leader.items():
        wanted = {tp: positions[tp] for tp in tps}
        await _fetch(cluster, leader, wanted, max_wait_ms, isolation_level, out)
    return out


async def _fetch(
    cluster: Cluster,
    node: int,
    positions: dict[TopicPartition, int],
    max_wait_ms: int,
    isolation_level: int,
    out: Fetched,
) -> None:
    version = cluster.version(api_keys.FETCH, 4, 12)
    m = FETCH.requests(version)
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in positions:
        by_topic[topic].append(partition)
    req = build(
        m.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=_MAX_BYTES,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=tuple(
            build(
                m.FetchTopic,
                topic=topic,
                partitions=tuple(
                    build(
                        m.FetchPartition,
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=positions[(topic, p)],
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=_MAX_BYTES,
                    )
                    for p in ps
                ),
            )
            for topic, ps in by_topic.items()
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    resp = await cluster.call(req, FETCH.response(version), node_id=node)
    if not isinstance(resp, NO_TOP_LEVEL_ERROR) and resp.error_code != ErrorCode.none:
        raise error_for(resp.error_code, "Fetch")
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                if p.error_code == ErrorCode.not_leader_or_follower:
                    cluster.forget(t.topic)
                raise error_for(p.error_code, f"Fetch {t.topic}-{p.partition_index}")
            tp = (t.topic, int(p.partition_index))
            data = p.records or b""
            nxt = _after_whole_batches(data)
            if nxt is not None:
                out.next_offsets[tp] = max(positions[tp], nxt)
            data = committed_batches(data, aborted_of(p))
            wanted = [AcquiredRange(positions[tp], _LAST, 1)]
            out.records += decode_acquired(t.topic, tp[1], data, wanted)


def _after_whole_batches(data: bytes) -> int | None:
    """The offset after the last whole batch of `data` (None: no whole batch)."""
    last = None
    try:
        for _, header in iter_batch_headers(data):
            last = header
    except InvalidRecordBatch as e:
        raise corrupt(f"fetched batches: {e}") from e
    return None if last is None else last.last_offset + 1
