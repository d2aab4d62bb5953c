"""Verification of transactional batches with a coordinator in another process (KIP-890).

With `--processes N` a partition's leader may not be its transaction's coordinator: before it
appends a transactional batch it asks the coordinator, with AddPartitionsToTxn v5
`verify_only`, whether the producer's transaction has added the partition, as Kafka's
`ReplicaManager.appendRecords` does through `AddPartitionsToTxnManager`. One request per
produce request names every partition to verify; the produce handler awaits it before it
appends anything, so the connection's later requests wait (`broker/request_order.py`) and the
loop does not.

A partition where the producer already has an open transaction at this epoch needs no asking,
as Kafka's `UnifiedLog.maybeStartTransactionVerification` (`hasOngoingTransaction`): the
coordinator verified its first batch, and an abort writes a marker that ends it here.

The coordinator's answers reach the producer as Kafka's leader passes them on
(`AddPartitionsToTxnManager.AddPartitionsToTxnHandler`): no answer (not reachable, timed out)
is NETWORK_EXCEPTION and a request-level CLUSTER_AUTHORIZATION_FAILED is INVALID_TXN_STATE;
`txn_produce.refusal` then maps them for the producer as `ReplicaManager`'s
`postVerificationCallback` does (NETWORK_EXCEPTION, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS: the retriable NOT_ENOUGH_REPLICAS).
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence
from typing import Protocol

import structlog
from kio.schema.add_partitions_to_txn import v5
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.schema.types import TransactionalId
from kio.static.primitive import i16
from kio.static.primitive import i32

from broker.node_link import NodeLinks
from broker.slicing import Slicer
from broker.txn_produce import is_transactional
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import parse_header
from storage.errors import StorageError
from storage.log_manager import LogManager

log = structlog.get_logger("shoal.transactions")

Verdicts = dict[tuple[str, int], ErrorCode]


class TxnRequest(Protocol):
    """What a transactional request names: its transactional id, producer id and epoch
    (TxnOffsetCommit's and TxnShareAcknowledge's remote steps, `txn_offsets_remote`,
    `txn_share_remote`)."""

    @property
    def transactional_id(self) -> str: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...


class _Partition(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def records(self) -> bytes | None: ...


class _Topic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partition_data(self) -> Sequence[_Partition]: ...


def _needs_asking(logs: LogManager, topic: str, partition: int, pid: int, epoch: int) -> bool:
    """Whether this partition is here and the producer has no transaction open in it at
    `epoch` yet (a partition not here is refused by the append, unasked)."""
    try:
        plog = logs.log(topic, partition)
    except StorageError:
        return False
    if plog is None:
        return False
    return not any(p == pid and e == epoch and first >= 0 for p, e, _, _, first in
                   plog.active_producers())  # fmt: skip


async def remote_verdicts(
    links: NodeLinks, coordinator: int, logs: LogManager, txn_id: str,
    topics: Iterable[_Topic],
) -> Verdicts:  # fmt: skip
    """The coordinator's verdict on each transactional batch of the request that needs one
    (absent: no asking needed, or not a batch the append would take)."""
    verdicts: Verdicts = {}
    producer, wanted = await _to_verify(logs, topics, verdicts)
    if producer is None or not wanted:
        return verdicts
    return verdicts | await verify(links, coordinator, txn_id, *producer, wanted)


async def verify(
    links: NodeLinks, coordinator: int, txn_id: str, pid: int, epoch: int,
    wanted: dict[str, list[int]], verify_only: bool = True,
) -> Verdicts:  # fmt: skip
    """The coordinator's answer for each partition of `wanted` (topic -> partitions), with
    what Kafka's `AddPartitionsToTxnManager` makes of no answer or a request-level error.
    `verify_only=False` adds them instead (TxnShareAcknowledge's leader: `txn_share_remote`)."""
    asked = [(name, i) for name, parts in wanted.items() for i in parts]
    try:
        request = _request(txn_id, pid, epoch, wanted, verify_only)
        answer = await links.request(coordinator, request)
    except (OSError, TimeoutError) as e:
        log.warning("transaction verification: coordinator not reachable",
                    transactional_id=txn_id, coordinator=coordinator, error=str(e))  # fmt: skip
        return dict.fromkeys(asked, ErrorCode.network_exception)
    if answer.error_code != ErrorCode.none:
        code = (
            ErrorCode.invalid_txn_state
            if answer.error_code == ErrorCode.cluster_authorization_failed
            else ErrorCode(answer.error_code)
        )
        log.error("transaction verification refused by the coordinator",
                  transactional_id=txn_id, coordinator=coordinator, error=code.name)  # fmt: skip
        return dict.fromkeys(asked, code)
    verdicts: Verdicts = {}
    for txn in answer.results_by_transaction:
        for t in txn.topic_results:
            for r in t.results_by_partition:
                verdicts[(str(t.name), int(r.partition_index))] = ErrorCode(r.partition_error_code)
    for tp in asked:  # a partition the answer left out was not verified
        verdicts.setdefault(tp, ErrorCode.invalid_txn_state)
    return verdicts


async def _to_verify(
    logs: LogManager, topics: Iterable[_Topic], verdicts: Verdicts
) -> tuple[tuple[int, int] | None, dict[str, list[int]]]:
    """The request's producer (id, epoch) and the partitions to ask about; a batch of another
    producer gets its verdict in `verdicts` (Kafka's `ReplicaManager`: "Transactional records
    contained more than one producer ID")."""
    slicer = Slicer()
    wanted: dict[str, list[int]] = {}
    producer: tuple[int, int] | None = None
    for topic in topics:
        for p in topic.partition_data:
            await slicer.pause()
            if not p.records or not is_transactional(p.records):
                continue
            try:
                header = parse_header(p.records)
            except InvalidRecordBatch:
                continue  # the append refuses it, saying why
            ids = (header.producer_id, header.producer_epoch)
            producer = producer or ids
            if ids != producer:
                verdicts[(topic.name, p.index)] = ErrorCode.invalid_producer_id_mapping
            elif _needs_asking(logs, topic.name, p.index, *ids):
                wanted.setdefault(topic.name, []).append(p.index)
    return producer, wanted


def _request(
    txn_id: str, pid: int, epoch: int, wanted: dict[str, list[int]], verify_only: bool = True
) -> v5.AddPartitionsToTxnRequest:
    r = v5.request
    topics = tuple(
        r.AddPartitionsToTxnTopic(name=TopicName(name), partitions=tuple(map(i32, parts)))
        for name, parts in wanted.items()
    )
    txn = r.AddPartitionsToTxnTransaction(
        transactional_id=TransactionalId(txn_id), producer_id=ProducerId(pid),
        producer_epoch=i16(epoch), verify_only=verify_only, topics=topics,
    )  # fmt: skip
    return v5.AddPartitionsToTxnRequest(transactions=(txn,))
