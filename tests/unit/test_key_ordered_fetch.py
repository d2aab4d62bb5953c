"""Key-ordered share groups through SharePartitionManager over in-memory logs: keys are read
from the stored batches (any codec) for groups that enable key ordering, and never for others.
"""

from __future__ import annotations

import zlib

import pytest

from broker.share import key_hashes as key_hashes_module
from broker.share.share_partition_manager import SharePartitionManager
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.record_batch import Compression
from protocol.record_batch import build_batch
from protocol.records import StoredBatch
from protocol.records import build_stored_batch
from protocol.records import decode_records
from protocol.records import encode_run
from protocol.records import record_keys
from storage.memory_log import MemoryLogs

ACCEPT = 1


def compressed(pairs: list[tuple[bytes | None, bytes]], codec: Compression) -> bytes:
    _, records = decode_records(build_batch(pairs, timestamp_ms=1))
    fields = StoredBatch(
        base_offset=0, last_offset=len(records) - 1, attributes=codec, base_timestamp=1,
        max_timestamp=1, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        record_count=len(records),
    )  # fmt: skip
    return build_stored_batch(fields, encode_run(records, 0))


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_record_keys_of_a_batch(codec: Compression) -> None:
    pairs: list[tuple[bytes | None, bytes]] = [(b"a", b"1"), (None, b"2"), (b"bb", b"3")]
    batch = build_batch(pairs, timestamp_ms=1) if codec == 0 else compressed(pairs, codec)
    assert record_keys(batch) == [(0, b"a"), (1, None), (2, b"bb")]


class Partition:
    """Topic "t" with one partition holding one batch: keys a, b, a, None, b, a."""

    KEYS = [b"a", b"b", b"a", None, b"b", b"a"]

    def __init__(self, *, ordered: bool) -> None:
        self.logs = MemoryLogs()
        self.topic = self.logs.create_topic("t", 1)
        plog = self.logs.log("t", 0)
        assert plog is not None
        batch = compressed([(k, b"v") for k in self.KEYS], Compression.GZIP)
        plog.append(batch, now_ms=1)
        self.configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
        self.configs.alter(
            "G",
            {
                "share.auto.offset.reset": "earliest",
                "share.key.ordering.enable": str(ordered).lower(),
            },
        )
        self.manager = SharePartitionManager(self.logs, self.configs)

    def fetch(self, member: str, now: int) -> list[int]:
        got = self.manager.fetch(
            "G", member, self.topic.topic_id, 0, max_bytes=1 << 20, max_records=500, now_ms=now
        )
        return [o for a in got.acquired for o in range(a.first_offset, a.last_offset + 1)]

    def accept(self, member: str, offsets: list[int], now: int) -> None:
        batches = [(o, o, [ACCEPT]) for o in offsets]
        assert self.manager.acknowledge("G", member, self.topic.topic_id, 0, batches, now) == 0


def test_one_record_of_each_key_at_a_time_in_offset_order() -> None:
    p = Partition(ordered=True)
    # A lone member owns every key: the first record of a and of b, and the null key.
    assert p.fetch("M", 0) == [0, 1, 3]
    assert p.fetch("M", 1) == []  # a and b are held
    p.accept("M", [0], 2)
    assert p.fetch("M", 3) == [2]  # a's next; b still held
    p.accept("M", [1, 2, 3], 4)
    assert p.fetch("M", 5) == [4, 5]


def test_two_members_split_the_keys_by_hash_range() -> None:
    p = Partition(ordered=True)
    sp = p.manager.get("G", p.topic.topic_id, 0, 0)
    assert sp is not None
    for member in ("A", "B"):  # both fetch (nothing yet), so both own a hash range
        assert sp.acquire(member, [], max_records=500, now_ms=0, keys={}) == []
    owners = ["A", "B"]
    owner = {k: owners[zlib.crc32(k) * 2 >> 32] for k in (b"a", b"b")}
    got = {"A": p.fetch("A", 1), "B": p.fetch("B", 2)}
    want = {m: [o for o in (0, 1) if owner[Partition.KEYS[o] or b""] == m] for m in owners}
    want[owners[0]].append(3)  # the null key goes to whoever fetches first
    assert got == {m: sorted(v) for m, v in want.items()}


def test_default_groups_never_read_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = key_hashes_module.record_keys

    def counting(batch: bytes) -> list[tuple[int, bytes | None]]:
        calls.append(1)
        return real(batch)

    monkeypatch.setattr(key_hashes_module, "record_keys", counting)
    p = Partition(ordered=False)
    assert p.fetch("M", 0) == list(range(6))  # the whole batch, keys or not
    assert calls == []
    q = Partition(ordered=True)
    q.fetch("M", 0)
    assert calls
