"""Kafka's ACL model as values: resource patterns, bindings and the filters that select them.

The codes are Kafka's wire values (`ResourceType`, `PatternType`, `AclOperation`,
`AclPermissionType` in `org.apache.kafka.common`), shared by the broker's authorizer, the ACL
file in the data dir, and the client's admin calls. Pure values, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from protocol.errors import ProtocolException

WILDCARD: Final = "*"  # a resource name or principal that matches every one
WILDCARD_PRINCIPAL: Final = "User:*"
CLUSTER_NAME: Final = "kafka-cluster"  # the one CLUSTER resource


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, exact name
    MATCH = 2  # filters only: every binding that applies to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's AclOperation codes; also a bit each in an authorized-operations field."""

    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


# An ALLOW of one of these also allows the key (Kafka's AclEntry / StandardAuthorizerData).
IMPLIED_BY: Final[dict[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


class InvalidAcl(ProtocolException, ValueError):
    """A binding that cannot be stored (an ANY/UNKNOWN code, a bad principal or name)."""


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Does this stored pattern apply to the concrete resource (type, name)?"""
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def fields(self) -> dict[str, str]:
        """The whole binding by field name (names as kafka-acls.sh's): audit lines, the CLI's
        rows and the ACL file (`storage.acl_store`, whose format these names are) use it."""
        p, e = self.pattern, self.entry
        return {
            "resource_type": p.resource_type.name,
            "name": p.name,
            "pattern_type": p.pattern_type.name,
            "principal": e.principal,
            "host": e.host,
            "operation": e.operation.name,
            "permission": e.permission.name,
        }

    def validate(self) -> None:
        """:raises InvalidAcl: as Kafka's AclControlManager.validateNewAcl refuses it."""
        p, e = self.pattern, self.entry
        if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl(f"invalid resource type {p.resource_type.name}")
        if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"invalid pattern type {p.pattern_type.name}")
        if e.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidAcl(f"invalid operation {e.operation.name}")
        if e.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAcl(f"invalid permission type {e.permission.name}")
        if not p.name:
            raise InvalidAcl("resource name must not be empty")
        if p.pattern_type is PatternType.PREFIXED and p.name == WILDCARD:
            raise InvalidAcl("a PREFIXED pattern of '*' is not allowed: use LITERAL '*'")
        kind, sep, name = e.principal.partition(":")
        if not sep or not kind or not name:
            raise InvalidAcl(f"principal {e.principal!r} is not of the form Type:name")
        if not e.host:
            raise InvalidAcl("host must not be empty (use '*' for any)")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: None or ANY is 'anything' in each field."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding.pattern) and self._matches_entry(binding.entry)

    def _matches_pattern(self, p: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and p.resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            return self.name is None or p.matches(p.resource_type, self.name)
        if self.pattern_type is not PatternType.ANY and p.pattern_type is not self.pattern_type:
            return False
        return self.name is None or p.name == self.name

    def _matches_entry(self, e: AccessControlEntry) -> bool:
        return (
            (self.principal is None or e.principal == self.principal)
            and (self.host is None or e.host == self.host)
            and (self.operation is AclOperation.ANY or e.operation is self.operation)
            and (self.permission is AclPermissionType.ANY or e.permission is self.permission)
        )

    def validate(self) -> None:
        """:raises InvalidAcl: a filter code Kafka refuses (UNKNOWN anywhere)."""
        codes = (self.resource_type, self.pattern_type, self.operation, self.permission)
        if any(c == 0 for c in codes):
            raise InvalidAcl("a filter field is UNKNOWN")
