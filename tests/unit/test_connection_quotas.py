"""Connection limits without sockets: the counts, Kafka's config checks, the log throttle.

Kafka's sources: SocketServer.scala (ConnectionQuotas), KafkaConfig.validateValues,
SocketServerConfigs.java (names and defaults).
"""

from __future__ import annotations

import pytest

from broker.acceptor import LogThrottle
from broker.config import BrokerConfig
from broker.config import parse_ip_overrides
from broker.connection_quotas import ConnectionQuotas


def config(**settings: object) -> BrokerConfig:
    return BrokerConfig.load(environ={}, overrides=settings)


def quotas(**settings: object) -> ConnectionQuotas:
    current = config(**settings)
    return ConnectionQuotas(lambda: current)


def test_kafka_s_names_and_defaults() -> None:
    """SocketServerConfigs: Integer.MAX_VALUE for both limits, backlog 50."""
    c = config()
    assert c.by_name("max.connections") == c.by_name("max.connections.per.ip") == 2**31 - 1
    assert c.by_name("max.connections.per.ip.overrides") == ""
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
    ],
)
def test_kafka_s_checks(settings: dict[str, object], message: str) -> None:
    """KafkaConfig.validateValues: per-IP 0 needs overrides, overrides name valid hosts."""
    with pytest.raises(ValueError, match=message):
        config(**settings)


def test_zero_per_ip_is_fine_with_overrides() -> None:
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
