"""ShareAcknowledge (79): acknowledgements outside a fetch; epoch -1 also closes the session.

Closing acknowledgements are accepted after the member has left the group (librdkafka sends
them before or after its leave heartbeat). v2 adds RENEW and returns the lock duration.
"""

from __future__ import annotations

import datetime
import uuid

from kio.schema.errors import ErrorCode
from kio.schema.share_acknowledge.v1.request import (
    ShareAcknowledgeRequest as ShareAcknowledgeRequestV1,
)
from kio.schema.share_acknowledge.v2.request import (
    ShareAcknowledgeRequest as ShareAcknowledgeRequestV2,
)
from kio.schema.share_acknowledge.v2.response import LeaderIdAndEpoch
from kio.schema.share_acknowledge.v2.response import PartitionData
from kio.schema.share_acknowledge.v2.response import ShareAcknowledgeResponse
from kio.schema.share_acknowledge.v2.response import ShareAcknowledgeTopicResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.share_common import SHARE_ACL_CHECKS
from broker.handlers.share_common import SLICED
from broker.handlers.share_common import AckResults
from broker.handlers.share_common import Refusal
from broker.handlers.share_common import acknowledge_all
from broker.handlers.share_common import authorized_member
from broker.handlers.share_common import count_acknowledgements
from broker.handlers.share_common import failed_topics
from broker.handlers.share_common import member_of
from broker.handlers.share_common import refused_acks
from broker.handlers.share_common import topic_id
from broker.handlers.share_common import unreadable_topics
from broker.registry import handler
from broker.share.share_session_cache import CLOSE_EPOCH
from broker.share.share_session_cache import ShareSessionError
from broker.slicing import Slicer

ShareAcknowledgeRequest = ShareAcknowledgeRequestV1 | ShareAcknowledgeRequestV2


def _response(
    refusal: Refusal | None = None,
    lock_ms: int = 0,
    topics: tuple[ShareAcknowledgeTopicResponse, ...] = (),
) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(
        throttle_time=NO_THROTTLE,
        error_code=refusal.error_code if refusal else ErrorCode.none,
        error_message=refusal.message if refusal else None,
        acquisition_lock_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=lock_ms)),
        responses=topics,
        node_endpoints=(),
    )


async def handle(ctx: RequestContext, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    response = await _handle(ctx, request)
    if response.error_code != ErrorCode.none:  # refused whole: every topic named failed
        ctx.services.metrics.on_share_acknowledgement(await failed_topics(ctx, request.topics))
    return response


async def _handle(
    ctx: RequestContext, request: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    s = ctx.services
    ids = member_of(request.group_id, request.member_id)
    if isinstance(ids, Refusal):
        return _response(ids)
    group_id, member_id = ids
    if refusal := authorized_member(ctx, group_id, member_id):
        return _response(refusal)
    try:
        s.share_fetch.advance_for_acknowledge(group_id, member_id, request.share_session_epoch)
    except ShareSessionError as e:
        return _response(Refusal(e.error_code, str(e)))
    # To its end if the client goes (`broker.to_the_end`), as Kafka's broker finishes a
    # request it has read: a cancelled one's acknowledgements were applied (a big one's
    # steps go on in a task of their own) but not counted, and the rest not applied.
    results = await s.changes.to_the_end(_acknowledge(ctx, request, group_id, member_id))
    leader = LeaderIdAndEpoch(leader_id=BrokerId(s.node_id), leader_epoch=i32(0))
    by_topic: dict[uuid.UUID, list[PartitionData]] = {}
    slicer = Slicer() if len(results) > SLICED else None  # a request may name a million
    for (tid, partition), outcome in results.items():
        by_topic.setdefault(tid, []).append(
            PartitionData(
                partition_index=i32(partition),
                error_code=outcome.error_code,
                error_message=outcome.message,
                current_leader=leader,
            )
        )
        if slicer is not None:
            await slicer.pause()
    topics = tuple(
        ShareAcknowledgeTopicResponse(topic_id=t, partitions=tuple(ps))
        for t, ps in by_topic.items()
    )
    return _response(lock_ms=s.share_fetch.lock_duration_ms(group_id), topics=topics)


async def _acknowledge(
    ctx: RequestContext, request: ShareAcknowledgeRequest, group_id: str, member_id: str
) -> AckResults:
    """Every partition's acknowledgements applied and counted, and the session closed if
    the request asks."""
    s = ctx.services
    denied = unreadable_topics(ctx, request.topics)
    results = await acknowledge_all(
        s.share_fetch, s.ack_slices, group_id, member_id,
        [t for t in request.topics if topic_id(t) not in denied],
        renew_allowed=isinstance(request, ShareAcknowledgeRequestV2), now_ms=s.now_ms(),
    )  # fmt: skip
    results |= refused_acks(request.topics, denied)
    await count_acknowledgements(ctx, results)
    if request.share_session_epoch == CLOSE_EPOCH:
        s.share_fetch.close_session(group_id, member_id, s.now_ms())
    return results


HANDLER = handler(
    handle,
    ShareAcknowledgeRequestV1,
    ShareAcknowledgeRequestV2,
    acl=SHARE_ACL_CHECKS,
    bulky_answers=False,  # as long as its request (see Handler.bulky_answers)
)
