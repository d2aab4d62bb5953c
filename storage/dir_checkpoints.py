"""What a data dir says a restart may trust: Kafka's clean shutdown marker and recovery points.

As Kafka's LogManager keeps them, one of each for the whole data dir, not one per partition:

- `.kafka_cleanshutdown` (Kafka's `CleanShutdownFileHandler`) is written by a stop that closed
  every log, after everything else, and removed at the next start before any log is opened, so
  a crash while starting is seen as one. With it, nothing is checked past the saved indexes.
- `recovery-point-offset-checkpoint` (Kafka's `OffsetCheckpointFile` layout: a version line,
  a count line, then `topic partition offset` per line) holds, for each partition, the offset
  below which its log was synced. It is written every `log.flush.offset.checkpoint.interval.ms`
  and at stop; after a crash only what lies past a partition's recovery point is read again
  (Kafka's `LogLoader.recoverLog`). A missing or unreadable file means 0 for every partition
  (everything is checked, as Kafka resets it), with one warning.

Older versions marked each log's clean close in its own directory (`.clean_shutdown`, as
`SegmentLog.close` still does for a log closed on its own): `SegmentLog.open` honours such a
marker once and removes it before anything is appended. In a data dir an older version wrote
(no recovery points), `take_log_markers` takes them all at start instead, their directories
synced in threads rather than one by one while the logs open.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import structlog

from storage.fsutil import atomic_write
from storage.fsutil import fsync_dir

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOG_CLEAN_SHUTDOWN = ".clean_shutdown"  # one log's, in its directory
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]

_log = structlog.get_logger("shoal.storage")


def had_clean_shutdown(data_dir: Path) -> bool:
    """Whether the last stop closed every log (read-only: the marker stays)."""
    return (data_dir / CLEAN_SHUTDOWN_FILE).exists()


def take_clean_shutdown(data_dir: Path) -> bool:
    """Whether the last stop closed every log; the marker is removed (durably) before anything
    is opened, so a crash from here on is an unclean shutdown."""
    marker = data_dir / CLEAN_SHUTDOWN_FILE
    if not marker.exists():
        return False
    marker.unlink()
    fsync_dir(data_dir)
    return True


def mark_clean_shutdown(data_dir: Path) -> None:
    """The last thing a clean stop writes (Kafka's content: a version and a broker epoch)."""
    atomic_write(
        data_dir / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": -1}).encode()
    )


def take_log_markers(directories: Iterable[Path], threads: int = 1) -> set[Path]:
    """The log directories that hold a marker of their own (see the module doc); the markers
    are removed, and those directories synced (in `threads` threads) before anything is
    opened, so none can come back after the first append to its log."""
    marked = [d for d in directories if (d / LOG_CLEAN_SHUTDOWN).exists()]
    for directory in marked:
        (directory / LOG_CLEAN_SHUTDOWN).unlink()
    if len(marked) > 1 and threads > 1:
        with ThreadPoolExecutor(threads, thread_name_prefix="shoal-open") as pool:
            list(pool.map(fsync_dir, marked))
    else:
        for directory in marked:
            fsync_dir(directory)
    return set(marked)


def encode_recovery_points(points: Mapping[TopicPartition, int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(points))]
    lines += [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(points.items())
    ]
    return ("\n".join(lines) + "\n").encode()


def parse_recovery_points(text: str) -> dict[TopicPartition, int]:
    """:raises ValueError: not a version-0 checkpoint file with as many entries as it says."""
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError(f"version {lines[0][:20]!r}" if lines else "empty")
    count = int(lines[1])
    entries = [line for line in lines[2:] if line.strip()]
    if count != len(entries):
        raise ValueError(f"{len(entries)} entries, {count} expected")
    points: dict[TopicPartition, int] = {}
    for line in entries:
        topic, partition, offset = line.split()
        if int(partition) < 0 or int(offset) < 0:
            raise ValueError(f"malformed line {line[:80]!r}")
        points[(topic, int(partition))] = int(offset)
    return points


def read_recovery_points(data_dir: Path) -> dict[TopicPartition, int]:
    """Each partition's recovery point; none (everything is checked) without a readable file."""
    path = data_dir / RECOVERY_POINT_FILE
    try:
        return parse_recovery_points(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        _log.warning(
            "recovery-point checkpoint unreadable; logs not closed cleanly are checked whole",
            path=str(path), error=str(e),
        )  # fmt: skip
        return {}


def save_recovery_points(data_dir: Path, points: Mapping[TopicPartition, int]) -> None:
    """Written atomically and synced: readers see the old file or the new one. Any thread.

    :raises OSError: not written (the old file stays: its points are older, so still safe).
    """
    atomic_write(data_dir / RECOVERY_POINT_FILE, encode_recovery_points(points))
