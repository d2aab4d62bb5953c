"""The ACLs in force, changed two-phase: plan on a copy, write the file, then swap it in.

Changes are serialized by one lock so two CreateAcls cannot each write a file missing the
other's bindings; the write (an fsync) runs in a thread, and until it has succeeded the
authorizer in force is the old one, so memory is never ahead of what a restart would load.
"""

from __future__ import annotations

import asyncio
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
        errors: list[str | None] = []
        for b in bindings:
            try:
                b.validate()
                errors.append(None)
            except InvalidAcl as e:
                errors.append(str(e))
        valid = [b for b, err in zip(bindings, errors, strict=True) if err is None]
        async with self._lock:
            await self._commit(self.authorizer.with_added(valid))
        # The bindings themselves, not counts: an audit must say what access changed.
        refused = [b for b, err in zip(bindings, errors, strict=True) if err is not None]
        log.info("acls created", acls=[b.fields() for b in valid],
                 refused=[b.fields() for b in refused])  # fmt: skip
        return errors

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter selects; the bindings removed, per filter.

        :raises OSError: the file was not written; nothing changed.
        """
        async with self._lock:
            current = self.authorizer
            matched = [current.matching(f) for f in filters]
            await self._commit(current.with_removed(b for m in matched for b in m))
        log.info("acls deleted", acls=[b.fields() for m in matched for b in m])
        return matched

    async def _commit(self, new: StandardAuthorizer) -> None:
        await asyncio.to_thread(self._store.save, list(new))
        self.authorizer = new
