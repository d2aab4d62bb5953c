"""Topics created, grown and deleted without holding the event loop.

A partition costs two fsyncs to make (6 ms each on an ordinary disk): CreateTopics with 9,000
partitions stalled every client for 14.5 s. The file-system steps of `storage.topic_changes`
(directories, fsyncs, renames, removals) run in a worker thread; logs are opened and closed on
the loop, yielding between slices; the outcome is the synchronous calls'. Changes of one topic
name, or of names that collide (`a.b`, `a_b`), run one after another: a second waits for the
first, then sees its outcome. A change runs to its end even if the client that asked goes
away meanwhile, as a Kafka controller's does, and so does what its handler does once it is made
(`then`: the audit line, a deleted topic's offsets and share state forgotten): a request task
is cancelled when its connection is lost, so steps left to the handler after the change were
skipped for a client that closed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from collections.abc import Coroutine
from collections.abc import Mapping
from typing import Any
from typing import TypeVar

from broker import gc_freeze
from broker.slicing import Slicer
from broker.to_the_end import Changes
from storage.log_manager import LogManager
from storage.topic_changes import NewPartitions
from storage.topic_changes import TopicDeletion
from storage.topic_changes import failed
from storage.topics import TopicInfo
from storage.topics import collision_key

T = TypeVar("T")
_PARTITIONS_A_STEP = 1_000  # partitions' logs given a topic's new configs between pauses


class TopicAdmin:
    def __init__(self, changes: Changes) -> None:
        self._changes = changes
        self._busy: dict[str, asyncio.Event] = {}  # collision key -> set when its change ends

    async def create_topic(
        self,
        logs: LogManager,
        name: str,
        partitions: int,
        configs: Mapping[str, str],
        then: Callable[[TopicInfo], None] | None = None,
    ) -> TopicInfo:
        """`LogManager.create_topic`, off the loop; `then(info)` once it is made, whether or
        not the caller still waits.

        :raises StorageError: as `LogManager.create_topic`.
        """
        return await self._change(
            name, lambda: _add(logs.begin_topic(name, partitions, configs)), then
        )

    async def create_partitions(
        self,
        logs: LogManager,
        name: str,
        new_total: int,
        then: Callable[[TopicInfo], None] | None = None,
    ) -> TopicInfo:
        """`LogManager.create_partitions`, off the loop; `then(info)` as `create_topic`'s."""
        return await self._change(name, lambda: _add(logs.begin_partitions(name, new_total)), then)

    async def delete_topic(
        self, logs: LogManager, name: str, then: Callable[[None], None] | None = None
    ) -> None:
        """`LogManager.delete_topic`, off the loop; `then(None)` as `create_topic`'s."""
        await self._change(name, lambda: _delete(logs.begin_delete(name)), then)

    async def alter_configs(
        self,
        logs: LogManager,
        name: str,
        changes_of: Callable[[Mapping[str, str]], Mapping[str, str | None]],
    ) -> TopicInfo:
        """`LogManager.alter_topic_configs` with the changes `changes_of(the topic's configs)`
        makes, worked out once no other change of `name` runs (an APPEND sees the one before
        it: two alters in order take effect in order), the file written in a thread and the
        partitions' logs changed a slice at a time, to its end if the caller goes.

        :raises StorageError: as `alter_topic_configs`; nothing changed.
        :raises OSError: the file was not written; nothing changed.
        """
        return await self._change(name, lambda: _alter(logs, name, changes_of), None)

    async def _change(
        self,
        name: str,
        start: Callable[[], Coroutine[Any, Any, T]],
        then: Callable[[T], None] | None,
    ) -> T:
        """Run the change `start` makes, and `then` with its outcome, once no other change of
        `name` runs, in a task of its own: both go on if the request's task is cancelled (the
        task has a copy of the request's context: its log lines say who asked)."""
        return await self._changes.to_the_end(self._exclusive(name, start, then))

    async def _exclusive(
        self,
        name: str,
        start: Callable[[], Coroutine[Any, Any, T]],
        then: Callable[[T], None] | None,
    ) -> T:
        key = collision_key(name)
        while (busy := self._busy.get(key)) is not None:
            await busy.wait()
        done = self._busy[key] = asyncio.Event()
        try:
            outcome = await start()
            if then is not None:  # before the next change of the name: it sees this one whole
                then(outcome)
            return outcome
        finally:
            del self._busy[key]
            done.set()


async def _add(change: NewPartitions) -> TopicInfo:
    """`NewPartitions.run_all`, with the file-system steps in a thread and the logs opened a
    slice at a time."""
    try:
        await _in_thread(change.make)
        slicer = Slicer()
        for partition in range(change.first, change.info.partitions):
            change.open(partition)
            await slicer.pause()
        await _in_thread(change.record)
    except OSError as e:
        failed(change, e)
    except BaseException:  # cancelled (the broker stops): leave nothing half made
        change.abandon()
        raise
    info = change.finish()
    gc_freeze.after_bulk(info.partitions - change.first)
    return info


async def _alter(
    logs: LogManager,
    name: str,
    changes_of: Callable[[Mapping[str, str]], Mapping[str, str | None]],
) -> TopicInfo:
    """The configs planned from the topic as it is now, written (a value may be megabytes,
    and the fsyncs take a disk's time), then put in force."""
    current = logs.topic(name)
    altered = logs.plan_topic_configs(name, changes_of(current.configs if current else {}))
    await _in_thread(lambda: logs.save(altered))
    slicer = Slicer()
    total = altered.partitions
    for first in range(0, total, _PARTITIONS_A_STEP):  # a topic may have 100,000
        logs.apply_topic_configs(altered, range(first, min(first + _PARTITIONS_A_STEP, total)))
        await slicer.pause()
    return altered


async def _delete(deletion: TopicDeletion) -> None:
    """`TopicDeletion.run_all`, the same way."""
    try:
        await _in_thread(deletion.move_aside)
    except BaseException:
        deletion.restore()
        raise
    slicer = Slicer()
    for partition in range(deletion.info.partitions):
        deletion.close(partition)
        await slicer.pause()
    await _in_thread(deletion.remove)


async def _in_thread(step: Callable[[], None]) -> None:
    """`step` in a worker thread; if cancelled meanwhile, still wait for it to end (what
    runs next undoes what it did, and must not race it)."""
    future = asyncio.get_running_loop().run_in_executor(None, step)
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await future
        raise
