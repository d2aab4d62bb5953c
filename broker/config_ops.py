"""IncrementalAlterConfigs' operations turned into plain changes, as Kafka's ConfigAdminManager.

SET and DELETE set or remove a value. APPEND and SUBTRACT apply to list-valued configs (values
separated by commas), starting from the resource's own value, else the config's default:
APPEND adds the values not already present, SUBTRACT removes the ones given. On any other
config they are INVALID_CONFIG, with Kafka's message.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from enum import IntEnum

from kio.schema.errors import ErrorCode

from broker.errors import BrokerException

# Topic configs that are lists, with their Kafka defaults (no broker or group config is one).
TOPIC_LIST_CONFIGS: Mapping[str, str] = {"cleanup.policy": "delete"}


class OpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class InvalidOperation(BrokerException, ValueError):
    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.invalid_config) -> None:
        super().__init__(message)
        self.error_code = error_code


def _items(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _list_op(op: OpType, current: str, value: str | None) -> str:
    old, given = _items(current), _items(value)
    if op == OpType.APPEND:
        return ",".join(old + [v for v in dict.fromkeys(given) if v not in old])
    return ",".join(v for v in old if v not in given)


def resolve(
    ops: Iterable[tuple[str, int, str | None]],
    own: Mapping[str, str],
    lists: Mapping[str, str],
) -> dict[str, str | None]:
    """(name, operation, value) triples -> {name: new value, or None to remove it}.

    `own` holds the values set on the resource, `lists` its list-valued configs and defaults.

    :raises InvalidOperation: APPEND or SUBTRACT on a config that is not a list, or an unknown
        operation.
    """
    changes: dict[str, str | None] = {}
    for name, op, value in ops:
        if op == OpType.SET:
            changes[name] = value
        elif op == OpType.DELETE:
            changes[name] = None
        elif op in (OpType.APPEND, OpType.SUBTRACT):
            if name not in lists:
                verb = "append" if op == OpType.APPEND else "subtract"
                raise InvalidOperation(f"Config value {verb} is not allowed for config key: {name}")
            current = changes.get(name, own.get(name, lists[name]))
            changes[name] = _list_op(OpType(op), current or "", value)
        else:
            raise InvalidOperation(f"Unknown operations type {op}", ErrorCode.invalid_request)
    return changes
