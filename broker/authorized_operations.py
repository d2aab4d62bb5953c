"""The operations a client may perform on a resource, as Kafka reports them (KIP-430).

Without an authorizer Kafka reports every operation the resource type supports
(`AclEntry.supportedOperations`); with one, only those the principal is allowed
(`broker.authorization.authorized_operations`).
"""

from __future__ import annotations

from typing import Final

from kio.static.primitive import i32

from protocol.acl import AclOperation


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
