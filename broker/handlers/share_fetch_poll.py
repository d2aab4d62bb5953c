"""ShareFetch's acquisition with its long poll, for the general path (`share_fetch`) and the
direct one (`share_fetch_direct`)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import cast

from kio.schema.share_fetch.v1.request import ShareFetchRequest as ShareFetchRequestV1
from kio.schema.share_fetch.v2.request import ShareFetchRequest as ShareFetchRequestV2

from broker.context import RequestContext
from broker.long_poll import long_poll
from broker.share.partition_reads import FetchedPartition
from broker.share.share_session_cache import ShareSession
from broker.share.share_session_cache import TopicIdPartition

ShareFetchRequest = ShareFetchRequestV1 | ShareFetchRequestV2
Fetched = dict[TopicIdPartition, FetchedPartition]


def _record_limit(request: ShareFetchRequest) -> bool:
    """ShareFetch v2's ShareAcquireMode (KIP-1206): 1 asks for record_limit."""
    return isinstance(request, ShareFetchRequestV2) and request.share_acquire_mode == 1


async def acquire_waiting(
    ctx: RequestContext, request: ShareFetchRequest, session: ShareSession, max_wait_s: float
) -> Fetched:
    s = ctx.services
    max_bytes = min(request.max_bytes, s.config.fetch_max_bytes)  # as Fetch's (KafkaApis)

    async def attempt() -> Fetched:
        return s.share_fetch.acquire(
            session, session_epoch=request.share_session_epoch, max_records=request.max_records,
            max_bytes=max_bytes, now_ms=s.now_ms(), record_limit=_record_limit(request),
        )  # fmt: skip

    def wait_keys(_: Fetched) -> list[tuple[str, int]]:
        return [(t.name, p) for tid, p in session.partitions if (t := s.logs.topic_by_id(tid))]

    def left_some(fetched: Fetched, woke: Hashable) -> bool:
        """Woken by an append to `woke` and done: whether records it was woken for may still
        wait there (it took none of them, or it stopped at MaxRecords)."""
        name, partition = cast(tuple[str, int], woke)
        topic = s.logs.topic(name)
        got = fetched.get((topic.topic_id, partition)) if topic is not None else None
        if got is None:
            return topic is not None
        taken = 0
        for f in fetched.values():
            for a in f.acquired:
                taken += a.last_offset - a.first_offset + 1
        return taken >= request.max_records

    # A ShareFetch waits in line: an append of n records wakes n waiting fetches, not all of
    # them (a key-ordered group's records are for one member each: it wakes them all).
    in_line = None if s.share_fetch.key_ordered(session.key.group_id) else left_some
    return await long_poll(
        attempt, enough=bool, wait_keys=wait_keys, notifier=s.notifier, max_wait_s=max_wait_s,
        in_line=in_line,
    )  # fmt: skip
