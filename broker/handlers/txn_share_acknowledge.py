"""TxnShareAcknowledge (Shoal's own API key 30000, no Kafka client sends it): a transactional
producer stages a share-group member's acknowledgements in its open transaction, after
KIP-1289's draft RPC of that name (apache/kafka#22357). The transaction's COMMIT applies them,
its ABORT (EndTxn, timeout, fencing) releases the records (`broker/share/txn_acks.py`).

Checks, as TxnOffsetCommit's: WRITE on the TransactionalId, READ on the group and on each topic.
The share-partitions acknowledged join the transaction (with the `SHARE_ACKS_PARTITION`
participant), as AddPartitionsToTxn adds partitions, so its markers reach them; then each
partition's batches are staged, all or none per partition (INVALID_RECORD_STATE: a record the
member does not hold, as ShareAcknowledge).

With `--processes N` the request goes to each share-partition's leader, as ShareAcknowledge
(NOT_LEADER_OR_FOLLOWER for a partition led elsewhere); a leader that is not the transaction's
coordinator has the coordinator add them (`broker/txn_share_remote.py`).
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
from broker.txn_share_remote import join
from coordinator.transaction_coordinator import share_participant
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
        owner = ctx.services.config.ownership
        for p in t.partitions:
            tp = (str(t.name), int(p.partition_index))
            if not readable:
                codes[tp] = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= tp[1] < info.partitions:
                codes[tp] = ErrorCode.unknown_topic_or_partition
            elif not owner.leads(info.topic_id, tp[1]):
                codes[tp] = ErrorCode.not_leader_or_follower
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
    if ctx.services.config.ownership.coordinates(request.transactional_id):
        live = s.transactions.verify(request.transactional_id, pid, epoch, tp)
    else:  # its coordinator added it; a marker since (the transaction ended) voids the join
        joined = s.txn_share_acks.joined(pid, epoch)
        live = ErrorCode.none if joined else ErrorCode.transaction_abortable
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


async def _join(ctx: RequestContext, request: Request, wanted: list[tuple[str, int]]) -> ErrorCode:
    """The share-partitions (and this process's participant) added to the transaction: by
    its coordinator here, or asked of it in its process."""
    s, owner = ctx.services, ctx.services.config.ownership
    if (
        s.node_links is not None
        and s.txn_share_acks is not None
        and not owner.coordinates(request.transactional_id)
    ):
        if not wanted:
            return ErrorCode.none  # nothing to stage here: the transaction need not know
        coordinator = owner.coordinator(request.transactional_id)
        return await join(
            s.node_links, coordinator, s.txn_share_acks, owner.node_id, owner.nodes, request,
            wanted,
        )  # fmt: skip
    return s.transactions.add_partitions(
        request.transactional_id, int(request.producer_id), int(request.producer_epoch),
        [share_participant(owner.node_id, owner.nodes), *wanted], s.now_ms(),
    )  # fmt: skip


async def handle(ctx: RequestContext, request: Request) -> Response:
    if sum(len(t.partitions) for t in request.topics) > MAX_STAGED_RUNS:
        # More partitions than a transaction may stage runs: refused whole, before any
        # per-partition work (50,000 of them held the loop 124 ms).
        return Response(throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_request, topics=())
    code = _request_code(ctx, request)
    if code is not ErrorCode.none:
        return _response(request, code, {})
    codes, wanted = _checked(ctx, request)
    joined = await _join(ctx, request, wanted)
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
