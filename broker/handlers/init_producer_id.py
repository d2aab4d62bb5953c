"""InitProducerId (22): a fresh producer id for idempotent producers, and a transactional id's
producer id and epoch for transactional ones (the transaction coordinator's; WRITE on the
TransactionalId, as Kafka's `KafkaApis.handleInitProducerIdRequest` checks).

An idempotent producer that re-initialises with its current id and epoch (v3+) gets the next
epoch, so its old batches are fenced. PRODUCER_FENCED came with v4 (InitProducerIdResponse.json);
older versions are answered INVALID_PRODUCER_EPOCH instead, as Kafka does.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id import v0
from kio.schema.init_producer_id import v1
from kio.schema.init_producer_id import v2
from kio.schema.init_producer_id import v3
from kio.schema.init_producer_id import v4
from kio.schema.init_producer_id import v5
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from broker.authorization import authorize
from broker.authorization import authorize_any
from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.request_order import release_order
from broker.transactions import finish
from protocol.acl import AclOperation
from protocol.acl import ResourceType

MAX_EPOCH = 32767
# While the logs are still being opened at start, a new id waits this long for them (every id
# must lie above all those the logs hold), then the answer is retriable.
LOADING_WAIT_S = 10.0

Request = (
    v0.InitProducerIdRequest
    | v1.InitProducerIdRequest
    | v2.InitProducerIdRequest
    | v3.InitProducerIdRequest
    | v4.InitProducerIdRequest
    | v5.InitProducerIdRequest
)
Response = v5.InitProducerIdResponse


def _answer(code: ErrorCode, producer_id: int, epoch: int) -> Response:
    return Response(
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
    )


async def _transactional(ctx: RequestContext, request: Request, txn_id: str) -> Response:
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return _answer(ErrorCode.transactional_id_authorization_failed, -1, -1)
    expected = None
    if isinstance(
        request, (v3.InitProducerIdRequest, v4.InitProducerIdRequest, v5.InitProducerIdRequest)
    ) and (request.producer_id >= 0 or request.producer_epoch >= 0):
        expected = (int(request.producer_id), int(request.producer_epoch))
    now = ctx.services.now_ms()
    result = ctx.services.transactions.init_producer_id(
        txn_id, round(request.transaction_timeout.total_seconds() * 1000), expected, now
    )
    code = result.error_code
    if code is ErrorCode.concurrent_transactions:  # a fenced transaction aborts: finish it,
        s = ctx.services  # to its end, the client there or not
        await s.changes.to_the_end(finish(s.transactions, txn_id, now))
    if code == ErrorCode.producer_fenced and ctx.version < 4:
        code = ErrorCode.invalid_producer_epoch
    return _answer(code, result.producer_id, result.producer_epoch)


async def _ids_ready(ctx: RequestContext) -> bool:
    """Producer ids are handed out once every log is open (above every id they hold): wait
    for that, up to LOADING_WAIT_S; False: Kafka's answer while it loads is due."""
    allocator = ctx.services.producer_ids
    if allocator.started:
        return True
    release_order()  # only waiting on the logs: the connection's next requests may run
    return await allocator.wait_started(LOADING_WAIT_S)


async def handle(ctx: RequestContext, request: Request) -> Response:
    if request.transactional_id is not None:
        txn_id = request.transactional_id
        if not_coordinator(ctx, txn_id) and authorize(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
        ):  # answered at once: no id handed out, no transaction made here
            return _answer(ErrorCode.not_coordinator, -1, -1)
        if not await _ids_ready(ctx):
            return _answer(ErrorCode.coordinator_load_in_progress, -1, -1)
        return await _transactional(ctx, request, request.transactional_id)
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster or WRITE on any topic (KIP-679).
    if not (
        authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE)
        or authorize_any(ctx, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _answer(ErrorCode.cluster_authorization_failed, -1, -1)
    pid, epoch = -1, -1
    if isinstance(
        request, (v3.InitProducerIdRequest, v4.InitProducerIdRequest, v5.InitProducerIdRequest)
    ):
        pid, epoch = request.producer_id, request.producer_epoch
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return _answer(ErrorCode.none, pid, epoch + 1)
    if not await _ids_ready(ctx):
        return _answer(ErrorCode.coordinator_load_in_progress, -1, -1)
    try:
        producer_id = ctx.services.producer_ids.allocate()
    except OSError:  # no block recorded (a full disk): retriable, as Kafka's RPCProducerIdManager
        return _answer(ErrorCode.coordinator_load_in_progress, -1, -1)  # answers without one
    return _answer(ErrorCode.none, producer_id, 0)


HANDLER = handler(
    handle,
    v0.InitProducerIdRequest,
    v1.InitProducerIdRequest,
    v2.InitProducerIdRequest,
    v3.InitProducerIdRequest,
    v4.InitProducerIdRequest,
    v5.InitProducerIdRequest,
    acl=(
        (AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER),
        (AclOperation.WRITE, ResourceType.TOPIC),
        (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    ),
)
