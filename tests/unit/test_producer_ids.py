"""The producer id allocator and the producer state it starts above (issue 28).

Kafka hands ids out in blocks recorded before use (`ProducerIdControlManager`, metadata/src/
main/java/org/apache/kafka/controller/ProducerIdControlManager.java); here the block end is
`<data dir>/producer-ids`, and the partitions' producer state is the second record of every id
that was written with, so losing the file never reissues one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from broker.producer_ids import BLOCK
from broker.producer_ids import ProducerIdAllocator
from protocol.record_batch import build_batch
from protocol.record_batch import parse_header
from storage import LogConfig
from storage import LogManager
from storage import SegmentLog
from storage.producer_state import ProducerStateManager

TS = 1_700_000_000_000
REBUILT = "producer-ids file rebuilt from the partitions' producer state"


def test_a_new_data_dir_starts_at_zero_and_records_each_block_first(tmp_path: Path) -> None:
    path = tmp_path / "producer-ids"
    with capture_logs() as logs:
        ids = ProducerIdAllocator(path)
        assert [ids.allocate() for _ in range(3)] == [0, 1, 2]
    assert not logs
    assert path.read_text() == str(BLOCK)
    again = ProducerIdAllocator(path, recorded=2)
    assert again.allocate() == BLOCK  # the rest of the block is never handed out again


@pytest.mark.parametrize(
    ("content", "found"),
    [
        (None, "missing"),
        (b"\xff\xfe garbage", "garbled"),
        (b"", "garbled"),
        (b"-5", "garbled"),
        (b"9" * 30, "garbled"),
        (b"1000", "block end 1000"),  # behind the logs: stale, or restored from a backup
    ],
)
def test_a_lost_garbled_or_stale_file_is_rebuilt_above_every_recorded_id(
    tmp_path: Path, content: bytes | None, found: str
) -> None:
    path = tmp_path / "producer-ids"
    if content is not None:
        path.write_bytes(content)
    with capture_logs() as logs:
        ids = ProducerIdAllocator(path, recorded=1523)
    [line] = logs
    assert line["event"] == REBUILT and line["log_level"] == "warning"
    assert line["found"].startswith(found)
    # The rest of 1523's block and the next one may have gone to producers not yet written.
    assert line["highest_recorded_id"] == 1523 and line["next_id"] == 3000
    assert path.read_text() == "3000"
    assert ids.allocate() == 3000
    assert path.read_text() == "4000"


def test_a_file_ahead_of_the_logs_is_trusted(tmp_path: Path) -> None:
    path = tmp_path / "producer-ids"
    path.write_text("5000\n")
    with capture_logs() as logs:
        ids = ProducerIdAllocator(path, recorded=4999)
    assert not logs
    assert ids.allocate() == 5000


def test_a_block_that_cannot_be_recorded_hands_out_no_id(tmp_path: Path) -> None:
    path = tmp_path / "gone" / "producer-ids"  # every write fails until the directory is back
    ids = ProducerIdAllocator(path)
    with capture_logs() as logs:
        for _ in range(2):
            with pytest.raises(OSError):
                ids.allocate()
        path.parent.mkdir()
        assert ids.allocate() == 0
    assert path.read_text() == str(BLOCK)
    assert [e["log_level"] for e in logs] == ["warning", "info"]  # once per episode


def batch(pid: int, seq: int = 0) -> bytes:
    return build_batch(
        [(None, b"v")], timestamp_ms=TS, producer_id=pid, producer_epoch=0, base_sequence=seq
    )


def test_the_highest_id_outlives_its_producer_and_survives_a_snapshot() -> None:
    state = ProducerStateManager()
    for pid in (7, 42, 3):
        state.update(parse_header(batch(pid)), 0)
    assert state.max_producer_id == 42
    assert state.expire(TS + 10**9, max_age_ms=1) == 3  # every producer expired
    assert state.max_producer_id == 42
    loaded, _ = ProducerStateManager.from_json(state.to_json(5))
    assert loaded.max_producer_id == 42 and not loaded.producers


def test_a_snapshot_from_before_the_field_counts_its_producers() -> None:
    old = b'{"version": 1, "offset": 3, "producers": [[9, 0, 1, []], [4, 0, 1, []]]}'
    state, _ = ProducerStateManager.from_json(old)
    assert state.max_producer_id == 9


def test_an_id_no_allocator_could_issue_does_not_count(tmp_path: Path) -> None:
    """A client may write any producer id; one at the end of the id space must not push the
    allocator there (Kafka's is exhausted past 2**63 - 1 - 1000)."""
    log = SegmentLog.open(tmp_path / "t-0", LogConfig())
    log.append(batch(12), now_ms=TS)
    log.append(batch(2**63 - 1), now_ms=TS)
    assert log.max_producer_id == 12


@pytest.mark.parametrize("snapshot", ["kept", "deleted", "garbled"])
def test_the_highest_id_comes_back_after_a_restart(tmp_path: Path, snapshot: str) -> None:
    directory = tmp_path / "t-0"
    log = SegmentLog.open(directory, LogConfig())
    for pid in (5, 1700, 30):
        log.append(batch(pid), now_ms=TS)
    log.close()
    if snapshot == "deleted":
        (directory / "producer_state.json").unlink()
    elif snapshot == "garbled":
        (directory / "producer_state.json").write_bytes(b"\x00\x01")
    assert SegmentLog.open(directory, LogConfig()).max_producer_id == 1700  # from the headers


async def test_no_id_is_handed_out_until_every_log_is_open(tmp_path: Path) -> None:
    """The broker listens before its logs are open (issue 28, Scale): until every log is read,
    the highest id they hold is not known, so the allocator waits (InitProducerId waits on it,
    then answers COORDINATOR_LOAD_IN_PROGRESS, retriable)."""
    logs = LogManager(tmp_path / "data")
    logs.create_topic("t", 3)
    plog = logs.log("t", 2)
    assert plog is not None
    plog.append(batch(1523), now_ms=TS)
    assert logs.close()
    path = tmp_path / "producer-ids"  # lost: only the log knows of 1523

    logs = LogManager(tmp_path / "data", lazy=True)
    assert logs.max_producer_id() == -1  # nothing read yet: an id handed out now could repeat
    ids = ProducerIdAllocator(path, None)
    assert not ids.started and not await ids.wait_started(0.01)
    with pytest.raises(RuntimeError):
        ids.allocate()
    waiting = asyncio.ensure_future(ids.wait_started(10))
    for _ in logs.open_pending():
        pass
    assert logs.fully_loaded
    with capture_logs():
        ids.start(logs.max_producer_id())
    assert await waiting
    assert ids.allocate() == 3000  # above 1523's block and the next
