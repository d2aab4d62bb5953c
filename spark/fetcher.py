"""A plain Fetch reader over `client.cluster`: a topic's records by offset, no group involved.

The client package has a producer, an admin and a share consumer but no plain consumer; the
batch reader needs only "records of partition p from offset a to b", which this gives. It could
move to `client/` as is (it imports only `client` and kio).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from client.cluster import Cluster
from client.cluster import schema
from client.errors import KafkaError
from client.errors import error_for
from client.records import AcquiredRange
from client.records import ConsumerRecord
from client.records import decode_acquired
from client.security import Security
from protocol import api_keys
from protocol.messages import build

_MAX_WAIT = datetime.timedelta(milliseconds=0)


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [start, end) of one partition."""

    topic: str
    partition: int
    start: int
    end: int


class Fetcher:
    """Fetch v4-12 (topics by name), one partition at a time, from its leader."""

    def __init__(
        self, bootstrap: str, *, client_id: str = "shoal-fetcher", security: Security | None = None
    ) -> None:
        self.cluster = Cluster(bootstrap, client_id=client_id, security=security)

    async def close(self) -> None:
        await self.cluster.close()

    async def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int
    ) -> tuple[bytes, int]:
        """Stored batches from `offset` on (at least one whole batch), and the high watermark.

        :raises KafkaError: the broker refused (OFFSET_OUT_OF_RANGE, unknown partition...).
        """
        await self.cluster.bootstrap()
        info = await self.cluster.topic(topic)
        if partition not in info.partitions:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition}")
        m = schema("fetch", self.cluster.version(api_keys.FETCH, 4, 12))
        req = build(
            m.FetchRequest,
            replica_id=-1,
            max_wait=_MAX_WAIT,
            min_bytes=0,
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                build(
                    m.FetchTopic,
                    topic=topic,
                    partitions=(
                        build(
                            m.FetchPartition,
                            partition=partition,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=max_bytes,
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        resp = await self.cluster.request(req, node_id=info.partitions[partition].leader_id)
        if getattr(resp, "error_code", ErrorCode.none) != ErrorCode.none:
            raise error_for(resp.error_code, f"Fetch {topic}-{partition}")
        p = resp.responses[0].partitions[0]
        if p.error_code != ErrorCode.none:
            if p.error_code == ErrorCode.not_leader_or_follower:
                self.cluster.forget(topic)
            raise error_for(p.error_code, f"Fetch {topic}-{partition}@{offset}")
        return bytes(p.records or b""), int(p.high_watermark)

    async def read_round(self, r: OffsetRange, max_bytes: int) -> tuple[list[ConsumerRecord], int]:
        """The records of one Fetch within `r`, and the offset to fetch next (>= r.end: done)."""
        data, high_watermark = await self.fetch(r.topic, r.partition, r.start, max_bytes)
        records = decode_acquired(
            r.topic, r.partition, data, [AcquiredRange(r.start, r.end - 1, 0)]
        )
        nxt = _next_offset(data)
        if nxt is None or nxt <= r.start:
            # No whole batch came back: the range runs past the log end (or the log shrank).
            return records, r.end if high_watermark <= r.start else r.start + 1
        return records, nxt


def _next_offset(data: bytes) -> int | None:
    """The offset after the last whole batch in `data`."""
    import struct

    pos, nxt = 0, None
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        nxt = base + last_delta + 1
        pos += 12 + length
    return nxt
