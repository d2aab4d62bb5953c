"""ShareFetch (78): share-session bookkeeping, piggybacked acknowledgements, acquisition.

Records come back as stored batches with `AcquiredRecords` ranges; the client drops offsets
outside them. With IsRenewAck (v2) the request only renews locks and returns no records.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.handlers.common import apply_acknowledgements
from broker.registry import handler
from broker.share.acknowledgements import AckOutcome
from broker.share.departures import session_closed
from broker.share.share_partition_manager import FetchedPartition
from broker.share.share_session_cache import CLOSE_EPOCH
from broker.share.share_session_cache import OPEN_EPOCH
from broker.share.share_session_cache import ShareSession
from broker.share.share_session_cache import ShareSessionError
from broker.share.share_session_cache import ShareSessionKey
from coordinator.share_group import CoordinatorError
from coordinator.share_group import check_ids
from protocol.api_keys import SHARE_FETCH
from protocol.messages import build
from protocol.messages import request_type
from protocol.messages import response_type

Key = tuple[Any, int]


def _invalid(request: Any) -> str | None:
    if not request.group_id or not request.member_id:
        return "group id and member id are required"
    if request.share_session_epoch == OPEN_EPOCH and any(
        p.acknowledgement_batches for t in request.topics for p in t.partitions
    ):
        return "a request that opens a share session cannot carry acknowledgements"
    if getattr(request, "is_renew_ack", False) and (
        request.max_wait.total_seconds()
        or request.min_bytes
        or request.max_bytes
        or request.max_records
    ):
        return "a renew request must have MaxWaitMs, MinBytes, MaxBytes and MaxRecords 0"
    return None


def _unknown(ctx: RequestContext, topic_id: Any, partition: int) -> ErrorCode | None:
    topic = ctx.services.logs.topic_by_id(topic_id)
    if topic is None:
        return ErrorCode.unknown_topic_id
    if not 0 <= partition < topic.partitions:
        return ErrorCode.unknown_topic_or_partition
    return None


def _session(
    ctx: RequestContext, request: Any, unknown: dict[Key, FetchedPartition]
) -> ShareSession | None:
    """Open, advance or look up the share session. Partitions that do not exist are put in
    `unknown` (answered once with their error) and never kept in the session.

    :raises ShareSessionError:"""
    s = ctx.services
    key = ShareSessionKey(request.group_id, request.member_id)
    if request.share_session_epoch == CLOSE_EPOCH:
        return None
    if request.share_session_epoch == OPEN_EPOCH:
        if not s.coordinator.is_member(request.group_id, request.member_id):
            raise ShareSessionError(ErrorCode.unknown_member_id, "not a member of the share group")
        session = s.share_sessions.open(key)
    else:
        session = s.share_sessions.advance(key, request.share_session_epoch)
    for topic in request.topics:
        for p in topic.partitions:
            code = _unknown(ctx, topic.topic_id, p.partition_index)
            if code is None:
                session.partitions[(topic.topic_id, p.partition_index)] = None
            else:
                unknown[(topic.topic_id, p.partition_index)] = FetchedPartition(code, b"", [])
    for topic in request.forgotten_topics_data:
        for index in topic.partitions:
            session.partitions.pop((topic.topic_id, index), None)
    return session


def _acquire(
    ctx: RequestContext, request: Any, session: ShareSession
) -> dict[Key, FetchedPartition]:
    s = ctx.services
    keys = list(session.partitions)
    if not keys:
        return {}
    start = session.rotation % len(keys)
    session.rotation += 1
    records_left, bytes_left = request.max_records, request.max_bytes
    out: dict[Key, FetchedPartition] = {}
    for topic_id, partition in keys[start:] + keys[:start]:
        if records_left <= 0 or bytes_left <= 0:
            break
        fetched = s.share_partitions.fetch(
            request.group_id, request.member_id, topic_id, partition,
            max_bytes=bytes_left, max_records=records_left, now_ms=s.now_ms(),
        )  # fmt: skip
        if fetched.acquired or fetched.error_code != ErrorCode.none:
            out[(topic_id, partition)] = fetched
            records_left -= sum(a.last_offset - a.first_offset + 1 for a in fetched.acquired)
            bytes_left -= len(fetched.records)
    return out


async def _long_poll(
    ctx: RequestContext, request: Any, session: ShareSession
) -> dict[Key, FetchedPartition]:
    s = ctx.services
    deadline = time.monotonic() + request.max_wait.total_seconds()
    while True:
        fetched = _acquire(ctx, request, session)
        left = deadline - time.monotonic()
        if fetched or left <= 0 or not session.partitions:
            return fetched
        names = [
            (t.name, p) for t, p in ((s.logs.topic_by_id(t), p) for t, p in session.partitions) if t
        ]
        await s.notifier.wait(names, left)


def _response(
    ctx: RequestContext,
    request: Any,
    acks: dict[Key, AckOutcome],
    fetched: dict[Key, FetchedPartition],
) -> Any:
    r = Response(ctx)
    s = ctx.services
    leader = build(r.LeaderIdAndEpoch, leader_id=s.node_id, leader_epoch=0)
    by_topic: dict[Any, list[Any]] = {}
    for key in list(dict.fromkeys([*acks, *fetched])):
        f = fetched.get(key)
        ack = acks.get(key)
        by_topic.setdefault(key[0], []).append(
            build(
                r.PartitionData,
                partition_index=key[1],
                error_code=f.error_code if f else ErrorCode.none,
                acknowledge_error_code=ack.error_code if ack else ErrorCode.none,
                acknowledge_error_message=ack.message if ack else None,
                current_leader=leader,
                records=f.records if f else b"",
                acquired_records=tuple(
                    build(
                        r.AcquiredRecords,
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in (f.acquired if f else ())
                ),
            )
        )
    return build(
        r.type,
        error_code=ErrorCode.none,
        acquisition_lock_timeout=datetime.timedelta(
            milliseconds=s.share_partitions.lock_duration_ms(request.group_id)
        ),
        responses=tuple(
            build(r.ShareFetchableTopicResponse, topic_id=t, partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
        node_endpoints=(),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    s = ctx.services
    problem = _invalid(request)
    if problem:
        return build(
            r.type,
            error_code=ErrorCode.invalid_request,
            error_message=problem,
            responses=(),
            node_endpoints=(),
        )
    try:
        check_ids(request.group_id, request.member_id)
    except CoordinatorError as e:
        return build(
            r.type, error_code=e.error_code, error_message=str(e), responses=(), node_endpoints=()
        )
    unknown: dict[Key, FetchedPartition] = {}
    try:
        session = _session(ctx, request, unknown)
    except ShareSessionError as e:
        return build(
            r.type, error_code=e.error_code, error_message=str(e), responses=(), node_endpoints=()
        )
    acks = await apply_acknowledgements(ctx, request)
    if session is None:
        session_closed(s, request.group_id, request.member_id, s.now_ms())
        return _response(ctx, request, acks, {})
    if getattr(request, "is_renew_ack", False):
        return _response(ctx, request, acks, unknown)
    # Partitions answered with an error need an answer now, not after the long poll.
    fetched = (
        _acquire(ctx, request, session) if unknown else await _long_poll(ctx, request, session)
    )
    return _response(ctx, request, acks, unknown | fetched)


# Until this handler builds typed responses it answers each version with that version's class.
HANDLER = handler(
    handle,
    *(request_type(SHARE_FETCH, v) for v in range(1, 3)),
    responses=tuple(response_type(SHARE_FETCH, v) for v in range(1, 3)),
)
