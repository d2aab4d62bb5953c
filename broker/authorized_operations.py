"""The operations a client may perform on a resource, as Kafka reports them (KIP-430).

Without an authorizer Kafka reports every operation the resource type supports
(`AclEntry.supportedOperations`); Shoal has no authorizer yet, so it does the same. When the
security work adds ACLs, these become what the principal is allowed.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from kio.static.primitive import i32


class AclOperation(IntEnum):
    """Kafka's AclOperation codes: a bit each in an authorized-operations field."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


def _bits(*ops: AclOperation) -> i32:
    return i32(sum(1 << op for op in ops))


A = AclOperation
TOPIC_OPERATIONS: Final = _bits(
    A.READ, A.WRITE, A.CREATE, A.DESCRIBE, A.DELETE, A.ALTER, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS
)
GROUP_OPERATIONS: Final = _bits(A.READ, A.DESCRIBE, A.DELETE, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS)
CLUSTER_OPERATIONS: Final = _bits(
    A.CREATE, A.CLUSTER_ACTION, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS, A.IDEMPOTENT_WRITE,
    A.ALTER, A.DESCRIBE,
)  # fmt: skip
# What a response carries when the request did not ask (Kafka's INT32_MIN).
NOT_REQUESTED: Final = i32(-(2**31))


def reported(requested: bool, operations: i32) -> i32:
    return operations if requested else NOT_REQUESTED
