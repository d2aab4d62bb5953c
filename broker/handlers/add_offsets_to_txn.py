"""AddOffsetsToTxn (25): a group's offsets partition joins the transaction, so that its
TxnOffsetCommits commit with it. WRITE on the TransactionalId and READ on the group, as Kafka's
`KafkaApis.handleAddOffsetsToTxnRequest` checks; PRODUCER_FENCED from v2.
"""

from __future__ import annotations

from kio.schema.add_offsets_to_txn import v0
from kio.schema.add_offsets_to_txn import v1
from kio.schema.add_offsets_to_txn import v2
from kio.schema.add_offsets_to_txn import v3
from kio.schema.add_offsets_to_txn import v4
from kio.schema.errors import ErrorCode

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.handlers.txn_common import for_version
from broker.registry import handler
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = (
    v0.AddOffsetsToTxnRequest | v1.AddOffsetsToTxnRequest | v2.AddOffsetsToTxnRequest
    | v3.AddOffsetsToTxnRequest | v4.AddOffsetsToTxnRequest
)  # fmt: skip


def _code(ctx: RequestContext, request: Request) -> ErrorCode:
    if not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return ErrorCode.transactional_id_authorization_failed
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed
    if not_coordinator(ctx, request.transactional_id):
        return ErrorCode.not_coordinator
    code = ctx.services.transactions.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id,
        ctx.services.now_ms(),
    )  # fmt: skip
    return for_version(code, ctx.version, 2)


async def handle(ctx: RequestContext, request: Request) -> v4.AddOffsetsToTxnResponse:
    return v4.AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=_code(ctx, request))


HANDLER = handler(
    handle,
    v0.AddOffsetsToTxnRequest, v1.AddOffsetsToTxnRequest, v2.AddOffsetsToTxnRequest,
    v3.AddOffsetsToTxnRequest, v4.AddOffsetsToTxnRequest,
    acl=(
        (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
        (AclOperation.READ, ResourceType.GROUP),
    ),
)  # fmt: skip
