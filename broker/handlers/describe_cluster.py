"""DescribeCluster (60): one broker, which is also the controller (v0-2, as Kafka 4 serves;
v2's fenced brokers, KIP-1073: this one never is)."""

from __future__ import annotations

from kio.schema.describe_cluster import v0
from kio.schema.describe_cluster import v1
from kio.schema.describe_cluster import v2
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from broker.authorization import authorize_cluster
from broker.authorization import authorized_operations
from broker.authorized_operations import CLUSTER_OPERATIONS
from broker.authorized_operations import NOT_REQUESTED
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from protocol.acl import CLUSTER_NAME
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = v0.DescribeClusterRequest | v1.DescribeClusterRequest | v2.DescribeClusterRequest


async def handle(ctx: RequestContext, request: Request) -> v2.DescribeClusterResponse:
    s = ctx.services
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return v2.DescribeClusterResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            cluster_id=s.cluster_id,
            controller_id=BrokerId(-1),
            brokers=(),
            cluster_authorized_operations=NOT_REQUESTED,
        )
    owner = s.config.ownership  # with --processes N: every node, each at port + its id
    brokers = tuple(
        v2.response.DescribeClusterBroker(
            broker_id=BrokerId(n),
            host=ctx.endpoint[0],
            port=i32(owner.port_of(n, ctx.endpoint[1])),
            is_fenced=False,
        )
        for n in owner.node_ids()
    )
    return v2.DescribeClusterResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        cluster_id=s.cluster_id,
        controller_id=BrokerId(owner.controller_id),
        brokers=brokers,
        cluster_authorized_operations=(
            authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
            if request.include_cluster_authorized_operations
            else NOT_REQUESTED
        ),
    )


HANDLER = handler(
    handle,
    v0.DescribeClusterRequest,
    v1.DescribeClusterRequest,
    v2.DescribeClusterRequest,
    acl=((AclOperation.DESCRIBE, ResourceType.CLUSTER),),
)
