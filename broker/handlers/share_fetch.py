"""ShareFetch (78): validate, update the share session, apply piggybacked acknowledgements,
acquire (with a long poll), answer.

Records come back as stored batches with `AcquiredRecords` ranges; the client drops offsets
outside them. With IsRenewAck (v2) the request only renews locks and returns no records.
The share logic is `ShareFetchService`'s; this module only speaks the protocol.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Hashable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import cast

from kio.schema.errors import ErrorCode
from kio.schema.share_fetch.v1.request import ShareFetchRequest as ShareFetchRequestV1
from kio.schema.share_fetch.v2.request import ShareFetchRequest as ShareFetchRequestV2
from kio.schema.share_fetch.v2.response import ShareFetchResponse

from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.share_common import SHARE_ACL_CHECKS
from broker.handlers.share_common import SLICED
from broker.handlers.share_common import AckResults
from broker.handlers.share_common import HasPartitions
from broker.handlers.share_common import Refusal
from broker.handlers.share_common import acknowledge_all
from broker.handlers.share_common import any_acknowledgements
from broker.handlers.share_common import authorized_member
from broker.handlers.share_common import count_acknowledgements
from broker.handlers.share_common import failed_by_topic
from broker.handlers.share_common import failed_topics
from broker.handlers.share_common import member_of
from broker.handlers.share_common import refused_acks
from broker.handlers.share_common import topic_id
from broker.handlers.share_common import unreadable_topics
from broker.log_loading import open_first
from broker.long_poll import long_poll
from broker.registry import handler
from broker.share.partition_reads import FetchedPartition
from broker.share.share_fetch_service import SessionUpdate
from broker.share.share_session_cache import OPEN_EPOCH
from broker.share.share_session_cache import ShareSession
from broker.share.share_session_cache import ShareSessionError
from broker.share.share_session_cache import TopicIdPartition
from broker.slicing import Slicer
from protocol.api_keys import SHARE_FETCH
from protocol.messages import EncodedResponse
from protocol.share_fetch_response import AcquiredRange
from protocol.share_fetch_response import PartitionAnswer
from protocol.share_fetch_response import encode_share_fetch_response

ShareFetchRequest = ShareFetchRequestV1 | ShareFetchRequestV2
# An answer for more partitions than this is written in a thread.
ENCODE_ON_LOOP_MAX_PARTITIONS = 5_000
SLICE = 2_000  # partitions added to a session per slice (a few milliseconds)
Fetched = dict[TopicIdPartition, FetchedPartition]


def _is_renew(request: ShareFetchRequest) -> bool:
    return isinstance(request, ShareFetchRequestV2) and request.is_renew_ack


def _record_limit(request: ShareFetchRequest) -> bool:
    """ShareFetch v2's ShareAcquireMode (KIP-1206): 1 asks for record_limit."""
    return isinstance(request, ShareFetchRequestV2) and request.share_acquire_mode == 1


def _invalid(request: ShareFetchRequest, with_acks: bool) -> Refusal | None:
    if request.share_session_epoch == OPEN_EPOCH and with_acks:
        problem = "a request that opens a share session cannot carry acknowledgements"
        return Refusal(ErrorCode.invalid_request, problem)
    if _is_renew(request) and (
        request.max_wait.total_seconds() or request.min_bytes or request.max_bytes
        or request.max_records
    ):  # fmt: skip
        problem = "a renew request must have MaxWaitMs, MinBytes, MaxBytes and MaxRecords 0"
        return Refusal(ErrorCode.invalid_request, problem)
    if isinstance(request, ShareFetchRequestV2) and request.share_acquire_mode not in (0, 1):
        problem = f"unknown ShareAcquireMode {request.share_acquire_mode}"
        return Refusal(ErrorCode.invalid_request, problem)
    return None


async def _acquire(
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


def _partition(
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
        acquired=[
            AcquiredRange(a.first_offset, a.last_offset, a.delivery_count)
            for a in (fetched.acquired if fetched else ())
        ],
    )


async def _count(ctx: RequestContext, acks: AckResults, fetched: Fetched) -> None:
    metrics = ctx.services.metrics
    await count_acknowledgements(ctx, acks)
    for (tid, _), f in fetched.items():
        if f.records and (info := ctx.services.logs.topic_by_id(tid)) is not None:
            metrics.on_bytes_out(info.name, len(f.records))


async def _response(
    ctx: RequestContext, group_id: str, acks: AckResults, fetched: Fetched
) -> EncodedResponse:
    """Written by `protocol.share_fetch_response` (tested byte for byte against kio): one
    answer per fetch, and a consumer at the tail fetches a record or two at a time. One for
    a million partitions is built in slices and written in a thread."""
    await _count(ctx, acks, fetched)
    by_topic: dict[uuid.UUID, list[PartitionAnswer]] = {}
    if len(acks) + len(fetched) > SLICED:
        slicer = Slicer()
        for key in acks:  # the acknowledged partitions first, then those only fetched
            by_topic.setdefault(key[0], []).append(_partition(ctx, key, fetched.get(key), acks))
            await slicer.pause()
        for key in fetched:
            if key not in acks:
                by_topic.setdefault(key[0], []).append(_partition(ctx, key, fetched[key], acks))
            await slicer.pause()
    else:
        for key in dict.fromkeys([*acks, *fetched]) if acks else fetched:
            by_topic.setdefault(key[0], []).append(_partition(ctx, key, fetched.get(key), acks))
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


def _refused(refusal: Refusal) -> ShareFetchResponse:
    return ShareFetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=refusal.error_code,
        error_message=refusal.message,
        acquisition_lock_timeout=NO_THROTTLE,
        responses=(),
        node_endpoints=(),
    )


def _denied(topics: Sequence[HasPartitions], denied: set[uuid.UUID]) -> Fetched:
    refused = FetchedPartition(ErrorCode.topic_authorization_failed, b"", [])
    return {
        (topic_id(t), p.partition_index): refused
        for t in topics
        if topic_id(t) in denied
        for p in t.partitions
    }


async def handle(
    ctx: RequestContext, request: ShareFetchRequest
) -> ShareFetchResponse | EncodedResponse:
    listed = sum(len(t.partitions) for t in request.topics)
    with_acks = await any_acknowledgements(request.topics, listed)
    response = await _handle(ctx, request, with_acks, listed)
    if response.error_code != ErrorCode.none:  # refused whole: every topic named failed
        failed = await failed_topics(ctx, request.topics)
        ctx.services.metrics.on_share_fetch(failed)
        if with_acks:
            ctx.services.metrics.on_share_acknowledgement(failed)
    return response


def _session_partitions(
    ctx: RequestContext, session: ShareSession
) -> Iterator[tuple[str | None, int]]:
    for tid, partition in session.partitions:
        info = ctx.services.logs.topic_by_id(tid)
        yield (info.name if info is not None else None), partition


async def _handle(
    ctx: RequestContext, request: ShareFetchRequest, with_acks: bool, listed: int
) -> ShareFetchResponse | EncodedResponse:
    s = ctx.services
    ids = member_of(request.group_id, request.member_id)
    if isinstance(ids, Refusal):
        return _refused(ids)
    group_id, member_id = ids
    if refusal := _invalid(request, with_acks) or authorized_member(ctx, group_id, member_id):
        return _refused(refusal)
    denied = unreadable_topics(ctx, request.topics)
    readable = [t for t in request.topics if topic_id(t) not in denied]
    try:
        update = await _update_session(ctx, request, group_id, member_id, readable, listed)
    except ShareSessionError as e:
        return _refused(Refusal(e.error_code, str(e)))
    if s.logs.loading and update.session is not None:  # just started: open its logs in slices
        await open_first(s.logs, _session_partitions(ctx, update.session))
    acks = await acknowledge_all(
        s.share_fetch, s.ack_slices, group_id, member_id, readable,
        renew_allowed=isinstance(request, ShareFetchRequestV2), now_ms=s.now_ms(),
    )  # fmt: skip
    if denied:  # rare: most fetches skip building these maps
        acks |= refused_acks(request.topics, denied)
    unknown = update.unknown | _denied(request.topics, denied) if denied else update.unknown
    if update.session is None:
        s.share_fetch.close_session(group_id, member_id, s.now_ms())
        return await _response(ctx, group_id, acks, {})
    if _is_renew(request):
        return await _response(ctx, group_id, acks, unknown)
    # Partitions answered with an error need an answer now, not after the long poll.
    max_wait_s = 0.0 if unknown else request.max_wait.total_seconds()
    fetched = await _acquire(ctx, request, update.session, max_wait_s)
    answered = unknown | fetched
    await _count_fetch(ctx, update.session.partitions, answered)
    return await _response(ctx, group_id, acks, answered)


async def _count_fetch(
    ctx: RequestContext, session: Iterable[TopicIdPartition], answered: Fetched
) -> None:
    """A fetch counts once for every topic of the session's partitions, with or without
    records to answer (as SharePartitionManager.fetchMessages marks TotalShareFetchRequests-
    PerSec), and as failed for a topic one of whose partitions has an error."""
    codes = dict.fromkeys(session, int(ErrorCode.none))
    codes.update((k, f.error_code) for k, f in answered.items())
    ctx.services.metrics.on_share_fetch(await failed_by_topic(ctx, codes.items(), len(codes)))


async def _update_session(
    ctx: RequestContext,
    request: ShareFetchRequest,
    group_id: str,
    member_id: str,
    readable: Sequence[HasPartitions],
    listed: int,
) -> SessionUpdate:
    """`ShareFetchService.update_session`; the partitions of a request naming many are added
    a slice at a time (a million, each looked up, held the loop for seconds).

    :raises ShareSessionError: as `update_session`."""
    service = ctx.services.share_fetch
    epoch = request.share_session_epoch
    forgotten = request.forgotten_topics_data
    if listed <= SLICE and (not forgotten or sum(len(t.partitions) for t in forgotten) <= SLICE):
        added = [(topic_id(t), p.partition_index) for t in readable for p in t.partitions]
        gone = [(topic_id(t), i) for t in forgotten for i in t.partitions]
        # Nearly always: one call, as before.
        return service.update_session(group_id, member_id, epoch, added, gone, ctx.principal)
    update = service.update_session(group_id, member_id, epoch, (), (), ctx.principal)
    if update.session is None:
        return update
    unknown = dict(update.unknown)
    added_pairs = ((topic_id(t), p.partition_index) for t in readable for p in t.partitions)
    for chunk in _chunks(added_pairs):
        unknown |= service.change_partitions(update.session, chunk, ())
        await asyncio.sleep(0)
    for chunk in _chunks((topic_id(t), i) for t in forgotten for i in t.partitions):
        service.change_partitions(update.session, (), chunk)
        await asyncio.sleep(0)
    return SessionUpdate(update.session, unknown)


def _chunks(pairs: Iterable[TopicIdPartition]) -> Iterator[list[TopicIdPartition]]:
    it = iter(pairs)
    while chunk := list(itertools.islice(it, SLICE)):
        yield chunk


HANDLER = handler(handle, ShareFetchRequestV1, ShareFetchRequestV2, acl=SHARE_ACL_CHECKS)
