"""What handlers call to authorize a request: one check, the operations a principal may do.

Without an authorizer (`authorizer.class.name` empty) everything is allowed and no ACL code
runs: a check is one attribute test. With one, decisions are cached per connection, keyed by
principal, operation and resource, and dropped whenever the ACLs change (a new authorizer
version), so a long-lived producer pays the ACL lookup once per topic.
"""

from __future__ import annotations

from typing import Final

import structlog
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.context import RequestContext
from protocol.acl import CLUSTER_NAME
from protocol.acl import AclOperation
from protocol.acl import ResourceType

log: structlog.typing.FilteringBoundLogger = structlog.get_logger("shoal.authorizer")


def authorize(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str) -> bool:
    acls = ctx.services.acls
    if acls is None:
        return True
    authorizer = acls.authorizer
    key = (ctx.principal, op, rtype, name)
    cache = ctx.acl_cache
    if cache is not None:
        hit = cache.get(authorizer.version, key)
        if hit is not None:
            return hit
    allowed = authorizer.authorize(ctx.principal, ctx.host, op, rtype, name)
    if cache is not None:
        cache.put(key, allowed)
    if not allowed:  # once per connection and resource while the ACLs stay the same
        log.info(
            "authorization denied",
            principal=ctx.principal,
            host=ctx.host,
            operation=op.name,
            resource_type=rtype.name,
            resource=name,
        )
    return allowed


def authorize_any(ctx: RequestContext, op: AclOperation, rtype: ResourceType) -> bool:
    """May the principal do `op` on some resource of the type (uncached: rare requests)?"""
    acls = ctx.services.acls
    return acls is None or acls.authorizer.authorize_any(ctx.principal, ctx.host, op, rtype)


def authorize_cluster(ctx: RequestContext, op: AclOperation) -> bool:
    return authorize(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)


# ConfigResource types (DescribeConfigs, AlterConfigs) -> the ACL resource and its error.
_CONFIG_RESOURCES: Final = {
    2: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed),
    4: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
    32: (ResourceType.GROUP, ErrorCode.group_authorization_failed),
}


def config_refusal(
    ctx: RequestContext, config_type: int, name: str, op: AclOperation
) -> ErrorCode | None:
    """The error for a config resource the principal may not `op`, or None. A BROKER config is
    checked on the cluster, as Kafka does; an unknown type is left to the handler to refuse."""
    found = _CONFIG_RESOURCES.get(config_type)
    if found is None:
        return None
    rtype, error = found
    allowed = authorize(ctx, op, rtype, CLUSTER_NAME if rtype is ResourceType.CLUSTER else name)
    return None if allowed else error


def authorized_operations(
    ctx: RequestContext, rtype: ResourceType, name: str, supported: i32
) -> i32:
    """The bits of `supported` (KIP-430's field) this principal may perform on the resource."""
    if ctx.services.acls is None:
        return supported
    bits = 0
    for op in AclOperation:
        if supported & (1 << op) and authorize(ctx, op, rtype, name):
            bits |= 1 << op
    return i32(bits)
