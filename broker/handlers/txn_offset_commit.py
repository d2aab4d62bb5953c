"""TxnOffsetCommit (28): a group's offsets, committed with the transaction (visible to
OffsetFetch only once it commits; dropped if it aborts).

WRITE on the TransactionalId, READ on the group and on each topic, as Kafka's
`KafkaApis.handleTxnOffsetCommitRequest`. From v3 the group's coordinator judges member and
generation (KIP-447), as for OffsetCommit. A commit the transaction has no AddOffsetsToTxn for
is answered TRANSACTION_ABORTABLE from v4 and INVALID_TXN_STATE before, as Kafka 4's
`AddPartitionsToTxnManager.txnOffsetCommitRequestVersionToTransactionSupportedOperation`.

A request may name a million partitions: checked, added to the transaction (`OFFSETS_PER_CALL` a
call) and answered a slice at a time; if one addition fails, every accepted partition gets
that error (the client aborts, dropping the offsets added before).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.txn_offset_commit import v0
from kio.schema.txn_offset_commit import v1
from kio.schema.txn_offset_commit import v2
from kio.schema.txn_offset_commit import v3
from kio.schema.txn_offset_commit import v4
from kio.schema.txn_offset_commit import v5
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import Slicer
from broker.txn_offsets_remote import staged_remotely
from coordinator.transaction_coordinator import OFFSETS_PER_CALL
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from protocol.transaction_log import PendingOffset

Request = (
    v0.TxnOffsetCommitRequest | v1.TxnOffsetCommitRequest | v2.TxnOffsetCommitRequest
    | v3.TxnOffsetCommitRequest | v4.TxnOffsetCommitRequest | v5.TxnOffsetCommitRequest
)  # fmt: skip
Codes = dict[tuple[str, int], ErrorCode]


def _request_code(ctx: RequestContext, request: Request) -> ErrorCode:
    if not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return ErrorCode.transactional_id_authorization_failed
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed
    if not_coordinator(ctx, request.group_id):  # the group's coordinator takes it (KIP-447)
        return ErrorCode.not_coordinator
    if isinstance(request, (v3.TxnOffsetCommitRequest, v4.TxnOffsetCommitRequest,
                            v5.TxnOffsetCommitRequest)):  # fmt: skip
        verdict = ctx.services.offsets.check_commit(
            request.group_id, request.member_id, request.generation_id, request.group_instance_id
        )
        if verdict is not ErrorCode.none:
            return verdict
    return ErrorCode.none


async def _commit(ctx: RequestContext, request: Request, slicer: Slicer) -> Codes:
    codes: Codes = {}
    accepted: dict[tuple[str, int], PendingOffset] = {}
    code = _request_code(ctx, request)
    limit = ctx.services.config.offset_metadata_max_bytes
    for topic in request.topics:
        readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
        info = ctx.services.logs.topic(topic.name)
        count = info.partitions if info is not None else 0
        for p in topic.partitions:
            tp = (str(topic.name), int(p.partition_index))
            metadata = p.committed_metadata or ""
            if code is not ErrorCode.none:
                codes[tp] = code
            elif not readable:
                codes[tp] = ErrorCode.topic_authorization_failed
            elif not 0 <= tp[1] < count:
                codes[tp] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode()) > limit:
                codes[tp] = ErrorCode.offset_metadata_too_large
            else:
                epoch = int(getattr(p, "committed_leader_epoch", -1))
                accepted[tp] = PendingOffset(int(p.committed_offset), epoch, metadata)
            await slicer.pause()
    if accepted:
        result = await _added(ctx, request, accepted, slicer)
        for tp in accepted:
            codes[tp] = result
            await slicer.pause()
    return codes


async def _added(
    ctx: RequestContext, request: Request, accepted: dict[tuple[str, int], PendingOffset],
    slicer: Slicer,
) -> ErrorCode:  # fmt: skip
    """The coordinator's answer, the offsets added OFFSETS_PER_CALL at a time."""
    rows = list(accepted.items())
    result = ErrorCode.none
    owner, links = ctx.services.config.ownership, ctx.services.node_links
    if links is not None and not owner.coordinates(request.transactional_id):
        result = await staged_remotely(ctx, links, request, rows, slicer)
        rows = []
    for start in range(0, len(rows), OFFSETS_PER_CALL):
        result = ctx.services.transactions.txn_offset_commit(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.group_id, dict(rows[start : start + OFFSETS_PER_CALL]), ctx.services.now_ms(),
        )  # fmt: skip
        if result is not ErrorCode.none:
            break
        await slicer.pause()
    if result is ErrorCode.transaction_abortable and ctx.version < 4:
        result = ErrorCode.invalid_txn_state
    return result


async def handle(ctx: RequestContext, request: Request) -> v5.TxnOffsetCommitResponse:
    slicer = Slicer()
    codes = await _commit(ctx, request, slicer)
    r = v5.response

    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            partitions.append(
                r.TxnOffsetCommitResponsePartition(
                    partition_index=i32(p.partition_index),
                    error_code=codes[(str(t.name), int(p.partition_index))],
                )
            )
            await slicer.pause()
        topics.append(
            r.TxnOffsetCommitResponseTopic(name=TopicName(t.name), partitions=tuple(partitions))
        )
    return v5.TxnOffsetCommitResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLER = handler(
    handle,
    v0.TxnOffsetCommitRequest, v1.TxnOffsetCommitRequest, v2.TxnOffsetCommitRequest,
    v3.TxnOffsetCommitRequest, v4.TxnOffsetCommitRequest, v5.TxnOffsetCommitRequest,
    acl=(
        (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
        (AclOperation.READ, ResourceType.GROUP),
        (AclOperation.READ, ResourceType.TOPIC),
    ),
)  # fmt: skip
