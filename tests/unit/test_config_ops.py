"""IncrementalAlterConfigs operations (broker.config_ops) and the `cleanup.policy` check."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.config_ops import TOPIC_LIST_CONFIGS
from broker.config_ops import InvalidOperation
from broker.config_ops import OpType
from broker.config_ops import resolve
from storage.config import check_topic_config_values
from storage.errors import InvalidConfig

POLICY = "cleanup.policy"


def one(op: OpType, value: str | None, own: dict[str, str] | None = None) -> str | None:
    return resolve([(POLICY, op, value)], own or {}, TOPIC_LIST_CONFIGS)[POLICY]


def test_append_adds_what_is_missing_starting_from_the_default() -> None:
    assert one(OpType.APPEND, "compact") == "delete,compact"
    assert one(OpType.APPEND, "delete") == "delete"
    assert one(OpType.APPEND, "delete,compact,compact", {POLICY: "compact"}) == "compact,delete"


def test_subtract_removes_what_is_given() -> None:
    assert one(OpType.SUBTRACT, "delete", {POLICY: "delete,compact"}) == "compact"
    assert one(OpType.SUBTRACT, "compact", {POLICY: "delete"}) == "delete"
    assert one(OpType.SUBTRACT, "delete") == ""  # then refused: an empty policy


def test_operations_apply_in_order_within_a_request() -> None:
    ops = [(POLICY, OpType.SET, "compact"), (POLICY, OpType.APPEND, "delete")]
    assert resolve(ops, {}, TOPIC_LIST_CONFIGS) == {POLICY: "compact,delete"}
    assert resolve([("retention.ms", OpType.DELETE, None)], {}, {}) == {"retention.ms": None}


def test_append_and_subtract_need_a_list_config() -> None:
    for op, verb in ((OpType.APPEND, "append"), (OpType.SUBTRACT, "subtract")):
        with pytest.raises(InvalidOperation) as refused:
            resolve([("retention.ms", op, "1")], {}, TOPIC_LIST_CONFIGS)
        assert refused.value.error_code == ErrorCode.invalid_config
        assert (
            str(refused.value) == f"Config value {verb} is not allowed for config key: retention.ms"
        )
    with pytest.raises(InvalidOperation) as unknown:
        resolve([(POLICY, 7, "x")], {}, TOPIC_LIST_CONFIGS)
    assert unknown.value.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize("value", ["delete", "compact", "compact,delete", "delete, compact"])
def test_cleanup_policy_values(value: str) -> None:
    check_topic_config_values({POLICY: value})


@pytest.mark.parametrize("value", ["", "remove", "delete,", "compact,bogus"])
def test_bad_cleanup_policy_values(value: str) -> None:
    with pytest.raises(InvalidConfig):
        check_topic_config_values({POLICY: value})
