"""The dead-letter duty (KIP-1191): ARCHIVING records copied to their group's dead-letter
topic, then archived.

The manager tells the duty which share-partitions may hold ARCHIVING records (`note`), and a
broker duty runs it off the fetch path (`run`). For each such share-partition the copies are
appended first and the SHARE_DELTA that archives the records after, so a crash in between
copies them again on recovery (a duplicate, never a loss). Without a usable dead-letter topic
the records are archived as without one, and the problem logged once per group.

`DeadLetters` is the protocol the manager holds; `DeadLetterCopier` the one that copies
(`dead_letter.py` says where to and what is written); `NoDeadLetters` copies nothing and
archives nothing (a share core whose groups have no dead-letter topic: tools and tests).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Sequence
from typing import Protocol

import structlog

from broker.share.dead_letter import Target
from broker.share.dead_letter import dead_letters
from broker.share.dead_letter import resolve
from broker.share.persister import Persister
from broker.share.persister import change_of
from broker.share.share_logs import ShareLogs
from broker.share.share_metrics import ShareMetrics
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from broker.share.window import StateRange
from coordinator.group_configs import GroupConfigs
from protocol.dead_letter import build_dead_letter_batch
from protocol.record_batch import InvalidRecordBatch
from storage.errors import InvalidRecord
from storage.errors import StorageError

log = structlog.get_logger("shoal.share")

# One dead-letter pass copies at most this many records: it runs on the event loop, and 500
# copies with their keys and values take about 30 ms (pointers alone, about 10 ms).
DEAD_LETTER_BUDGET = 500


class DeadLetters(Protocol):
    def note(self, key: SharePartitionKey) -> None:
        """The share-partition may hold ARCHIVING records now (or after a restart)."""
        ...

    def run(self, now_ms: int, budget: int = DEAD_LETTER_BUDGET) -> int:
        """One pass: copy and archive at most about `budget` records; how many were."""
        ...

    def problem(self, group_id: str) -> str | None:
        """The last problem met copying the group's records, until a copy is archived."""
        ...


class NoDeadLetters:
    """Copies nothing: records given up on in a group with a dead-letter topic stay ARCHIVING."""

    def note(self, key: SharePartitionKey) -> None:
        pass

    def run(self, now_ms: int, budget: int = DEAD_LETTER_BUDGET) -> int:
        return 0

    def problem(self, group_id: str) -> str | None:
        return None


class DeadLetterHost(Protocol):
    """What the duty needs of the manager that holds the share-partitions."""

    def loaded(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The share-partition if it is loaded."""
        ...

    def busy(self, key: SharePartitionKey) -> bool:
        """Whether an acknowledgement in progress holds the share-partition's state."""
        ...

    def changed(self, sp: SharePartition, now_ms: int) -> None:
        """Bookkeeping after a change was applied (timer, wake-ups)."""
        ...


class DeadLetterCopier:
    """The duty over real dead-letter topics (see the module docstring)."""

    def __init__(
        self,
        host: DeadLetterHost,
        logs: ShareLogs,
        configs: GroupConfigs,
        persister: Persister,
        metrics: ShareMetrics,
        *,
        prefix: Callable[[], str],
        on_available: Callable[[str, int], None],
    ) -> None:
        self._host = host
        self._logs = logs
        self._configs = configs
        self._persister = persister
        self._metrics = metrics
        self._prefix = prefix
        self._on_available = on_available  # wakes fetchers of the dead-letter topic
        self._pending: set[SharePartitionKey] = set()
        self._problems: dict[str, str] = {}  # group -> the problem last logged
        # Runs copied by a pass whose archiving was not written: not copied again.
        self._copied: dict[SharePartitionKey, list[StateRange]] = {}

    def note(self, key: SharePartitionKey) -> None:
        self._pending.add(key)

    def problem(self, group_id: str) -> str | None:
        return self._problems.get(group_id)

    def run(self, now_ms: int, budget: int = DEAD_LETTER_BUDGET) -> int:
        """Records copied or archived, at most about `budget`."""
        done = 0
        for key in sorted(self._pending):
            if done >= budget:
                break
            if self._host.busy(key):  # its share state is being written: next pass
                continue
            sp = self._host.loaded(*key)
            runs = sp.archiving.runs(budget - done) if sp is not None else []
            if sp is None or not runs:
                self._pending.discard(key)
                continue
            done += self._copy_and_archive(sp, runs, now_ms)
        return done

    def _copy_and_archive(self, sp: SharePartition, runs: list[StateRange], now_ms: int) -> int:
        """One share-partition's part of a pass; how many records it archived."""
        copied = self._copy(sp, runs, now_ms)
        if copied is None:
            return 0  # the disk refused: the records stay ARCHIVING, tried next pass
        changes = sp.archiving.plan_end(runs)
        try:
            self._persister.write(sp.key, change_of(sp, changes), now_ms)
        except StorageError as e:
            # Kept ARCHIVING and noted as copied: the next pass writes the archiving again
            # without another copy (a restart before then copies them once more).
            if copied:
                self._copied[sp.key] = runs
            self._metrics.on_share_state_write_failure()
            self._log_problem(
                sp.group_id,
                f"share state of {sp.group_id} on partition {sp.partition} not written: {e}",
                "dead letters not archived yet; tried again",
            )
            return 0
        self._copied.pop(sp.key, None)
        if copied:
            self._problems.pop(sp.group_id, None)  # a later problem is logged
        archived = sp.archiving.apply_end(changes)
        self._metrics.on_dead_letters(archived, copied=copied)
        self._host.changed(sp, now_ms)
        return archived

    def _copy(self, sp: SharePartition, runs: list[StateRange], now_ms: int) -> bool | None:
        """Copy `runs` to the group's dead-letter partition: True when the copies are there,
        False when they cannot be made (archive without them), None to try again later."""
        source = self._logs.topic_by_id(sp.topic_id)
        target = resolve(
            self._logs,
            self._configs,
            self._prefix(),
            sp.group_id,
            source.name if source else None,
            sp.partition,
        )
        if isinstance(target, str):
            self._log_problem(sp.group_id, target)
            return False
        if target is None:  # the group's dead-letter topic was unset meanwhile
            return False
        if _covered(runs, self._copied.get(sp.key, ())):
            return True  # copied on a pass whose archiving was not written
        return self._append(sp, target, runs, now_ms)

    def _append(
        self, sp: SharePartition, target: Target, runs: list[StateRange], now_ms: int
    ) -> bool | None:
        """Append the copies of `runs`: True when written, False when the topic refuses them
        (archive without a copy), None when the disk refused (try again)."""
        topic = self._logs.topic_by_id(sp.topic_id)
        source = self._logs.log(topic.name, sp.partition) if topic else None
        letters = dead_letters(
            runs,
            sp.archiving.reasons,
            sp.limits().delivery_count_limit,
            source if target.copy_record else None,
        )
        batch = build_dead_letter_batch(
            topic.name if topic else str(sp.topic_id),
            sp.partition,
            sp.group_id,
            letters,
            timestamp_ms=now_ms,
        )
        try:
            target.log.append(batch, now_ms=now_ms)
        except (InvalidRecord, InvalidRecordBatch) as e:  # e.g. compacted: copies need keys
            self._log_problem(
                sp.group_id, f"dead-letter topic {target.topic} refuses the copies: {e}"
            )
            return False
        except StorageError as e:
            self._log_problem(
                sp.group_id,
                f"dead-letter topic {target.topic} not written: {e}",
                "dead letters not copied yet; tried again",
            )
            return None
        self._on_available(target.topic, target.partition)
        return True

    def _log_problem(
        self,
        group_id: str,
        problem: str,
        what: str = "records archived without a dead-letter copy",
    ) -> None:
        """Log `problem` once, until a copy of the group's records succeeds or it changes."""
        if self._problems.get(group_id) != problem:
            self._problems[group_id] = problem
            log.warning(what, problem=problem)


def _covered(runs: Sequence[StateRange], copied: Sequence[StateRange]) -> bool:
    """Whether every offset of `runs` lies in one of the `copied` runs."""
    return all(
        any(c.first_offset <= r.first_offset and r.last_offset <= c.last_offset for c in copied)
        for r in runs
    )
