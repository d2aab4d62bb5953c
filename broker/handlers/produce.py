"""Produce (0): validate batch headers, assign offsets, append the bytes as received.

No record is decoded here: the storage layer checks each batch's header and CRC and rewrites
only its base offset. The answer is written by `protocol.produce_response` (tested byte for
byte against kio): one per produce request, and kio's generic writer cost more than the append.
"""

from __future__ import annotations

import asyncio
from time import perf_counter

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.produce import v3
from kio.schema.produce import v4
from kio.schema.produce import v5
from kio.schema.produce import v6
from kio.schema.produce import v7
from kio.schema.produce import v8
from kio.schema.produce import v9
from kio.schema.produce import v10
from kio.schema.produce import v11
from kio.schema.produce import v12

from broker import txn_produce
from broker.authorization import authorize
from broker.context import RequestContext
from broker.disposal import free_in_chunks
from broker.handlers.common import missing_partition
from broker.log_loading import open_first
from broker.registry import handler
from broker.request_order import release_order
from broker.slicing import SLICE_SECONDS
from broker.txn_produce import TXN_FLAG_BYTE
from broker.txn_verify import Verdicts
from broker.txn_verify import remote_verdicts
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from protocol.api_keys import PRODUCE
from protocol.messages import EncodedResponse
from protocol.produce_response import PartitionResult
from protocol.produce_response import TopicResults
from protocol.produce_response import encode_produce_response
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import InvalidRecordBatch
from storage.errors import InvalidRecord
from storage.errors import StorageError
from storage.log import PartitionLog

log: structlog.typing.FilteringBoundLogger = structlog.get_logger("shoal.produce")
# An answer for more partitions than this is written in a thread (a million take a second).
ENCODE_ON_LOOP_MAX_PARTITIONS = 5_000

Request = (
    v3.ProduceRequest
    | v4.ProduceRequest
    | v5.ProduceRequest
    | v6.ProduceRequest
    | v7.ProduceRequest
    | v8.ProduceRequest
    | v9.ProduceRequest
    | v10.ProduceRequest
    | v11.ProduceRequest
    | v12.ProduceRequest
)


def _append(
    ctx: RequestContext,
    topic: str,
    index: int,
    records: bytes | None,
    now_ms: int,
    to_sync: list[PartitionLog],
    txn_id: str | None = None,
    verdicts: Verdicts | None = None,
) -> PartitionResult:
    """One partition's answer: error code, base offset, log start offset, error message.
    A log that is due an fsync (`log.flush.interval.messages`) joins `to_sync`."""
    services = ctx.services
    # No authorizer (the default): skip the call, once per partition of every request.
    if services.acls is not None and not authorize(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, topic
    ):
        return PartitionResult(index, ErrorCode.topic_authorization_failed, -1, -1)
    partition_log = services.logs.log(topic, index)
    if partition_log is None:
        return PartitionResult(index, missing_partition(ctx, topic, index), -1, -1)
    if not records:
        return PartitionResult(index, ErrorCode.invalid_record, -1, -1, "no record batches")
    if len(records) > TXN_FLAG_BYTE and records[TXN_FLAG_BYTE] & TRANSACTIONAL_MASK:  # inline:
        # `txn_produce.is_transactional`, a call less per partition
        refused = txn_produce.refusal(ctx, txn_id, topic, index, records, verdicts)
        if refused is not None:
            return PartitionResult(index, refused, -1, -1, "transaction verification failed")
    try:
        result = partition_log.append(records, now_ms=now_ms, defer_sync=True)
    except InvalidRecordBatch as e:
        log.info("rejected batch", topic=topic, partition=index, reason=str(e))
        return PartitionResult(index, ErrorCode.corrupt_message, -1, -1, str(e))
    except InvalidRecord as e:
        # The batch fails whole, and the answer names its bad records: the client fails those
        # and may send the others again (KIP-467). As Kafka's ReplicaManager, with the log start.
        log.info("rejected records", topic=topic, partition=index, reason=str(e))
        return PartitionResult(
            index, e.error_code, -1, partition_log.log_start_offset, str(e), e.record_errors
        )
    except StorageError as e:
        return PartitionResult(index, e.error_code, -1, -1, str(e))
    if partition_log.sync_due:
        to_sync.append(partition_log)
    appended = result.last_offset - result.base_offset + 1
    services.metrics.on_bytes_in(topic, len(records), appended)
    # Each record wakes at most one ShareFetch waiting in line (every Fetch wakes).
    services.notifier.notify((topic, index), appended)
    # tuple.__new__: a NamedTuple's own __new__ is Python code, one frame more per partition.
    return tuple.__new__(
        PartitionResult,
        (index, 0, result.base_offset, result.log_start_offset, None, ()),  # 0: none
    )


async def _synced(
    ctx: RequestContext, topics: list[TopicResults], to_sync: list[PartitionLog]
) -> list[TopicResults]:
    """The answers once the logs' fsyncs (one batch per loop tick) are done; a partition
    whose sync failed answers KAFKA_STORAGE_ERROR (its records are written, not durable)."""
    failed = await ctx.services.group_commit.durable(to_sync)
    if not failed:
        return topics
    logs = ctx.services.logs
    bad = ErrorCode.kafka_storage_error
    return [
        (
            name,
            [
                PartitionResult(p.partition, bad, -1, -1, "fsync failed")
                if p.error_code == ErrorCode.none and id(logs.log(name, p.partition)) in failed
                else p
                for p in partitions
            ],
        )
        for name, partitions in topics
    ]


def _encoded_then_freed(
    version: int, topics: list[TopicResults], held: list[Request], answer: bool
) -> bytes:
    """The answer's body (if `answer`: acks is not 0), made in a thread; then the results and
    the request (`held` holds its last reference) are freed there a chunk at a time: a million
    partitions of each freed at once when the handler returned held the loop ~50 ms of CPU
    apiece (170 ms on a loaded machine)."""
    body = encode_produce_response(version, topics) if answer else b""
    for _, partitions in topics:
        if isinstance(partitions, list):
            free_in_chunks(partitions)
    request = held.pop()
    parts = [list(t.partition_data) for t in request.topic_data]
    del request  # its tuples go, one decref per partition: `parts` holds them still
    for items in parts:
        free_in_chunks(items)
    return body


async def _large_answer(
    version: int, topics: list[TopicResults], codes: list[int], held: list[Request]
) -> EncodedResponse | None:
    """The answer to a request of many partitions, encoded (and the request freed) in a
    thread."""
    acks = held[0].acks
    body = await asyncio.to_thread(_encoded_then_freed, version, topics, held, acks != 0)
    if acks == 0:
        return None
    return tuple.__new__(EncodedResponse, (PRODUCE, version, body, 0, tuple(codes)))


async def _remote_verdicts(ctx: RequestContext, txn_id: str, request: Request) -> Verdicts | None:
    """With the transaction's coordinator in another process, its verdicts on the batches
    (awaited before anything is appended); None when it is this process."""
    owner, links = ctx.services.config.ownership, ctx.services.node_links
    if owner.coordinates(txn_id) or links is None:
        return None
    return await remote_verdicts(
        links, owner.coordinator(txn_id), ctx.services.logs, txn_id, request.topic_data
    )


async def handle(ctx: RequestContext, request: Request) -> EncodedResponse | None:
    to_sync: list[PartitionLog] = []
    now_ms = ctx.services.clock.now_ms()  # one reading for the request's partitions
    topics: list[TopicResults] = []
    codes: list[int] = []  # the non-zero error codes, for the request metrics
    txn_id = request.transactional_id
    # A request may name a million partitions: yield between slices (`broker.slicing`; the
    # clock read inline, as a Slicer's pause costs a call per partition on the hottest path).
    # The clock is read before each partition but the first: a one-partition request, the
    # commonest, never yields (descheduled mid-append on a busy machine, it would have gone
    # on in a task of its own, for nothing).
    slice_ends = perf_counter() + SLICE_SECONDS
    answered = 0  # partitions so far
    verdicts = None
    if txn_id is not None and ctx.services.node_links is not None:
        verdicts = await _remote_verdicts(ctx, txn_id, request)
        now_ms = ctx.services.clock.now_ms()  # the appends come after the wait
    if ctx.services.logs.loading:  # just started: open the logs named first, in slices
        named = ((t.name, p.index) for t in request.topic_data for p in t.partition_data)
        await open_first(ctx.services.logs, named)
        del named  # it holds the request's partitions: freed with it (`_encoded_then_freed`)
    for topic in request.topic_data:
        name = topic.name
        results = []
        for p in topic.partition_data:
            if answered and perf_counter() >= slice_ends:
                await asyncio.sleep(0)
                slice_ends = perf_counter() + SLICE_SECONDS
            answered += 1
            result = _append(ctx, name, p.index, p.records, now_ms, to_sync, txn_id, verdicts)
            if result.error_code:
                codes.append(result.error_code)
            results.append(result)
        topics.append((name, results))
    if to_sync:  # only with log.flush.interval.messages: by default the flush duty syncs
        release_order()  # appended: later requests need not wait for the fsync
        topics = await _synced(ctx, topics, to_sync)
        codes = [p.error_code for _, partitions in topics for p in partitions if p.error_code]
    version = ctx.header.api_version
    if answered > ENCODE_ON_LOOP_MAX_PARTITIONS:
        # This frame holds the request's last references (the connection keeps none once the
        # handler runs): they go to the thread, which frees its partitions in chunks.
        held = [request]
        del request, topic, p
        return await _large_answer(version, topics, codes, held)
    if request.acks == 0:
        return None
    body = encode_produce_response(version, topics)
    return tuple.__new__(EncodedResponse, (PRODUCE, version, body, 0, tuple(codes)))  # no frame


HANDLER = handler(
    handle,
    v3.ProduceRequest,
    v4.ProduceRequest,
    v5.ProduceRequest,
    v6.ProduceRequest,
    v7.ProduceRequest,
    v8.ProduceRequest,
    v9.ProduceRequest,
    v10.ProduceRequest,
    v11.ProduceRequest,
    v12.ProduceRequest,
    # Refusals (error_response) are kio classes: v10-v12 each need their own (their tagged
    # `current_leader` default is an entity of that version; entity_tagged_defaults).
    responses=(v9.ProduceResponse, v10.ProduceResponse, v11.ProduceResponse, v12.ProduceResponse),
    acl=(
        (AclOperation.WRITE, ResourceType.TOPIC),
        (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    ),
    # Listed from v0 and served from v3, as Kafka 4 does (ApiKeys.
    # PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION, KAFKA-18659): older librdkafka turns
    # compression off unless Produce v0 is listed (its issue 4956). v0-2 close the connection.
    advertise_from=0,
)
