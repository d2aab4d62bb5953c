"""What the ACL APIs (CreateAcls, DescribeAcls, DeleteAcls) share: wire codes to ACL values.

Each needs ALTER (create, delete) or DESCRIBE (describe) on the cluster, and answers
SECURITY_DISABLED when no authorizer is configured, as Kafka does.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Protocol
from typing import TypeVar

from kio.schema.errors import ErrorCode

from broker.acl_manager import AclManager
from broker.authorization import authorize_cluster
from broker.context import RequestContext
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import InvalidAcl
from protocol.acl import PatternType
from protocol.acl import ResourceType

E = TypeVar("E", bound=IntEnum)


def code(enum: type[E], value: int) -> E:
    """:raises InvalidAcl: a code the enum does not know."""
    try:
        return enum(value)
    except ValueError:
        raise InvalidAcl(f"unknown {enum.__name__} {value}") from None


class FilterFields(Protocol):
    @property
    def resource_type_filter(self) -> int: ...
    @property
    def resource_name_filter(self) -> str | None: ...
    @property
    def pattern_type_filter(self) -> int: ...
    @property
    def principal_filter(self) -> str | None: ...
    @property
    def host_filter(self) -> str | None: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


def binding_filter(f: FilterFields) -> AclBindingFilter:
    """:raises InvalidAcl: an unknown or UNKNOWN code."""
    result = AclBindingFilter(
        code(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        code(PatternType, f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        code(AclOperation, f.operation),
        code(AclPermissionType, f.permission_type),
    )
    result.validate()
    return result


def refusal(
    ctx: RequestContext, op: AclOperation
) -> tuple[AclManager, None] | tuple[None, tuple[ErrorCode, str]]:
    """The ACL manager, or why the request is refused as a whole."""
    acls = ctx.services.acls
    if acls is None:
        return None, (ErrorCode.security_disabled, "no authorizer is configured")
    if not authorize_cluster(ctx, op):
        return None, (ErrorCode.cluster_authorization_failed, f"no {op.name} on the cluster")
    return acls, None
