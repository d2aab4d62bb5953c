"""A consumer group's committed offsets over the wire: OffsetFetch (v1-9), OffsetCommit (v2-9)
and OffsetDelete (v0), sent to the group's coordinator.

Used through `Admin.list_consumer_group_offsets`, `alter_consumer_group_offsets` and
`delete_consumer_group_offsets`. Alterations commit as Kafka's admin client does: member ""
and generation -1, which a group's coordinator accepts only while the group has no members.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.offset_fetch.v8.response import OffsetFetchResponse as OffsetFetchV8

from client.cluster import Cluster
from client.errors import KafkaError
from client.errors import error_for
from client.errors import raise_for
from client.kio_apis import OFFSET_COMMIT
from client.kio_apis import OFFSET_DELETE
from client.kio_apis import OFFSET_FETCH
from client.kio_apis import OFFSET_FETCH_V1_TO_7
from client.kio_apis import OFFSET_FETCH_V8
from protocol import api_keys
from protocol.messages import build

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int  # -1: nothing committed
    leader_epoch: int = -1
    metadata: str = ""


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, p in partitions:
        out.setdefault(topic, []).append(p)
    return out


async def list_offsets(
    cluster: Cluster, node: int, group_id: str, partitions: Iterable[TopicPartition] | None
) -> dict[TopicPartition, CommittedOffset]:
    """Committed offsets of the partitions (None: every partition the group committed).

    :raises KafkaError: GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED...
    """
    version = cluster.version(api_keys.OFFSET_FETCH, 1, 8)
    m = OFFSET_FETCH.requests(version)
    asked = None if partitions is None else _by_topic(partitions)
    topics: tuple[Any, ...] | None
    if version >= 8:  # groups, each with its topics
        m8 = OFFSET_FETCH_V8.requests(version)
        topics = None if asked is None else tuple(
            build(m8.OffsetFetchRequestTopics, name=t, partition_indexes=tuple(ps))
            for t, ps in asked.items()
        )  # fmt: skip
        group = build(m8.OffsetFetchRequestGroup, group_id=group_id, topics=topics)
        req = build(m.OffsetFetchRequest, groups=(group,), require_stable=True)
    else:
        m7 = OFFSET_FETCH_V1_TO_7.requests(version)
        topics = None if asked is None else tuple(
            build(m7.OffsetFetchRequestTopic, name=t, partition_indexes=tuple(ps))
            for t, ps in asked.items()
        )  # fmt: skip
        req = build(m.OffsetFetchRequest, group_id=group_id, topics=topics, require_stable=True)
    resp = await cluster.call(req, OFFSET_FETCH.response(version), node_id=node)
    answered: tuple[Any, ...]  # each version's topics: name, and partitions as below
    if isinstance(resp, OffsetFetchV8):
        (g,) = resp.groups
        raise_for(g.error_code, f"group {group_id}")
        answered = g.topics
    else:
        raise_for(getattr(resp, "error_code", 0), f"group {group_id}")  # v2+
        answered = resp.topics
    out: dict[TopicPartition, CommittedOffset] = {}
    for t in answered:
        for p in t.partitions:
            raise_for(p.error_code, f"{t.name}-{p.partition_index}")
            epoch = int(getattr(p, "committed_leader_epoch", -1))
            out[(t.name, int(p.partition_index))] = CommittedOffset(
                int(p.committed_offset), epoch, p.metadata or ""
            )
    return out


async def alter_offsets(
    cluster: Cluster,
    node: int,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    member_id: str = "",
    generation: int = -1,
) -> dict[TopicPartition, KafkaError | None]:
    """Commit `offsets` for the group (as the admin client, or as a member given its id and
    generation or KIP-848 epoch); each partition's error, or None."""
    version = cluster.version(api_keys.OFFSET_COMMIT, 2, 8)
    m = OFFSET_COMMIT.requests(version)
    topics = tuple(
        build(
            m.OffsetCommitRequestTopic,
            name=t,
            partitions=tuple(
                build(
                    m.OffsetCommitRequestPartition,
                    partition_index=p,
                    committed_offset=offsets[(t, p)],
                    committed_metadata="",
                )
                for p in ps
            ),
        )
        for t, ps in _by_topic(offsets).items()
    )
    req = build(
        m.OffsetCommitRequest,
        group_id=group_id,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=topics,
    )
    resp = await cluster.call(req, OFFSET_COMMIT.response(version), node_id=node)
    return {
        (t.name, int(p.partition_index)): None
        if p.error_code == 0
        else error_for(p.error_code, f"{t.name}-{p.partition_index}")
        for t in resp.topics
        for p in t.partitions
    }


async def delete_offsets(
    cluster: Cluster, node: int, group_id: str, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, KafkaError | None]:
    """Delete the group's committed offsets of `partitions`; each partition's error, or None.

    :raises KafkaError: GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED.
    """
    version = cluster.version(api_keys.OFFSET_DELETE, 0, 0)
    m = OFFSET_DELETE.requests(version)
    topics = tuple(
        build(
            m.OffsetDeleteRequestTopic,
            name=t,
            partitions=tuple(build(m.OffsetDeleteRequestPartition, partition_index=p) for p in ps),
        )
        for t, ps in _by_topic(partitions).items()
    )
    resp = await cluster.call(
        build(m.OffsetDeleteRequest, group_id=group_id, topics=topics),
        OFFSET_DELETE.response(version),
        node_id=node,
    )
    raise_for(resp.error_code, f"group {group_id}")
    return {
        (t.name, int(p.partition_index)): None
        if p.error_code == 0
        else error_for(p.error_code, f"{t.name}-{p.partition_index}")
        for t in resp.topics
        for p in t.partitions
    }
