"""What an operator meets when a command goes wrong or names several things: every group
asked for is shown or reported, errors are one line (a JSON object under `--json`), a bad
`--bootstrap-server` is a usage error, and share-state control records are not user records."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.brokers import BrokerProcess
from tests.brokers import free_port
from tests.integration.admin_support import FAST_GROUPS
from tests.integration.test_cli import _table
from tests.integration.test_cli import ok
from tests.integration.test_cli import ok_json
from tests.integration.test_cli import shoal
from tests.integration.test_cli import shoal_all

pytestmark = pytest.mark.integration


BROKER_CONFIG = FAST_GROUPS  # module_broker_process: one broker for the module


def _started_group(b: str, group: str, topic: str, values: str, take: int = 0) -> None:
    """Produce `values` and consume `take` of them (all by default) in share group `group`."""
    ok("configs", "alter", "--entity-type", "groups", "--entity-name", group,
       "--add-config", "share.auto.offset.reset=earliest", bootstrap=b)  # fmt: skip
    code, _, err = shoal("produce", "--topic", topic, bootstrap=b, stdin=values)
    assert code == 0, err
    n = str(take or len(values.split()))
    ok("consume", "--topic", topic, "--group", group, "--max-messages", n, bootstrap=b)


def test_describe_shows_every_group_named_and_reports_the_missing(
    module_broker_process: BrokerProcess,
) -> None:
    b = module_broker_process.bootstrap
    _started_group(b, "ga", "ta", "1\n2\n")
    _started_group(b, "gb", "tb", "3\n")
    both, with_missing, every = shoal_all(
        ("share-groups", "describe", "--group", "ga", "--group", "gb", "--json"),
        ("share-groups", "describe", "--group", "ga", "--group", "nope", "--group", "gb"),
        ("share-groups", "describe", "--all-groups", "--state"),
        bootstrap=b,
    )
    assert both[0] == 0, both[2]
    assert [g["group"] for g in json.loads(both[1])] == ["ga", "gb"]
    code, out, err = with_missing
    assert code == 1
    groups = {row[0] for row in _table(out) if row and row[0] in ("ga", "gb", "nope")}
    assert groups == {"ga", "gb"}
    assert err.count("\n") == 1 and "GROUP_ID_NOT_FOUND" in err and "nope" in err
    assert every[0] == 0
    assert {"ga", "gb"} <= {row[0] for row in _table(every[1]) if row and row[0] != "GROUP"}


def test_errors_are_json_under_json_and_bootstrap_is_checked(
    module_broker_process: BrokerProcess,
) -> None:
    b = module_broker_process.bootstrap
    code, out, err = shoal("share-groups", "describe", "--group", "nope", "--json", bootstrap=b)
    assert code == 1 and out == ""
    error = json.loads(err)
    assert error["exit_code"] == 1 and error["error"].startswith("GROUP_ID_NOT_FOUND")
    code, _, err = shoal("topics", "list", bootstrap="127.0.0.1")  # no port
    assert code == 2 and "Traceback" not in err and "HOST:PORT" in err


def test_configs_describe_of_a_missing_group_is_an_error(
    module_broker_process: BrokerProcess,
) -> None:
    b = module_broker_process.bootstrap
    code, out, err = shoal("configs", "describe", "--entity-type", "groups",
                           "--entity-name", "typo-group", bootstrap=b)  # fmt: skip
    assert code == 1 and out == "" and "GROUP_ID_NOT_FOUND" in err and "typo-group" in err
    # A group with configs set and no member yet is a group to Kafka's tools too.
    ok("configs", "alter", "--entity-type", "groups", "--entity-name", "planned",
       "--add-config", "share.record.lock.duration.ms=20000", bootstrap=b)  # fmt: skip
    out = ok("configs", "describe", "--entity-type", "groups", "--entity-name", "planned",
             bootstrap=b)  # fmt: skip
    assert _table(out)[1][:2] == ["share.record.lock.duration.ms", "20000"]


def test_reset_offsets_says_whether_it_executed(module_broker_process: BrokerProcess) -> None:
    b = module_broker_process.bootstrap
    _started_group(b, "gr", "tr", "x\ny\n")
    reset = ("share-groups", "reset-offsets", "--group", "gr", "--topic", "tr", "--to-earliest")
    dry = ok(*reset, bootstrap=b)
    assert "Dry run: nothing changed" in dry and "Executed" not in dry
    done = ok(*reset, "--execute", bootstrap=b)
    assert "Executed:" in done and "Dry run" not in done


def test_control_records_are_not_counted_as_archived(module_broker_process: BrokerProcess) -> None:
    """Share state lives as control records in the partition's log. Records released ahead
    of them keep them inside the SPSO..SPEO window, where the fetch archived them: nothing
    was rejected, so ARCHIVED is 0 and the control offsets are shown as CONTROL."""
    b = module_broker_process.bootstrap
    _started_group(b, "gc", "tc", "a\nb\nc\n", take=1)  # b, c released as it leaves
    _started_group(b, "gc", "tc", "d\ne\n", take=1)  # past the share-state records
    (p0,) = ok_json("share-groups", "describe", "--group", "gc", bootstrap=b)["partitions"]
    assert p0["start_offset"] == 2 and p0["available"] == 3, p0
    assert p0["archived"] == 0, p0
    assert p0["control"] > 0 and p0["lag"] == 3, p0
    out = ok("share-groups", "describe", "--group", "gc", "--offsets", bootstrap=b)
    header, row = _table(out)[:2]
    assert header[-3:] == ["ARCHIVED", "ARCHIVING", "CONTROL"] and row[-3] == "0"


def test_a_running_brokers_data_dir_is_not_read_or_shared(
    module_broker_process: BrokerProcess,
) -> None:
    """The broker holds its data dir: `share-state dump` refuses it (rc 2, saying how to read
    it anyway), and a second broker on the same data dir does not start."""
    b, data = module_broker_process.bootstrap, module_broker_process.data_dir
    _started_group(b, "gd", "td", "x\n")
    dump = ("share-state", "dump", "td", "0", "--group", "gd", "--data-dir", str(data))
    code, out, err = shoal(*dump)
    assert code == 2 and out == "" and "--force-read-only" in err, err
    forced = json.loads(ok(*dump, "--force-read-only", bootstrap=None))
    assert forced["Records"][0]["Type"] == "SHARE_CHECKPOINT"
    port = free_port()
    second = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--data-dir", str(data), "--metrics-port", "-1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 1 and "in use by a running broker" in second.stderr + second.stdout


def test_users_add_refuses_a_running_brokers_data_dir(
    module_broker_process: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`shoal users add --data-dir` wrote into a running broker's data dir (issue 28): the
    broker keeps its users in memory, so the user could not log in, and the broker's next
    change of users wrote over the file. Its `.lock` now refuses it (rc 2, saying how to add
    the user instead), as it refuses `share-state dump`; a stopped broker's data dir is fine."""
    creds = module_broker_process.data_dir / "scram-credentials.json"
    before = creds.read_bytes() if creds.exists() else None
    add = ("users", "add", "eve", "--password", "pw", "--data-dir")
    code, out, err = shoal(*add, str(module_broker_process.data_dir))
    assert code == 2 and out == "", err
    assert "in use by a running broker" in err and "--bootstrap-server" in err
    assert (creds.read_bytes() if creds.exists() else None) == before
    stopped = tmp_path_factory.mktemp("stopped") / "data"
    code, out, err = shoal(*add, str(stopped))
    assert code == 0, err
    assert "eve" in json.loads((stopped / "scram-credentials.json").read_text())["users"]
