"""Transactions seen from outside, as Kafka's Admin sees them: ListTransactions,
DescribeTransactions, DescribeProducers, and `abort_transaction` (WriteTxnMarkers to the
partition's leader, as Kafka's `AbortTransactionHandler` sends it) to end a hanging
transaction. `kafka-transactions.sh` (`shoal transactions`) is built on these.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.describe_producers import v0 as dp
from kio.schema.describe_transactions import v0 as dt
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions import v1 as lt
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.schema.types import TransactionalId
from kio.schema.write_txn_markers import v1 as wtm
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64

from client.cluster import Cluster
from client.errors import KafkaError
from client.errors import error_for
from client.errors import raise_for

TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key type for a transactional id


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    coordinator_id: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int | None  # None: no transaction open
    partitions: list[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # -1: not known
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int | None  # None: no transaction open in the partition


async def list_transactions(
    cluster: Cluster, producer_ids: Iterable[int] = (), states: Iterable[str] = (),
    duration_ms: int = -1,
) -> list[TransactionListing]:  # fmt: skip
    """The transactional ids every broker coordinates, asked of each (Kafka's
    `ListTransactionsHandler`)."""
    await cluster.bootstrap()
    await cluster.metadata(())
    request = lt.ListTransactionsRequest(
        state_filters=tuple(states),
        producer_id_filters=tuple(ProducerId(p) for p in producer_ids),
        duration_filter=i64(duration_ms),
    )
    out: list[TransactionListing] = []
    for node in cluster.node_ids:
        resp = await cluster.request(request, node_id=node)
        raise_for(resp.error_code, "ListTransactions")
        out.extend(
            TransactionListing(s.transactional_id, node, int(s.producer_id), s.transaction_state)
            for s in resp.transaction_states
        )
    return out


async def describe_transactions(
    cluster: Cluster, transactional_ids: Iterable[str]
) -> dict[str, TransactionDescription | KafkaError]:
    """Each id's state, or its error (TRANSACTIONAL_ID_NOT_FOUND for one not known)."""
    await cluster.bootstrap()
    out: dict[str, TransactionDescription | KafkaError] = {}
    for txn_id in transactional_ids:
        node = await cluster.find_coordinator(txn_id, TRANSACTION_KEY_TYPE)
        resp = await cluster.request(
            dt.DescribeTransactionsRequest(transactional_ids=(TransactionalId(txn_id),)),
            node_id=node.node_id,
        )
        (s,) = resp.transaction_states
        if s.error_code:
            out[txn_id] = error_for(s.error_code, f"transactional id {txn_id}")
            continue
        start = int(s.transaction_start_time.timestamp() * 1000)
        out[txn_id] = TransactionDescription(
            node.node_id, txn_id, int(s.producer_id), int(s.producer_epoch),
            s.transaction_state, int(s.transaction_timeout.total_seconds() * 1000),
            start if start > 0 else None,
            [(t.topic, int(p)) for t in s.topics for p in t.partitions],
        )  # fmt: skip
    return out


async def describe_producers(cluster: Cluster, topic: str, partition: int) -> list[ProducerState]:
    """The producers the partition's leader knows.

    :raises KafkaError: the partition is unknown, or its leader refused."""
    await cluster.bootstrap()
    info = await cluster.topic(topic)
    if partition not in info.partitions:
        raise error_for(
            ErrorCode.unknown_topic_or_partition, f"{topic} has no partition {partition}"
        )
    resp = await cluster.request(
        dp.DescribeProducersRequest(
            topics=(
                dp.request.TopicRequest(name=TopicName(topic), partition_indexes=(i32(partition),)),
            )
        ),
        node_id=info.partitions[partition].leader_id,
    )
    p = resp.topics[0].partitions[0]
    raise_for(p.error_code, p.error_message or f"DescribeProducers {topic}-{partition}")
    return [
        ProducerState(
            int(s.producer_id),
            int(s.producer_epoch),
            int(s.coordinator_epoch),
            int(s.last_sequence),
            int(s.last_timestamp),
            int(s.current_txn_start_offset) if s.current_txn_start_offset >= 0 else None,
        )
        for s in p.active_producers
    ]


async def abort_transaction(
    cluster: Cluster, topic: str, partition: int, producer_id: int, producer_epoch: int,
    coordinator_epoch: int,
) -> None:  # fmt: skip
    """Write an ABORT marker for `producer_id`'s open transaction in the partition, as Kafka's
    `Admin.abortTransaction` does (a coordinator epoch below 0 is sent as 0, as its tool does).

    :raises KafkaError: the leader refused (CLUSTER_AUTHORIZATION_FAILED without
        CLUSTER_ACTION, INVALID_PRODUCER_EPOCH for an epoch older than the producer's)."""
    await cluster.bootstrap()
    info = await cluster.topic(topic)
    if partition not in info.partitions:
        raise error_for(
            ErrorCode.unknown_topic_or_partition, f"{topic} has no partition {partition}"
        )
    m = wtm.request
    resp = await cluster.request(
        wtm.WriteTxnMarkersRequest(
            markers=(
                m.WritableTxnMarker(
                    producer_id=ProducerId(producer_id), producer_epoch=i16(producer_epoch),
                    transaction_result=False,
                    topics=(m.WritableTxnMarkerTopic(name=TopicName(topic),
                                                     partition_indexes=(i32(partition),)),),
                    coordinator_epoch=i32(max(coordinator_epoch, 0)),
                ),
            )
        ),
        node_id=info.partitions[partition].leader_id,
    )  # fmt: skip
    result = resp.markers[0].topics[0].partitions[0]
    raise_for(result.error_code, f"WriteTxnMarkers {topic}-{partition}")
