"""Plain Fetch of partitions from given positions, decoded into records: the reading half of
a classic consumer, without a group (positions are the caller's).

One Fetch per leader per call, with `max_wait` so an idle topic long-polls at the broker
instead of the reader spinning. Records come back in offset order per partition; control
batches are dropped (`client.records`).
"""

from __future__ import annotations

import datetime
from collections import defaultdict

from kio.schema.errors import ErrorCode

from client.cluster import Cluster
from client.cluster import schema
from client.errors import error_for
from client.records import AcquiredRange
from client.records import ConsumerRecord
from client.records import decode_acquired
from protocol import api_keys
from protocol.messages import build

TopicPartition = tuple[str, int]
_MAX_BYTES = 8 << 20
_LAST = 2**63 - 1


async def fetch_records(
    cluster: Cluster, positions: dict[TopicPartition, int], max_wait_ms: int
) -> list[ConsumerRecord]:
    """The records at and after each partition's position (at least one batch where there is
    one), waiting up to `max_wait_ms` at the broker when there is none.

    :raises KafkaError: the broker refused a partition (OFFSET_OUT_OF_RANGE, unknown...).
    """
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for topic, partition in positions:
        info = await cluster.topic(topic)
        by_leader[info.partitions[partition].leader_id].append((topic, partition))
    out: list[ConsumerRecord] = []
    for leader, tps in by_leader.items():
        out += await _fetch(cluster, leader, {tp: positions[tp] for tp in tps}, max_wait_ms)
    return out


async def _fetch(
    cluster: Cluster, node: int, positions: dict[TopicPartition, int], max_wait_ms: int
) -> list[ConsumerRecord]:
    m = schema("fetch", cluster.version(api_keys.FETCH, 4, 12))
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in positions:
        by_topic[topic].append(partition)
    req = build(
        m.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=_MAX_BYTES,
        isolation_level=0,
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
    resp = await cluster.request(req, node_id=node)
    if getattr(resp, "error_code", ErrorCode.none) != ErrorCode.none:
        raise error_for(resp.error_code, "Fetch")
    out: list[ConsumerRecord] = []
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                if p.error_code == ErrorCode.not_leader_or_follower:
                    cluster.forget(t.topic)
                raise error_for(p.error_code, f"Fetch {t.topic}-{p.partition_index}")
            start = positions[(t.topic, int(p.partition_index))]
            wanted = [AcquiredRange(start, _LAST, 1)]
            out += decode_acquired(t.topic, int(p.partition_index), p.records or b"", wanted)
    return out
