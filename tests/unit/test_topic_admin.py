"""Topics made and removed in steps (`storage.topic_changes`), the slow ones off the event loop
(`broker.topic_admin`), with the outcome the synchronous calls had (issue 27: CreateTopics of
9,000 partitions held the loop for 14.5 s)."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

from broker.to_the_end import Changes
from broker.topic_admin import TopicAdmin
from storage import InvalidPartitions
from storage import InvalidTopic
from storage import LogManager
from storage import TopicAlreadyExists
from storage import UnknownTopicOrPartition
from storage import log_manager as log_manager_module
from storage.errors import KafkaStorageError
from storage.topics import TopicInfo

PARTITIONS = 40


def topic_files(data: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((data / "__topics").glob("*.json"))]


def test_partitions_being_made_are_unseen_until_finished_but_take_their_room(
    tmp_path: Path,
) -> None:
    logs = LogManager(tmp_path, max_partitions=10)
    change = logs.begin_topic("t", 6)
    assert logs.topic("t") is None and logs.partition_count() == 6
    with pytest.raises(InvalidPartitions, match=r"max\.broker\.partitions"):
        logs.begin_topic("u", 5)
    change.make()
    for p in range(6):
        change.open(p)
    change.record()
    assert logs.topic("t") is None and logs.log("t", 0) is None
    info = change.finish()
    assert logs.topic("t") == info and logs.log("t", 5) is not None
    assert logs.partition_count() == 6
    assert [f["name"] for f in topic_files(tmp_path)] == ["t"]


def test_an_abandoned_change_leaves_nothing_and_frees_its_room(tmp_path: Path) -> None:
    logs = LogManager(tmp_path, max_partitions=10)
    change = logs.begin_topic("t", 6)
    change.make()
    change.open(0)
    change.abandon()
    assert logs.partition_count() == 0 and logs.topic("t") is None
    assert not list(tmp_path.glob("t-*")) and topic_files(tmp_path) == []
    logs.create_topic("t", 10)


async def test_a_topic_is_made_while_the_loop_keeps_turning(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    ticking = asyncio.create_task(ticker())
    try:
        info = await TopicAdmin(Changes()).create_topic(
            logs, "made", PARTITIONS, {"retention.ms": "1000"}
        )
    finally:
        ticking.cancel()
    # 2 fsyncs a partition, in a thread: the loop turned all along (it never did, before).
    assert turns > PARTITIONS
    assert logs.topic("made") == info and info.configs == {"retention.ms": "1000"}
    assert all(logs.log("made", p) is not None for p in range(PARTITIONS))
    assert all((tmp_path / f"made-{p}" / "partition.metadata").exists() for p in range(PARTITIONS))
    assert [(f["name"], f["partitions"]) for f in topic_files(tmp_path)] == [("made", PARTITIONS)]
    logs.close()
    assert LogManager(tmp_path).topic("made") == info  # and it is all on disk


async def test_grown_and_deleted_off_the_loop(tmp_path: Path) -> None:
    logs, admin = LogManager(tmp_path), TopicAdmin(Changes())
    await admin.create_topic(logs, "t", 2, {})
    grown = await admin.create_partitions(logs, "t", 5)
    assert grown.partitions == 5 and logs.log("t", 4) is not None
    await admin.delete_topic(logs, "t")
    assert logs.topic("t") is None and logs.partition_count() == 0
    assert not list(tmp_path.glob("t-*")) and topic_files(tmp_path) == []
    with pytest.raises(UnknownTopicOrPartition):
        await admin.delete_topic(logs, "t")


async def test_changes_of_one_name_run_one_after_another(tmp_path: Path) -> None:
    logs, admin = LogManager(tmp_path), TopicAdmin(Changes())
    first, same, colliding = await asyncio.gather(
        admin.create_topic(logs, "a.b", PARTITIONS, {}),
        admin.create_topic(logs, "a.b", 1, {}),
        admin.create_topic(logs, "a_b", 1, {}),
        return_exceptions=True,
    )
    assert not isinstance(first, BaseException) and first.partitions == PARTITIONS
    assert isinstance(same, TopicAlreadyExists)
    assert isinstance(colliding, InvalidTopic)  # not made beside it: it waited, then collided
    _, remade = await asyncio.gather(
        admin.delete_topic(logs, "a.b"), admin.create_topic(logs, "a.b", 3, {})
    )
    assert logs.topic("a.b") == remade and remade.topic_id != first.topic_id


async def test_a_change_goes_on_when_its_request_is_cancelled(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    asking = asyncio.create_task(TopicAdmin(Changes()).create_topic(logs, "t", PARTITIONS, {}))
    await asyncio.sleep(0.001)
    asking.cancel()
    for _ in range(1000):
        if logs.topic("t") is not None:
            break
        await asyncio.sleep(0.01)
    info = logs.topic("t")
    assert info is not None and info.partitions == PARTITIONS


async def test_a_failed_make_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = LogManager(tmp_path)
    real = log_manager_module.write_partition_metadata
    calls: list[Path] = []

    def failing(directory: Path, topic_id: object) -> None:
        calls.append(directory)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(directory, topic_id)  # type: ignore[arg-type]

    monkeypatch.setattr(log_manager_module, "write_partition_metadata", failing)
    with pytest.raises(KafkaStorageError):
        await TopicAdmin(Changes()).create_topic(logs, "half", 5, {})
    assert logs.topic("half") is None and logs.partition_count() == 0
    assert not list(tmp_path.glob("half-*")) and topic_files(tmp_path) == []


class _HeldSaves(LogManager):
    """Topic files whose next save waits until the test lets it go on (in its thread)."""

    def __init__(self, data: Path) -> None:
        super().__init__(data)
        self.hold = threading.Event()
        self.saving = threading.Event()
        self.go_on = threading.Event()

    def save(self, info: TopicInfo) -> None:  # type: ignore[override]
        if self.hold.is_set():
            self.hold.clear()
            self.saving.set()
            assert self.go_on.wait(30)
        super().save(info)


async def _until(event: threading.Event) -> None:
    for _ in range(3000):
        if event.is_set():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def test_topic_configs_are_written_off_the_loop_in_order_and_to_their_end(
    tmp_path: Path,
) -> None:
    """`TopicAdmin.alter_configs`: the file is written in a thread (a value may be megabytes),
    so the loop turns meanwhile; a second change of the topic waits for the first and is
    worked out from it (an APPEND to `cleanup.policy` keeps what the first set: two alters in
    order take effect in order); the first runs to its end though its caller was cancelled;
    and a change of partitions under way is not undone by either (before, an alter during
    CreatePartitions was lost: the new partitions were registered with the configs from
    before it)."""
    logs = _HeldSaves(tmp_path)
    logs.create_topic("t", 2)
    admin = TopicAdmin(Changes())
    logs.hold.set()
    first = asyncio.create_task(
        admin.alter_configs(logs, "t", lambda now: {"cleanup.policy": "compact"})
    )
    await _until(logs.saving)  # its file being written, in a thread: the loop turns
    seen: list[dict[str, str]] = []

    def append_delete(now: Mapping[str, str]) -> dict[str, str | None]:
        seen.append(dict(now))
        return {"cleanup.policy": now["cleanup.policy"] + ",delete"}

    second = asyncio.create_task(admin.alter_configs(logs, "t", append_delete))
    more = asyncio.create_task(admin.create_partitions(logs, "t", 4))
    await asyncio.sleep(0.05)
    assert not seen and logs.topic("t").configs == {}  # type: ignore[union-attr]
    first.cancel()  # its client went
    logs.go_on.set()
    await second
    await more
    assert first.cancelled()
    assert seen == [{"cleanup.policy": "compact"}]
    info = logs.topic("t")
    assert info is not None and info.partitions == 4
    assert info.configs == {"cleanup.policy": "compact,delete"}
    assert logs.log("t", 3).config.cleanup_policy == "compact,delete"  # type: ignore[union-attr]
    (on_disk,) = topic_files(tmp_path)
    assert (on_disk["partitions"], on_disk["configs"]) == (4, {"cleanup.policy": "compact,delete"})
