"""WriteTxnMarkers (27): write COMMIT/ABORT markers into partitions, as a transaction
coordinator asks a partition leader. Shoal's own coordinator writes its markers locally; this
API serves `kafka-transactions.sh abort` (`shoal transactions abort`), whose
`Admin.abortTransaction` sends it to the partition's leader (Kafka's `AbortTransactionHandler`)
to end a hanging transaction: one open in a partition while its coordinator knows nothing of it.

As Kafka's `KafkaApis.handleWriteTxnMarkersRequest`: CLUSTER_ACTION on the cluster, else every
partition is answered CLUSTER_AUTHORIZATION_FAILED; a partition not here is answered
UNKNOWN_TOPIC_OR_PARTITION; a marker whose epoch is older than the producer's in that partition
INVALID_PRODUCER_EPOCH (`ProducerAppendInfo.checkProducerEpoch`); a failed write
KAFKA_STORAGE_ERROR. Coordinator epochs are not kept (DescribeProducers answers -1), so none
is fenced. v2's TransactionVersion is read and ignored: every marker is written as TV1's. A
request may name a million partitions: written and answered a slice at a time.
"""

from __future__ import annotations

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.schema.write_txn_markers import v1
from kio.schema.write_txn_markers import v2
from kio.static.primitive import i32

from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.node_link import NODE_CLIENT_PREFIX
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError
from storage.topics import CONSUMER_OFFSETS

_log = structlog.get_logger("shoal.transactions")
Request = v1.WriteTxnMarkersRequest | v2.WriteTxnMarkersRequest
r = v2.response


def _write_offsets(
    ctx: RequestContext, partition: int, pid: int, epoch: int, commit: bool
) -> ErrorCode:
    """`--processes N`: a transaction's marker for the offsets it staged in this process's
    `__consumer_offsets` (`coordinator/staged_offsets.py`); as Kafka's group coordinator's
    `onTransactionCompleted`, a COMMIT makes them the group's committed offsets."""
    if partition != ctx.services.node_id:
        return ErrorCode.not_leader_or_follower
    offsets = ctx.services.offsets
    staged = offsets.staged.epoch(pid)
    if staged is not None and epoch < staged:
        return ErrorCode.invalid_producer_epoch
    try:
        offsets.end_txn(pid, epoch, commit)
    except StorageError:
        return ErrorCode.kafka_storage_error
    return ErrorCode.none


def _write(
    ctx: RequestContext, topic: str, partition: int, pid: int, epoch: int, commit: bool
) -> ErrorCode:
    if topic == CONSUMER_OFFSETS and ctx.services.config.processes > 1:
        return _write_offsets(ctx, partition, pid, epoch, commit)
    plog = ctx.services.logs.log(topic, partition)
    if plog is None:
        return ErrorCode.unknown_topic_or_partition
    current = next((e for p, e, *_ in plog.active_producers() if p == pid), -1)
    if epoch < current:
        return ErrorCode.invalid_producer_epoch
    # What the transaction staged on this share-partition first, as the coordinator's own
    # markers do (`broker/txn_share_remote.py`): a failed share-state write is retried.
    acks = ctx.services.txn_share_acks if ctx.services.config.processes > 1 else None
    if acks is not None and not acks.end((topic, partition), pid, commit, ctx.services.now_ms()):
        return ErrorCode.kafka_storage_error
    try:
        result = plog.append_marker(pid, epoch, commit, now_ms=ctx.services.now_ms())
    except StorageError:
        return ErrorCode.kafka_storage_error
    ctx.services.notifier.notify((topic, partition))  # read_committed fetches wait on the LSO
    if (ctx.header.client_id or "").startswith(NODE_CLIENT_PREFIX):
        return ErrorCode.none  # a coordinator of `--processes N`: routine, not an admin's abort
    _log.warning("transaction marker written by WriteTxnMarkers", topic=topic,
                 partition=partition, producer_id=pid, producer_epoch=epoch, commit=commit,
                 offset=result.base_offset)  # fmt: skip
    return ErrorCode.none


async def _marker(
    ctx: RequestContext, m: v2.request.WritableTxnMarker, allowed: bool, slicer: Slicer
) -> r.WritableTxnMarkerResult:
    topics = []
    for t in m.topics:
        partitions = []
        for p in t.partition_indexes:
            code = (
                _write(ctx, t.name, p, m.producer_id, m.producer_epoch, m.transaction_result)
                if allowed
                else ErrorCode.cluster_authorization_failed
            )
            partitions.append(r.WritableTxnMarkerPartitionResult(partition_index=i32(p),
                                                                 error_code=code))  # fmt: skip
            await slicer.pause()
        topics.append(
            r.WritableTxnMarkerTopicResult(name=TopicName(t.name), partitions=tuple(partitions))
        )
    return r.WritableTxnMarkerResult(producer_id=ProducerId(m.producer_id), topics=tuple(topics))


async def handle(ctx: RequestContext, request: Request) -> v2.WriteTxnMarkersResponse:
    allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    slicer = Slicer()
    markers = [await _marker(ctx, m, allowed, slicer) for m in request.markers]  # type: ignore[arg-type]
    return v2.WriteTxnMarkersResponse(markers=tuple(markers))


HANDLER = handler(
    handle,
    v1.WriteTxnMarkersRequest,
    v2.WriteTxnMarkersRequest,
    acl=((AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),),
)
