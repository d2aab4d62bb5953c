"""Retention below the Earliest Share Offset keeps every group's share state recoverable.

Two groups on one partition: G1 keeps up (its checkpoints move forward), G2 stalls mid-window
(its Share Checkpoint Offset stays early). Retention with the ESO deletes old segments but never
one holding control records at or after the lowest SCO, and both groups recover exactly. The
same retention without the ESO loses G2's checkpoint: the control shows the guard matters.
"""

from __future__ import annotations

from pathlib import Path

from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_state_persister import ShareStatePersister
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.record_batch import build_batch
from storage.config import LogConfig
from storage.log_manager import LogManager

CONFIG = LogConfig(segment_bytes=1500, retention_ms=1, index_interval_bytes=100)


def _manager(data: Path) -> tuple[LogManager, SharePartitionManager, ShareStatePersister]:
    logs = LogManager(data, CONFIG)
    configs = GroupConfigs(data / "group-configs.json", lambda name: BROKER_DEFAULTS[name][0])
    for group in ("G1", "G2"):
        configs.alter(group, {"share.auto.offset.reset": "earliest"})
    persister = ShareStatePersister(logs, data / "__share_state")
    return logs, SharePartitionManager(logs, configs, persister=persister), persister


def _produce(logs: LogManager, batches: int) -> None:
    plog = logs.log("t", 0)
    assert plog is not None
    for _ in range(batches):
        plog.append(build_batch([(None, b"x" * 20)] * 10, timestamp_ms=1), now_ms=1)


def _consume(
    m: SharePartitionManager, group: str, topic_id: object, upto: int | None = None
) -> None:
    """Fetch everything available; accept all of it, or only offsets below `upto`."""
    while True:
        got = m.fetch(group, "m", topic_id, 0, max_bytes=1 << 20, max_records=500, now_ms=2)  # type: ignore[arg-type]
        if not got.acquired:
            return
        for a in got.acquired:
            last = a.last_offset if upto is None else min(a.last_offset, upto - 1)
            if a.first_offset <= last:
                assert m.acknowledge(group, "m", topic_id, 0, [(a.first_offset, last, [1])], 3) == 0  # type: ignore[arg-type]


def _data_offsets(logs: LogManager, start: int, end: int) -> list[int]:
    plog = logs.log("t", 0)
    assert plog is not None
    offsets: list[int] = []
    position = start
    while position < min(end, plog.log_end_offset):
        spans = plog.batch_spans(position, 1 << 20)  # one segment at a time
        for s in spans:
            if not s.is_control:
                offsets.extend(range(max(s.base_offset, start), min(s.last_offset + 1, end)))
        position = spans[-1].last_offset + 1
    return offsets


def test_cleaning_below_the_eso_keeps_recovery_correct(tmp_path: Path) -> None:
    logs, m, persister = _manager(tmp_path)
    topic = logs.create_topic("t", 1, {})
    tid = topic.topic_id
    _produce(logs, 10)  # 0-99
    _consume(m, "G1", tid)
    _consume(m, "G2", tid)
    _produce(logs, 30)
    _consume(m, "G1", tid)
    _consume(m, "G2", tid, upto=250)  # G2 stalls: records from 250 on stay acquired
    _produce(logs, 60)
    _consume(m, "G1", tid)
    # G2 releases a few records it holds: state only its control records can bring back.
    got = m.fetch("G2", "m", tid, 0, max_bytes=1 << 20, max_records=500, now_ms=4)
    last = got.acquired[-1].last_offset
    assert m.acknowledge("G2", "m", tid, 0, [(last - 4, last, [2])], 5) == 0
    # Control batches past G1's last record are not written down: its next fetch skips them
    # again, so the live and the recovered G1 are compared after one such fetch each.
    assert m.fetch("G1", "m", tid, 0, max_bytes=1 << 20, max_records=500, now_ms=9).acquired == []
    persister.flush_snapshots()
    live = {g: m.get(g, tid, 0, 10) for g in ("G1", "G2")}
    sco = {g: persister.checkpoint_offset(sp.key) for g, sp in live.items() if sp}
    eso = persister.earliest_share_offsets()
    assert eso == {("t", 0): sco["G2"]} and sco["G2"] < sco["G1"]  # type: ignore[operator]

    logs.apply_retention(10**15, eso)
    plog = logs.log("t", 0)
    assert plog is not None and 0 < plog.log_start_offset <= eso[("t", 0)]
    log_start = plog.log_start_offset
    logs.close()

    logs2, m2, _ = _manager(tmp_path)  # a restart
    assert m2.fetch("G1", "m", tid, 0, max_bytes=1 << 20, max_records=500, now_ms=21).acquired == []
    for group, sp in live.items():
        assert sp is not None
        recovered = m2.get(group, tid, 0, 20)
        assert recovered is not None
        # Retention may delete data below the ESO, acknowledged or not (as Kafka's does);
        # it never deletes the control records a group needs. Recovery passes the control
        # batches at the start of the window, as a fetch would: SPSO stops at the first data
        # record the group has not finished.
        start = max(sp.spso, log_start)
        data = set(_data_offsets(logs2, start, recovered.speo))
        assert recovered.spso >= start, group
        for offset in range(start, recovered.spso):
            assert offset not in data or sp.state_of(offset)[0] in (2, 4), (group, offset)
        if recovered.spso < recovered.speo:
            assert recovered.spso in data and sp.state_of(recovered.spso)[0] not in (2, 4)
        # Offset by offset over the data records (control batches are re-skipped on fetch),
        # in durable form: an acquired record is AVAILABLE with its count less one.
        for offset in _data_offsets(logs2, recovered.spso, recovered.speo):
            state, count = sp.state_of(offset)
            durable = (0, count - 1) if state == 1 else (int(state), count)
            assert (int(recovered.state_of(offset)[0]), recovered.state_of(offset)[1]) == durable, (
                offset
            )
        checked = _data_offsets(logs2, recovered.spso, recovered.speo)
        assert group == "G1" or len(checked) >= 20  # G2's window really was compared
        for offset in _data_offsets(logs2, recovered.speo, sp.speo):  # first deliveries
            assert sp.state_of(offset) == (1, 1), offset
    g2 = m2.get("G2", tid, 0, 20)
    assert g2 is not None and g2.state_of(last) == (0, 1)  # the release survived: AVAILABLE, 1
    logs2.close()


def test_without_the_eso_retention_would_lose_a_stalled_groups_checkpoint(tmp_path: Path) -> None:
    logs, m, _ = _manager(tmp_path)
    topic = logs.create_topic("t", 1, {})
    _produce(logs, 10)
    _consume(m, "G2", topic.topic_id, upto=50)  # G2's only checkpoint is its first one
    _produce(logs, 60)
    sp = m.get("G2", topic.topic_id, 0, 10)
    assert sp is not None and sp.spso == 50
    logs.apply_retention(10**15, None)  # no ESO: old segments go, control records with them
    logs.close()

    logs2, m2, _ = _manager(tmp_path)
    recovered = m2.get("G2", topic.topic_id, 0, 20)
    assert recovered is not None and recovered.spso != 50  # the acknowledged position is lost
    logs2.close()


def test_overwrite_agrees_with_a_per_offset_model() -> None:
    """The bisecting range overwrite used by recovery, against a dict of offsets."""
    import itertools
    import random

    from protocol.share_state import StateBatch
    from storage.share_state_store import overwrite

    rng = random.Random(7)
    for _ in range(300):
        states: list[StateBatch] = []
        model: dict[int, tuple[int, int]] = {}
        for _ in range(rng.randint(1, 12)):
            first = rng.randint(0, 60)
            last = first + rng.randint(0, 8)
            ranges = tuple(sorted({(first, last)}))
            delta = tuple(
                StateBatch(f, lst, rng.choice((0, 2, 4)), rng.randint(0, 5)) for f, lst in ranges
            )
            states = overwrite(states, delta)
            for d in delta:
                model.update(
                    {
                        o: (d.state, d.delivery_count)
                        for o in range(d.base_offset, d.last_offset + 1)
                    }
                )
            flat = {
                o: (s.state, s.delivery_count)
                for s in states
                for o in range(s.base_offset, s.last_offset + 1)
            }
            assert flat == model
            assert all(a.last_offset < b.base_offset for a, b in itertools.pairwise(states))


def test_a_checkpoint_not_yet_in_a_snapshot_file_holds_the_eso(tmp_path: Path) -> None:
    """Snapshot files lag their checkpoints, and one may fail to be written while another's
    is. A group whose checkpoint is in no snapshot file yet must still bound retention and
    cleaning: otherwise another group's higher SCO lets its records go, and a restart loses
    its progress."""
    logs, m, persister = _manager(tmp_path)
    tid = logs.create_topic("t", 1, {}).topic_id
    _produce(logs, 10)
    _consume(m, "G1", tid, upto=50)  # G1 checkpoints, then stalls
    g1 = m.get("G1", tid, 0, 3)
    assert g1 is not None
    g1_sco = persister.checkpoint_offset(g1.key)
    _produce(logs, 30)
    _consume(m, "G2", tid)  # G2's checkpoints lie above G1's
    for write in persister.due_snapshots():  # G1's snapshot write fails (say, a full disk)
        if write.group_id == "G2":
            write.run()
            write.done()
    eso = persister.earliest_share_offsets()[("t", 0)]
    assert g1_sco is not None and eso <= g1_sco, (eso, g1_sco)
