"""A consumer group's coordinator, state, assignor and members, as Kafka's admin client
describes them: ConsumerGroupDescribe (KIP-848 groups) first, DescribeGroups (classic groups)
when the coordinator answers GROUP_ID_NOT_FOUND to it.

A classic member's assignment is the client's own ConsumerProtocolAssignment bytes (the broker
only relays them); its prefix, the assigned partitions, is the same in every version.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from kio.schema.errors import ErrorCode

from client.cluster import BrokerNode
from client.cluster import Cluster
from client.errors import raise_for
from client.kio_apis import CONSUMER_GROUP_DESCRIBE
from client.kio_apis import DESCRIBE_GROUPS
from protocol import api_keys
from protocol.messages import build

Assignment = dict[str, tuple[int, ...]]  # topic name -> partitions


@dataclass(frozen=True, slots=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    assignment: Assignment
    member_epoch: int | None = None  # KIP-848 groups only
    target_assignment: Assignment | None = None  # KIP-848 groups only


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    group_type: str  # "consumer" (KIP-848) or "classic"
    state: str
    assignor: str  # the server-side assignor, or the classic group's chosen protocol
    coordinator: BrokerNode
    members: list[ConsumerMemberDescription] = field(default_factory=list)
    group_epoch: int | None = None  # KIP-848 groups only
    assignment_epoch: int | None = None


def decode_assignment(data: bytes) -> Assignment:
    """The partitions of a ConsumerProtocolAssignment (any version); {} if it does not parse:
    a member of another protocol type (Connect) carries other bytes."""
    out: Assignment = {}
    try:
        (count,) = struct.unpack_from(">i", data, 2)  # after the int16 version
        pos = 6
        for _ in range(count):
            (length,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2 : pos + 2 + length].decode()
            pos += 2 + length
            (n,) = struct.unpack_from(">i", data, pos)
            out[topic] = struct.unpack_from(f">{n}i", data, pos + 4)
            pos += 4 + 4 * n
    except (struct.error, UnicodeDecodeError, ValueError):
        return {}
    return out


def _assignment(a: Any) -> Assignment:
    return {t.topic_name: tuple(int(p) for p in t.partitions) for t in a.topic_partitions}


async def _consumer_group(
    cluster: Cluster, node: BrokerNode, group_id: str
) -> ConsumerGroupDescription | None:
    if not cluster.supports(api_keys.CONSUMER_GROUP_DESCRIBE, 0):
        return None
    version = cluster.version(api_keys.CONSUMER_GROUP_DESCRIBE, 0, 1)
    m = CONSUMER_GROUP_DESCRIBE.requests(version)
    req = build(
        m.ConsumerGroupDescribeRequest, group_ids=(group_id,), include_authorized_operations=False
    )
    resp = await cluster.call(req, CONSUMER_GROUP_DESCRIBE.response(version), node_id=node.node_id)
    (g,) = resp.groups
    if g.error_code == ErrorCode.group_id_not_found:
        return None
    raise_for(g.error_code, g.error_message or f"consumer group {group_id}")
    return ConsumerGroupDescription(
        group_id=group_id,
        group_type="consumer",
        state=g.group_state,
        assignor=g.assignor_name,
        coordinator=node,
        members=[
            ConsumerMemberDescription(
                member_id=x.member_id,
                instance_id=x.instance_id,
                client_id=x.client_id,
                client_host=x.client_host,
                assignment=_assignment(x.assignment),
                member_epoch=int(x.member_epoch),
                target_assignment=_assignment(x.target_assignment),
            )
            for x in g.members
        ],
        group_epoch=int(g.group_epoch),
        assignment_epoch=int(g.assignment_epoch),
    )


async def _classic_group(
    cluster: Cluster, node: BrokerNode, group_id: str
) -> ConsumerGroupDescription | None:
    version = cluster.version(api_keys.DESCRIBE_GROUPS, 0, 6)
    m = DESCRIBE_GROUPS.requests(version)
    resp = await cluster.call(
        build(m.DescribeGroupsRequest, groups=(group_id,), include_authorized_operations=False),
        DESCRIBE_GROUPS.response(version),
        node_id=node.node_id,
    )
    (g,) = resp.groups
    if g.error_code == ErrorCode.group_id_not_found or (g.group_state == "Dead" and not g.members):
        return None  # v6 says so; older versions describe an unknown group as Dead
    raise_for(g.error_code, getattr(g, "error_message", None) or f"consumer group {group_id}")
    consumer = g.protocol_type == "consumer"
    return ConsumerGroupDescription(
        group_id=group_id,
        group_type="classic",
        state=g.group_state,
        assignor=g.protocol_data,
        coordinator=node,
        members=[
            ConsumerMemberDescription(
                member_id=x.member_id,
                instance_id=getattr(x, "group_instance_id", None),
                client_id=x.client_id,
                client_host=x.client_host,
                assignment=decode_assignment(bytes(x.member_assignment)) if consumer else {},
            )
            for x in g.members
        ],
    )


async def describe(cluster: Cluster, group_id: str) -> ConsumerGroupDescription | None:
    """The group as its coordinator knows it; None when it knows no such consumer group.

    :raises KafkaError: GROUP_AUTHORIZATION_FAILED and other refusals.
    """
    await cluster.bootstrap()
    node = await cluster.find_coordinator(group_id)
    found = await _consumer_group(cluster, node, group_id)
    return found if found is not None else await _classic_group(cluster, node, group_id)
