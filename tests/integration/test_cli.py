"""The `shoal` tools as a user runs them: subprocesses against a broker process (`python -m
broker`, which is what `shoal serve` runs; `shoal serve` itself is run here too).

Checks their own output (tables and --json) and the exit codes scripts rely on: 0 ok, 1 a
Kafka error (or an unknown name), 2 usage, 3 broker unreachable.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from client.share_consumer import ShareConsumer
from tests.brokers import BrokerProcess
from tests.brokers import free_port
from tests.integration.admin_support import FAST_GROUPS
from tests.integration.admin_support import poll_until

pytestmark = pytest.mark.integration


BROKER_CONFIG = FAST_GROUPS  # module_broker_process: one broker for the module


def shoal(*args: str, bootstrap: str | None = None, stdin: str = "") -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m cli ARGS` (what `shoal ARGS` runs)."""
    cmd = [sys.executable, "-m", "cli", *args]
    if bootstrap is not None:
        cmd += ["--bootstrap-server", bootstrap]
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def shoal_all(*calls: tuple[str, ...], bootstrap: str) -> list[tuple[int, str, str]]:
    """Several independent invocations at once (each CLI start costs a few hundred ms)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "cli", *args, "--bootstrap-server", bootstrap],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for args in calls
    ]  # fmt: skip
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=60)
        out.append((proc.returncode, stdout, stderr))
    return out


def ok(*args: str, bootstrap: str | None) -> str:
    code, out, err = shoal(*args, bootstrap=bootstrap)
    assert code == 0, err
    return out


def ok_json(*args: str, bootstrap: str) -> Any:
    return json.loads(ok(*args, "--json", bootstrap=bootstrap))


def _table(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


def test_topics(module_broker_process: BrokerProcess) -> None:
    b = module_broker_process.bootstrap
    out = ok("topics", "create", "--topic", "t1", "--partitions", "3",
             "--config", "retention.ms=60000", bootstrap=b)  # fmt: skip
    assert out.strip() == "Created topic t1."
    dup, listed, described, table, missing = shoal_all(
        ("topics", "create", "--topic", "t1"),
        ("topics", "list"),
        ("topics", "describe", "--topic", "t1", "--json"),
        ("topics", "describe", "--topic", "t1"),
        ("topics", "describe", "--topic", "nope"),
        bootstrap=b,
    )
    assert dup[0] == 1 and dup[2].startswith("shoal: TOPIC_ALREADY_EXISTS")
    assert dup[2].count("\n") == 1  # one line
    assert listed[0] == 0 and "t1" in listed[1].split()
    (desc,) = json.loads(described[1])
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    assert desc["configs"] == {"retention.ms": "60000"}
    assert "PartitionCount: 3" in table[1] and "Configs: retention.ms=60000" in table[1]
    assert missing[0] == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing[2]
    assert ok("topics", "delete", "--topic", "t1", bootstrap=b).strip() == "Deleted topic t1."
    assert "t1" not in ok_json("topics", "list", bootstrap=b)  # other tests share the broker


def test_topics_delete_records(module_broker_process: BrokerProcess, tmp_path: Path) -> None:
    """Like kafka-delete-records.sh: Kafka's offset JSON file, or one partition by options;
    the new low watermark is printed, and ListOffsets EARLIEST then answers it."""
    b = module_broker_process.bootstrap
    ok("topics", "create", "--topic", "purge", "--partitions", "2", bootstrap=b)
    for p in ("0", "1"):
        code, _, err = shoal("produce", "--topic", "purge", "--partition", p, bootstrap=b,
                             stdin="".join(f"v{i}\n" for i in range(10)))  # fmt: skip
        assert code == 0, err
    out = ok("topics", "delete-records", "--topic", "purge", "--partition", "0",
             "--offset", "4", bootstrap=b)  # fmt: skip
    assert out.splitlines() == [
        "Records delete operation completed:", "partition: purge-0\tlow_watermark: 4"
    ]  # fmt: skip
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [
        {"topic": "purge", "partition": 0, "offset": 2},  # below the start: stays at 4
        {"topic": "purge", "partition": 1, "offset": -1},  # everything
    ], "version": 1}))  # fmt: skip
    done = ok_json("topics", "delete-records", "--offset-json-file", str(offsets), bootstrap=b)
    assert done == [
        {"topic": "purge", "partition": 0, "low_watermark": 4},
        {"topic": "purge", "partition": 1, "low_watermark": 10},
    ]
    ok("configs", "alter", "--entity-type", "groups", "--entity-name", "after-purge",
       "--add-config", "share.auto.offset.reset=earliest", bootstrap=b)  # fmt: skip
    lines = ok("consume", "--topic", "purge", "--group", "after-purge", "--json",
               "--max-messages", "6", "--timeout", "5", bootstrap=b).splitlines()  # fmt: skip
    got = sorted((r["partition"], r["offset"]) for r in map(json.loads, lines))
    assert got == [(0, 4), (0, 5), (0, 6), (0, 7), (0, 8), (0, 9)]
    past_end, no_topic, both = shoal_all(
        ("topics", "delete-records", "--topic", "purge", "--partition", "0", "--offset", "999"),
        ("topics", "delete-records", "--topic", "nope", "--partition", "0", "--offset", "1"),
        ("topics", "delete-records", "--offset-json-file", str(offsets), "--topic", "purge"),
        bootstrap=b,
    )
    assert past_end[0] == 1 and past_end[2].startswith("shoal: OFFSET_OUT_OF_RANGE"), past_end
    assert no_topic[0] == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in no_topic[2]
    assert both[0] == 2
    # The module's other tests list every topic and group: leave none behind.
    ok("share-groups", "delete", "--group", "after-purge", bootstrap=b)
    ok("topics", "delete", "--topic", "purge", bootstrap=b)


def test_create_without_partitions_takes_the_brokers_num_partitions(tmp_path: Path) -> None:
    """As kafka-topics.sh: no --partitions sends -1 and the broker's num.partitions decides."""
    props = tmp_path / "broker.properties"
    props.write_text("num.partitions=3\n")
    with BrokerProcess(tmp_path / "data", extra=["--config", str(props)]) as proc:
        b = proc.bootstrap
        made = ok_json("topics", "create", "--topic", "defaulted", bootstrap=b)
        ok("topics", "create", "--topic", "explicit", "--partitions", "2", bootstrap=b)
        described = ok_json("topics", "describe", bootstrap=b)
    assert made["partitions"] == 3
    counts = {t["topic"]: len(t["partitions"]) for t in described}
    assert counts == {"defaulted": 3, "explicit": 2}


def test_share_groups_consume_describe_reset_delete(module_broker_process: BrokerProcess) -> None:
    b = module_broker_process.bootstrap
    ok("topics", "create", "--topic", "jobs", bootstrap=b)
    ok("configs", "alter", "--entity-type", "groups", "--entity-name", "g1",
       "--add-config", "share.auto.offset.reset=earliest", bootstrap=b)  # fmt: skip
    code, out, _ = shoal("produce", "--topic", "jobs", bootstrap=b, stdin="a\nb\nc\nd\ne\n")
    assert code == 0 and out.strip() == "Produced 5 record(s) to jobs."
    out = ok("consume", "--topic", "jobs", "--group", "g1", "--max-messages", "3",
             "--timeout", "5", bootstrap=b)  # fmt: skip
    assert out.split() == ["a", "b", "c"]

    listed, listed_json, offsets_table, dry = shoal_all(
        ("share-groups", "list"),
        ("share-groups", "list", "--json"),
        ("share-groups", "describe", "--group", "g1", "--offsets"),
        ("share-groups", "reset-offsets", "--group", "g1", "--topic", "jobs", "--to-earliest"),
        bootstrap=b,
    )
    assert listed[1].split() == ["g1"]
    assert json.loads(listed_json[1]) == [{"group": "g1", "state": "Empty"}]
    rows = _table(offsets_table[1])
    assert rows[0][:6] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "LAG"]
    assert rows[1][:4] == ["g1", "jobs", "0", "3"] and rows[1][5] == "2"
    assert _table(dry[1])[:2] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"], ["g1", "jobs", "0", "0"]
    ]  # fmt: skip
    desc = ok_json("share-groups", "describe", "--group", "g1", bootstrap=b)
    (p0,) = desc["partitions"]
    assert (desc["state"], desc["members"]) == ("Empty", [])
    # a, b, c accepted; d, e released by the consumer as it left (never acknowledged); the
    # dry run changed nothing.
    assert (p0["start_offset"], p0["lag"], p0["available"], p0["acquired"]) == (3, 2, 2, 0)
    done = ok_json("share-groups", "reset-offsets", "--group", "g1", "--all-topics",
                   "--to-offset", "1", "--execute", bootstrap=b)  # fmt: skip
    assert done["executed"] and done["partitions"] == [
        {"topic": "jobs", "partition": 0, "start_offset": 1}
    ]
    lines = ok("consume", "--topic", "jobs", "--group", "g1", "--json", "--max-messages", "4",
               bootstrap=b).splitlines()  # fmt: skip
    got = [json.loads(line) for line in lines]
    assert [(r["offset"], r["value"], r["delivery_count"]) for r in got] == [
        (1, "b", 1), (2, "c", 1), (3, "d", 1), (4, "e", 1)
    ]  # fmt: skip

    out = ok("share-groups", "delete-offsets", "--group", "g1", "--topic", "jobs", bootstrap=b)
    assert _table(out)[1] == ["g1", "jobs", "Successful"]
    assert ok_json("share-groups", "describe", "--group", "g1", bootstrap=b)["partitions"] == []
    assert ok("share-groups", "delete", "--group", "g1", bootstrap=b).strip() == (
        "Deleted share group g1."
    )
    gone, no_topic = shoal_all(
        ("share-groups", "describe", "--group", "g1"),
        ("share-groups", "reset-offsets", "--group", "g1", "--topic", "nope", "--to-latest"),
        bootstrap=b,
    )
    assert gone[0] == 1 and gone[2].startswith("shoal: GROUP_ID_NOT_FOUND"), gone
    assert no_topic[0] == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in no_topic[2]


def test_consume_release_then_reject(module_broker_process: BrokerProcess) -> None:
    b = module_broker_process.bootstrap
    ok("configs", "alter", "--entity-type", "groups", "--entity-name", "g2",
       "--add-config", "share.auto.offset.reset=earliest", bootstrap=b)  # fmt: skip
    ok("produce", "--topic", "acks", "x", bootstrap=b)
    first = ok_json("consume", "--topic", "acks", "--group", "g2", "--ack", "release",
                    "--max-messages", "1", bootstrap=b)  # fmt: skip
    assert (first["value"], first["delivery_count"]) == ("x", 1)
    second = ok_json("consume", "--topic", "acks", "--group", "g2", "--ack", "reject",
                     "--max-messages", "1", bootstrap=b)  # fmt: skip
    assert (second["offset"], second["delivery_count"]) == (0, 2)
    (p0,) = ok_json("share-groups", "describe", "--group", "g2", bootstrap=b)["partitions"]
    assert p0["lag"] == 0 and p0["start_offset"] >= 1


async def test_reset_of_a_group_with_members_fails(module_broker_process: BrokerProcess) -> None:
    b = module_broker_process.bootstrap
    ok("produce", "--topic", "busy", "x", bootstrap=b)
    async with ShareConsumer(b, "busy-group") as consumer:
        consumer.subscribe(["busy"])
        await poll_until(consumer, 1, timeout_s=1.0)  # joins (the group starts at latest)
        reset = ("--group", "busy-group", "--topic", "busy", "--to-earliest", "--execute")
        code, _, err = shoal("share-groups", "reset-offsets", *reset, bootstrap=b)
        assert code == 1 and err.startswith("shoal: NON_EMPTY_GROUP"), err
        desc = ok_json("share-groups", "describe", "--group", "busy-group", bootstrap=b)
        (member,) = desc["members"]
        assert member["member_id"] == consumer.member_id
        assert member["assignment"] == {"busy": [0]}
        code, _, err = shoal("share-groups", "delete", "--group", "busy-group", bootstrap=b)
        assert code == 1 and "NON_EMPTY_GROUP" in err


def test_configs(module_broker_process: BrokerProcess) -> None:
    b = module_broker_process.bootstrap
    described, not_dynamic, too_big, bad = shoal_all(
        ("configs", "describe", "--entity-type", "brokers", "--entity-name", "1", "--all",
         "--json"),
        ("configs", "alter", "--entity-type", "brokers", "--entity-name", "1",
         "--add-config", "log.dirs=/elsewhere"),
        ("configs", "alter", "--entity-type", "groups", "--entity-name", "g",
         "--add-config", "share.delivery.count.limit=99"),
        ("configs", "alter", "--entity-type", "groups", "--entity-name", "g",
         "--add-config", "oops"),
        bootstrap=b,
    )  # fmt: skip
    by_name = {e["name"]: e for e in json.loads(described[1])}
    assert by_name["group.share.heartbeat.interval.ms"]["value"] == "200"
    assert by_name["group.share.heartbeat.interval.ms"]["source"] == "STATIC_BROKER_CONFIG"
    assert by_name["log.dirs"]["read_only"] is True
    assert not by_name["group.share.max.size"]["read_only"]
    assert not_dynamic[0] == 1 and not_dynamic[2].startswith("shoal: INVALID_REQUEST")
    assert "Cannot update these configs dynamically: Set(log.dirs)" in not_dynamic[2]
    assert too_big[0] == 1 and "above the broker maximum" in too_big[2]
    assert bad[0] == 2 and "name=value" in bad[2]
    ok("topics", "create", "--topic", "cfg", bootstrap=b)  # its own: runs alone or in any order
    ok("configs", "alter", "--entity-type", "topics", "--entity-name", "cfg",
       "--add-config", "retention.ms=1000,segment.ms=5000", bootstrap=b)  # fmt: skip
    rows = _table(ok("configs", "describe", "--entity-type", "topics", "--entity-name", "cfg",
                     bootstrap=b))  # fmt: skip
    assert rows == [
        ["NAME", "VALUE", "SOURCE", "READ-ONLY"],
        ["retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG", "false"],
        ["segment.ms", "5000", "DYNAMIC_TOPIC_CONFIG", "false"],
    ]
    ok("configs", "alter", "--entity-type", "topics", "--entity-name", "cfg",
       "--delete-config", "segment.ms", bootstrap=b)  # fmt: skip
    shown = ok_json("configs", "describe", "--entity-type", "topics", "--entity-name", "cfg",
                    bootstrap=b)  # fmt: skip
    assert [e["name"] for e in shown] == ["retention.ms"]


def test_dynamic_broker_config_survives_a_restart(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as proc:
        b = proc.bootstrap
        ok("topics", "create", "--topic", "t", bootstrap=b)
        bound = "group.share.max.record.lock.duration.ms=50000,log.retention.bytes=1000000"
        out = ok("configs", "alter", "--entity-type", "brokers", "--entity-default",
                 "--add-config", bound, bootstrap=b)  # fmt: skip
        assert out.strip() == "Completed updating config for the default broker."
        assert proc.stop() == 0
        proc.start()
        entries = ok_json("configs", "describe", "--entity-type", "brokers", bootstrap=b)
        assert entries == [
            {
                "name": "group.share.max.record.lock.duration.ms",
                "value": "50000",
                "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                "read_only": False,
            },
            {
                "name": "log.retention.bytes",
                "value": "1000000",
                "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                "read_only": False,
            },
        ]
        # The topic follows the broker's default but has nothing set on itself.
        assert ok_json("configs", "describe", "--entity-type", "topics", "--entity-name", "t",
                       bootstrap=b) == []  # fmt: skip
        # Enforced from the start: a group config above the new bound is refused.
        code, _, err = shoal("configs", "alter", "--entity-type", "groups", "--entity-name",
                             "g", "--add-config", "share.record.lock.duration.ms=55000",
                             bootstrap=b)  # fmt: skip
        assert code == 1 and "INVALID_CONFIG" in err


def test_acls_add_list_remove(tmp_path: Path, module_broker_process: BrokerProcess) -> None:
    """kafka-acls.sh's way: one binding per principal x operation x resource; --remove and
    --list select with the same options; without an authorizer, SECURITY_DISABLED."""
    props = tmp_path / "broker.properties"
    props.write_text(
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "allow.everyone.if.no.acl.found=true\n"
    )
    with BrokerProcess(tmp_path / "data", extra=["--config", str(props)]) as proc:
        b = proc.bootstrap
        added = ok("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
                   "--operation", "Describe", "--topic", "orders", bootstrap=b)  # fmt: skip
        ok("acls", "--add", "--deny-principal", "User:bob", "--operation", "All", "--topic",
           "ord", "--resource-pattern-type", "prefixed", bootstrap=b)  # fmt: skip
        everything, matching, table, bad = shoal_all(
            ("acls", "--list", "--json"),
            ("acls", "--list", "--topic", "orders", "--resource-pattern-type", "match", "--json"),
            ("acls", "--list", "--principal", "User:bob"),
            ("acls", "--add", "--topic", "orders"),  # no principal, no operation
            bootstrap=b,
        )
        removed = ok("acls", "--remove", "--allow-principal", "User:alice", "--operation",
                     "Read", "--topic", "orders", bootstrap=b)  # fmt: skip
        left = ok_json("acls", "--list", bootstrap=b)
    assert added.strip() == "Added 2 ACL(s)."
    rows = json.loads(everything[1])
    assert {(r["name"], r["pattern_type"], r["principal"], r["operation"], r["permission"])
            for r in rows} == {
        ("orders", "LITERAL", "User:alice", "READ", "ALLOW"),
        ("orders", "LITERAL", "User:alice", "DESCRIBE", "ALLOW"),
        ("ord", "PREFIXED", "User:bob", "ALL", "DENY"),
    }  # fmt: skip
    assert len(json.loads(matching[1])) == 3  # the prefixed DENY applies to orders too
    assert _table(table[1])[1:] == [["TOPIC", "ord", "PREFIXED", "User:bob", "*", "ALL", "DENY"]]
    assert bad[0] == 2 and "--add needs" in bad[2]
    assert removed.strip() == "Removed 1 ACL(s)."
    assert sorted(r["operation"] for r in left) == ["ALL", "DESCRIBE"]
    code, _, err = shoal("acls", "--list", bootstrap=module_broker_process.bootstrap)
    assert code == 1 and err.startswith("shoal: SECURITY_DISABLED")


def test_broker_down_and_usage_errors() -> None:
    down = f"127.0.0.1:{free_port()}"
    *unreachable, no_target, no_name = shoal_all(
        ("topics", "list"),
        ("share-groups", "describe", "--group", "g"),
        ("produce", "--topic", "t", "x"),
        ("consume", "--topic", "t", "--group", "g"),
        ("share-groups", "reset-offsets", "--group", "g", "--topic", "t"),  # no --to-...
        ("configs", "describe", "--entity-type", "topics"),
        bootstrap=down,
    )
    for code, out, err in unreachable:
        assert code == 3, err
        assert out == "" and err.startswith(f"shoal: cannot reach the broker at {down}")
        assert err.count("\n") == 1
    assert no_target[0] == 2
    assert no_name[0] == 2 and "--entity-name is required" in no_name[2]


def test_share_state_dump(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data) as proc:
        b = proc.bootstrap
        ok("configs", "alter", "--entity-type", "groups", "--entity-name", "g",
           "--add-config", "share.auto.offset.reset=earliest", bootstrap=b)  # fmt: skip
        ok("produce", "--topic", "jobs", "--partition", "0", "a", "b", "c", "d", bootstrap=b)
        ok("consume", "--topic", "jobs", "--group", "g", "--max-messages", "2",
           "--timeout", "5", bootstrap=b)  # fmt: skip
        assert proc.stop() == 0
    dump = json.loads(ok("share-state", "dump", "jobs", "0", "--group", "g",
                         "--data-dir", str(data), bootstrap=None))  # fmt: skip
    assert (dump["Topic"], dump["Partition"], dump["GroupId"]) == ("jobs", 0, "g")
    records = dump["Records"]
    checkpoint, deltas = records[0], records[1:]
    assert checkpoint["Type"] == "SHARE_CHECKPOINT" and checkpoint["GroupId"] == "g"
    assert {"Offset", "CheckpointEpoch", "StartOffset", "EndOffset", "States"} <= set(checkpoint)
    assert deltas and all(d["Type"] == "SHARE_DELTA" for d in deltas)
    back = checkpoint["Offset"]
    for d in deltas:  # each delta points at the record before it in the chain
        assert d["BackOffset"] == back and d["CheckpointEpoch"] == checkpoint["CheckpointEpoch"]
        back = d["Offset"]
    states = [s for d in deltas for s in d["States"]]
    assert {"BaseOffset", "LastOffset", "State", "DeliveryCount"} == set(states[0])
    # a, b accepted (2 = Acknowledged); c, d released on leaving: Available, counted once.
    assert {(s["BaseOffset"], s["LastOffset"], s["State"]) for s in states} >= {(0, 1, 2)}
    code, _, err = shoal("share-state", "dump", "jobs", "0", "--group", "other",
                         "--data-dir", str(data))  # fmt: skip
    assert code == 1 and "no share state for group 'other'" in err
    code, _, err = shoal("share-state", "dump", "jobs", "0", "--group", "g",
                         "--data-dir", str(tmp_path / "empty"))  # fmt: skip
    assert code == 2 and "not a Shoal data directory" in err


def _wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"shoal serve exited with {proc.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"shoal serve did not listen on {port}")


def test_shoal_serve_runs_the_broker_until_sigterm(tmp_path: Path) -> None:
    port, data = free_port(), tmp_path / "data"
    cmd = [sys.executable, "-m", "cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--data-dir", str(data), "--metrics-port", "-1", "--log-json"]  # fmt: skip
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_listening(proc, port)
            ok("topics", "create", "--topic", "served", bootstrap=f"127.0.0.1:{port}")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()  # leave no broker behind; the test fails on the timeout
                raise
    assert code == 0, (tmp_path / "serve.log").read_text()
    assert (data / "served-0").is_dir()
    bad, _, err = shoal("serve", "--config", str(tmp_path / "missing.properties"))
    assert bad == 2 and err.startswith("shoal: bad configuration:")


def test_acquire_mode_and_key_ordering_group_configs(module_broker_process: BrokerProcess) -> None:
    b = module_broker_process.bootstrap
    mode, ordering, bad_mode, bad_ordering, bad_default = shoal_all(
        ("configs", "alter", "--entity-type", "groups", "--entity-name", "modes",
         "--add-config", "share.acquire.mode=record_limit"),
        ("configs", "alter", "--entity-type", "groups", "--entity-name", "keyed",
         "--add-config", "share.key.ordering.enable=true"),
        ("configs", "alter", "--entity-type", "groups", "--entity-name", "modes",
         "--add-config", "share.acquire.mode=fastest"),
        ("configs", "alter", "--entity-type", "groups", "--entity-name", "keyed",
         "--add-config", "share.key.ordering.enable=maybe"),
        ("configs", "alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "group.share.acquire.mode=fastest"),
        bootstrap=b,
    )  # fmt: skip
    assert mode[0] == 0 and ordering[0] == 0, (mode, ordering)
    assert bad_mode[0] == 1 and "must be one of batch_optimized, record_limit" in bad_mode[2]
    assert bad_ordering[0] == 1 and "must be true or false" in bad_ordering[2]
    assert bad_default[0] == 1 and "must be one of" in bad_default[2]
    modes = ok_json("configs", "describe", "--entity-type", "groups", "--entity-name", "modes",
                    bootstrap=b)  # fmt: skip
    keyed = ok_json("configs", "describe", "--entity-type", "groups", "--entity-name", "keyed",
                    bootstrap=b)  # fmt: skip
    assert {e["name"]: e["value"] for e in modes}["share.acquire.mode"] == "record_limit"
    assert {e["name"]: e["value"] for e in keyed}["share.key.ordering.enable"] == "true"
