"""Kafka-tool parity of the `shoal` tools (issue 31): subprocesses against one broker process,
each behaviour checked against what Kafka's own tool does (the source is cited per test)."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from kio.schema.consumer_group_heartbeat import v1 as heartbeat
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from client.connection import Connection
from tests.brokers import BrokerProcess
from tests.integration.admin_support import FAST_GROUPS
from tests.integration.test_cli import _table
from tests.integration.test_cli import ok
from tests.integration.test_cli import ok_json
from tests.integration.test_cli import shoal
from tests.integration.test_cli import shoal_all

pytestmark = pytest.mark.integration

CG = "consumer-groups"


BROKER_CONFIG = FAST_GROUPS  # module_broker_process: one broker for the module


@asynccontextmanager
async def _member(b: str, group: str, topic: str) -> AsyncIterator[Connection]:
    """A KIP-848 member of `group`, for the time of the `async with`."""
    host, _, port = b.rpartition(":")
    conn = await Connection.open(host, int(port))
    joined = await conn.request(
        heartbeat.ConsumerGroupHeartbeatRequest(
            group_id=GroupId(group),
            member_id="member-a",
            member_epoch=i32(0),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            subscribed_topic_names=(TopicName(topic),),
            server_assignor="range",
            topic_partitions=(),
        )
    )
    assert joined.error_code == ErrorCode.none
    try:
        yield conn
    finally:
        leave = heartbeat.ConsumerGroupHeartbeatRequest(
            group_id=GroupId(group),
            member_id="member-a",
            member_epoch=i32(-1),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            subscribed_topic_names=None,
            server_assignor=None,
            topic_partitions=None,
        )
        await conn.request(leave)
        await conn.close()


async def test_reset_of_an_active_group_is_refused_up_front(
    module_broker_process: BrokerProcess,
) -> None:
    """kafka-consumer-groups.sh resets only an Empty or Dead (or unknown) group, dry run or
    not, and says so with "Assignments can only be reset if the group 'G' is inactive, but
    the current state is S." (`ConsumerGroupCommand.resetOffsets`, apache/kafka tools/).
    Kafka then exits 0; Shoal exits 1, its code for a refusal. Nothing is committed."""
    b = module_broker_process.bootstrap
    ok("produce", "--topic", "busy-cg", "a", "b", "c", bootstrap=b)
    ok(CG, "--reset-offsets", "--group", "busy-readers", "--topic", "busy-cg", "--to-offset",
       "1", "--execute", bootstrap=b)  # fmt: skip
    async with _member(b, "busy-readers", "busy-cg"):
        for mode in ("--execute", "--dry-run"):
            code, out, err = shoal(CG, "--reset-offsets", "--group", "busy-readers", "--topic",
                                   "busy-cg", "--to-earliest", mode, bootstrap=b)  # fmt: skip
            assert code == 1, (out, err)
            assert "Executed" not in out and "NEW-OFFSET" not in out, out
            assert err.strip() == (
                "shoal: Error: Assignments can only be reset if the group 'busy-readers' is "
                "inactive, but the current state is Stable."
            ), err
        parts = ok_json(CG, "--describe", "--group", "busy-readers", bootstrap=b)["partitions"]
        assert [p["current_offset"] for p in parts] == [1]  # not reset


async def test_list_with_states_and_types_and_all_groups(
    module_broker_process: BrokerProcess,
) -> None:
    """`--list --state [S,...]` and `--list --type [T,...]` print GROUP, TYPE and STATE columns
    and filter by them; `--all-groups` describes, resets and deletes every consumer group
    (`ConsumerGroupCommand.listGroups`/`printGroupInfo`, `describeGroups`, `resetOffsets`).
    Classic groups are consumer groups too (`ListGroupsOptions.forConsumerGroups`)."""
    b = module_broker_process.bootstrap
    ok("produce", "--topic", "listed-cg", "a", "b", bootstrap=b)
    for group in ("idle-one", "idle-two"):
        ok(CG, "--reset-offsets", "--group", group, "--topic", "listed-cg", "--to-offset", "1",
           "--execute", bootstrap=b)  # fmt: skip
    async with _member(b, "live-one", "listed-cg"):
        states, types, stable, bad = shoal_all(
            (CG, "--list", "--state"), (CG, "--list", "--type"),
            (CG, "--list", "--state", "stable"), (CG, "--list", "--state", "Sleepy"),
            bootstrap=b,
        )  # fmt: skip
        rows = _table(states[1])
        assert rows[0] == ["GROUP", "STATE"], states
        assert {tuple(r) for r in rows[1:]} >= {
            ("idle-one", "Empty"), ("idle-two", "Empty"), ("live-one", "Stable")
        }  # fmt: skip
        assert _table(types[1])[0] == ["GROUP", "TYPE"]
        assert ["live-one", "consumer"] in _table(types[1])
        assert _table(stable[1]) == [["GROUP", "STATE"], ["live-one", "Stable"]]
        assert bad[0] == 2 and "Invalid state list 'Sleepy'" in bad[2], bad

        described = ok(CG, "--describe", "--all-groups", bootstrap=b)
        for group in ("idle-one", "idle-two", "live-one"):
            assert f"\n{group} " in f"\n{described}" or f"'{group}'" in described, described
        as_json = ok_json(CG, "--describe", "--all-groups", bootstrap=b)  # one JSON list
        assert {"idle-one", "idle-two", "live-one"} <= {d["group"] for d in as_json}, as_json
        code, out, err = shoal(CG, "--reset-offsets", "--all-groups", "--topic", "listed-cg",
                               "--to-earliest", "--execute", bootstrap=b)  # fmt: skip
        assert code == 1 and "'live-one' is inactive" in err, err  # the active one refused
        assert {r[0] for r in _table(out)[1:] if r} >= {"idle-one", "idle-two"}
    for group in ("idle-one", "idle-two"):
        parts = ok_json(CG, "--describe", "--group", group, bootstrap=b)["partitions"]
        assert [p["current_offset"] for p in parts] == [0]


def test_version_get_offsets_and_keyed_produce(module_broker_process: BrokerProcess) -> None:
    """`--version` prints the version, exit 0 (Kafka's tools: `CommandLineUtils`).
    `get-offsets` is kafka-get-offsets.sh (`GetOffsetShell`): `topic:partition:offset` lines,
    `--time -1/-2/ts`, `--partitions`, a timestamp past the last record leaves the partition
    out, no match is exit 1. The console producer's `--property parse.key=true
    key.separator=:` splits each line at the first separator; a line without one is refused
    with Kafka's message (`LineMessageReader`)."""
    b = module_broker_process.bootstrap
    code, out, _ = shoal("--version")
    assert code == 0 and out.startswith("shoal "), out
    ok("topics", "create", "--topic", "keyed", "--partitions", "2", bootstrap=b)
    code, _, err = shoal("produce", "--topic", "keyed", "--partition", "0", "--property",
                         "parse.key=true", "--property", "key.separator=:", bootstrap=b,
                         stdin="k1:v:1\nk2:v2\n")  # fmt: skip
    assert code == 0, err
    code, _, err = shoal("produce", "--topic", "keyed", "--property", "parse.key=true",
                         bootstrap=b, stdin="a\tb\nno-separator\n")  # fmt: skip
    assert code == 2 and "No key separator found on line number 2: 'no-separator'" in err, err
    read = ok("console-consumer", "--topic", "keyed", "--partition", "0", "--offset",
              "earliest", "--max-messages", "2", "--property", "print.key=true",
              "--property", "key.separator=|", bootstrap=b)  # fmt: skip
    assert read.splitlines() == ["k1|v:1", "k2|v2"]

    latest, earliest, one, future, none = shoal_all(
        ("get-offsets", "--topic", "keyed"), ("get-offsets", "--topic", "keyed", "--time", "-2"),
        ("get-offsets", "--topic", "key.*", "--partitions", "1", "--time", "latest"),
        ("get-offsets", "--topic", "keyed", "--time", str(2**45)),
        ("get-offsets", "--topic", "nothing-like-this"),
        bootstrap=b,
    )  # fmt: skip
    assert latest[1].splitlines() == ["keyed:0:2", "keyed:1:0"], latest
    assert earliest[1].splitlines() == ["keyed:0:0", "keyed:1:0"], earliest
    assert one[1].splitlines() == ["keyed:1:0"], one
    assert (future[0], future[1]) == (0, ""), future
    assert none[0] == 1 and "Could not match any topic-partitions" in none[2], none


def test_topics_describe_prints_kafkas_lines(module_broker_process: BrokerProcess) -> None:
    """kafka-topics.sh --describe: `Topic: T<TAB>TopicId: ..<TAB>PartitionCount: N<TAB>
    ReplicationFactor: 1<TAB>Configs: k=v`, then per partition `<TAB>Topic: T<TAB>Partition:
    P<TAB>Leader: 1<TAB>Replicas: 1<TAB>Isr: 1<TAB>Elr: N/A<TAB>LastKnownElr: N/A`
    (`TopicCommand.TopicDescription/PartitionDescription.printDescription`)."""
    b = module_broker_process.bootstrap
    ok("topics", "create", "--topic", "described", "--partitions", "2", "--config",
       "retention.ms=60000", bootstrap=b)  # fmt: skip
    (info,) = ok_json("topics", "describe", "--topic", "described", bootstrap=b)
    lines = ok("topics", "--describe", "--topic", "described", bootstrap=b).splitlines()
    leader = info["partitions"][0]["leader"]
    assert lines[0] == (
        f"Topic: described\tTopicId: {info['topic_id']}\tPartitionCount: 2\t"
        "ReplicationFactor: 1\tConfigs: retention.ms=60000"
    )
    assert lines[1:] == [
        f"\tTopic: described\tPartition: {p}\tLeader: {leader}\tReplicas: {leader}\t"
        f"Isr: {leader}\tElr: N/A\tLastKnownElr: N/A"
        for p in (0, 1)
    ]


def test_consume_on_a_missing_topic_fails_and_creates_no_group(
    module_broker_process: BrokerProcess,
) -> None:
    b = module_broker_process.bootstrap
    code, _, err = shoal("consume", "--topic", "no-such-topic", "--group", "ghosts",
                           "--timeout", "1", bootstrap=b)  # fmt: skip
    assert code == 1 and "no-such-topic" in err and "UNKNOWN_TOPIC_OR_PARTITION" in err, err
    listed = ok_json("share-groups", "list", bootstrap=b)
    assert "ghosts" not in str(listed), listed
    code, _, err = shoal("console-consumer", "--topic", "no-such-topic", "--timeout-ms", "100",
                         bootstrap=b)  # fmt: skip
    assert code == 1 and "does not exist" in err, err


def test_console_consumer_plain_and_in_a_group(module_broker_process: BrokerProcess) -> None:
    """kafka-console-consumer.sh's main options (`ConsoleConsumerOptions`): a plain read from
    the beginning, one partition from an offset, the usage rules (exit 2), and `--group`:
    a member of the group while it reads, its offsets committed, the next run going on from
    them; `--timeout-ms` ends an idle read with exit 0 and "Processed a total of N messages"."""
    b = module_broker_process.bootstrap
    ok("topics", "create", "--topic", "console", "--partitions", "2", bootstrap=b)
    for partition, values in (("0", "a\nb\nc\n"), ("1", "x\ny\n")):
        code, _, err = shoal("produce", "--topic", "console", "--partition", partition,
                             bootstrap=b, stdin=values)  # fmt: skip
        assert code == 0, err
    plain, one, latest, bad1, bad2, bad3 = shoal_all(
        ("console-consumer", "--topic", "console", "--from-beginning", "--timeout-ms", "1500"),
        ("console-consumer", "--topic", "console", "--partition", "0", "--offset", "1",
         "--max-messages", "2", "--property", "print.offset=true", "--property",
         "print.partition=true", "--property", "print.timestamp=true"),
        ("console-consumer", "--topic", "console", "--timeout-ms", "500"),
        ("console-consumer", "--topic", "console", "--offset", "1"),
        ("console-consumer", "--topic", "console", "--group", "g", "--partition", "0"),
        ("console-consumer", "--topic", "console", "--partition", "0", "--offset", "-3"),
        bootstrap=b,
    )  # fmt: skip
    assert plain[0] == 0 and sorted(plain[1].split()) == ["a", "b", "c", "x", "y"], plain
    assert "Processed a total of 5 messages" in plain[2]
    rows = [line.split("\t") for line in one[1].splitlines()]
    assert [r[1:] for r in rows] == [
        ["Partition:0", "Offset:1", "b"], ["Partition:0", "Offset:2", "c"]
    ]  # fmt: skip
    assert all(r[0].startswith("CreateTime:") for r in rows), rows
    assert latest[0] == 0 and latest[1] == "", latest  # from the end: nothing new
    assert bad1[0] == 2 and "The partition is required when offset is specified." in bad1[2]
    assert bad2[0] == 2 and "Options group and partition cannot be specified together." in bad2[2]
    assert bad3[0] == 2 and "'-3' is incorrect" in bad3[2]

    first = ok("console-consumer", "--topic", "console", "--group", "readers",
               "--from-beginning", "--max-messages", "3", bootstrap=b)  # fmt: skip
    assert len(first.split()) == 3
    described = ok_json(CG, "--describe", "--group", "readers", bootstrap=b)
    assert sum(p["current_offset"] or 0 for p in described["partitions"]) == 3, described
    rest = ok("console-consumer", "--topic", "console", "--group", "readers",
              "--timeout-ms", "1500", bootstrap=b)  # fmt: skip
    assert sorted(first.split() + rest.split()) == ["a", "b", "c", "x", "y"], (first, rest)
    lags = ok_json(CG, "--describe", "--group", "readers", bootstrap=b)["partitions"]
    assert [p["lag"] for p in lags] == [0, 0], lags


def test_configs_entity_type_users(module_broker_process: BrokerProcess) -> None:
    """kafka-configs.sh --entity-type users manages SCRAM credentials (`ConfigCommand`):
    `--add-config 'SCRAM-SHA-256=[iterations=8192,password=P]'`, `--delete-config MECH`,
    and `--describe` printing "SCRAM credential configs for user-principal 'U' are
    SCRAM-SHA-256=iterations=8192, ..."; alter prints "Completed updating config for user U."."""
    b = module_broker_process.bootstrap
    out = ok("configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
             "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
             "SCRAM-SHA-512=[password=alice-secret]", bootstrap=b)  # fmt: skip
    assert out.strip() == "Completed updating config for user alice."
    described = ok("configs", "--describe", "--entity-type", "users", "--entity-name", "alice",
                   bootstrap=b)  # fmt: skip
    assert described.strip() == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    )
    ok("configs", "--alter", "--user", "alice", "--delete-config", "SCRAM-SHA-512", bootstrap=b)
    every = ok("configs", "--describe", "--entity-type", "users", bootstrap=b)
    assert "'alice' are SCRAM-SHA-256=iterations=8192\n" in every, every
    code, _, err = shoal("configs", "--alter", "--entity-type", "users", "--entity-name", "bob",
                         "--add-config", "producer_byte_rate=1024", bootstrap=b)  # fmt: skip
    assert code == 2 and "SCRAM" in err, err


def test_acls_producer_consumer_and_force(tmp_path: Path) -> None:
    """kafka-acls.sh's `--producer` (Write, Describe, Create on the topic; IdempotentWrite on
    the cluster with --idempotent), `--consumer` (Read, Describe on the topic, Read on the
    group, which it requires) and `--force` (`AclCommand`)."""
    props = tmp_path / "broker.properties"
    props.write_text(
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "allow.everyone.if.no.acl.found=true\n"
        "super.users=User:ANONYMOUS\n"  # the tool itself, once the cluster has an ACL
    )
    with BrokerProcess(tmp_path / "data", extra=["--config", str(props)]) as proc:
        _producer_consumer_force(proc.bootstrap)


def _producer_consumer_force(b: str) -> None:
    who = ("--allow-principal", "User:carol")
    ok("acls", "--add", *who, "--producer", "--idempotent", "--topic", "orders", bootstrap=b)
    ok("acls", "--add", *who, "--consumer", "--topic", "orders", "--group", "billing",
       bootstrap=b)  # fmt: skip
    rows = ok_json("acls", "--list", "--principal", "User:carol", bootstrap=b)
    got = {(r["resource_type"], r["name"], r["operation"]) for r in rows}
    assert got == {
        ("TOPIC", "orders", "WRITE"), ("TOPIC", "orders", "DESCRIBE"),
        ("TOPIC", "orders", "CREATE"), ("TOPIC", "orders", "READ"),
        ("GROUP", "billing", "READ"), ("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"),
    }, got  # fmt: skip
    code, _, err = shoal("acls", "--add", *who, "--consumer", "--topic", "orders", bootstrap=b)
    assert code == 2 and "With --consumer you must specify a --group" in err, err
    ok("acls", "--remove", *who, "--consumer", "--topic", "orders", "--group", "billing",
       "--force", bootstrap=b)  # fmt: skip
    left = {r["operation"] for r in ok_json("acls", "--list", "--principal", "User:carol",
                                             bootstrap=b)}  # fmt: skip
    assert left == {"WRITE", "CREATE", "IDEMPOTENT_WRITE"}, left  # Describe was shared
