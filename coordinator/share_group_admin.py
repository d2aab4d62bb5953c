"""Share-group admin operations at the group level: list, describe, delete, and the checks the
offset APIs make before touching share-partition state (KIP-932 admin APIs).

A group is known when the coordinator holds it in memory or from what lies on disk
(`durable`: its share-partition state here and, with `--processes N`, the coordinator's
record of it, `share_group_records`): the coordinator's membership is not persisted, so after
a restart such a group is listed as Empty until a member joins again, as Kafka lists a
persisted share group.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Collection
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coordinator.group_registry import GroupKind
from coordinator.share_group import CoordinatorError
from coordinator.share_group import ShareGroup
from coordinator.share_group import ShareGroupCoordinator

GROUP_TYPE = GroupKind.SHARE.value
PROTOCOL_TYPE = "share"  # what Kafka lists as a share group's protocol type


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    group_type: str = GROUP_TYPE
    protocol_type: str = PROTOCOL_TYPE


class ShareGroupAdmin:
    """Group-level admin over the coordinator and the groups that only have durable state."""

    def __init__(
        self, coordinator: ShareGroupCoordinator, durable: Callable[[], Collection[str]]
    ) -> None:
        self._coordinator = coordinator
        self._durable = durable

    def group(self, group_id: str) -> ShareGroup | None:
        """The group, or an Empty stand-in for one known only from durable state."""
        group = self._coordinator.groups.get(group_id)
        if group is None and group_id in self._durable():
            return ShareGroup(group_id)
        return group

    def list_groups(
        self, states: Collection[str] = (), types: Collection[str] = ()
    ) -> list[GroupListing]:
        """Every known share group; filters match case-insensitively, empty means all."""
        wanted_types = {t.lower() for t in types}
        if wanted_types and GROUP_TYPE not in wanted_types:
            return []
        wanted_states = {s.lower() for s in states}
        held = self._coordinator.groups
        out = []
        for group_id in sorted(set(held) | set(self._durable())):  # the durable ones read once
            group = held.get(group_id) or ShareGroup(group_id)
            if not wanted_states or group.state.lower() in wanted_states:
                out.append(GroupListing(group_id, group.state))
        return out

    def require_empty(self, group_id: str, *, create: bool = False) -> ShareGroup:
        """The group, which must have no members (offset changes are for empty groups only).

        With `create`, an unknown group is made (empty): AlterShareGroupOffsets initialises a
        share group that has never run (KIP-932).
        :raises CoordinatorError: INVALID_GROUP_ID, GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP.
        """
        if not group_id:
            raise CoordinatorError(ErrorCode.invalid_group_id, "group id is empty")
        group = self.group(group_id)
        if group is None:
            if not create:
                raise CoordinatorError(ErrorCode.group_id_not_found, f"no share group {group_id}")
            group = self._coordinator.groups[group_id] = ShareGroup(group_id)
        if group.members:
            raise CoordinatorError(
                ErrorCode.non_empty_group,
                f"share group {group_id} has {len(group.members)} member(s); stop them first",
            )
        return group

    def delete_group(self, group_id: str) -> None:
        """Forget an empty group; the caller drops its share-partition state and configs.

        :raises CoordinatorError: INVALID_GROUP_ID, GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP.
        """
        self.require_empty(group_id)
        self._coordinator.groups.pop(group_id, None)
