"""What ShareFetch and ShareAcknowledge share at the protocol edge: the id checks, and their
acknowledgements listed per partition and applied in slices (`broker.ack_slices`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.ack_slices import AckSlices
from broker.authorization import authorize
from broker.context import RequestContext
from broker.share.acknowledgements import AckBatchLike
from broker.share.acknowledgements import AckOutcome
from broker.share.share_fetch_service import ShareFetchService
from broker.share.share_session_cache import ShareSessionError
from broker.share.share_session_cache import TopicIdPartition
from broker.slicing import Slicer
from coordinator.share_group import CoordinatorError
from coordinator.share_group import check_ids
from protocol.acl import AclOperation
from protocol.acl import ResourceType

TOPIC = ResourceType.TOPIC
# What ShareFetch and ShareAcknowledge check (KIP-932): READ on the group and on each topic.
SHARE_ACL_CHECKS: Final = ((AclOperation.READ, ResourceType.GROUP), (AclOperation.READ, TOPIC))

AckResults = dict[TopicIdPartition, AckOutcome]
# Requests naming more partitions than this are walked a slice at a time.
SLICED = 1_000
# Kafka's null topic id: what a request that names no topic id is answered under.
NULL_TOPIC_ID = uuid.UUID(int=0)


class AckPartition(Protocol):
    @property
    def partition_index(self) -> int: ...
    @property
    def acknowledgement_batches(self) -> Sequence[AckBatchLike]: ...


class HasTopicId(Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...


class Partition(Protocol):
    @property
    def partition_index(self) -> int: ...


class HasPartitions(HasTopicId, Protocol):
    @property
    def partitions(self) -> Sequence[Partition]: ...


class AckTopic(HasTopicId, Protocol):
    @property
    def partitions(self) -> Sequence[AckPartition]: ...


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request refused as a whole, before anything changed."""

    error_code: ErrorCode
    message: str


def member_of(group_id: str | None, member_id: str | None) -> tuple[str, str] | Refusal:
    """The request's group and member id, or why they are refused."""
    if not group_id or not member_id:
        return Refusal(ErrorCode.invalid_request, "group id and member id are required")
    try:
        check_ids(group_id, member_id)
    except CoordinatorError as e:
        return Refusal(e.error_code, str(e))
    return group_id, member_id


def topic_id(topic: HasTopicId) -> uuid.UUID:
    return topic.topic_id or NULL_TOPIC_ID


def authorized_member(ctx: RequestContext, group_id: str, member_id: str) -> Refusal | None:
    """READ on the group, and the member's share session (if any) opened by this principal."""
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return Refusal(ErrorCode.group_authorization_failed, f"no READ on group {group_id!r}")
    try:
        ctx.services.share_fetch.check_principal(group_id, member_id, ctx.principal)
    except ShareSessionError as e:
        return Refusal(e.error_code, str(e))
    return None


def unreadable_topics(ctx: RequestContext, topics: Iterable[HasTopicId]) -> set[uuid.UUID]:
    """The ids of listed topics the principal may not READ (unknown ids are left to the
    session, which answers UNKNOWN_TOPIC_ID)."""
    if ctx.services.acls is None:
        return set()
    denied = set()
    for t in topics:
        info = ctx.services.logs.topic_by_id(topic_id(t))
        if info is not None and not authorize(ctx, AclOperation.READ, TOPIC, info.name):
            denied.add(topic_id(t))
    return denied


def refused_acks(topics: Iterable[AckTopic], denied: set[uuid.UUID]) -> AckResults:
    """TOPIC_AUTHORIZATION_FAILED for the acknowledged partitions of unreadable topics."""
    refused = AckOutcome(ErrorCode.topic_authorization_failed, "no READ on the topic")
    return {
        (topic_id(t), p.partition_index): refused
        for t in topics
        if topic_id(t) in denied
        for p in t.partitions
        if p.acknowledgement_batches
    }


async def acknowledge_all(
    service: ShareFetchService,
    slices: AckSlices,
    group_id: str,
    member_id: str,
    topics: Iterable[AckTopic],
    *,
    renew_allowed: bool,
    now_ms: int,
) -> AckResults:
    """Every partition's acknowledgement batches, each partition atomically, yielding to the
    loop between partitions, and within a partition between the steps of a big one, so that
    a huge request never stalls other clients.

    A topic may be listed twice in one request (librdkafka does it): batches are merged per
    partition, never overwritten."""
    slicer = Slicer()
    listed: dict[TopicIdPartition, list[Sequence[AckBatchLike]]] = {}
    for topic in topics:
        for p in topic.partitions:
            if p.acknowledgement_batches:
                key = (topic_id(topic), p.partition_index)
                listed.setdefault(key, []).append(p.acknowledgement_batches)
            await slicer.pause()
    out: AckResults = {}
    for key, batch_lists in listed.items():
        out[key] = await acknowledge_one(
            service, slices, group_id, member_id, key, batch_lists,
            renew_allowed=renew_allowed, now_ms=now_ms,
        )  # fmt: skip
        await slicer.pause()
    return out


async def acknowledge_one(
    service: ShareFetchService,
    slices: AckSlices,
    group_id: str,
    member_id: str,
    key: TopicIdPartition,
    batch_lists: Sequence[Sequence[AckBatchLike]],
    *,
    renew_allowed: bool,
    now_ms: int,
) -> AckOutcome:
    """One partition's acknowledgement batches (every listing of it), all or none."""
    if slices.busy((group_id, *key)):  # a big one of this share-partition is under way
        start = partial(
            service.begin_acknowledge, group_id, member_id, key, batch_lists,
            renew_allowed=renew_allowed, now_ms=now_ms,
        )  # fmt: skip
        return await slices.acknowledge((group_id, *key), start)
    # Nearly always: answered at once, or a big one starting now.
    started = service.begin_acknowledge(
        group_id, member_id, key, batch_lists, renew_allowed=renew_allowed, now_ms=now_ms
    )
    if isinstance(started, AckOutcome):
        return started
    return await slices.run((group_id, *key), started)


async def failed_by_topic(
    ctx: RequestContext, codes: Iterable[tuple[TopicIdPartition, int]], count: int
) -> dict[str, bool]:
    """Per topic name (as BrokerTopicMetrics counts it): did any of its partitions fail?
    Topic ids the broker does not know are left out: there is no name to count them under.
    `count` codes: more than `SLICED` are grouped a slice at a time."""
    out: dict[str, bool] = {}
    if count <= SLICED:  # nearly always: each code's topic looked up, no slices
        for (tid, _), code in codes:
            info = ctx.services.logs.topic_by_id(tid)
            if info is not None:
                out[info.name] = out.get(info.name, False) or code != ErrorCode.none
        return out
    failed: dict[uuid.UUID, bool] = {}  # grouped by topic id first: one look-up per topic
    slicer = Slicer()
    for (tid, _), code in codes:
        failed[tid] = failed.get(tid, False) or code != ErrorCode.none
        await slicer.pause()
    for tid, fail in failed.items():
        info = ctx.services.logs.topic_by_id(tid)
        if info is not None:
            out[info.name] = out.get(info.name, False) or fail
    return out


async def failed_topics(ctx: RequestContext, topics: Iterable[AckTopic]) -> dict[str, bool]:
    """Every topic of a request refused as a whole (session, member or group errors)."""
    listed = list(topics)
    return await failed_by_topic(
        ctx, (((topic_id(t), 0), ErrorCode.unknown_server_error) for t in listed), len(listed)
    )


async def count_acknowledgements(ctx: RequestContext, acks: AckResults) -> None:
    if acks:
        ctx.services.metrics.on_share_acknowledgement(
            await failed_by_topic(ctx, ((key, a.error_code) for key, a in acks.items()), len(acks))
        )


async def any_acknowledgements(topics: Sequence[AckTopic], listed: int) -> bool:
    """Whether any of the `listed` partitions carries acknowledgements (in slices, for many)."""
    if listed <= SLICED:
        return any(p.acknowledgement_batches for t in topics for p in t.partitions)
    slicer = Slicer()
    for t in topics:
        for p in t.partitions:
            if p.acknowledgement_batches:
                return True
            await slicer.pause()
    return False
