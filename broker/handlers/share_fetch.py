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
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence

from kio.schema.errors import ErrorCode
from kio.schema.share_fetch.v1.request import ShareFetchRequest as ShareFetchRequestV1
from kio.schema.share_fetch.v2.request import ShareFetchRequest as ShareFetchRequestV2
from kio.schema.share_fetch.v2.response import ShareFetchResponse

from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.share_common import SHARE_ACL_CHECKS
from broker.handlers.share_common import HasPartitions
from broker.handlers.share_common import Refusal
from broker.handlers.share_common import acknowledge_all
from broker.handlers.share_common import any_acknowledgements
from broker.handlers.share_common import authorized_member
from broker.handlers.share_common import count_acknowledgements
from broker.handlers.share_common import failed_topics
from broker.handlers.share_common import member_of
from broker.handlers.share_common import refused_acks
from broker.handlers.share_common import topic_id
from broker.handlers.share_common import unreadable_topics
from broker.handlers.share_fetch_answer import answer
from broker.handlers.share_fetch_answer import count_fetch
from broker.handlers.share_fetch_direct import direct
from broker.handlers.share_fetch_poll import ShareFetchRequest
from broker.handlers.share_fetch_poll import acquire_waiting
from broker.log_loading import open_first
from broker.registry import handler
from broker.share.partition_reads import FetchedPartition
from broker.share.share_fetch_service import SessionUpdate
from broker.share.share_session_cache import OPEN_EPOCH
from broker.share.share_session_cache import ShareSession
from broker.share.share_session_cache import ShareSessionError
from broker.share.share_session_cache import TopicIdPartition
from protocol.messages import EncodedResponse

SLICE = 2_000  # partitions added to a session per slice (a few milliseconds)
Fetched = dict[TopicIdPartition, FetchedPartition]


def _is_renew(request: ShareFetchRequest) -> bool:
    return isinstance(request, ShareFetchRequestV2) and request.is_renew_ack


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
    if (direct_answer := await direct(ctx, request)) is not None:  # nearly every fetch
        return direct_answer
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
    # Counted now, before any wait: a fetch whose client goes while it waits has applied
    # them (Kafka counts in SharePartitionManager.acknowledge, as they are applied).
    await count_acknowledgements(ctx, acks)
    unknown = update.unknown | _denied(request.topics, denied) if denied else update.unknown
    if update.session is None:
        s.share_fetch.close_session(group_id, member_id, s.now_ms())
        return await answer(ctx, group_id, acks, {})
    if _is_renew(request):
        return await answer(ctx, group_id, acks, unknown)
    # Partitions answered with an error need an answer now, not after the long poll.
    max_wait_s = 0.0 if unknown else request.max_wait.total_seconds()
    fetched = await acquire_waiting(ctx, request, update.session, max_wait_s)
    answered = unknown | fetched
    await count_fetch(ctx, update.session.partitions, answered)
    return await answer(ctx, group_id, acks, answered)


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
