"""Fetch (1): stored batch bytes, unchanged, with a long poll on MaxWaitMs / MinBytes.

Topics are named up to v12 and identified by topic id from v13, so the response is built from
the v12 classes, or from the request version's own (v13-v16: their tagged fields' defaults
are entities of their own version, see `protocol.messages.entity_tagged_defaults`). No fetch
sessions: the response carries session id 0, which
tells clients to send full requests (KIP-227).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any
from typing import Protocol
from typing import TypeVar
from typing import cast

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.request import FetchRequest as FetchRequestV4
from kio.schema.fetch.v5.request import FetchRequest as FetchRequestV5
from kio.schema.fetch.v6.request import FetchRequest as FetchRequestV6
from kio.schema.fetch.v7.request import FetchRequest as FetchRequestV7
from kio.schema.fetch.v8.request import FetchRequest as FetchRequestV8
from kio.schema.fetch.v9.request import FetchRequest as FetchRequestV9
from kio.schema.fetch.v10.request import FetchRequest as FetchRequestV10
from kio.schema.fetch.v11.request import FetchRequest as FetchRequestV11
from kio.schema.fetch.v12 import response as by_name
from kio.schema.fetch.v12.request import FetchRequest as FetchRequestV12
from kio.schema.fetch.v13 import response as v13_response
from kio.schema.fetch.v13.request import FetchRequest as FetchRequestV13
from kio.schema.fetch.v14 import response as v14_response
from kio.schema.fetch.v14.request import FetchRequest as FetchRequestV14
from kio.schema.fetch.v15 import response as v15_response
from kio.schema.fetch.v15.request import FetchRequest as FetchRequestV15
from kio.schema.fetch.v16 import response as by_id
from kio.schema.fetch.v16.request import FetchRequest as FetchRequestV16
from kio.schema.types import BrokerId
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.static.primitive import Records
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.log_loading import open_first
from broker.long_poll import long_poll
from broker.read_committed import READ_COMMITTED
from broker.read_committed import committed_view
from broker.registry import handler
from broker.slicing import SLICE_SECONDS
from broker.slicing import sliced_map
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError
from storage.producer_state import AbortedTxn

READ = AclOperation.READ
SLICED_ANSWER_PARTITIONS = 1_000  # answers for more partitions are built a slice at a time
TOPIC = ResourceType.TOPIC

FetchRequestByName = (
    FetchRequestV4 | FetchRequestV5 | FetchRequestV6 | FetchRequestV7 | FetchRequestV8
    | FetchRequestV9 | FetchRequestV10 | FetchRequestV11 | FetchRequestV12
)  # fmt: skip
FetchRequestById = FetchRequestV13 | FetchRequestV14 | FetchRequestV15 | FetchRequestV16
FetchRequest = FetchRequestByName | FetchRequestById
BY_NAME = (
    FetchRequestV4, FetchRequestV5, FetchRequestV6, FetchRequestV7, FetchRequestV8,
    FetchRequestV9, FetchRequestV10, FetchRequestV11, FetchRequestV12,
)  # fmt: skip
BY_ID = (FetchRequestV13, FetchRequestV14, FetchRequestV15, FetchRequestV16)
BY_ID_RESPONSES = {13: v13_response, 14: v14_response, 15: v15_response, 16: by_id}
FetchResponseById = (
    v13_response.FetchResponse | v14_response.FetchResponse | v15_response.FetchResponse
    | by_id.FetchResponse
)  # fmt: skip


class FetchPartition(Protocol):
    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...


class FetchTopic(Protocol):
    @property
    def partitions(self) -> Sequence[FetchPartition]: ...


class NamedTopic(FetchTopic, Protocol):
    @property
    def topic(self) -> str: ...


class IdentifiedTopic(FetchTopic, Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...


def _named(request: FetchRequestByName) -> Sequence[NamedTopic]:
    return request.topics


def _identified(request: FetchRequestById) -> Sequence[IdentifiedTopic]:
    return request.topics


@dataclass(frozen=True, slots=True)
class PartitionRead:
    partition: int
    error_code: ErrorCode
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    aborted: list[AbortedTxn] | None = None  # read_committed only (None: a null list)


@dataclass(slots=True)
class Read:
    """One pass over the requested partitions, by the topic's position in the request."""

    topics: list[list[PartitionRead]]
    total_bytes: int
    wait_keys: list[tuple[str, int]]


def _topic_names(ctx: RequestContext, request: FetchRequest) -> list[str | None]:
    if isinstance(request, BY_NAME):
        return [t.topic for t in _named(request)]
    infos = [
        ctx.services.logs.topic_by_id(t.topic_id) if t.topic_id else None
        for t in _identified(request)
    ]
    return [info.name if info else None for info in infos]


def _named_partitions(
    request: FetchRequest, names: Sequence[str | None]
) -> Iterator[tuple[str | None, int]]:
    topics = _named(request) if isinstance(request, BY_NAME) else _identified(request)
    for name, topic in zip(names, topics, strict=True):
        for p in topic.partitions:
            yield name, p.partition


async def _read(
    ctx: RequestContext,
    request: FetchRequest,
    names: Sequence[str | None],
    denied: set[str],
    max_bytes: int,
) -> Read:
    """Each partition in request order, as `ReplicaManager.readFromLog` reads them: at most its
    PartitionMaxBytes and what is left of `max_bytes`, except that until a partition has
    returned bytes, the next one returns its first batch whole whatever its size (KIP-74's
    minOneMessage: a consumer always progresses, and only the first data may exceed a limit).
    """
    unknown = (
        ErrorCode.unknown_topic_or_partition
        if isinstance(request, BY_NAME)
        else ErrorCode.unknown_topic_id
    )
    topics: Sequence[FetchTopic] = request.topics
    remaining = max_bytes
    min_one = True
    committed = request.isolation_level == READ_COMMITTED
    read = Read([], 0, [])
    # A request may name a million partitions: yield between slices (`broker.slicing`; the
    # clock read inline, as a Slicer's pause costs a call per partition on a hot path).
    slice_ends = perf_counter() + SLICE_SECONDS
    for name, topic in zip(names, topics, strict=True):
        partitions: list[PartitionRead] = []
        for p in topic.partitions:
            if perf_counter() >= slice_ends:
                await asyncio.sleep(0)
                slice_ends = perf_counter() + SLICE_SECONDS
            plog = ctx.services.logs.log(name, p.partition) if name is not None else None
            if name is None or plog is None:
                # Led by another of `--processes N`: the client goes to the leader.
                elsewhere = name is not None and ctx.services.logs.led_elsewhere(name, p.partition)
                code = ErrorCode.not_leader_or_follower if elsewhere else unknown
                partitions.append(PartitionRead(p.partition, code))
                continue
            if name in denied:
                partitions.append(PartitionRead(p.partition, ErrorCode.topic_authorization_failed))
                continue
            read.wait_keys.append((name, p.partition))
            hw, start, lso = plog.log_end_offset, plog.log_start_offset, plog.last_stable_offset
            budget = max(0, min(p.partition_max_bytes, remaining))
            try:
                records = plog.read(p.fetch_offset, budget, None if min_one else budget)
            except StorageError as e:
                partitions.append(PartitionRead(p.partition, e.error_code, b"", hw, start, lso))
                continue
            aborted = None
            if committed:
                records, aborted = committed_view(plog, p.fetch_offset, records, lso)
            if records:
                min_one = False
                remaining -= len(records)
                read.total_bytes += len(records)
            partitions.append(
                PartitionRead(p.partition, ErrorCode.none, records, hw, start, lso, aborted)
            )
        read.topics.append(partitions)
    return read


P = TypeVar(
    "P",
    by_name.PartitionData,
    v13_response.PartitionData,
    v14_response.PartitionData,
    v15_response.PartitionData,
    by_id.PartitionData,
)


_ABORTED: dict[type[Any], type[Any]] = {
    m.PartitionData: m.AbortedTransaction
    for m in (by_name, v13_response, v14_response, v15_response, by_id)
}


def _aborted(cls: type[P], aborted: list[AbortedTxn] | None) -> Any:
    if not aborted:
        return None if aborted is None else ()
    aborted_cls = _ABORTED[cls]
    return tuple(
        aborted_cls(producer_id=ProducerId(a.producer_id), first_offset=i64(a.first_offset))
        for a in aborted
    )


def _partitions(cls: type[P], reads: list[PartitionRead]) -> tuple[P, ...]:
    return tuple(_partition(cls, r) for r in reads)


async def _partitions_sliced(cls: type[P], reads: list[PartitionRead]) -> tuple[P, ...]:
    return tuple(await sliced_map(lambda r: _partition(cls, r), reads))


def _partition(cls: type[P], r: PartitionRead) -> P:
    return cls(
        partition_index=i32(r.partition),
        error_code=r.error_code,
        high_watermark=i64(r.high_watermark),
        last_stable_offset=i64(r.last_stable_offset),
        log_start_offset=i64(r.log_start_offset),
        aborted_transactions=_aborted(cls, r.aborted),
        preferred_read_replica=BrokerId(-1),
        records=Records(r.records),
    )


def _response(request: FetchRequest, read: Read) -> by_name.FetchResponse | FetchResponseById:
    if isinstance(request, BY_NAME):
        return by_name.FetchResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            session_id=i32(0),
            responses=tuple(
                by_name.FetchableTopicResponse(
                    topic=TopicName(t.topic), partitions=_partitions(by_name.PartitionData, ps)
                )
                for t, ps in zip(_named(request), read.topics, strict=True)
            ),
        )
    m = BY_ID_RESPONSES[request.__version__]
    response = m.FetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=tuple(
            m.FetchableTopicResponse(
                topic_id=t.topic_id, partitions=_partitions(m.PartitionData, ps)
            )
            for t, ps in zip(_identified(request), read.topics, strict=True)
        ),
    )
    return cast(FetchResponseById, response)


async def _response_sliced(
    request: FetchRequest, read: Read
) -> by_name.FetchResponse | FetchResponseById:
    """`_response` for a request naming thousands of partitions: built a slice at a time."""
    if isinstance(request, BY_NAME):
        return by_name.FetchResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            session_id=i32(0),
            responses=tuple(
                [
                    by_name.FetchableTopicResponse(
                        topic=TopicName(t.topic),
                        partitions=await _partitions_sliced(by_name.PartitionData, ps),
                    )
                    for t, ps in zip(_named(request), read.topics, strict=True)
                ]
            ),
        )
    m = BY_ID_RESPONSES[request.__version__]
    response = m.FetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=tuple(
            [
                m.FetchableTopicResponse(
                    topic_id=t.topic_id, partitions=await _partitions_sliced(m.PartitionData, ps)
                )
                for t, ps in zip(_identified(request), read.topics, strict=True)
            ]
        ),
    )
    return cast(FetchResponseById, response)


async def handle(
    ctx: RequestContext, request: FetchRequest
) -> by_name.FetchResponse | FetchResponseById:
    names = _topic_names(ctx, request)
    if ctx.services.logs.loading:  # just started: open the logs named first, in slices
        await open_first(ctx.services.logs, _named_partitions(request, names))
    denied = {n for n in names if n is not None and not authorize(ctx, READ, TOPIC, n)}
    # The broker's fetch.max.bytes caps MaxBytes, and MinBytes with it (KafkaApis).
    max_bytes = min(request.max_bytes, ctx.services.config.fetch_max_bytes)
    min_bytes = min(request.min_bytes, max_bytes)
    read = await long_poll(
        lambda: _read(ctx, request, names, denied, max_bytes),
        enough=lambda r: r.total_bytes >= min_bytes,
        wait_keys=lambda r: r.wait_keys,
        notifier=ctx.services.notifier,
        max_wait_s=request.max_wait.total_seconds(),
    )
    for name, reads in zip(names, read.topics, strict=True):
        if name is not None:
            ctx.services.metrics.on_bytes_out(name, sum(len(r.records) for r in reads))
    if sum(len(ps) for ps in read.topics) > SLICED_ANSWER_PARTITIONS:
        return await _response_sliced(request, read)
    return _response(request, read)


HANDLER = handler(
    handle,
    *BY_NAME,
    *BY_ID,
    responses=(by_name.FetchResponse, *(m.FetchResponse for m in BY_ID_RESPONSES.values())),
    acl=((READ, TOPIC),),
    bulky_answers=False,  # as long as its request (see Handler.bulky_answers)
)
