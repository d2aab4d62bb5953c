"""Static ownership for `shoal serve --processes N` (issue 33, docs/multicore.md): who leads a
partition, who coordinates a group, which producer ids a process hands out, and what a process
that is not the controller sees of the topics the controller makes.

Kafka maps a group to the `__consumer_offsets` partition `abs(hashCode(group id)) % partitions`
(`GroupCoordinatorService.partitionFor`); here one hash (crc32) picks the node directly.
"""

from __future__ import annotations

import json
import os
import uuid
import zlib
from collections.abc import Iterable
from pathlib import Path

import pytest

from broker.ownership import Ownership
from broker.producer_ids import ProducerIdAllocator
from protocol.record_batch import build_batch
from storage import LogManager
from storage.topics import TopicInfo
from storage.topics import UnreadableTopicFile
from storage.topics import topic_file_stats

TS = 1_700_000_000_000


def test_one_process_owns_everything_under_its_configured_node_id() -> None:
    one = Ownership(node_id=7)
    topic = uuid.uuid4()
    assert [one.leader(topic, p) for p in range(4)] == [7, 7, 7, 7]
    assert one.coordinator("any group") == 7 and one.controller_id == 7
    assert one.leads(topic, 3) and one.coordinates("g") and one.is_controller
    assert list(one.node_ids()) == [7]
    assert one.node_dir(Path("/d")) == Path("/d")  # N = 1: the data dir as before


def test_partitions_and_groups_spread_by_crc32_over_n_nodes() -> None:
    topic = uuid.UUID("6f1c1a49-8f0e-4c55-9a44-0d3b8a4f8a10")
    first = zlib.crc32(topic.bytes) % 3
    nodes = [Ownership(node_id=n, nodes=3) for n in range(3)]
    for p in range(9):
        leaders = [o.node_id for o in nodes if o.leads(topic, p)]
        assert leaders == [(first + p) % 3]  # exactly one leader, the static one
    for group in ("orders", "billing", "g1", ""):
        owners = [o.node_id for o in nodes if o.coordinates(group)]
        assert owners == [zlib.crc32(group.encode()) % 3]
    assert [o.is_controller for o in nodes] == [True, False, False]
    assert nodes[2].port_of(0, 9094) == 9092 and nodes[0].port_of(2, 9092) == 9094
    assert nodes[1].node_dir(Path("/d")) == Path("/d/__nodes/1")


def test_producer_ids_of_n_processes_never_meet(tmp_path: Path) -> None:
    """Ids node + N*k: each process its own block file, none talks to another."""
    handed: list[set[int]] = []
    for node in range(3):
        ids = ProducerIdAllocator(tmp_path / f"ids-{node}", stride=3, offset=node)
        handed.append({ids.allocate() for _ in range(2500)})  # across block ends
        assert all(pid % 3 == node for pid in handed[-1])
    assert not (handed[0] & handed[1]) and not (handed[1] & handed[2])


def test_a_restarted_process_starts_above_its_own_recorded_ids(tmp_path: Path) -> None:
    path = tmp_path / "ids"
    # The logs hold id 3 * 40 + 1 = 121 (node 1's), the file is lost.
    ids = ProducerIdAllocator(path, recorded=121, stride=3, offset=1)
    first = ids.allocate()
    assert first > 121 and first % 3 == 1


def test_a_follower_serves_the_controllers_topics_and_opens_only_its_own(tmp_path: Path) -> None:
    """Node 0 makes the topic (every directory, its own logs); node 1 reads `__topics` when it
    changes, opens only the partitions it leads, and closes them when the topic is deleted."""
    owners = [Ownership(n, 2) for n in range(2)]
    controller, follower = (
        LogManager(
            tmp_path, node_dir=o.node_dir(tmp_path), owns=o.leads, writes_topics=o.is_controller
        )
        for o in owners
    )
    assert not follower.refresh_topics()  # nothing changed: one stat, nothing read
    info = controller.create_topic("t", 4)
    assert follower.topic("t") is None
    assert follower.refresh_topics()
    assert follower.topic("t") == info
    for p in range(4):
        mine = owners[1].leads(info.topic_id, p)
        assert (follower.log("t", p) is not None) == mine
        assert (controller.log("t", p) is not None) == (not mine)
        assert follower.led_elsewhere("t", p) == (not mine)
    theirs = next(p for p in range(4) if owners[1].leads(info.topic_id, p))
    plog = follower.log("t", theirs)
    assert plog is not None
    plog.append(build_batch([(None, b"v")], timestamp_ms=TS), now_ms=TS)
    controller.delete_topic("t")
    assert follower.refresh_topics()
    assert follower.topic("t") is None and follower.log("t", theirs) is None
    assert controller.close() and follower.close()
    assert (tmp_path / "__nodes" / "1" / ".kafka_cleanshutdown").exists()


def _pair(tmp_path: Path) -> tuple[LogManager, LogManager]:
    owners = [Ownership(n, 2) for n in range(2)]
    controller, follower = (
        LogManager(
            tmp_path, node_dir=o.node_dir(tmp_path), owns=o.leads, writes_topics=o.is_controller
        )
        for o in owners
    )
    return controller, follower


def test_a_follower_reads_only_the_topic_files_made_or_replaced_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each refresh lists `__topics` and reads the files whose version (inode) moved: a new
    topic, a config change (a new file renamed into place), not the others; a file gone or no
    longer readable stops the topic being served, as when every file was read."""
    from storage import log_manager

    controller, follower = _pair(tmp_path)
    kept = controller.create_topic("kept", 1)
    changed = controller.create_topic("changed", 1)
    assert follower.refresh_topics()
    reads: list[list[str]] = []
    read = log_manager.read_topic_files

    def counted(paths: Iterable[Path]) -> tuple[list[TopicInfo], list[UnreadableTopicFile]]:
        listed = list(paths)
        reads.append(sorted(p.name for p in listed))
        return read(listed)

    monkeypatch.setattr(log_manager, "read_topic_files", counted)
    made = controller.create_topic("made", 2)
    controller.alter_topic_configs("changed", {"retention.ms": "1000"})
    assert follower.refresh_topics()
    assert reads == [sorted([f"{made.topic_id}.json", f"{changed.topic_id}.json"])]
    assert follower.topic("made") == made
    changed_now = follower.topic("changed")
    assert changed_now is not None and changed_now.configs == {"retention.ms": "1000"}
    assert follower.topic("kept") == kept
    assert not follower.refresh_topics()  # nothing moved: one stat
    garbled = tmp_path / "__topics" / "garbled.tmp"  # a new version, renamed into place
    garbled.write_bytes(b"{garbled")
    garbled.rename(tmp_path / "__topics" / f"{kept.topic_id}.json")
    controller.delete_topic("made")
    assert follower.refresh_topics()
    assert reads[-1] == [f"{kept.topic_id}.json"]
    assert follower.topic("kept") is None and follower.topic("made") is None
    assert follower.topic("changed") is not None
    assert controller.close()
    follower.close()  # "kept"'s log, if it led it, dropped as a deleted topic's: not clean


def test_a_topic_file_replaced_with_its_inode_reused_is_read_again_after_the_stat_check(
    tmp_path: Path,
) -> None:
    """`refresh_topics` goes by inode, and ext4 gives a new file the inode just freed: a topic
    file replaced twice between two looks can show the inode the follower read (this machine's
    ext4 gave 718, 719, 718 to three versions of one file). Modelled deterministically by
    rewriting the file in place (same inode, new content) and moving the directory's stamp
    as a rename does: the inode scan misses it; the threaded stat check
    (`controller_link.recheck_topic_files`) finds it and the next refresh reads it."""
    controller, follower = _pair(tmp_path)
    controller.create_topic("grown", 1)
    assert follower.refresh_topics()
    meta = tmp_path / "__topics"
    (path,) = meta.glob("*.json")
    first = path.stat()
    doc = json.loads(path.read_bytes())
    doc["partitions"], doc["configs"] = 3, {"retention.ms": "1000"}
    path.write_text(json.dumps(doc))  # in place: the inode kept, as a reused one
    later = first.st_mtime_ns + 1_000_000_000  # a later write, at any clock granularity
    os.utime(path, ns=(later, later))
    inode = first.st_ino
    assert path.stat().st_ino == inode
    (meta / ".stamp.tmp").write_bytes(b"")  # the directory moves, as the renames moved it
    (meta / ".stamp.tmp").unlink()
    follower.refresh_topics()
    stale = follower.topic("grown")
    assert stale is not None and stale.partitions == 1  # the inode scan alone misses it
    stamp = follower.topic_files_unchecked()
    assert stamp is not None
    follower.recheck_topic_files(stamp, topic_file_stats(meta))
    assert follower.topic_files_unchecked() is None  # checked: nothing moved since
    assert follower.refresh_topics()
    now = follower.topic("grown")
    assert now is not None and now.partitions == 3 and now.configs == {"retention.ms": "1000"}
    assert controller.close()
    follower.close()
