"""GroupCommit: the fsyncs asked for in one loop tick run as one batch, off the loop, and a
failed sync fails only the requests of its own log. Fake logs hand out fake syncs (the real
`sync_all` runs them in a real thread pool)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from typing import cast

import pytest

from broker.group_commit import GroupCommit
from storage.log import PartitionLog


class FakeSegment:
    dirty = False


class FakeSync:
    def __init__(self, error: OSError | None) -> None:
        self.segment = FakeSegment()
        self.error = error
        self.ran = False

    def run(self) -> OSError | None:
        self.ran = True
        return self.error


class FakeLog:
    def __init__(self, error: OSError | None = None) -> None:
        self.error = error
        self.syncs: list[FakeSync] = []

    def start_flush(self) -> list[Any]:
        sync = FakeSync(self.error)
        self.syncs.append(sync)
        return [sync]


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool


def as_logs(*logs: FakeLog) -> list[PartitionLog]:
    return [cast(PartitionLog, log) for log in logs]


async def test_requests_of_one_tick_share_one_batch_of_syncs(executor: ThreadPoolExecutor) -> None:
    commit = GroupCommit(executor)
    a, b = FakeLog(), FakeLog()
    results = await asyncio.gather(
        commit.durable(as_logs(a)), commit.durable(as_logs(a, b)), commit.durable(as_logs(b))
    )
    assert results == [set(), set(), set()]
    assert commit.batches == 1
    assert [len(a.syncs), len(b.syncs)] == [1, 1]  # one fsync per log, not per request
    assert all(s.ran for s in a.syncs + b.syncs)


async def test_a_later_tick_gets_its_own_batch(executor: ThreadPoolExecutor) -> None:
    commit = GroupCommit(executor)
    a = FakeLog()
    await commit.durable(as_logs(a))
    await commit.durable(as_logs(a))
    assert commit.batches == 2
    assert len(a.syncs) == 2


async def test_a_failed_sync_fails_only_its_own_log(executor: ThreadPoolExecutor) -> None:
    commit = GroupCommit(executor)
    good, bad = FakeLog(), FakeLog(OSError(5, "Input/output error"))
    both, only_good = await asyncio.gather(
        commit.durable(as_logs(good, bad)), commit.durable(as_logs(good))
    )
    assert both == {id(bad)}
    assert only_good == set()
    assert bad.syncs[0].segment.dirty  # left for the flush duty to sync again
    assert not good.syncs[0].segment.dirty


async def test_nothing_to_sync_answers_at_once(executor: ThreadPoolExecutor) -> None:
    commit = GroupCommit(executor)
    assert await commit.durable([]) == set()
    assert commit.batches == 0
