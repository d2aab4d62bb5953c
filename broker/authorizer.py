"""Shoal's StandardAuthorizer: the ACL store and the allow/deny decision, sans-IO.

Kafka's rules (`StandardAuthorizerData`): a super user may do anything; otherwise the bindings
that apply to the resource are its LITERAL ones, the LITERAL `*` of its type, and the PREFIXED
ones whose prefix starts its name. If there are none, `allow.everyone.if.no.acl.found` decides.
Of those, the ones for this principal (or `User:*`) and host (or `*`) count: a DENY of the
operation (or ALL) refuses, whatever allows it; else an ALLOW of the operation, of ALL, or of
an operation that implies it (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
DESCRIBE_CONFIGS) permits; else refused.

Bindings are indexed by (type, name) for LITERAL and (type, prefix) for PREFIXED, with the set
of prefix lengths in use per type, so a check costs O(bindings on the resource + distinct
prefix lengths), never O(all bindings). Changes are made on a copy (`with_added`,
`with_removed`) so the caller can write the new set durably before it takes effect.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass

from protocol.acl import IMPLIED_BY
from protocol.acl import WILDCARD
from protocol.acl import WILDCARD_PRINCIPAL
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType

# The implementation named by Kafka's own config, accepted as Shoal's.
KAFKA_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SHOAL_AUTHORIZER = "shoal.StandardAuthorizer"
KNOWN_AUTHORIZERS = frozenset({KAFKA_AUTHORIZER, SHOAL_AUTHORIZER})

_Key = tuple[ResourceType, str]


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def parse_super_users(value: str) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by semicolons (`User:alice;User:bob`)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


def _covers(deny: ResourcePattern, allow: ResourcePattern) -> bool:
    """Does the DENY pattern apply to every resource the ALLOW pattern names?"""
    if deny.pattern_type is PatternType.PREFIXED:
        return allow.name.startswith(deny.name)
    return deny.name == WILDCARD or (
        deny.name == allow.name and allow.pattern_type is PatternType.LITERAL
    )


class StandardAuthorizer:
    """The ACLs in force and the decision over them. `version` grows with every change."""

    def __init__(self, settings: AuthorizerSettings, bindings: Iterable[AclBinding] = ()) -> None:
        self.settings = settings
        self.version = 0
        self._literal: dict[_Key, set[AclBinding]] = {}
        self._prefixed: dict[_Key, set[AclBinding]] = {}
        self._prefix_lengths: dict[ResourceType, Counter[int]] = {}
        for b in bindings:
            self._insert(b)

    def __len__(self) -> int:
        return sum(len(s) for s in self._literal.values()) + sum(
            len(s) for s in self._prefixed.values()
        )

    def __iter__(self) -> Iterator[AclBinding]:
        for table in (self._literal, self._prefixed):
            for bindings in table.values():
                yield from bindings

    # --- decisions

    def authorize(
        self, principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        if principal in self.settings.super_users:
            return True
        found = False
        allowed = False
        for b in self._applying(rtype, name):
            found = True
            e = b.entry
            if e.principal not in (principal, WILDCARD_PRINCIPAL) or e.host not in (host, WILDCARD):
                continue
            if e.permission is AclPermissionType.DENY:
                if e.operation in (op, AclOperation.ALL):
                    return False  # DENY wins over any ALLOW
            elif e.operation in (op, AclOperation.ALL) or e.operation in IMPLIED_BY.get(op, ()):
                allowed = True
        return allowed if found else self.settings.allow_everyone_if_no_acl_found

    def authorize_any(
        self, principal: str, host: str, op: AclOperation, rtype: ResourceType
    ) -> bool:
        """Kafka's `authorizeByResourceType`: may the principal do `op` on some resource of the
        type? (An idempotent producer needs WRITE on any topic.) An ALLOW counts unless a DENY
        pattern covers all it names. O(bindings of the type): for rare requests only."""
        if principal in self.settings.super_users:
            return True
        of_type = [b for b in self if b.pattern.resource_type is rtype]
        if not of_type:
            return self.settings.allow_everyone_if_no_acl_found
        mine = [
            b
            for b in of_type
            if b.entry.principal in (principal, WILDCARD_PRINCIPAL)
            and b.entry.host in (host, WILDCARD)
            and b.entry.operation in (op, AclOperation.ALL)
        ]
        denied = [b.pattern for b in mine if b.entry.permission is AclPermissionType.DENY]
        return any(
            b.entry.permission is AclPermissionType.ALLOW
            and not any(_covers(d, b.pattern) for d in denied)
            for b in mine
        )

    def _applying(self, rtype: ResourceType, name: str) -> Iterator[AclBinding]:
        """Every binding whose pattern applies to the resource, through the indexes only."""
        yield from self._literal.get((rtype, name), ())
        if name != WILDCARD:
            yield from self._literal.get((rtype, WILDCARD), ())
        for length in self._prefix_lengths.get(rtype, ()):
            if length <= len(name):
                yield from self._prefixed.get((rtype, name[:length]), ())

    # --- the store

    def matching(self, f: AclBindingFilter) -> list[AclBinding]:
        """The bindings a DescribeAcls/DeleteAcls filter selects, in a stable order. A filter
        naming one resource (type, name, LITERAL or PREFIXED) is looked up in its index, not
        matched against every binding (a DeleteAcls of a million such filters was quadratic)."""
        return sorted(b for b in self._candidates(f) if f.matches(b))

    def _candidates(self, f: AclBindingFilter) -> Iterable[AclBinding]:
        concrete = f.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN)
        if concrete and f.name is not None:
            if f.pattern_type is PatternType.LITERAL:
                return self._literal.get((f.resource_type, f.name), ())
            if f.pattern_type is PatternType.PREFIXED:
                return self._prefixed.get((f.resource_type, f.name), ())
        return self

    def with_added(self, bindings: Iterable[AclBinding]) -> StandardAuthorizer:
        """A copy with `bindings` added (adding one already present changes nothing)."""
        copy = self._copy()
        for b in bindings:
            copy._insert(b)
        return copy

    def with_removed(self, bindings: Iterable[AclBinding]) -> StandardAuthorizer:
        copy = self._copy()
        for b in bindings:
            copy._discard(b)
        return copy

    def _copy(self) -> StandardAuthorizer:
        copy = StandardAuthorizer(self.settings, self)
        copy.version = self.version + 1
        return copy

    def _table(self, b: AclBinding) -> dict[_Key, set[AclBinding]]:
        return self._prefixed if b.pattern.pattern_type is PatternType.PREFIXED else self._literal

    def _insert(self, b: AclBinding) -> None:
        key = (b.pattern.resource_type, b.pattern.name)
        entries = self._table(b).setdefault(key, set())
        if b in entries:
            return
        entries.add(b)
        if b.pattern.pattern_type is PatternType.PREFIXED:
            lengths = self._prefix_lengths.setdefault(b.pattern.resource_type, Counter())
            lengths[len(b.pattern.name)] += 1

    def _discard(self, b: AclBinding) -> None:
        key = (b.pattern.resource_type, b.pattern.name)
        table = self._table(b)
        entries = table.get(key)
        if entries is None or b not in entries:
            return
        entries.remove(b)
        if not entries:
            del table[key]
        if b.pattern.pattern_type is PatternType.PREFIXED:
            lengths = self._prefix_lengths[b.pattern.resource_type]
            lengths[len(b.pattern.name)] -= 1
            if not lengths[len(b.pattern.name)]:
                del lengths[len(b.pattern.name)]
