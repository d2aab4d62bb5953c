"""The ACLs in force, changed two-phase: plan on a copy, write the file, then swap it in.

Changes are serialized by one lock so two CreateAcls cannot each write a file missing the
other's bindings; the write (an fsync) runs in a thread, and until it has succeeded the
authorizer in force is the old one, so memory is never ahead of what a restart would load.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

import structlog

from broker.authorizer import AuthorizerSettings
from broker.authorizer import StandardAuthorizer
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import InvalidAcl
from storage.acl_store import AclStore

log: structlog.typing.FilteringBoundLogger = structlog.get_logger("shoal.acls")


class AclManager:
    def __init__(self, store: AclStore, settings: AuthorizerSettings) -> None:
        """:raises AclFileDamaged: the ACL file in the data dir does not parse."""
        self._store = store
        self._lock = asyncio.Lock()
        self.authorizer = StandardAuthorizer(settings, store.load())
        log.info("authorizer on", acls=len(self.authorizer), super_users=len(settings.super_users))

    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.matching(f)

    async def create(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """Add the valid bindings; per binding, None or why it was refused.

        :raises OSError: the file was not written; nothing changed.
        """
        async with self._lock:
            # The new authorizer is planned in a thread too: a request may add a million
            # bindings. The one in force is never changed in place, so reading it meanwhile
            # (requests being authorized) is safe.
            errors, new = await asyncio.to_thread(_added, self.authorizer, bindings)
            await self._commit(new)
        # The bindings themselves, not counts: an audit must say what access changed.
        valid, refused = await asyncio.to_thread(_split, bindings, errors)
        log.info("acls created", **_listed("acls", valid), **_listed("refused", refused))
        return errors

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter selects; the bindings removed, per filter.

        :raises OSError: the file was not written; nothing changed.
        """
        async with self._lock:
            matched, new = await asyncio.to_thread(_removed, self.authorizer, filters)
            await self._commit(new)
        log.info("acls deleted", **_listed("acls", list(itertools.islice(
            (b for m in matched for b in m), LOGGED_BINDINGS + 1))))  # fmt: skip
        return matched

    async def _commit(self, new: StandardAuthorizer) -> None:
        await asyncio.to_thread(lambda: self._store.save(list(new)))  # list(): a million, maybe
        self.authorizer = new


# An audit line lists each binding in full, up to this many (a real admin changes a handful;
# a million in one request would make one line of megabytes): past it, the line says so.
LOGGED_BINDINGS = 1_000


def _listed(key: str, bindings: Sequence[AclBinding]) -> dict[str, object]:
    listed: dict[str, object] = {key: [b.fields() for b in bindings[:LOGGED_BINDINGS]]}
    if len(bindings) > LOGGED_BINDINGS:
        listed[f"{key}_listed"] = LOGGED_BINDINGS  # of more
    return listed


def _split(
    bindings: Sequence[AclBinding], errors: Sequence[str | None]
) -> tuple[list[AclBinding], list[AclBinding]]:
    """The bindings added and those refused (in a thread: a request may hold a million)."""
    valid = [b for b, err in zip(bindings, errors, strict=True) if err is None]
    return valid, [b for b, err in zip(bindings, errors, strict=True) if err is not None]


def _added(
    current: StandardAuthorizer, bindings: Sequence[AclBinding]
) -> tuple[list[str | None], StandardAuthorizer]:
    errors: list[str | None] = []
    for b in bindings:
        try:
            b.validate()
            errors.append(None)
        except InvalidAcl as e:
            errors.append(str(e))
    valid = [b for b, err in zip(bindings, errors, strict=True) if err is None]
    return errors, current.with_added(valid)


def _removed(
    current: StandardAuthorizer, filters: Sequence[AclBindingFilter]
) -> tuple[list[list[AclBinding]], StandardAuthorizer]:
    """What each filter selects (a filter named again is matched once), and the authorizer
    without them."""
    found: dict[AclBindingFilter, list[AclBinding]] = {}
    matched = []
    for f in filters:
        if (selected := found.get(f)) is None:
            selected = found[f] = current.matching(f)
        matched.append(selected)
    return matched, current.with_removed(b for m in found.values() for b in m)
