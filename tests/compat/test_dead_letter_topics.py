"""Dead-letter topics (KIP-1191) with confluent-kafka's real clients.

ShareConsumers REJECT records, or release them until the delivery-count limit; a plain
Consumer then reads the group's dead-letter topic and finds a copy of each with its context
headers. A dead-letter topic that is missing or not opted in leaves the records archived as
without one, and `shoal share-groups describe` says why. The configs are set and described
through AdminClient. The kill -9 test rejects records while the broker is killed and
restarted: every rejection the client saw confirmed reaches the dead-letter topic.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka import Consumer
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import NewTopic

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import describe_group_configs
from tests.compat.support import error_code
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer
from tests.compat.support import share_worker_rows
from tests.compat.support import start_broker
from tests.compat.support import start_share_worker

pytestmark = pytest.mark.compat

INVALID_CONFIG = 40
ENABLE = "errors.deadletterqueue.group.enable"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
COPY = "errors.deadletterqueue.copy.record.enable"
_names = itertools.count()


BROKER_CONFIG = SHORT_SESSION_CONFIG  # the `broker` of tests/compat/conftest.py


def create_dlq_topic(bootstrap: str, name: str, enable: str | None = "true") -> None:
    configs = {} if enable is None else {ENABLE: enable}
    client = admin(bootstrap)
    client.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(10)


def fresh(broker: BrokerProcess, dlq_enable: str | None = "true", **group: str) -> tuple[str, ...]:
    """A topic holding 10 records k0..k9, its dead-letter topic (made unless `dlq_enable` is
    "missing"), and a group reading it from the earliest offset with that dead-letter topic."""
    n = next(_names)
    topic, dlq, name = f"dlq-src{n}", f"dlq.src{n}", f"dlq-g{n}"
    create_topic(broker.bootstrap, topic, 1)
    if dlq_enable != "missing":
        create_dlq_topic(broker.bootstrap, dlq, dlq_enable)
    set_group_configs(
        broker.bootstrap,
        name,
        {"share.auto.offset.reset": "earliest", DLQ_TOPIC: dlq, **group},
    )
    p = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(10):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(10) == 0
    return topic, dlq, name


def run(c: ShareConsumer, decide: dict[bytes, AcknowledgeType], seconds: float) -> list[bytes]:
    """Poll for `seconds`, acknowledging as `decide` says (else ACCEPT); keys delivered."""
    seen: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in poll_records(c, 0.2):
            seen.append(m.key())
            c.acknowledge(m, decide.get(m.key(), AcknowledgeType.ACCEPT))
        c.commit_sync(10)
    return seen


def read_dead_letters(
    bootstrap: str, dlq: str, expected: int, timeout: float = 15
) -> list[tuple[bytes | None, bytes | None, dict[str, str]]]:
    """(key, value, headers) of the dead-letter topic, once it holds `expected` records (or
    the timeout passed, then a little longer to catch any extra)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-reader", **QUIET})
    c.assign([TopicPartition(dlq, 0, 0)])
    out: list[tuple[bytes | None, bytes | None, dict[str, str]]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and len(out) < expected:
            for m in c.consume(1000, timeout=0.5):
                if m.error() is None:
                    headers = {k: v.decode() for k, v in m.headers() or []}
                    out.append((m.key(), m.value(), headers))
    finally:
        c.close()
    return out


def context(topic: str, group: str, offset: int, count: int, reason: str) -> dict[str, str]:
    return {
        "__dlq.errors.topic": topic,
        "__dlq.errors.partition": "0",
        "__dlq.errors.offset": str(offset),
        "__dlq.errors.group": group,
        "__dlq.errors.delivery.count": str(count),
        "__dlq.errors.message": reason,
    }


def explicit(broker: BrokerProcess, group: str, topic: str) -> ShareConsumer:
    c = share_consumer(broker.bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    return c


def test_rejected_records_are_copied_with_their_context_headers(broker: BrokerProcess) -> None:
    topic, dlq, group = fresh(broker, **{COPY: "true"})
    c = explicit(broker, group, topic)
    try:
        seen = run(c, {b"k3": AcknowledgeType.REJECT, b"k7": AcknowledgeType.REJECT}, 4.0)
    finally:
        c.close()
    assert sorted(seen) == [b"k%d" % i for i in range(10)]  # rejected ones never come back
    letters = read_dead_letters(broker.bootstrap, dlq, 2)
    assert letters == [
        (b"k3", b"v3", context(topic, group, 3, 1, "Offset rejected by client.")),
        (b"k7", b"v7", context(topic, group, 7, 1, "Offset rejected by client.")),
    ]


def test_records_at_the_delivery_count_limit_are_copied(broker: BrokerProcess) -> None:
    topic, dlq, group = fresh(broker, **{"share.delivery.count.limit": "2"})
    c = explicit(broker, group, topic)
    try:
        seen = run(c, {b"k0": AcknowledgeType.RELEASE}, 5.0)
    finally:
        c.close()
    assert seen.count(b"k0") == 2
    (letter,) = read_dead_letters(broker.bootstrap, dlq, 1)
    reason = "Offset delivery count exceeded the threshold."
    # Without errors.deadletterqueue.copy.record.enable the copy is the headers alone.
    assert letter == (None, None, context(topic, group, 0, 2, reason))


def _describe(broker: BrokerProcess, group: str) -> dict[str, object]:
    cmd = [sys.executable, "-m", "cli", "share-groups", "describe", "--group", group, "--json",
           "--bootstrap-server", broker.bootstrap]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)
    desc: dict[str, object] = json.loads(done.stdout)
    return desc


@pytest.mark.parametrize(
    ("dlq_enable", "problem"),
    [
        ("missing", "does not exist"),
        (None, "does not have errors.deadletterqueue.group.enable=true"),
        ("false", "does not have errors.deadletterqueue.group.enable=true"),
    ],
)
def test_an_unusable_dead_letter_topic_archives_and_describe_says_why(
    broker: BrokerProcess, dlq_enable: str | None, problem: str
) -> None:
    topic, dlq, group = fresh(broker, dlq_enable)
    c = explicit(broker, group, topic)
    try:
        first = run(c, {b"k5": AcknowledgeType.REJECT}, 3.0)
        again = run(c, {}, 2.0)
    finally:
        c.close()
    assert sorted(first) == [b"k%d" % i for i in range(10)] and again == []  # archived
    desc = _describe(broker, group)
    assert desc["dead_letter_topic"] == dlq
    assert problem in str(desc["dead_letter_problem"])
    (p0,) = desc["partitions"]  # type: ignore[misc]
    assert p0["lag"] == 0 and p0["archived"] + p0["acknowledged"] >= 0
    if dlq_enable != "missing":
        assert read_dead_letters(broker.bootstrap, dlq, 1, timeout=2) == []


def test_a_usable_dead_letter_topic_is_described_as_ok(broker: BrokerProcess) -> None:
    topic, dlq, group = fresh(broker)
    c = explicit(broker, group, topic)
    try:
        run(c, {}, 2.0)  # the group exists once it has consumed
    finally:
        c.close()
    desc = _describe(broker, group)
    assert (desc["dead_letter_topic"], desc["dead_letter_problem"]) == (dlq, None)


def _alter(resource_type: str, name: str, configs: dict[str, str]) -> ConfigResource:
    return ConfigResource(
        resource_type,
        name,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )


def test_configs_through_admin_client_with_kafkas_rules(broker: BrokerProcess) -> None:
    client = admin(broker.bootstrap)
    group = f"dlq-admin{next(_names)}"
    assert describe_group_configs(broker.bootstrap, group)[DLQ_TOPIC] == ""
    assert describe_group_configs(broker.bootstrap, group)[COPY] == "false"
    refused = []
    for value in ("orders.dlq", "__dlq.x", "dlq.bad name"):  # prefix, internal, illegal
        resource = _alter("group", group, {DLQ_TOPIC: value})
        with pytest.raises(KafkaException) as info:
            client.incremental_alter_configs([resource])[resource].result(10)
        refused.append(error_code(info.value))
    assert refused == [INVALID_CONFIG] * 3
    set_group_configs(broker.bootstrap, group, {DLQ_TOPIC: "dlq.orders", COPY: "true"})
    described = describe_group_configs(broker.bootstrap, group)
    assert (described[DLQ_TOPIC], described[COPY]) == ("dlq.orders", "true")
    # The topic's opt-in: a boolean topic config, false unless set.
    create_dlq_topic(broker.bootstrap, "dlq.orders", None)
    topic = ConfigResource("topic", "dlq.orders")
    assert client.describe_configs([topic])[topic].result(10)[ENABLE].value == "false"
    client.incremental_alter_configs([_alter("topic", "dlq.orders", {ENABLE: "true"})])[
        ConfigResource("topic", "dlq.orders")
    ].result(10)
    assert client.describe_configs([topic])[topic].result(10)[ENABLE].value == "true"
    bad = _alter("topic", "dlq.orders", {ENABLE: "yes"})
    with pytest.raises(KafkaException) as info:
        client.incremental_alter_configs([bad])[bad].result(10)
    assert error_code(info.value) == INVALID_CONFIG
    # The broker's prefix is dynamic; group names are checked against it when set (seed 002).
    cluster = _alter("broker", "1", {"errors.deadletterqueue.topic.name.prefix": "dead."})
    client.incremental_alter_configs([cluster])[cluster].result(10)
    try:
        set_group_configs(broker.bootstrap, group, {DLQ_TOPIC: "dead.orders"})
        with pytest.raises(KafkaException):
            set_group_configs(broker.bootstrap, group, {DLQ_TOPIC: "dlq.orders"})
    finally:
        back = _alter("broker", "1", {"errors.deadletterqueue.topic.name.prefix": "dlq."})
        client.incremental_alter_configs([back])[back].result(10)


RECORDS, KILLS = 3000, 3


def test_kill_9_while_rejecting_loses_no_dead_letter(tmp_path: Path) -> None:
    rng = random.Random(1191)
    data = tmp_path / "data"
    broker = start_broker(data)
    topic, dlq, group = "reject-src", "dlq.reject", "reject-group"
    create_topic(broker.bootstrap, topic, 1)
    create_dlq_topic(broker.bootstrap, dlq)
    set_group_configs(
        broker.bootstrap, group, {"share.auto.offset.reset": "earliest", DLQ_TOPIC: dlq}
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
    for i in range(RECORDS):
        producer.produce(topic, value=b"%d" % i)
        if i % 50 == 0:
            producer.flush(10)
    assert producer.flush(10) == 0
    del producer

    confirmed: set[int] = set()
    for cycle in range(KILLS + 1):
        out = tmp_path / f"cycle-{cycle}.txt"
        out.touch()
        worker = start_share_worker(broker.bootstrap, group, topic, out, mode="reject")
        try:
            if cycle < KILLS:
                time.sleep(rng.uniform(1.5, 3.0))
                broker.kill()  # kill -9 while rejections are being copied
                time.sleep(0.3)
            else:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    done = {o for k, _, o in share_worker_rows(out) if k == "C"}
                    if len(confirmed | done) >= RECORDS:
                        break
                    time.sleep(0.5)
        finally:
            worker.kill()
            worker.wait()
        confirmed |= {o for k, _, o in share_worker_rows(out) if k == "C"}
        if cycle < KILLS:
            broker = start_broker(data)
    try:
        assert confirmed == set(range(RECORDS))  # every record was rejected, in the end
        letters = read_dead_letters(broker.bootstrap, dlq, RECORDS, timeout=30)
    finally:
        broker.stop()
    copied = [int(h["__dlq.errors.offset"]) for _, _, h in letters]
    missing = confirmed - set(copied)
    assert not missing, (
        f"{len(missing)} rejected records never reached {dlq}: {sorted(missing)[:10]}"
    )
    assert set(copied) <= set(range(RECORDS))  # copies of real records only


def _shoal(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cli", *args, "--bootstrap-server", broker.bootstrap]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_configs_through_the_cli(broker: BrokerProcess) -> None:
    n = next(_names)
    group, dlq = f"dlq-cli{n}", f"dlq.cli{n}"
    create_topic(broker.bootstrap, dlq, 1)
    done = _shoal(broker, "configs", "alter", "--entity-type", "topics", "--entity-name", dlq,
                  "--add-config", f"{ENABLE}=true")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = _shoal(broker, "configs", "alter", "--entity-type", "groups", "--entity-name", group,
                  "--add-config", f"{DLQ_TOPIC}={dlq},{COPY}=true")  # fmt: skip
    assert done.returncode == 0, done.stderr
    refused = _shoal(broker, "configs", "alter", "--entity-type", "groups", "--entity-name",
                     group, "--add-config", f"{DLQ_TOPIC}=elsewhere")  # fmt: skip
    assert refused.returncode == 1 and "dlq." in refused.stderr
    shown = _shoal(broker, "configs", "describe", "--entity-type", "groups", "--entity-name",
                   group, "--json")  # fmt: skip
    rows = {r["name"]: r["value"] for r in json.loads(shown.stdout)}
    assert rows == {DLQ_TOPIC: dlq, COPY: "true"}
    topic = _shoal(broker, "configs", "describe", "--entity-type", "topics", "--entity-name",
                   dlq, "--json")  # fmt: skip
    assert {r["name"]: r["value"] for r in json.loads(topic.stdout)} == {ENABLE: "true"}


def test_a_group_reading_its_own_dead_letter_topic_gets_no_copies(broker: BrokerProcess) -> None:
    n = next(_names)
    topic, group = f"dlq.self{n}", f"dlq-self{n}"
    create_dlq_topic(broker.bootstrap, topic)
    set_group_configs(
        broker.bootstrap, group, {"share.auto.offset.reset": "earliest", DLQ_TOPIC: topic}
    )
    p = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    p.produce(topic, key=b"k0", value=b"v0")
    assert p.flush(10) == 0
    c = explicit(broker, group, topic)
    try:
        seen = run(c, {b"k0": AcknowledgeType.REJECT}, 3.0)
        seen += run(c, {}, 2.0)
    finally:
        c.close()
    assert seen == [b"k0"]  # no copy came back to be delivered
    desc = _describe(broker, group)
    assert "is the topic it reads" in str(desc["dead_letter_problem"])
