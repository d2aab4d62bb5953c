"""The common ACCEPT's own step (`ShareChanges._accept_sole`: one range, all ACCEPT, exactly
what the member holds from SPSO) against the general path (plan, write, apply) on the same
inputs: a Hypothesis run of produce, fetch, acknowledge, lock expiry and departure steps, done
twice over in-memory logs, once with the step and once without (`share_changes.ACCEPT_SOLE`),
compared after every step: the answer, the window, the share-state bytes in the log, the
fetchers woken, the lock timer's work and every metric sample.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.metrics import BrokerMetrics
from broker.share import share_changes
from broker.share.record_state import AcknowledgeType
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_state_persister import ShareStatePersister
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.record_batch import build_batch
from storage.memory_log import MemoryLogs

GAP, ACCEPT, RELEASE, REJECT, RENEW = (int(t) for t in AcknowledgeType)
MEMBERS = ("m1", "m2")
LOCK_MS = 30_000

# One step of a scenario (all drawn ahead, so both runs take the very same steps).
Step = tuple[Any, ...]


class World:
    """A manager over one topic "t" of MemoryLogs with durable share state."""

    def __init__(self, configs: dict[str, str]) -> None:
        self.logs = MemoryLogs()
        self.topic = self.logs.create_topic("t", 1)
        plog = self.logs.log("t", 0)
        assert plog is not None
        self.plog = plog
        self.configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
        self.configs.alter("G", {"share.auto.offset.reset": "earliest", **configs})
        self.metrics = BrokerMetrics()
        self.woken: list[tuple[str, int]] = []
        self.manager = SharePartitionManager(
            self.logs,
            self.configs,
            lambda t, p: self.woken.append((t, p)),
            persister=ShareStatePersister(self.logs),
            metrics=self.metrics,
        )
        # What each member was last handed, as a client would ACCEPT it next.
        self.held: dict[str, tuple[int, int] | None] = dict.fromkeys(MEMBERS)

    def step(self, s: Step, now: int) -> object:
        kind = s[0]
        tid = self.topic.topic_id
        if kind == "produce":
            self.plog.append(build_batch([(None, b"v")] * s[1], timestamp_ms=now), now_ms=now)
            return self.plog.log_end_offset
        if kind == "fetch":
            got = self.manager.fetch(
                "G", s[1], tid, 0, max_bytes=1 << 20, max_records=s[2], now_ms=now
            )
            acquired = [(a.first_offset, a.last_offset, a.delivery_count) for a in got.acquired]
            if acquired:
                self.held[s[1]] = (acquired[0][0], acquired[-1][1])
            return got.error_code, acquired
        if kind == "ack_held":  # the member ACCEPTs (or else) what it was last handed
            held = self.held[s[1]]
            if held is None:
                return None
            first, last = held[0] + s[3], held[1] + s[4]
            return self.manager.acknowledge("G", s[1], tid, 0, [(first, last, [s[2]])], now)
        if kind == "cycle":  # the steady rate: a record or more, the last ACCEPTed, a fetch
            return (
                self.step(("produce", s[2]), now),
                self.step(("ack_held", s[1], ACCEPT, 0, 0), now),
                self.step(("fetch", s[1], 500), now),
            )
        if kind == "ack":
            return self.manager.acknowledge("G", s[1], tid, 0, s[2], now)
        if kind == "expire":
            return self.manager.expire_locks(now)
        if kind == "depart":
            return self.manager.release_member("G", s[1], now)
        raise AssertionError(kind)

    def seen(self) -> object:
        """Everything the two runs must agree on."""
        sp = self.manager.loaded("G", self.topic.topic_id, 0)
        window = None
        if sp is not None:
            window = (
                sp.spso, sp.speo, sp.in_flight(), sp.acquired_count(), sp.open_records(),
                sp.next_deadline(), sp.state_ranges(),
            )  # fmt: skip
        samples = sorted(
            (s.name, tuple(sorted(s.labels.items())), s.value)
            for m in self.metrics.registry.collect()
            if not m.name.startswith(("process_", "python_"))
            for s in m.samples
            if not s.name.endswith("_created") and "_seconds" not in s.name  # wall clock
        )
        log = self.plog.read(0, 1 << 30) if self.plog.log_end_offset else b""
        return window, log, list(self.woken), samples


@contextmanager
def accept_sole(enabled: bool) -> Iterator[None]:
    before = share_changes.ACCEPT_SOLE
    share_changes.ACCEPT_SOLE = enabled
    try:
        yield
    finally:
        share_changes.ACCEPT_SOLE = before


def run(steps: list[Step], configs: dict[str, str], enabled: bool) -> list[object]:
    with accept_sole(enabled):
        world = World(configs)
        now, out = 1_000, []
        for s in steps:
            now += s[-1]
            out.append((world.step(s[:-1], now), world.seen()))
        return out


CONFIGS = (
    {},
    {"share.delivery.count.limit": "2"},
    {"share.partition.max.record.locks": "100"},  # the bound: a window that holds back
    {"share.key.ordering.enable": "true"},  # holds back too: woken by the ACCEPT
    {"share.acquire.mode": "record_limit"},
)


_dt = st.sampled_from((0, 1, 10, LOCK_MS // 2, LOCK_MS + 1))
_member = st.sampled_from((*MEMBERS, "m1", "m1"))  # mostly one: its ACCEPTs are sole
_type = st.sampled_from((ACCEPT, ACCEPT, ACCEPT, RELEASE, REJECT, GAP))
_shift = st.sampled_from((0, 0, 0, 0, -1, 1))
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.integers(1, 4), _dt),
        st.tuples(st.just("fetch"), _member, st.sampled_from((1, 2, 500)), _dt),
        st.tuples(st.just("ack_held"), _member, _type, _shift, _shift, _dt),
        st.tuples(st.just("ack_held"), _member, st.just(ACCEPT), st.just(0), st.just(0), _dt),
        *[st.tuples(st.just("cycle"), _member, st.integers(1, 3), _dt)] * 4,
        st.tuples(
            st.just("ack"),
            _member,
            st.lists(
                st.tuples(
                    st.integers(0, 12), st.integers(0, 2), st.sampled_from((ACCEPT, REJECT))
                ).map(lambda t: (t[0], t[0] + t[1], [t[2]])),
                min_size=1,
                max_size=2,
            ),
            _dt,
        ),
        st.tuples(st.just("expire"), _dt),
        st.tuples(st.just("depart"), _member, _dt),
    ),
    min_size=1,
    max_size=25,
)
_configs = st.sampled_from(CONFIGS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_steps, configs=_configs)
def test_the_common_accept_does_what_the_general_path_does(
    steps: list[Step], configs: dict[str, str]
) -> None:
    assert run(steps, configs, enabled=True) == run(steps, configs, enabled=False)


@pytest.mark.parametrize("configs", CONFIGS)
@pytest.mark.parametrize("records", [1, 3])
def test_a_steady_rate_accept_takes_the_common_step(
    records: int, configs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steady-rate cycle (a record produced, the one before ACCEPTed, the new one
    fetched) takes the step, with the control batch of the last write behind the held
    records, and leaves the state the general path leaves (the fetchers it wakes too)."""
    steps: list[Step] = [("produce", records, 1), ("fetch", "m1", 500, 1)]
    for _ in range(4):
        steps += [("produce", records, 1), ("ack_held", "m1", ACCEPT, 0, 0, 1)]
        steps += [("fetch", "m1", 500, 1)]
    taken: list[int] = []
    real = share_changes.ShareChanges._accept_sole

    def counting(self: share_changes.ShareChanges, *args: Any) -> ErrorCode:
        taken.append(1)
        return real(self, *args)

    monkeypatch.setattr(share_changes.ShareChanges, "_accept_sole", counting)
    fast = run(steps, configs, enabled=True)
    monkeypatch.undo()
    assert len(taken) == 4
    assert fast == run(steps, configs, enabled=False)
    assert all(code == ErrorCode.none for code, _ in fast[3::3])
