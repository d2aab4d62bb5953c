"""Which kind of group owns a group id: the one place that answers it.

A group id is one kind at a time (share, classic, or KIP-848 consumer), as in Kafka, whose
`GroupMetadataManager` keeps every group in one map and answers `group(id).type()`. Here each
kind has its own coordinator; this registry holds them by kind and answers, for an id, the
kind (and so the coordinator) that holds it. Handlers ask it before letting a request of one
kind touch an id (ShareGroupHeartbeat, ConsumerGroupHeartbeat, JoinGroup, DeleteGroups, ...).

A share group is also known after a restart from its durable share state alone, before any
member joins again (`coordinator.share_group_admin`); finding those reads the share-state
directory once (the persister keeps the list after), so a caller asks for them
(`durable=True`) only where a group is about to be made or named: a join of an id no
coordinator holds, an admin request; never per heartbeat of a known group.

Adding a kind: a `GroupKind` member, a coordinator with `has_group`, and its `register`
call where the broker is wired (`broker/wiring.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from enum import StrEnum
from typing import Protocol
from typing import TypeVar


class GroupKind(StrEnum):
    """Kafka's group types (`GroupType`), as ListGroups names them (KIP-848)."""

    SHARE = "share"
    CLASSIC = "classic"
    CONSUMER = "consumer"


class GroupOwner(Protocol):
    """A coordinator of one kind of group."""

    def has_group(self, group_id: str) -> bool:
        """Whether the coordinator holds the group in memory (a dict look-up)."""
        ...


Owner = TypeVar("Owner", bound=GroupOwner)


class GroupRegistry:
    """The coordinators by kind, and the kind that holds a group id."""

    def __init__(self) -> None:
        self._owners: dict[GroupKind, GroupOwner] = {}
        self._durable: dict[GroupKind, Callable[[], Collection[str]]] = {}

    def register(
        self, kind: GroupKind, owner: Owner, durable: Callable[[], Collection[str]] | None = None
    ) -> Owner:
        """Make `owner` the coordinator of `kind`, and return it. `durable`: the ids of groups
        of the kind known only from what is on disk (share groups after a restart)."""
        if kind in self._owners:
            raise ValueError(f"{kind} groups already have a coordinator")
        self._owners[kind] = owner
        if durable is not None:
            self._durable[kind] = durable
        return owner

    def owner(self, kind: GroupKind) -> GroupOwner:
        return self._owners[kind]

    def holds(self, kind: GroupKind, group_id: str, *, durable: bool = False) -> bool:
        """Whether the coordinator of `kind` holds `group_id`."""
        return self.kind(group_id, (kind,), durable=durable) is not None

    def kind(
        self, group_id: str, among: Iterable[GroupKind] = GroupKind, *, durable: bool = False
    ) -> GroupKind | None:
        """The first of `among` (in the order given) whose coordinator holds `group_id`, or None.
        With `durable`, a group known only from durable state counts too (reads the disk)."""
        for kind in among:
            owner = self._owners.get(kind)
            if owner is not None and owner.has_group(group_id):
                return kind
            if durable and kind in self._durable and group_id in self._durable[kind]():
                return kind
        return None

    def other_kind(
        self, mine: GroupKind, group_id: str, *, durable: bool = False
    ) -> GroupKind | None:
        """The kind, other than `mine`, of a group that holds `group_id`: a request of kind
        `mine` for that id is refused."""
        return self.kind(group_id, (k for k in GroupKind if k is not mine), durable=durable)

    def taken_by_another(self, mine: GroupKind, *, durable: bool = False) -> Callable[[str], bool]:
        """`other_kind` for one kind, as the predicate its coordinator calls (in memory only,
        unless `durable`: then its coordinator asks only for ids it does not hold)."""
        return lambda group_id: self.other_kind(mine, group_id, durable=durable) is not None
