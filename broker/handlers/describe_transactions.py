"""DescribeTransactions (65): each transactional id's state, as Kafka's
`TransactionCoordinator.handleDescribeTransactions`: DESCRIBE on the TransactionalId (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), TRANSACTIONAL_ID_NOT_FOUND for an unknown id, and only
the partitions of topics the principal may DESCRIBE. A transaction with no start time (none is
open) is answered the epoch (kio's timestamp type has no -1; Kafka sends -1 there).
"""

from __future__ import annotations

import datetime
from typing import cast

from kio.schema.describe_transactions.v0 import request as req
from kio.schema.describe_transactions.v0 import response as resp
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.schema.types import TransactionalId
from kio.static.primitive import TZAware
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType

_EPOCH = TZAware.parse(datetime.datetime.fromtimestamp(0, tz=datetime.UTC))


def _start(ms: int) -> TZAware:
    if ms < 0:
        return _EPOCH
    return TZAware.truncate(datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC))


async def _state(ctx: RequestContext, txn_id: str, slicer: Slicer) -> resp.TransactionState:
    def refused(code: ErrorCode) -> resp.TransactionState:
        return resp.TransactionState(
            error_code=code, transactional_id=TransactionalId(txn_id), transaction_state="",
            transaction_timeout=i32Timedelta.parse(datetime.timedelta(0)),
            transaction_start_time=_EPOCH, producer_id=ProducerId(-1), producer_epoch=i16(-1),
            topics=(),
        )  # fmt: skip

    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return refused(ErrorCode.transactional_id_authorization_failed)
    if not_coordinator(ctx, txn_id):  # per id, as TransactionStateManager.getTransactionState
        return refused(ErrorCode.not_coordinator)
    m = ctx.services.transactions.txns.get(txn_id)
    if m is None:
        return refused(ErrorCode.transactional_id_not_found)
    # A transaction may hold 50,000 partitions and more (sorting them as pairs and making
    # kio's checked i32s took 70 ms of CPU): grouped by topic in slices, from a copy (the
    # transaction's set grows in place), then each topic's ints sorted, which C does at once.
    # They are partition numbers already checked when added (`cast`, as OffsetFetch does).
    by_topic: dict[str, list[int]] = {}
    for topic, partition in list(m.partitions):
        ps = by_topic.get(topic)
        if ps is None:
            ps = by_topic[topic] = []
        ps.append(partition)
        await slicer.pause()
    for ps in by_topic.values():
        ps.sort()
    return resp.TransactionState(
        error_code=ErrorCode.none,
        transactional_id=TransactionalId(txn_id),
        transaction_state=m.state,
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=m.timeout_ms)),
        transaction_start_time=_start(m.start_ms),
        producer_id=ProducerId(m.producer_id),
        producer_epoch=i16(m.producer_epoch),
        topics=tuple(
            resp.TopicData(topic=TopicName(t), partitions=cast(tuple[i32, ...], tuple(by_topic[t])))
            for t in sorted(by_topic)
            if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t)
        ),
    )


async def handle(
    ctx: RequestContext, request: req.DescribeTransactionsRequest
) -> resp.DescribeTransactionsResponse:
    # A request may name a million ids: answered a slice at a time.
    slicer = Slicer()
    states = []
    for txn_id in request.transactional_ids:
        states.append(await _state(ctx, txn_id, slicer))
        await slicer.pause()
    return resp.DescribeTransactionsResponse(
        throttle_time=NO_THROTTLE, transaction_states=tuple(states)
    )


HANDLER = handler(
    handle,
    req.DescribeTransactionsRequest,
    acl=(
        (AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID),
        (AclOperation.DESCRIBE, ResourceType.TOPIC),
    ),
)
