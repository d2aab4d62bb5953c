"""`shoal consumer-groups` as a user runs it (subprocesses against a broker process), in
`test_cli.py`'s style: reset (dry run, then --execute), list, describe with lag, shift,
by-duration, delete-offsets, delete, and the errors scripts rely on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess
from tests.integration.test_cli import _table
from tests.integration.test_cli import ok
from tests.integration.test_cli import ok_json
from tests.integration.test_cli import shoal
from tests.integration.test_cli import shoal_all

pytestmark = pytest.mark.integration

CG = "consumer-groups"


# Tests share the module's broker (module_broker_process), each with topics of its own.


def test_reset_list_describe_shift_delete(
    module_broker_process: BrokerProcess, tmp_path: Path
) -> None:
    b = module_broker_process.bootstrap
    ok("topics", "create", "--topic", "audit", "--partitions", "2", bootstrap=b)
    for partition, values in (("0", "a\nb\nc\nd\ne\n"), ("1", "x\ny\n")):
        code, _, err = shoal("produce", "--topic", "audit", "--partition", partition,
                             bootstrap=b, stdin=values)  # fmt: skip
        assert code == 0, err

    dry = ok(CG, "--reset-offsets", "--group", "auditors", "--topic", "audit:0",
             "--to-offset", "2", bootstrap=b)  # fmt: skip
    assert _table(dry)[:2] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["auditors", "audit", "0", "2"]
    ]  # fmt: skip
    assert "Dry run" in dry
    assert ok(CG, "--list", bootstrap=b).split() == []  # the dry run committed nothing

    done = ok_json(CG, "--reset-offsets", "--group", "auditors", "--topic", "audit",
                   "--to-earliest", "--execute", bootstrap=b)  # fmt: skip
    assert done["executed"] and [p["new_offset"] for p in done["partitions"]] == [0, 0]
    shifted = ok(CG, "--reset-offsets", "--group", "auditors", "--all-topics", "--shift-by",
                 "3", "--execute", bootstrap=b)  # fmt: skip
    assert "Executed" in shifted
    assert _table(shifted)[1:3] == [
        ["auditors", "audit", "0", "3"], ["auditors", "audit", "1", "2"]  # 1: clamped to end
    ]  # fmt: skip

    listed, described, as_json = shoal_all(
        (CG, "--list"), (CG, "--describe", "--group", "auditors"),
        (CG, "--describe", "--group", "auditors", "--json"), bootstrap=b,
    )  # fmt: skip
    assert listed[1].split() == ["auditors"]
    rows = _table(described[1].split("\n\n", 1)[1])
    assert rows[0][:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    assert [r[:6] for r in rows[1:]] == [
        ["auditors", "audit", "0", "3", "5", "2"], ["auditors", "audit", "1", "2", "2", "0"]
    ]  # fmt: skip
    assert json.loads(as_json[1])["partitions"][0]["lag"] == 2

    back = ok_json(CG, "--reset-offsets", "--group", "auditors", "--topic", "audit:0",
                   "--by-duration", "PT1H", "--execute", bootstrap=b)  # fmt: skip
    assert back["partitions"] == [{"topic": "audit", "partition": 0, "new_offset": 0}]

    out = ok(CG, "--delete-offsets", "--group", "auditors", "--topic", "audit:1", bootstrap=b)
    assert _table(out) == [["TOPIC", "PARTITION", "STATUS"], ["audit", "1", "Successful"]]
    parts = ok_json(CG, "--describe", "--group", "auditors", bootstrap=b)["partitions"]
    assert [(p["partition"], p["current_offset"]) for p in parts] == [(0, 0)]

    out = ok(CG, "--delete", "--group", "auditors", bootstrap=b)
    assert out.strip() == "Deletion of requested consumer groups ('auditors') was successful."
    gone, again, usage = shoal_all(
        (CG, "--describe", "--group", "auditors"),
        (CG, "--delete", "--group", "auditors"),
        (CG, "--reset-offsets", "--group", "auditors", "--topic", "audit"),  # no --to-...
        bootstrap=b,
    )
    assert gone[0] == 1 and gone[2].startswith("shoal: GROUP_ID_NOT_FOUND"), gone
    assert again[0] == 1 and "GROUP_ID_NOT_FOUND" in again[2], again
    assert usage[0] == 2, usage
