"""AddPartitionsToTxn (24): partitions join a transaction before its producer writes to them.

v0-3 are the clients' (one transaction; WRITE on the TransactionalId, WRITE on each topic), v4-5
the brokers' (KIP-890: several transactions, and `verify_only` asks whether partitions are in
them; CLUSTER_ACTION on the cluster). As Kafka's `KafkaApis.handleAddPartitionsToTxnRequest`:
when some partitions are unauthorized or unknown, none is added, those are answered
TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED;
else every partition gets the coordinator's one answer.

A request may name a million partitions: checked, added (`ADD_PER_CALL` a call) and answered a
slice at a time. A large addition is then several writes; if one fails, or the transaction is
fenced between them, every partition gets that error and the client aborts, which ends the
transaction in the partitions added before too.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Protocol

from kio.schema.add_partitions_to_txn import v0
from kio.schema.add_partitions_to_txn import v1
from kio.schema.add_partitions_to_txn import v2
from kio.schema.add_partitions_to_txn import v3
from kio.schema.add_partitions_to_txn import v4
from kio.schema.add_partitions_to_txn import v5
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.schema.types import TransactionalId
from kio.static.primitive import i32

from broker.authorization import authorize
from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.handlers.txn_common import for_version
from broker.registry import handler
from broker.slicing import Slicer
from coordinator.transaction_coordinator import ADD_PER_CALL
from coordinator.transaction_coordinator import SHARE_STATE
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.topics import CONSUMER_OFFSETS

ClientRequest = (
    v0.AddPartitionsToTxnRequest | v1.AddPartitionsToTxnRequest | v2.AddPartitionsToTxnRequest
    | v3.AddPartitionsToTxnRequest
)  # fmt: skip
BrokerRequest = v4.AddPartitionsToTxnRequest | v5.AddPartitionsToTxnRequest
Codes = dict[tuple[str, int], ErrorCode]


class _Topic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


async def _checked(
    ctx: RequestContext, topics: Sequence[_Topic], slicer: Slicer, verify_only: bool = False,
    from_broker: bool = False,
) -> Codes:  # fmt: skip
    """Unauthorized and unknown partitions' codes (empty: every partition may be added). A
    group coordinator of `--processes N` verifies a TxnOffsetCommit with the group's
    `__consumer_offsets` partition (one a process, as Kafka's `partitionFor(groupId)`); a
    share-partition leader adds (and verifies) its `__share_group_state` participant, one a
    process (`broker/txn_share_remote.py`)."""
    codes: Codes = {}
    processes = ctx.services.config.processes
    offsets_partitions = processes if verify_only and processes > 1 else 0
    share_participants = processes if from_broker and processes > 1 else 0
    for topic in topics:
        writable = authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, topic.name)
        info = ctx.services.logs.topic(topic.name)
        count = info.partitions if info is not None else 0
        if topic.name == CONSUMER_OFFSETS:
            count = offsets_partitions
        elif topic.name == SHARE_STATE:
            count = share_participants
        for p in topic.partitions:
            if not writable:
                codes[(topic.name, p)] = ErrorCode.topic_authorization_failed
            elif not 0 <= p < count:
                codes[(topic.name, p)] = ErrorCode.unknown_topic_or_partition
            await slicer.pause()
    return codes


async def _added(
    ctx: RequestContext, txn_id: str, pid: int, epoch: int, wanted: list[tuple[str, int]],
    slicer: Slicer,
) -> ErrorCode:  # fmt: skip
    """The coordinator's answer, the partitions added ADD_PER_CALL at a time."""
    txns = ctx.services.transactions
    code = ErrorCode.none
    for start in range(0, len(wanted), ADD_PER_CALL):
        chunk = wanted[start : start + ADD_PER_CALL]
        code = txns.add_partitions(txn_id, pid, epoch, chunk, ctx.services.now_ms())
        if code is not ErrorCode.none:
            break
        await slicer.pause()
    return code


async def _one(
    ctx: RequestContext, txn_id: str, pid: int, epoch: int, topics: Sequence[_Topic],
    slicer: Slicer, verify_only: bool = False, from_broker: bool = False,
) -> Codes:  # fmt: skip
    pairs = ((t.name, int(p)) for t in topics for p in t.partitions)
    wanted = await slicer.map(lambda tp: tp, pairs)
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        refusal = ErrorCode.transactional_id_authorization_failed
        return await _each(wanted, lambda _: refusal, slicer)
    refused = await _checked(ctx, topics, slicer, verify_only, from_broker)
    if refused:
        return await _each(
            wanted, lambda tp: refused.get(tp, ErrorCode.operation_not_attempted), slicer
        )
    if not_coordinator(ctx, txn_id):  # a client's cached coordinator; never a node's own
        return await _each(wanted, lambda _: ErrorCode.not_coordinator, slicer)
    txns = ctx.services.transactions
    if verify_only:
        # TRANSACTION_ABORTABLE came with v5
        convert = _older if ctx.version < 5 else lambda c: c
        return await _each(wanted, lambda tp: convert(txns.verify(txn_id, pid, epoch, tp)), slicer)
    code = for_version(await _added(ctx, txn_id, pid, epoch, wanted, slicer), ctx.version, 2)
    return await _each(wanted, lambda _: code, slicer)


async def _each(
    wanted: list[tuple[str, int]], code: Callable[[tuple[str, int]], ErrorCode], slicer: Slicer
) -> Codes:
    codes: Codes = {}
    for tp in wanted:
        codes[tp] = code(tp)
        await slicer.pause()
    return codes


async def _results(module: object, codes: Codes, slicer: Slicer) -> tuple[object, ...]:
    by_topic: dict[str, list[object]] = {}
    result = module.AddPartitionsToTxnPartitionResult  # type: ignore[attr-defined]
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(
            result(partition_index=i32(p), partition_error_code=code)
        )
        await slicer.pause()
    return tuple(
        module.AddPartitionsToTxnTopicResult(  # type: ignore[attr-defined]
            name=TopicName(topic), results_by_partition=tuple(results)
        )
        for topic, results in by_topic.items()
    )


async def handle(
    ctx: RequestContext, request: ClientRequest | BrokerRequest
) -> v3.AddPartitionsToTxnResponse | v5.AddPartitionsToTxnResponse:
    slicer = Slicer()
    if not isinstance(request, (v4.AddPartitionsToTxnRequest, v5.AddPartitionsToTxnRequest)):
        codes = await _one(
            ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, request.v3_and_below_topics, slicer,
        )  # fmt: skip
        results = await _results(v3.response, codes, slicer)
        return v3.AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE,
            results_by_topic_v3_and_below=results,  # type: ignore[arg-type]
        )
    r = v5.response
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return v5.AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
            results_by_transaction=(),
        )  # fmt: skip
    answers = []
    for t in request.transactions:
        codes = await _one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics,
                           slicer, t.verify_only, from_broker=True)  # fmt: skip
        answers.append(
            r.AddPartitionsToTxnResult(
                transactional_id=TransactionalId(t.transactional_id),
                topic_results=await _results(r, codes, slicer),  # type: ignore[arg-type]
            )
        )
    return v5.AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results_by_transaction=tuple(answers)
    )


def _older(code: ErrorCode) -> ErrorCode:
    return ErrorCode.invalid_txn_state if code is ErrorCode.transaction_abortable else code


HANDLER = handler(
    handle,
    v0.AddPartitionsToTxnRequest, v1.AddPartitionsToTxnRequest, v2.AddPartitionsToTxnRequest,
    v3.AddPartitionsToTxnRequest, v4.AddPartitionsToTxnRequest, v5.AddPartitionsToTxnRequest,
    responses=(v3.AddPartitionsToTxnResponse, v5.AddPartitionsToTxnResponse),
    acl=(
        (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
        (AclOperation.WRITE, ResourceType.TOPIC),
        (AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),
    ),
)  # fmt: skip
