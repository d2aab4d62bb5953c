"""StandardAuthorizer against a literal reference model, driven by Hypothesis.

The model keeps the bindings in a plain set and applies Kafka's rules as written, binding by
binding: super users, the bindings that apply to the resource (LITERAL name, LITERAL `*`,
PREFIXED prefix), allow.everyone.if.no.acl.found when none apply, principal (or `User:*`) and
host (or `*`), DENY before ALLOW, ALL, and the implied operations. The real authorizer keeps
indexes by (type, name) and prefix length, and changes by copy; any disagreement in a decision
or in what a filter selects is a bug in them.
"""

from __future__ import annotations

from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import initialize
from hypothesis.stateful import invariant
from hypothesis.stateful import rule

from broker.authorizer import AuthorizerSettings
from broker.authorizer import StandardAuthorizer
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation as Op
from protocol.acl import AclPermissionType as Perm
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType
from tests.hypothesis_profiles import examples

USERS = ("User:alice", "User:bob", "User:carol")
PRINCIPALS = (*USERS, "User:*")
HOSTS = ("10.0.0.1", "10.0.0.2")
# Names chosen so that prefixes overlap: "o" and "ord" both start "orders" and "orders-eu".
NAMES = ("orders", "orders-eu", "ord", "o", "payments")
PATTERN_NAMES = (*NAMES, "*")
TYPES = (ResourceType.TOPIC, ResourceType.GROUP)
OPS = tuple(op for op in Op if op not in (Op.UNKNOWN, Op.ANY))
CONCRETE_OPS = tuple(op for op in OPS if op is not Op.ALL)
IMPLIES_DESCRIBE = {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}


def applies(b: AclBinding, rtype: ResourceType, name: str) -> bool:
    p = b.pattern
    if p.resource_type != rtype:
        return False
    if p.pattern_type == PatternType.LITERAL:
        return p.name == name or p.name == "*"
    return name[: len(p.name)] == p.name


def grants(granted: Op, wanted: Op) -> bool:
    return (
        granted in (wanted, Op.ALL)
        or (wanted == Op.DESCRIBE and granted in IMPLIES_DESCRIBE)
        or (wanted == Op.DESCRIBE_CONFIGS and granted == Op.ALTER_CONFIGS)
    )


class Model:
    def __init__(self, supers: frozenset[str], allow_if_none: bool) -> None:
        self.supers = supers
        self.allow_if_none = allow_if_none
        self.bindings: set[AclBinding] = set()

    def authorize(self, principal: str, host: str, op: Op, rtype: ResourceType, name: str) -> bool:
        if principal in self.supers:
            return True
        on_resource = [b for b in self.bindings if applies(b, rtype, name)]
        if not on_resource:
            return self.allow_if_none
        mine = [
            b.entry
            for b in on_resource
            if b.entry.principal in (principal, "User:*") and b.entry.host in (host, "*")
        ]
        if any(e.permission == Perm.DENY and e.operation in (op, Op.ALL) for e in mine):
            return False
        return any(e.permission == Perm.ALLOW and grants(e.operation, op) for e in mine)

    def select(self, f: AclBindingFilter) -> list[AclBinding]:
        def ok(b: AclBinding) -> bool:
            p, e = b.pattern, b.entry
            if f.resource_type not in (ResourceType.ANY, p.resource_type):
                return False
            if f.pattern_type == PatternType.MATCH:
                name_ok = f.name is None or applies(b, p.resource_type, f.name)
            else:
                name_ok = f.pattern_type in (PatternType.ANY, p.pattern_type) and (
                    f.name is None or f.name == p.name
                )
            return (
                name_ok
                and f.principal in (None, e.principal)
                and f.host in (None, e.host)
                and f.operation in (Op.ANY, e.operation)
                and f.permission in (Perm.ANY, e.permission)
            )

        return sorted(b for b in self.bindings if ok(b))


def _binding(
    rtype: ResourceType, name: str, prefixed: bool, principal: str, host: str, op: Op, perm: Perm
) -> AclBinding:
    pattern_type = PatternType.PREFIXED if prefixed and name != "*" else PatternType.LITERAL
    return AclBinding(
        ResourcePattern(rtype, name, pattern_type), AccessControlEntry(principal, host, op, perm)
    )


bindings = st.builds(
    _binding,
    st.sampled_from(TYPES),
    st.sampled_from(PATTERN_NAMES),
    st.booleans(),
    st.sampled_from(PRINCIPALS),
    st.sampled_from((*HOSTS, "*")),
    st.sampled_from(OPS),
    st.sampled_from((Perm.ALLOW, Perm.DENY)),
)
filters = st.builds(
    AclBindingFilter,
    st.sampled_from((ResourceType.ANY, *TYPES)),
    st.one_of(st.none(), st.sampled_from(PATTERN_NAMES)),
    st.sampled_from(
        (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED)
    ),
    st.one_of(st.none(), st.sampled_from(PRINCIPALS)),
    st.one_of(st.none(), st.sampled_from((*HOSTS, "*"))),
    st.sampled_from((Op.ANY, *OPS)),
    st.sampled_from((Perm.ANY, Perm.ALLOW, Perm.DENY)),
)
queries = st.tuples(
    st.sampled_from(USERS),
    st.sampled_from(HOSTS),
    st.sampled_from(CONCRETE_OPS),
    st.sampled_from(TYPES),
    st.sampled_from(NAMES),
)


class AuthorizerMachine(RuleBasedStateMachine):
    authorizer: StandardAuthorizer
    model: Model

    @initialize(
        supers=st.frozensets(st.sampled_from(USERS), max_size=1), allow_if_none=st.booleans()
    )
    def start(self, supers: frozenset[str], allow_if_none: bool) -> None:
        self.authorizer = StandardAuthorizer(AuthorizerSettings(supers, allow_if_none))
        self.model = Model(supers, allow_if_none)

    @rule(new=st.lists(bindings, min_size=1, max_size=4))
    def add(self, new: list[AclBinding]) -> None:
        before = self.authorizer
        self.authorizer = before.with_added(new)
        self.model.bindings.update(new)
        assert self.authorizer.version == before.version + 1

    @rule(f=filters)
    def remove(self, f: AclBindingFilter) -> None:
        selected = self.authorizer.matching(f)
        assert selected == self.model.select(f)
        before = sorted(self.authorizer)
        self.authorizer = self.authorizer.with_removed(selected)
        self.model.bindings.difference_update(selected)
        # The copy changed; the authorizer it was made from did not (two-phase changes).
        assert sorted(self.authorizer) == sorted(self.model.bindings)
        assert len(before) == len(self.model.bindings) + len(selected)

    @rule(f=filters)
    def describe(self, f: AclBindingFilter) -> None:
        assert self.authorizer.matching(f) == self.model.select(f)

    @rule(batch=st.lists(queries, min_size=1, max_size=25))
    def check(self, batch: list[tuple[str, str, Op, ResourceType, str]]) -> None:
        for q in batch:
            assert self.authorizer.authorize(*q) == self.model.authorize(*q), q

    @invariant()
    def same_bindings(self) -> None:
        assert len(self.authorizer) == len(self.model.bindings)


AuthorizerMachine.TestCase.settings = settings(
    max_examples=examples(40), stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
TestAuthorizer = AuthorizerMachine.TestCase
