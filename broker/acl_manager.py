"""The ACLs in force, changed two-phase: plan on a copy, write the file, then swap it in.

Changes are serialized by one lock so two CreateAcls cannot each write a file missing the
other's bindings; the write (an fsync) runs in a thread, and until it has succeeded the
authorizer in force is the old one, so memory is never ahead of what a restart would load.

With `--processes N` node 0 alone changes the file; the others `follow` it: when its stamp
moves they read it and build the authorizer in threads, then swap it in, so they are never
ahead of node 0's file and never see half of it (it is replaced atomically).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

import structlog

from broker import gc_freeze
from broker.authorizer import AuthorizerSettings
from broker.authorizer import StandardAuthorizer
from broker.to_the_end import Changes
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import InvalidAcl
from storage.acl_store import AclFileDamaged
from storage.acl_store import AclStore
from storage.fsutil import FileStamp

log: structlog.typing.FilteringBoundLogger = structlog.get_logger("shoal.acls")


class AclManager:
    def __init__(self, store: AclStore, settings: AuthorizerSettings, changes: Changes) -> None:
        """:raises AclFileDamaged: the ACL file in the data dir does not parse."""
        self._store = store
        self._settings = settings
        self._lock = asyncio.Lock()
        self._changes = changes
        self._stamp: FileStamp | None
        self._stamp, bindings = store.load_stamped()
        self.authorizer = StandardAuthorizer(settings, bindings)
        log.info("authorizer on", acls=len(self.authorizer), super_users=len(settings.super_users))

    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.matching(f)

    async def create(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """Add the valid bindings; per binding, None or why it was refused. Run to its end
        (`broker.to_the_end`), the file written and the ACLs in force, even if the request
        is cancelled meanwhile.

        :raises OSError: the file was not written; nothing changed.
        """
        return await self._changes.to_the_end(self._create(bindings))

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter selects; the bindings removed, per filter. Run to its end,
        as `create`.

        :raises OSError: the file was not written; nothing changed.
        """
        return await self._changes.to_the_end(self._delete(filters))

    async def _create(self, bindings: Sequence[AclBinding]) -> list[str | None]:
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

    async def _delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        async with self._lock:
            matched, new = await asyncio.to_thread(_removed, self.authorizer, filters)
            await self._commit(new)
        log.info("acls deleted", **_listed("acls", list(itertools.islice(
            (b for m in matched for b in m), LOGGED_BINDINGS + 1))))  # fmt: skip
        return matched

    async def follow(self) -> bool:
        """Take the file as another process (node 0) left it, if it changed since the last
        look (a stat when it did not); True if it did. A file that does not parse keeps the
        ACLs in force (one log line per version of it): it is replaced atomically, so that
        is damage, and opening what the ACLs closed would be worse."""
        if self._store.stamp() == self._stamp:
            return False
        async with self._lock:
            try:
                stamp, new, count = await gc_freeze.loaded_in_bulk(
                    lambda: _loaded(self._store, self._settings), lambda r: r[2]
                )
                if stamp == self._stamp:
                    return False
            except AclFileDamaged as e:
                self._stamp = self._store.stamp()
                log.error("acl file not followed; the acls in force stay", error=str(e))
                return False
            except OSError as e:
                log.error("acl file not read; the acls in force stay", error=str(e))
                return False
            # Connections cache decisions by version: a new one must drop them.
            new.version = self.authorizer.version + 1
            self._stamp, self.authorizer = stamp, new
        log.info("acls followed", acls=count)
        return True

    async def _commit(self, new: StandardAuthorizer) -> None:
        await asyncio.to_thread(lambda: self._store.save(list(new)))  # list(): a million, maybe
        self.authorizer = new


def _loaded(
    store: AclStore, settings: AuthorizerSettings
) -> tuple[FileStamp | None, StandardAuthorizer, int]:
    """The file's stamp, an authorizer of its bindings and their count (in a thread: there
    may be a million, and counting an authorizer's walks them)."""
    stamp, bindings = store.load_stamped()
    return stamp, StandardAuthorizer(settings, bindings), len(bindings)


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
