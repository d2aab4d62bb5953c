"""Kafka-tool parity of the `shoal` tools (issue 31): subprocesses against one broker process,
each behaviour checked against what Kafka's own tool does (the source is cited per test)."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from collections.abc import Iterator
from contextlib import asynccontextmanager

import pytest
from kio.schema.consumer_group_heartbeat import v1 as heartbeat
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from client.connection import Connection
from tests.brokers import BrokerProcess
from tests.integration.test_cli import _properties
from tests.integration.test_cli import _table
from tests.integration.test_cli import ok
from tests.integration.test_cli import ok_json
from tests.integration.test_cli import shoal
from tests.integration.test_cli import shoal_all

pytestmark = pytest.mark.integration

CG = "consumer-groups"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("parity")
    with BrokerProcess(tmp / "data", extra=["--config", str(_properties(tmp))]) as proc:
        yield proc


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


async def test_reset_of_an_active_group_is_refused_up_front(broker: BrokerProcess) -> None:
    """kafka-consumer-groups.sh resets only an Empty or Dead (or unknown) group, dry run or
    not, and says so with "Assignments can only be reset if the group 'G' is inactive, but
    the current state is S." (`ConsumerGroupCommand.resetOffsets`, apache/kafka tools/).
    Kafka then exits 0; Shoal exits 1, its code for a refusal. Nothing is committed."""
    b = broker.bootstrap
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


async def test_list_with_states_and_types_and_all_groups(broker: BrokerProcess) -> None:
    """`--list --state [S,...]` and `--list --type [T,...]` print GROUP, TYPE and STATE columns
    and filter by them; `--all-groups` describes, resets and deletes every consumer group
    (`ConsumerGroupCommand.listGroups`/`printGroupInfo`, `describeGroups`, `resetOffsets`).
    Classic groups are consumer groups too (`ListGroupsOptions.forConsumerGroups`)."""
    b = broker.bootstrap
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
        code, out, err = shoal(CG, "--reset-offsets", "--all-groups", "--topic", "listed-cg",
                               "--to-earliest", "--execute", bootstrap=b)  # fmt: skip
        assert code == 1 and "'live-one' is inactive" in err, err  # the active one refused
        assert {r[0] for r in _table(out)[1:] if r} >= {"idle-one", "idle-two"}
    for group in ("idle-one", "idle-two"):
        parts = ok_json(CG, "--describe", "--group", group, bootstrap=b)["partitions"]
        assert [p["current_offset"] for p in parts] == [0]
