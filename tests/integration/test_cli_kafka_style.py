"""Lines pasted from Kafka's tools, with only the program name changed, against a broker:
kafka-topics.sh (create/alter/describe/list/delete, --if-exists, regex --topic),
kafka-configs.sh (--alter --add-config, shorthands, --add-config-file, --delete-config) and
kafka-share-groups.sh (--list --state, --describe --members --verbose, --reset-offsets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess
from tests.integration.admin_support import FAST_GROUPS
from tests.integration.test_cli import _table
from tests.integration.test_cli import ok
from tests.integration.test_cli import ok_json
from tests.integration.test_cli import shoal

pytestmark = pytest.mark.integration


BROKER_CONFIG = FAST_GROUPS  # module_broker_process: one broker for the module


def test_kafka_topics_lines(module_broker_process: BrokerProcess) -> None:
    b = module_broker_process.bootstrap
    assert ok("topics", "--create", "--topic", "orders", "--partitions", "1", bootstrap=b)
    assert ok("topics", "--create", "--if-not-exists", "--topic", "orders", bootstrap=b) == ""
    ok("topics", "--create", "--topic", "orders-dlq", bootstrap=b)
    ok("topics", "--create", "--topic", "audit", bootstrap=b)
    out = ok("topics", "--alter", "--topic", "orders", "--partitions", "3", bootstrap=b)
    assert out.strip() == "Altered topic orders."
    (desc,) = ok_json("topics", "--describe", "--topic", "orders", bootstrap=b)
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    code, _, err = shoal("topics", "--alter", "--topic", "orders", "--partitions", "2",
                         bootstrap=b)  # fmt: skip
    assert code == 1 and "INVALID_PARTITIONS" in err  # never shrinks
    assert ok("topics", "--list", "--topic", "orders.*", bootstrap=b).split() == [
        "orders", "orders-dlq"
    ]  # fmt: skip
    assert [t["topic"] for t in ok_json("topics", "--describe", "--topic", "a.*",
                                        bootstrap=b)] == ["audit"]  # fmt: skip
    ok("topics", "--alter", "--topic", "audit", "--config", "retention.ms=60000", bootstrap=b)
    assert ok_json("topics", "--describe", "--topic", "audit", bootstrap=b)[0]["configs"] == {
        "retention.ms": "60000"
    }
    ok("topics", "--alter", "--topic", "audit", "--delete-config", "retention.ms", bootstrap=b)
    assert ok_json("topics", "--describe", "--topic", "audit", bootstrap=b)[0]["configs"] == {}
    assert ok("topics", "--delete", "--topic", "nope", "--if-exists", bootstrap=b) == ""
    assert ok("topics", "--alter", "--topic", "nope", "--partitions", "2", "--if-exists",
              bootstrap=b) == ""  # fmt: skip
    code, _, err = shoal("topics", "--delete", "--topic", "nope", bootstrap=b)
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err
    assert ok("topics", "--delete", "--topic", "orders-dlq", bootstrap=b)
    assert "orders-dlq" not in ok("topics", "--list", bootstrap=b).split()


def test_kafka_configs_lines(module_broker_process: BrokerProcess, tmp_path: Path) -> None:
    b = module_broker_process.bootstrap
    ok("configs", "--alter", "--entity-type", "groups", "--entity-name", "workers",
       "--add-config", "share.record.lock.duration.ms=20000", bootstrap=b)  # fmt: skip
    props = tmp_path / "group.properties"
    props.write_text(
        "# a comment\nshare.delivery.count.limit=4\nshare.auto.offset.reset=earliest\n"
    )
    ok("configs", "--group", "workers", "--alter", "--add-config-file", str(props), bootstrap=b)
    described = ok_json("configs", "--describe", "--group", "workers", bootstrap=b)
    got = {e["name"]: e["value"] for e in described}
    assert got == {
        "share.record.lock.duration.ms": "20000",
        "share.delivery.count.limit": "4",
        "share.auto.offset.reset": "earliest",
    }
    ok("configs", "--alter", "--group", "workers", "--delete-config",
       "share.delivery.count.limit", bootstrap=b)  # fmt: skip
    names = {e["name"] for e in ok_json("configs", "--describe", "--group", "workers", bootstrap=b)}
    assert "share.delivery.count.limit" not in names and len(names) == 2
    ok("topics", "create", "--topic", "cfg", bootstrap=b)
    ok("configs", "--topic", "cfg", "--alter", "--add-config", "retention.ms=1000", bootstrap=b)
    (entry,) = ok_json("configs", "--describe", "--topic", "cfg", bootstrap=b)
    assert (entry["name"], entry["value"]) == ("retention.ms", "1000")
    code, _, err = shoal("configs", "--describe", "--topic", "cfg", "--group", "workers",
                         bootstrap=b)  # fmt: skip
    assert code == 2 and "give one of" in err


def test_kafka_share_groups_lines(module_broker_process: BrokerProcess) -> None:
    b = module_broker_process.bootstrap
    ok("configs", "--group", "kg", "--alter", "--add-config", "share.auto.offset.reset=earliest",
       bootstrap=b)  # fmt: skip
    code, _, err = shoal("produce", "--topic", "kt", bootstrap=b, stdin="a\nb\n")
    assert code == 0, err
    ok("consume", "--topic", "kt", "--group", "kg", "--max-messages", "2", bootstrap=b)
    rows = _table(ok("share-groups", "--list", "--state", bootstrap=b))
    assert rows[0] == ["GROUP", "STATE"] and ["kg", "Empty"] in rows
    assert ok("share-groups", "--list", "--state", "Stable", bootstrap=b).strip() == "GROUP  STATE"
    out = ok("share-groups", "--describe", "--group", "kg", "--members", "--verbose", bootstrap=b)
    assert _table(out)[0][-2:] == ["RACK", "SUBSCRIBED"]
    offsets = _table(ok("share-groups", "--describe", "--group", "kg", "--offsets", bootstrap=b))
    assert offsets[1][:3] == ["kg", "kt", "0"]
    dry = ok("share-groups", "--reset-offsets", "--group", "kg", "--topic", "kt",
             "--to-earliest", "--dry-run", bootstrap=b)  # fmt: skip
    assert "Dry run" in dry
    done = json.loads(ok("share-groups", "--reset-offsets", "--group", "kg", "--topic", "kt",
                         "--to-earliest", "--execute", "--json", bootstrap=b))  # fmt: skip
    assert done["executed"] and done["partitions"][0]["start_offset"] == 0
    ok("share-groups", "--delete-offsets", "--group", "kg", "--topic", "kt", bootstrap=b)
    assert ok("share-groups", "--delete", "--group", "kg", bootstrap=b).strip() == (
        "Deleted share group kg."
    )
