"""A plain Fetch of one partition (no group, no session), and what the batch headers it
returns tell without decoding a record: how many offsets of a range hold data.

`data_records` is the client's side of lag: the broker counts the data records from a
committed offset to the log end by range (`storage.base_log.SegmentedLog.data_records`, for
`kafka_consumergroup_lag_sum`); the CLI has only the Fetch API, so it reads the batches over
that range and counts the same thing from their headers (`BatchHeader.holds_data`, the one
rule both use). The read is bounded: past `budget_bytes`, the offsets not read count as data.
"""

from __future__ import annotations

import datetime
from typing import Any
from typing import NamedTuple

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.response import FetchResponse as FetchV4
from kio.schema.fetch.v5.response import FetchResponse as FetchV5
from kio.schema.fetch.v6.response import FetchResponse as FetchV6

from client.cluster import Cluster
from client.errors import KafkaError
from client.errors import error_for
from client.kio_apis import FETCH
from client.read_committed import READ_UNCOMMITTED
from client.read_committed import AbortedTxn
from client.read_committed import aborted_of
from protocol import api_keys
from protocol.messages import build
from protocol.record_batch import iter_batch_headers

_MAX_WAIT = datetime.timedelta(milliseconds=0)
LAG_READ_BYTES = 64 * 1024 * 1024  # per partition: about a second of reading
_CHUNK = 4 * 1024 * 1024

# Fetch answers with a top-level error code from v7 on (KIP-227's sessions).
NO_TOP_LEVEL_ERROR = (FetchV4, FetchV5, FetchV6)


class PartitionData(NamedTuple):
    """One partition's Fetch answer: the stored batches as returned, and what bounds them."""

    records: bytes
    high_watermark: int
    last_stable_offset: int  # -1 below Fetch v4
    aborted: list[AbortedTxn]  # empty unless read_committed


async def fetch_partition(
    cluster: Cluster, topic: str, partition: int, offset: int, max_bytes: int
) -> tuple[bytes, int]:
    """Stored batches from `offset` on (at least one whole batch), and the high watermark;
    Fetch v4-12 (topics by name), from the partition's leader.

    :raises KafkaError: the broker refused (OFFSET_OUT_OF_RANGE, unknown partition...).
    """
    got = await fetch_partition_data(cluster, topic, partition, offset, max_bytes)
    return got.records, got.high_watermark


async def fetch_partition_data(
    cluster: Cluster,
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> PartitionData:
    """`fetch_partition` at an isolation level: read_committed (1) stops at the last stable
    offset and lists the aborted transactions (`client.read_committed` drops them).

    :raises KafkaError: the broker refused (OFFSET_OUT_OF_RANGE, unknown partition...).
    """
    p = await _fetch(cluster, topic, partition, offset, max_bytes, isolation_level)
    if p.error_code != ErrorCode.none:
        raise error_for(p.error_code, f"Fetch {topic}-{partition}@{offset}")
    return PartitionData(
        bytes(p.records or b""), int(p.high_watermark), int(p.last_stable_offset), aborted_of(p)
    )


async def _fetch(
    cluster: Cluster,
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> Any:
    """The partition's part of a Fetch response (its error code not checked, but for
    NOT_LEADER_OR_FOLLOWER forgetting the topic's leaders)."""
    await cluster.bootstrap()
    info = await cluster.topic(topic)
    if partition not in info.partitions:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition}")
    version = cluster.version(api_keys.FETCH, 4, 12)
    m = FETCH.requests(version)
    wanted = build(
        m.FetchPartition, partition=partition, current_leader_epoch=-1, fetch_offset=offset,
        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes,
    )  # fmt: skip
    req = build(
        m.FetchRequest, replica_id=-1, max_wait=_MAX_WAIT, min_bytes=0, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=0, session_epoch=-1,
        topics=(build(m.FetchTopic, topic=topic, partitions=(wanted,)),),
        forgotten_topics_data=(), rack_id="",
    )  # fmt: skip
    resp = await cluster.call(
        req, FETCH.response(version), node_id=info.partitions[partition].leader_id
    )
    if not isinstance(resp, NO_TOP_LEVEL_ERROR) and resp.error_code != ErrorCode.none:
        raise error_for(resp.error_code, f"Fetch {topic}-{partition}")
    p = resp.responses[0].partitions[0]
    if p.error_code == ErrorCode.not_leader_or_follower:
        cluster.forget(topic)
    return p


async def data_records(
    cluster: Cluster,
    topic: str,
    partition: int,
    start: int,
    end: int,
    budget_bytes: int = LAG_READ_BYTES,
) -> tuple[int, bool]:
    """Offsets of `[start, end)` holding data records (not control batches: transaction
    markers, share state; not empty batches), from the headers of the batches read; and
    whether all of the range was read (False: the budget ran out, the rest counted as data).
    """
    offset, non_data, read = max(start, 0), 0, 0
    while offset < end:
        if read >= budget_bytes:
            return end - start - non_data, False
        p = await _fetch(cluster, topic, partition, offset, _CHUNK)
        log_start = int(getattr(p, "log_start_offset", -1))  # Fetch v5 on
        if p.error_code == ErrorCode.offset_out_of_range and offset < log_start:
            offset = log_start  # deleted offsets count, as the broker counts them
            continue
        if p.error_code != ErrorCode.none:
            raise error_for(p.error_code, f"Fetch {topic}-{partition}@{offset}")
        data = bytes(p.records or b"")
        last = offset - 1
        for _, header in iter_batch_headers(data):
            if header.last_offset < offset:
                continue
            if header.base_offset >= end:
                break
            if not header.holds_data:
                non_data += min(header.last_offset, end - 1) - max(header.base_offset, offset) + 1
            last = header.last_offset
        if last < offset:  # nothing came back: the log moved (deleted, or truncated)
            break
        read += len(data)
        offset = last + 1
    return max(end - start - non_data, 0), True
