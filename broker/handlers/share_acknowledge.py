"""ShareAcknowledge (79): acknowledgements outside a fetch; epoch -1 also closes the session.

Closing acknowledgements are accepted after the member has left the group (librdkafka sends
them before or after its leave heartbeat). v2 adds RENEW and returns the lock duration.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.handlers.common import apply_acknowledgements
from broker.registry import handler
from broker.share.departures import session_closed
from broker.share.share_session_cache import CLOSE_EPOCH
from broker.share.share_session_cache import OPEN_EPOCH
from broker.share.share_session_cache import ShareSessionError
from broker.share.share_session_cache import ShareSessionKey
from coordinator.share_group import CoordinatorError
from coordinator.share_group import check_ids
from protocol.api_keys import SHARE_ACKNOWLEDGE
from protocol.messages import build
from protocol.messages import request_type
from protocol.messages import response_type


def _error(r: Response, code: ErrorCode, message: str) -> Any:
    return build(r.type, error_code=code, error_message=message, responses=(), node_endpoints=())


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    s = ctx.services
    if not request.group_id or not request.member_id:
        return _error(r, ErrorCode.invalid_request, "group id and member id are required")
    try:
        check_ids(request.group_id, request.member_id)
    except CoordinatorError as e:
        return _error(r, e.error_code, str(e))
    epoch = request.share_session_epoch
    if epoch == OPEN_EPOCH:
        return _error(
            r, ErrorCode.invalid_share_session_epoch, "a share session is opened by ShareFetch"
        )
    if epoch != CLOSE_EPOCH:
        try:
            s.share_sessions.advance(ShareSessionKey(request.group_id, request.member_id), epoch)
        except ShareSessionError as e:
            return _error(r, e.error_code, str(e))
    results = await apply_acknowledgements(ctx, request)
    if epoch == CLOSE_EPOCH:
        session_closed(s, request.group_id, request.member_id, s.now_ms())
    leader = build(r.LeaderIdAndEpoch, leader_id=s.node_id, leader_epoch=0)
    by_topic: dict[Any, list[Any]] = {}
    for (topic_id, partition), outcome in results.items():
        by_topic.setdefault(topic_id, []).append(
            build(
                r.PartitionData,
                partition_index=partition,
                error_code=outcome.error_code,
                error_message=outcome.message,
                current_leader=leader,
            )
        )
    return build(
        r.type,
        error_code=ErrorCode.none,
        acquisition_lock_timeout=datetime.timedelta(
            milliseconds=s.share_partitions.lock_duration_ms(request.group_id)
        ),
        responses=tuple(
            build(r.ShareAcknowledgeTopicResponse, topic_id=t, partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
        node_endpoints=(),
    )


# Until this handler builds typed responses it answers each version with that version's class.
HANDLER = handler(
    handle,
    *(request_type(SHARE_ACKNOWLEDGE, v) for v in range(1, 3)),
    responses=tuple(response_type(SHARE_ACKNOWLEDGE, v) for v in range(1, 3)),
)
