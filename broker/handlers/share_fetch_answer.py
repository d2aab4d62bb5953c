"""A ShareFetch's answer, and what it counts: the general path's (`share_fetch`), which the
direct one (`share_fetch_direct`) takes for anything but its one shape."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.share_common import SLICED
from broker.handlers.share_common import AckResults
from broker.handlers.share_common import failed_by_topic
from broker.share.partition_reads import FetchedPartition
from broker.share.share_session_cache import TopicIdPartition
from broker.slicing import Slicer
from protocol.api_keys import SHARE_FETCH
from protocol.messages import EncodedResponse
from protocol.share_fetch_response import PartitionAnswer
from protocol.share_fetch_response import encode_share_fetch_response

# An answer for more partitions than this is written in a thread.
ENCODE_ON_LOOP_MAX_PARTITIONS = 5_000
Fetched = dict[TopicIdPartition, FetchedPartition]


def partition_answer(
    ctx: RequestContext, key: TopicIdPartition, fetched: FetchedPartition | None, acks: AckResults
) -> PartitionAnswer:
    ack = acks.get(key)
    return PartitionAnswer(
        partition=key[1],
        error_code=fetched.error_code if fetched else ErrorCode.none,
        acknowledge_error_code=ack.error_code if ack else ErrorCode.none,
        acknowledge_error_message=ack.message if ack else None,
        leader_id=ctx.services.node_id,
        leader_epoch=0,
        records=fetched.records if fetched else b"",
        acquired=fetched.acquired if fetched else (),  # AcquiredRecords: the same 3 fields
    )


def _count(ctx: RequestContext, fetched: Fetched) -> None:
    """The bytes sent (the acknowledgements were counted as they were applied)."""
    metrics = ctx.services.metrics
    for (tid, _), f in fetched.items():
        if f.records and (info := ctx.services.logs.topic_by_id(tid)) is not None:
            metrics.on_bytes_out(info.name, len(f.records))


async def answer(
    ctx: RequestContext, group_id: str, acks: AckResults, fetched: Fetched
) -> EncodedResponse:
    """Written by `protocol.share_fetch_response` (tested byte for byte against kio): one
    answer per fetch, and a consumer at the tail fetches a record or two at a time. One for
    a million partitions is built in slices and written in a thread."""
    _count(ctx, fetched)
    by_topic: dict[uuid.UUID, list[PartitionAnswer]] = {}
    if len(acks) + len(fetched) > SLICED:
        slicer = Slicer()
        for key in acks:  # the acknowledged partitions first, then those only fetched
            by_topic.setdefault(key[0], []).append(
                partition_answer(ctx, key, fetched.get(key), acks)
            )
            await slicer.pause()
        for key in fetched:
            if key not in acks:
                by_topic.setdefault(key[0], []).append(
                    partition_answer(ctx, key, fetched[key], acks)
                )
            await slicer.pause()
    else:
        for key in dict.fromkeys([*acks, *fetched]) if acks else fetched:
            by_topic.setdefault(key[0], []).append(
                partition_answer(ctx, key, fetched.get(key), acks)
            )
    lock_ms = ctx.services.share_fetch.lock_duration_ms(group_id)
    answers = list(by_topic.items())
    if len(acks) + len(fetched) > ENCODE_ON_LOOP_MAX_PARTITIONS:
        body = await asyncio.to_thread(
            encode_share_fetch_response, ctx.version, answers, lock_timeout_ms=lock_ms
        )
    else:
        body = encode_share_fetch_response(ctx.version, answers, lock_timeout_ms=lock_ms)
    codes = tuple(
        code
        for answers in by_topic.values()
        for a in answers
        for code in (a.error_code, a.acknowledge_error_code)
        if code
    )
    return EncodedResponse(SHARE_FETCH, ctx.version, body, error_codes=codes)


async def count_fetch(
    ctx: RequestContext, session: Iterable[TopicIdPartition], answered: Fetched
) -> None:
    """A fetch counts once for every topic of the session's partitions, with or without
    records to answer (as SharePartitionManager.fetchMessages marks TotalShareFetchRequests-
    PerSec), and as failed for a topic one of whose partitions has an error."""
    codes = dict.fromkeys(session, int(ErrorCode.none))
    codes.update((k, f.error_code) for k, f in answered.items())
    ctx.services.metrics.on_share_fetch(await failed_by_topic(ctx, codes.items(), len(codes)))
