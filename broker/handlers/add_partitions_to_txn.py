"""AddPartitionsToTxn (24): partitions join a transaction before its producer writes to them.

v0-3 are the clients' (one transaction; WRITE on the TransactionalId, WRITE on each topic), v4-5
the brokers' (KIP-890: several transactions, and `verify_only` asks whether partitions are in
them; CLUSTER_ACTION on the cluster). As Kafka's `KafkaApis.handleAddPartitionsToTxnRequest`:
when some partitions are unauthorized or unknown, none is added, those are answered
TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED;
else every partition gets the coordinator's one answer.
"""

from __future__ import annotations

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
from broker.handlers.txn_common import for_version
from broker.registry import handler
from protocol.acl import AclOperation
from protocol.acl import ResourceType

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


def _checked(ctx: RequestContext, topics: Sequence[_Topic]) -> Codes:
    """Unauthorized and unknown partitions' codes (empty: every partition may be added)."""
    codes: Codes = {}
    for topic in topics:
        writable = authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, topic.name)
        info = ctx.services.logs.topic(topic.name)
        for p in topic.partitions:
            if not writable:
                codes[(topic.name, p)] = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= p < info.partitions:
                codes[(topic.name, p)] = ErrorCode.unknown_topic_or_partition
    return codes


def _one(
    ctx: RequestContext, txn_id: str, pid: int, epoch: int, topics: Sequence[_Topic],
    verify_only: bool = False,
) -> Codes:  # fmt: skip
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
    refused = _checked(ctx, topics)
    if refused:
        return {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}
    txns = ctx.services.transactions
    if verify_only:
        return {tp: txns.verify(txn_id, pid, epoch, tp) for tp in wanted}
    code = txns.add_partitions(txn_id, pid, epoch, wanted, ctx.services.now_ms())
    return dict.fromkeys(wanted, for_version(code, ctx.version, 2))


def _results(module: object, codes: Codes) -> tuple[object, ...]:
    by_topic: dict[str, list[object]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(
            module.AddPartitionsToTxnPartitionResult(  # type: ignore[attr-defined]
                partition_index=i32(p), partition_error_code=code
            )
        )
    return tuple(
        module.AddPartitionsToTxnTopicResult(  # type: ignore[attr-defined]
            name=TopicName(topic), results_by_partition=tuple(results)
        )
        for topic, results in by_topic.items()
    )


async def handle(
    ctx: RequestContext, request: ClientRequest | BrokerRequest
) -> v3.AddPartitionsToTxnResponse | v5.AddPartitionsToTxnResponse:
    if not isinstance(request, (v4.AddPartitionsToTxnRequest, v5.AddPartitionsToTxnRequest)):
        codes = _one(
            ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, request.v3_and_below_topics,
        )  # fmt: skip
        return v3.AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE,
            results_by_topic_v3_and_below=_results(v3.response, codes),  # type: ignore[arg-type]
        )
    r = v5.response
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return v5.AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
            results_by_transaction=(),
        )  # fmt: skip
    results = []
    for t in request.transactions:
        codes = _one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics,
                     t.verify_only)  # fmt: skip
        if ctx.version < 5:  # TRANSACTION_ABORTABLE came with v5
            codes = {tp: _older(c) for tp, c in codes.items()}
        results.append(
            r.AddPartitionsToTxnResult(
                transactional_id=TransactionalId(t.transactional_id),
                topic_results=_results(r, codes),  # type: ignore[arg-type]
            )
        )
    return v5.AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results_by_transaction=tuple(results)
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
