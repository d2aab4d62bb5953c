"""The partition directories alone are enough to recover every topic (issue 9, item 2).

Losing `__topics/<id>.json` used to start the broker without the topic, and the next
auto-create deleted the old partition directory: 6,000 records gone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from protocol.record_batch import build_batch
from storage import LogManager
from storage import TopicAlreadyExists
from storage.topics import PARTITION_METADATA
from storage.topics import encode_topic_id

TS = 1_700_000_000_000


def fill(logs: LogManager, topic: str, partitions: int, batches: int) -> None:
    for p in range(partitions):
        plog = logs.log(topic, p)
        assert plog is not None
        for i in range(batches):
            plog.append(build_batch([(None, b"%d-%d" % (p, i))] * 10, timestamp_ms=TS), now_ms=TS)


def said_lines(events: list[dict[str, object]]) -> list[dict[str, object]]:
    """What was said about the topic files: not the line every start says about the logs."""
    return [e for e in events if not str(e["event"]).startswith("logs loaded")]


def test_a_lost_topic_file_is_rebuilt_from_the_partition_directories(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    info = logs.create_topic("orders.v1-eu", 3, {"retention.ms": "-1"})
    fill(logs, "orders.v1-eu", 3, 20)
    logs.close()
    text = (tmp_path / "orders.v1-eu-2" / PARTITION_METADATA).read_text()
    assert text == f"version: 0\ntopic_id: {encode_topic_id(info.topic_id)}\n"  # Kafka's form
    for path in (tmp_path / "__topics").glob("*.json"):
        path.unlink()

    with capture_logs() as events:
        logs = LogManager(tmp_path)
    rebuilt = logs.topic("orders.v1-eu")
    assert rebuilt is not None
    assert (rebuilt.topic_id, rebuilt.partitions) == (info.topic_id, 3)
    for p in range(3):
        plog = logs.log("orders.v1-eu", p)
        assert plog is not None and plog.log_end_offset == 200
    said = [e for e in events if e["event"].startswith("topic rebuilt")]
    assert len(said) == 1 and said[0]["topic_id"] == str(info.topic_id)
    with pytest.raises(TopicAlreadyExists):  # an auto-create finds it: nothing is replaced
        logs.create_topic("orders.v1-eu", 1)
    logs.close()
    assert list((tmp_path / "__topics").glob("*.json"))  # written again


def test_directories_from_before_partition_metadata_get_a_new_id(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    logs.create_topic("t", 2)
    fill(logs, "t", 2, 5)
    logs.close()
    for path in [*(tmp_path / "__topics").glob("*.json"), *tmp_path.glob("t-*/partition.metadata")]:
        path.unlink()
    logs = LogManager(tmp_path)
    rebuilt = logs.topic("t")
    assert rebuilt is not None and rebuilt.partitions == 2
    plog = logs.log("t", 1)
    assert plog is not None and plog.log_end_offset == 50
    logs.close()
    assert (tmp_path / "t-0" / PARTITION_METADATA).exists()  # written on open


def test_a_partition_added_but_not_recorded_is_adopted(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    info = logs.create_topic("t", 1)
    logs.create_partitions("t", 3)
    fill(logs, "t", 3, 2)
    logs.close()
    from storage.topics import save_topic

    save_topic(tmp_path / "__topics", info)  # the file as it was before CreatePartitions
    logs = LogManager(tmp_path)
    grown = logs.topic("t")
    assert grown is not None and grown.partitions == 3
    plog = logs.log("t", 2)
    assert plog is not None and plog.log_end_offset == 20


def test_an_interrupted_delete_is_finished_not_undone(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    info = logs.create_topic("gone", 2)
    fill(logs, "gone", 2, 3)
    logs.close()
    # The crash came after the rename that starts a deletion, before the topic file went.
    for p in range(2):
        d = tmp_path / f"gone-{p}"
        d.rename(d.with_name(f"{d.name}.{info.topic_id.hex}-delete"))
    logs = LogManager(tmp_path)
    assert logs.topic("gone") is None
    assert not list(tmp_path.glob("gone-*"))
    assert not list((tmp_path / "__topics").glob("*.json"))


def test_delete_removes_everything_and_a_new_topic_of_that_name_starts_empty(
    tmp_path: Path,
) -> None:
    logs = LogManager(tmp_path)
    logs.create_topic("t", 1)
    fill(logs, "t", 1, 3)
    logs.delete_topic("t")
    assert not list(tmp_path.glob("t-*"))
    again = logs.create_topic("t", 1)
    plog = logs.log("t", 0)
    assert plog is not None and plog.log_end_offset == 0
    logs.close()
    assert LogManager(tmp_path).topic("t") == again


def test_a_create_never_deletes_a_directory_in_its_way(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    stray = tmp_path / "late-0"
    stray.mkdir()
    (stray / "00000000000000000000.log").write_bytes(b"precious")
    logs.create_topic("late", 1)  # the directory appeared after start: set aside, not deleted
    kept = list(tmp_path.glob("late-0.*-orphaned"))
    assert len(kept) == 1
    assert (kept[0] / "00000000000000000000.log").read_bytes() == b"precious"
    plog = logs.log("late", 0)
    assert plog is not None and plog.log_end_offset == 0  # the new partition starts empty


@pytest.mark.parametrize(
    "garble",
    [
        lambda b: b[:30] + b"\xff\xfe",  # cut and noise: not UTF-8 (JSONDecodeError's cousin)
        lambda b: b[: len(b) // 2],  # cut: JSONDecodeError
        lambda b: b"[]",  # JSON, not a topic
        lambda b: b.replace(b'"partitions": 2', b'"partitions": 0'),
        lambda b: b.replace(b'"name": "t"', b'"name": "../etc"'),
        lambda b: b"[" * 100_000,  # nested past the parser's recursion limit
    ],
    ids=["noise", "cut", "not-a-topic", "no-partitions", "bad-name", "deep"],
)
def test_a_garbled_topic_file_is_set_aside_and_the_topic_rebuilt(
    tmp_path: Path, garble: Callable[[bytes], bytes]
) -> None:
    """Issue 28: one garbled `__topics/<id>.json` stopped the broker (JSONDecodeError) and
    with it every other topic; it now costs only that topic's configs, as a lost file does."""
    logs = LogManager(tmp_path)
    info = logs.create_topic("t", 2, {"retention.ms": "-1"})
    other = logs.create_topic("other", 1, {"retention.ms": "1000"})
    fill(logs, "t", 2, 4)
    logs.close()
    path = tmp_path / "__topics" / f"{info.topic_id}.json"
    damaged = garble(path.read_bytes())
    path.write_bytes(damaged)

    with capture_logs() as events:
        logs = LogManager(tmp_path)
    assert logs.topic("other") == other  # untouched, configs and all
    rebuilt = logs.topic("t")
    assert rebuilt is not None and (rebuilt.topic_id, rebuilt.partitions) == (info.topic_id, 2)
    assert rebuilt.configs == {}  # only the garbled file held them
    plog = logs.log("t", 1)
    assert plog is not None and plog.log_end_offset == 40
    [said] = said_lines(events)  # one line, naming what was found and where it was kept
    [kept] = (tmp_path / "__topics").glob(f"{path.name}.corrupt-*")
    assert said["log_level"] == "warning" and said["topic"] == "t"
    assert said["metadata_file"].startswith("unreadable (") and kept.name in said["metadata_file"]
    assert kept.read_bytes() == damaged
    logs.close()
    assert LogManager(tmp_path).topic("t") == rebuilt  # its file was written again


def test_a_garbled_file_of_no_topic_on_disk_is_kept_and_said(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    logs.create_topic("t", 1)
    logs.close()
    stray = tmp_path / "__topics" / "6f1c9a32-3b1e-4c56-9a55-2f0d8f5b2a10.json"
    stray.write_bytes(b"\x00garbage")
    with capture_logs() as events:
        logs = LogManager(tmp_path)
    assert [t.name for t in logs.topics()] == ["t"]
    [said] = said_lines(events)
    assert said["log_level"] == "error" and ".corrupt-" in said["path"]
    assert not stray.exists() and list((tmp_path / "__topics").glob("*.corrupt-*"))
