"""Connection limits without sockets: the counts, Kafka's config checks, the log throttle, and
the idle sweep over real KafkaConnections on a recording transport, on a fake clock.

Kafka's sources: SocketServer.scala (ConnectionQuotas), KafkaConfig.validateValues,
Selector.java (IdleExpiryManager), SocketServerConfigs.java (names and defaults).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.acceptor import LogThrottle
from broker.config import BrokerConfig
from broker.config import parse_ip_overrides
from broker.connection import KafkaConnection
from broker.connection_quotas import ConnectionQuotas
from broker.connection_sweep import CLOSE_BUDGET
from broker.connection_sweep import SCAN_BUDGET
from broker.connection_sweep import SWEEP_MIN_MS
from broker.connection_sweep import ConnectionSweep
from broker.connection_sweep import sweep_interval_ms
from tests.unit.test_connection import Wire
from tests.unit.test_connection import request
from tests.unit.test_connection import settle


def config(**settings: object) -> BrokerConfig:
    return BrokerConfig.load(environ={}, overrides=settings)


def quotas(**settings: object) -> ConnectionQuotas:
    current = config(**settings)
    return ConnectionQuotas(lambda: current)


def test_kafka_s_names_and_defaults() -> None:
    """SocketServerConfigs: Integer.MAX_VALUE for both limits, 10 minutes idle, backlog 50."""
    c = config()
    assert c.by_name("max.connections") == c.by_name("max.connections.per.ip") == 2**31 - 1
    assert c.by_name("max.connections.per.ip.overrides") == ""
    assert c.by_name("connections.max.idle.ms") == 600_000
    assert c.by_name("socket.listen.backlog.size") == 50


def test_overrides_parse_addresses_and_host_names() -> None:
    assert parse_ip_overrides("hostName:100, 127.0.0.1:200,::1:3,[fe80::1]:4") == {
        "hostName": 100,
        "127.0.0.1": 200,
        "::1": 3,
        "fe80::1": 4,
    }
    assert parse_ip_overrides("") == {}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max.connections.per.ip.overrides": "host"}, "not host:count"),
        ({"max.connections.per.ip.overrides": "host:-1"}, "not host:count"),
        ({"max.connections.per.ip.overrides": "bad_host!:1"}, "invalid addresses"),
        ({"max.connections.per.ip": 0}, "can be set to zero only if"),
        ({"max.connections": -1}, "below the minimum 0"),
        ({"connections.max.idle.ms": 100}, "connections.max.idle.ms=100"),  # the auth delay
    ],
)
def test_kafka_s_checks(settings: dict[str, object], message: str) -> None:
    """KafkaConfig.validateValues: per-IP 0 needs overrides, overrides name valid hosts, a
    failed login is answered before the connection could idle out."""
    with pytest.raises(ValueError, match=message):
        config(**settings)


def test_negative_idle_means_never_and_zero_per_ip_is_fine_with_overrides() -> None:
    config(**{"connections.max.idle.ms": -1})
    config(**{"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "10.0.0.1:5"})


def test_the_per_ip_limit_counts_every_listener_and_an_override_wins() -> None:
    q = quotas(**{"max.connections.per.ip": 2})
    q.ip_overrides = {"10.0.0.9": 0}
    a, b = q.admit("PLAINTEXT", "10.0.0.1"), q.admit("SSL", "10.0.0.1")
    assert a is not None and b is not None
    assert q.admit("PLAINTEXT", "10.0.0.1") is None
    assert q.admit("PLAINTEXT", "10.0.0.9") is None
    assert q.listener("PLAINTEXT").refused_per_ip == 2
    a.release()
    a.release()  # a second release changes nothing
    assert q.connections_from("10.0.0.1") == 1 and q.total == 1
    assert q.admit("PLAINTEXT", "10.0.0.1") is not None
    counts = q.listener("PLAINTEXT")
    assert (counts.open, counts.created, counts.closed) == (1, 2, 1)


def test_a_slot_freed_under_max_connections_wakes_the_acceptors() -> None:
    q = quotas(**{"max.connections": 1})
    woken: list[str] = []
    q.on_slot(lambda: woken.append("slot"))
    slot = q.admit("PLAINTEXT", "10.0.0.1")
    assert slot is not None and not q.slot_available()
    slot.release()
    assert q.slot_available() and woken == ["slot"]


def test_the_log_throttle_writes_one_line_a_second_counting_those_held_back() -> None:
    now = [0.0]
    throttle = LogThrottle(1.0, clock=lambda: now[0])
    assert throttle.admit() == 0
    assert throttle.admit() is None and throttle.admit() is None
    now[0] = 1.0
    assert throttle.admit() == 2


def test_the_sweep_runs_often_enough_for_the_limit() -> None:
    assert sweep_interval_ms(config()) == 1000
    assert sweep_interval_ms(config(**{"connections.max.idle.ms": 400})) == 100
    assert sweep_interval_ms(config(**{"connections.max.idle.ms": -1})) == 1000


class Clock:
    """The sweep's clock, moved by hand; it starts at the monotonic time reads are stamped
    with (`KafkaConnection.data_received`)."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


def sweep_over(
    wires: list[Wire], clock: Clock, **settings: object
) -> tuple[ConnectionSweep, ConnectionQuotas]:
    current = config(**settings)
    connections: set[KafkaConnection] = {w.connection for w in wires}
    for w in wires:
        w.connection.last_active = clock.now
    q = ConnectionQuotas(lambda: current)
    return ConnectionSweep(connections, q, lambda: current, clock), q


async def test_a_request_in_flight_is_never_idle_however_long_it_waits(tmp_path: Path) -> None:
    """Idle time counts from the last read (Selector: IdleExpiryManager.update); a connection
    whose request is still being answered (a long poll) is not idle. Once answered it is
    idle from then, and closed after connections.max.idle.ms."""
    idle, waiting = Wire(tmp_path / "a"), Wire(tmp_path / "b")
    clock = Clock()
    sweep, _ = sweep_over([idle, waiting], clock, **{"connections.max.idle.ms": 1000})
    waiting.send(request(1))
    await settle()
    clock.now += 0.999
    sweep.run()
    assert "close" not in idle.timeline  # not yet: idle exactly the limit is not over it
    clock.now += 0.002
    sweep.run()
    assert "close" in idle.timeline
    assert "close" not in waiting.timeline  # 1 s into its request
    clock.now += 5
    sweep.run()
    assert "close" not in waiting.timeline
    waiting.finish(1)
    await settle()
    assert waiting.answers == [1]
    clock.now += 1.001  # from the last sweep that saw it busy
    sweep.run()
    assert "close" in waiting.timeline


async def test_a_lowered_max_connections_closes_the_least_recently_read(tmp_path: Path) -> None:
    wires = [Wire(tmp_path / str(i)) for i in range(3)]
    clock = Clock()
    sweep, q = sweep_over(wires, clock, **{"max.connections": 1})
    for _ in wires:
        q.admit("", "10.0.0.1")
    for w in wires:  # read in order: the last is the most recent
        clock.now += 1
        w.connection.last_active = clock.now
    sweep.run()
    assert ["close" in w.timeline for w in wires] == [True, True, False]
    assert q.listener("").closed_excess == 2


class Idle:
    """A connection idle since `last_active`: what the sweep reads of a KafkaConnection. Once
    expired it leaves `connections`, as a lost KafkaConnection leaves the server's set."""

    def __init__(self, last_active: float, connections: set[Idle]) -> None:
        self.last_active = last_active
        self.closing = False
        self.listener_name = "PLAINTEXT"
        self.peer = "10.0.0.1:1"
        self.looked_at = 0
        self._connections = connections
        connections.add(self)

    def idle_for(self, now: float) -> float:
        self.looked_at += 1
        return now - self.last_active

    def expire(self) -> None:
        self.closing = True
        self._connections.discard(self)


def test_thousands_expiring_at_once_are_closed_a_slice_per_run() -> None:
    """Kafka closes one idle connection per poll; Shoal at most CLOSE_BUDGET per run, looking
    at SCAN_BUDGET at most, and runs again soon while behind: no run holds the loop long."""
    clock = Clock()
    conns: set[Idle] = set()
    every = [Idle(clock.now, conns) for _ in range(SCAN_BUDGET + CLOSE_BUDGET + 1)]
    current = config(**{"connections.max.idle.ms": 1000})
    sweep = ConnectionSweep(conns, ConnectionQuotas(lambda: current), lambda: current, clock)
    sweep.run()
    assert conns == set(every)  # none closed: not idle yet
    assert sum(c.looked_at for c in every) == SCAN_BUDGET
    assert sweep.interval_ms() == SWEEP_MIN_MS  # the pass goes on soon
    clock.now += 2
    closed_per_run = []
    while conns:
        before = len(conns)
        sweep.run()
        closed_per_run.append(before - len(conns))
        assert len(closed_per_run) < 100
    assert max(closed_per_run) == CLOSE_BUDGET
    sweep.run()  # a pass over no connection
    assert sweep.interval_ms() == 250  # back to a quarter of the limit
