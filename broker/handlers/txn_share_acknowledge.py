"""TxnShareAcknowledge (Shoal's own API key 30000, no Kafka client sends it): a transactional
producer stages a share-group member's acknowledgements in its open transaction, after
KIP-1289's draft RPC of that name (apache/kafka#22357). The transaction's COMMIT applies them,
its ABORT (EndTxn, timeout, fencing) releases the records (`broker/share/txn_acks.py`).

Checks, as TxnOffsetCommit's: WRITE on the TransactionalId, READ on the group and on each topic.
The share-partitions acknowledged join the transaction (with the `SHARE_ACKS_PARTITION`
participant), as AddPartitionsToTxn adds partitions, so its markers reach them; then each
partition's batches are staged, all or none per partition (INVALID_RECORD_STATE: a record the
member does not hold, as ShareAcknowledge).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.share_common import member_of
from broker.registry import handler
from broker.share.txn_acks import MAX_STAGED_RUNS
from broker.slicing import Slicer
from coordinator.transaction_coordinator import SHARE_ACKS_PARTITION
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from protocol.shoal_apis import TxnShareAcknowledgePartition as Partition
from protocol.shoal_apis import TxnShareAcknowledgeRequest as Request
from protocol.shoal_apis import TxnShareAcknowledgeResponse as Response
from protocol.shoal_apis import TxnShareAcknowledgeResponsePartition as PartitionResult
from protocol.shoal_apis import TxnShareAcknowledgeResponseTopic as TopicResult

Codes = dict[tuple[str, int], ErrorCode]


def _response(request: Request, code: ErrorCode, codes: Codes) -> Response:
    topics = tuple(
        TopicResult(
            name=t.name,
            partitions=tuple(
                PartitionResult(
                    partition_index=p.partition_index,
                    error_code=codes.get((str(t.name), int(p.partition_index)), code),
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return Response(throttle_time=NO_THROTTLE, error_code=code, topics=topics)


def _request_code(ctx: RequestContext, request: Request) -> ErrorCode:
    if ctx.services.txn_share_acks is None:
        return ErrorCode.unsupported_version
    if not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return ErrorCode.transactional_id_authorization_failed
    ids = member_of(request.group_id, request.member_id)
    if not isinstance(ids, tuple):
        return ids.error_code
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed
    return ErrorCode.none


def _checked(ctx: RequestContext, request: Request) -> tuple[Codes, list[tuple[str, int]]]:
    """Refused partitions' codes, and the partitions that may be acknowledged."""
    codes: Codes = {}
    wanted: list[tuple[str, int]] = []
    for t in request.topics:
        readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
        info = ctx.services.logs.topic(t.name)
        for p in t.partitions:
            tp = (str(t.name), int(p.partition_index))
            if not readable:
                codes[tp] = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= tp[1] < info.partitions:
                codes[tp] = ErrorCode.unknown_topic_or_partition
            else:
                wanted.append(tp)
    return codes, wanted


def _stage(ctx: RequestContext, request: Request, tp: tuple[str, int], p: Partition) -> ErrorCode:
    """Stage one partition's batches, if the producer's transaction is still open with `tp`
    in it (an EndTxn or the timeout may have ended it while the handler yielded: nothing
    would release records staged then)."""
    s = ctx.services
    pid, epoch = int(request.producer_id), int(request.producer_epoch)
    info = s.logs.topic(tp[0])
    if info is None or s.txn_share_acks is None:
        return ErrorCode.unknown_topic_or_partition
    live = s.transactions.verify(request.transactional_id, pid, epoch, tp)
    if live is not ErrorCode.none:
        return live
    batches = [
        (int(b.first_offset), int(b.last_offset), [int(a) for a in b.acknowledge_types])
        for b in p.acknowledgement_batches
    ]
    return s.txn_share_acks.stage(
        pid, request.group_id, request.member_id, tp[0], info.topic_id, tp[1], batches,
        s.now_ms(),
    )  # fmt: skip


async def handle(ctx: RequestContext, request: Request) -> Response:
    s = ctx.services
    if sum(len(t.partitions) for t in request.topics) > MAX_STAGED_RUNS:
        # More partitions than a transaction may stage runs: refused whole, before any
        # per-partition work (50,000 of them held the loop 124 ms).
        return Response(throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_request, topics=())
    code = _request_code(ctx, request)
    if code is not ErrorCode.none:
        return _response(request, code, {})
    codes, wanted = _checked(ctx, request)
    joined = s.transactions.add_partitions(
        request.transactional_id, int(request.producer_id), int(request.producer_epoch),
        [SHARE_ACKS_PARTITION, *wanted], s.now_ms(),
    )  # fmt: skip
    if joined is not ErrorCode.none:
        return _response(request, joined, codes)
    slicer = Slicer()
    for t in request.topics:
        for p in t.partitions:
            tp = (str(t.name), int(p.partition_index))
            if tp not in codes:
                codes[tp] = _stage(ctx, request, tp, p)
                await slicer.pause()
    return _response(request, ErrorCode.none, codes)


HANDLER = handler(
    handle,
    Request,
    acl=(
        (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
        (AclOperation.READ, ResourceType.GROUP),
        (AclOperation.READ, ResourceType.TOPIC),
    ),
)
