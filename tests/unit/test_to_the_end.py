"""Changes made in steps around an await run to their end when the request that asked is
cancelled (its connection lost: `KafkaConnection` cancels its request tasks), and the next
change waits for them (`broker.to_the_end`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from broker.acl_manager import AclManager
from broker.authorizer import AuthorizerSettings
from broker.group_config_saves import GroupConfigSaves
from broker.to_the_end import Changes
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType
from storage.acl_store import AclStore
from tests.brokers import make_server


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
    manager = AclManager(store, AuthorizerSettings(), Changes())
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


class _HeldGroupConfigs(GroupConfigs):
    """Group configs whose first write waits until the test lets it go on; every write says
    whether another was under way beside it (two on the one tmp file)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, lambda name: BROKER_DEFAULTS[name][0])
        self.saving = threading.Event()
        self.go_on = threading.Event()
        self._writing = 0
        self.overlapped = False

    def write(self, configs: dict[str, dict[str, str]]) -> None:
        self._writing += 1
        self.overlapped |= self._writing > 1
        try:
            if not self.saving.is_set():
                self.saving.set()
                assert self.go_on.wait(30)
            super().write(configs)
        finally:
            self._writing -= 1


async def test_a_group_config_written_for_a_cancelled_request_is_saved_before_the_next_write(
    tmp_path: Path,
) -> None:
    """An IncrementalAlterConfigs of a group cancelled while its file is being written: the
    write goes on, is recorded as saved, and holds the lock till then, so the next change's
    write waits for it (before: the cancelled request released the lock, the next write ran
    beside it on the same tmp file, and the first change was taken as never saved)."""
    path = tmp_path / "group-configs.json"
    configs = _HeldGroupConfigs(path)
    saves = GroupConfigSaves(Changes())
    configs.change("g", {"share.auto.offset.reset": "earliest"})
    first = asyncio.create_task(saves.durable(configs))
    await _until(configs.saving)
    first.cancel()
    configs.change("h", {"share.auto.offset.reset": "earliest"})
    second = asyncio.create_task(saves.durable(configs))
    await asyncio.sleep(0.05)  # the second waits while the first still writes
    assert not second.done()
    configs.go_on.set()
    await second
    assert not configs.overlapped
    assert configs.unsaved() is None
    on_disk = GroupConfigs(path, lambda name: BROKER_DEFAULTS[name][0])
    assert on_disk.stored("g") == on_disk.stored("h") == {"share.auto.offset.reset": "earliest"}
    assert first.cancelled()


async def test_a_change_that_fails_after_its_caller_went_is_logged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No one is left to be answered the error: it is said once, in the log."""
    go_on = asyncio.Event()

    async def failing() -> None:
        await go_on.wait()
        raise OSError(28, "No space left on device")

    caller = asyncio.create_task(Changes().to_the_end(failing()))
    await asyncio.sleep(0)
    caller.cancel()
    go_on.set()
    for _ in range(100):
        await asyncio.sleep(0)
    assert caller.cancelled()
    out = capsys.readouterr().out
    assert out.count("a change whose client had gone failed") == 1, out
    assert "No space left on device" in out


async def test_a_servers_stop_waits_for_its_own_changes_not_another_servers(
    tmp_path: Path,
) -> None:
    """Each server keeps its own running changes (`BrokerServices.changes`): before, they were
    one module-level set, so a stopping server waited, up to its shutdown timeout, for a
    change of another server in the same process (the tests' in-process brokers)."""
    first = make_server(tmp_path / "first", **{"shutdown.timeout.ms": 10_000})
    second = make_server(tmp_path / "second", **{"shutdown.timeout.ms": 10_000})
    await first.start()
    await second.start()
    held, mine = asyncio.Event(), asyncio.Event()

    async def seconds_change() -> None:
        await held.wait()

    async def firsts_change() -> None:
        await asyncio.sleep(0.2)
        mine.set()

    others = asyncio.ensure_future(second.services.changes.to_the_end(seconds_change()))
    own = asyncio.ensure_future(first.services.changes.to_the_end(firsts_change()))
    await asyncio.sleep(0)  # begun
    others.cancel()  # their requests are gone; the changes go on
    own.cancel()
    try:
        started = time.monotonic()
        await asyncio.wait_for(first.stop(), 20)
        assert mine.is_set()  # its own change was waited for
        assert time.monotonic() - started < 5.0  # the other's, held, was not (10 s timeout)
    finally:
        held.set()
        await second.stop()
