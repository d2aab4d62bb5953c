"""`shoal consumer-groups --describe` of live groups, as kafka-consumer-groups.sh shows them:
per-partition owners, `--members` (with `--verbose`: the assignment) and `--state`, for
librdkafka members of a classic and of a KIP-848 group."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.compat.support import create_topic
from tests.integration.test_cli import _table
from tests.integration.test_cli import ok
from tests.integration.test_cli import shoal_all

pytestmark = pytest.mark.compat

CG, TOPIC, PARTITIONS = "consumer-groups", "orders", 4
CONFIG = {
    "group.initial.rebalance.delay.ms": 100,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.heartbeat.interval.ms": 500,
}
# The assignor each protocol's group reports: librdkafka's first classic strategy, and the
# broker's default server-side assignor.
ASSIGNOR = {"classic": "range", "consumer": "uniform"}


BROKER_CONFIG = CONFIG


@pytest.fixture(scope="module", autouse=True)
def _records(module_broker_process: BrokerProcess) -> None:
    """The module's broker holds TOPIC with 40 records over its partitions."""
    bootstrap = module_broker_process.bootstrap
    create_topic(bootstrap, TOPIC, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for i in range(40):
        producer.produce(TOPIC, value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(10) == 0


def _join(bootstrap: str, group: str, protocol: str) -> list[Consumer]:
    """Two members, each holding two partitions, with their positions committed."""
    members = [
        Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"client-{i}",
                  "group.protocol": protocol, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "log_level": 0})
        for i in range(2)
    ]  # fmt: skip
    for m in members:
        m.subscribe([TOPIC])
    deadline = time.monotonic() + 60
    while not all(_caught_up(m) for m in members):
        assert time.monotonic() < deadline, [m.assignment() for m in members]
        for m in members:
            m.consume(100, 0.1)
    for m in members:
        m.commit(asynchronous=False)
    return members


def _caught_up(consumer: Consumer) -> bool:
    """It holds two partitions and has read each to its end (10 records)."""
    held = consumer.assignment()
    return len(held) == 2 and all(tp.offset == 10 for tp in consumer.position(held))


def _held(consumer: Consumer) -> list[int]:
    return sorted(tp.partition for tp in consumer.assignment())


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_describe_shows_members_assignment_and_state(broker: BrokerProcess, protocol: str) -> None:
    b, group = broker.bootstrap, f"auditors-{protocol}"
    members = _join(b, group, protocol)
    held = [_held(m) for m in members]
    try:
        offsets, listed, state, as_json = shoal_all(
            (CG, "--describe", "--group", group),
            (CG, "--describe", "--group", group, "--members", "--verbose"),
            (CG, "--describe", "--group", group, "--state"),
            (CG, "--describe", "--group", group, "--state", "--json"),
            bootstrap=b,
        )
    finally:
        for m in members:
            m.close()
    for code, _, err in (offsets, listed, state, as_json):
        assert code == 0, err

    rows = _table(listed[1])
    assert rows[0][:6] == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                           "#PARTITIONS"]  # fmt: skip
    by_client = {r[4]: r for r in rows[1:]}
    assert sorted(by_client) == ["client-0", "client-1"]
    for i in range(2):
        row = by_client[f"client-{i}"]
        assert row[2] == "-" and row[5] == "2"  # no group.instance.id; two partitions each
        assert row[3] == "127.0.0.1"  # the client's address, without its port
        # The verbose ASSIGNMENT column (for KIP-848: CURRENT- and TARGET-ASSIGNMENT).
        assert f"{TOPIC}({','.join(map(str, held[i]))})" in row

    table = _table(offsets[1])
    assert table[0][-3:] == ["CONSUMER-ID", "HOST", "CLIENT-ID"]
    member_ids = {r[4]: r[1] for r in rows[1:]}
    owners = {int(r[2]): (r[3], r[5], r[6], r[8]) for r in table[1:]}
    assert sorted(owners) == list(range(PARTITIONS))
    for i in range(2):
        for partition in held[i]:
            current, lag, member_id, client = owners[partition]
            assert (current, lag, member_id, client) == ("10", "0", member_ids[f"client-{i}"],
                                                         f"client-{i}")  # fmt: skip

    header, row = _table(state[1])
    assert header == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    assert row == [group, b, "(1)", ASSIGNOR[protocol], "Stable", "2"]  # Shoal is node 1
    described = json.loads(as_json[1])
    assert described["type"] == protocol
    assert (described["state"], described["members"]) == ("Stable", 2)


def test_describe_after_the_members_left(broker: BrokerProcess) -> None:
    b, group = broker.bootstrap, "leavers"
    for m in _join(b, group, "classic"):
        m.close()  # LeaveGroup: the group is Empty, its offsets stay
    listed = ok(CG, "--describe", "--group", group, "--members", bootstrap=b)
    assert listed.strip() == f"Consumer group '{group}' has no active members."
    _, row = _table(ok(CG, "--describe", "--group", group, "--state", bootstrap=b))
    assert row[-2:] == ["Empty", "0"]
    out = ok(CG, "--describe", "--group", group, bootstrap=b)
    assert [r[3] for r in _table(out.split("\n\n", 1)[1])[1:]] == ["10"] * PARTITIONS
    code, _, err = shoal_all((CG, "--describe", "--group", group, "--state", "--members"),
                             bootstrap=b)[0]  # fmt: skip
    assert code == 2 and "exclude each other" in err
