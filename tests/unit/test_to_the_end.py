"""Changes made in steps around an await run to their end when the request that asked is
cancelled (its connection lost: `KafkaConnection` cancels its request tasks), and the next
change waits for them (`broker.to_the_end`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path

from broker.acl_manager import AclManager
from broker.authorizer import AuthorizerSettings
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType
from storage.acl_store import AclStore


def _deny(topic: str) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
        AccessControlEntry("User:mallory", "*", AclOperation.READ, AclPermissionType.DENY),
    )


class _HeldStore(AclStore):
    """The ACL file, whose first save waits until the test lets it go on."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.saving = threading.Event()
        self.go_on = threading.Event()

    def save(self, bindings: Iterable[AclBinding]) -> None:
        if not self.saving.is_set():
            self.saving.set()
            assert self.go_on.wait(30)
        super().save(bindings)


async def _until(condition: threading.Event) -> None:
    for _ in range(3000):
        if condition.is_set():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def test_an_acl_written_for_a_cancelled_request_is_in_force_and_kept_by_the_next(
    tmp_path: Path,
) -> None:
    """A DENY whose CreateAcls request is cancelled while its file is being written: once
    written it is in force (before: on disk, not enforced until a restart), and a CreateAcls
    that came meanwhile plans from it (before: the cancelled request's lock was released, the
    next one planned from the old ACLs, and its file dropped the DENY)."""
    store = _HeldStore(tmp_path)
    manager = AclManager(store, AuthorizerSettings())
    first = asyncio.create_task(manager.create([_deny("orders")]))
    await _until(store.saving)
    first.cancel()
    second = asyncio.create_task(manager.create([_deny("payments")]))
    await asyncio.sleep(0.05)  # the second is taken in while the first still writes
    store.go_on.set()
    assert await second == [None]
    assert sorted(manager.authorizer) == [_deny("orders"), _deny("payments")]
    assert sorted(AclStore(tmp_path).load()) == [_deny("orders"), _deny("payments")]
    assert first.cancelled()
