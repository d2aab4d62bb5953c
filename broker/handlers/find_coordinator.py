"""FindCoordinator (10): this broker coordinates every group (and transaction id); with
`--processes N`, the node `crc32(key) % N` of them does.

v0-3 answer one key at the top level; v4+ answer a list of coordinators, one per key. The
top-level fields are gone from v4, so each layout is answered with its own newest class.
"""

from __future__ import annotations

from typing import NamedTuple

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator import v0
from kio.schema.find_coordinator import v1
from kio.schema.find_coordinator import v2
from kio.schema.find_coordinator import v3
from kio.schema.find_coordinator import v4
from kio.schema.find_coordinator import v5
from kio.schema.find_coordinator import v6
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.slicing import sliced_map
from coordinator.share_group import CoordinatorError
from coordinator.share_group import check_ids
from protocol.acl import AclOperation
from protocol.acl import ResourceType

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
DESCRIBE = AclOperation.DESCRIBE

Request = (
    v0.FindCoordinatorRequest
    | v1.FindCoordinatorRequest
    | v2.FindCoordinatorRequest
    | v3.FindCoordinatorRequest
    | v4.FindCoordinatorRequest
    | v5.FindCoordinatorRequest
    | v6.FindCoordinatorRequest
)


class _Where(NamedTuple):
    node_id: BrokerId
    host: str
    port: i32
    error_code: ErrorCode
    error_message: str | None


def _refused(ctx: RequestContext, key_type: int, key: str) -> ErrorCode | None:
    """DESCRIBE on the group (or transactional id) the key names, as Kafka checks."""
    if key_type == GROUP_KEY_TYPE and not authorize(ctx, DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed
    if key_type == TRANSACTION_KEY_TYPE and not authorize(
        ctx, DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return ErrorCode.transactional_id_authorization_failed
    return None


def _where(ctx: RequestContext, key_type: int, key: str) -> _Where:
    s = ctx.services
    refused = _refused(ctx, key_type, key)
    if refused is not None:
        return _Where(BrokerId(-1), "", i32(-1), refused, None)
    if key_type == GROUP_KEY_TYPE:
        try:
            check_ids(key)
        except CoordinatorError as e:
            return _Where(BrokerId(-1), "", i32(-1), e.error_code, str(e))
    # With --processes N, node crc32(key) % N coordinates it (`broker.ownership`), for every
    # kind of group and for transactional ids, as Kafka hashes a key to the partition of
    # __consumer_offsets (or __transaction_state) whose leader coordinates it.
    owner = s.config.ownership
    node = owner.coordinator(key)
    port = owner.port_of(node, ctx.endpoint[1])
    return _Where(BrokerId(node), ctx.endpoint[0], i32(port), ErrorCode.none, None)


def _coordinator(ctx: RequestContext, key_type: int, key: str) -> v6.response.Coordinator:
    w = _where(ctx, key_type, key)
    return v6.response.Coordinator(
        key=key,
        node_id=w.node_id,
        host=w.host,
        port=w.port,
        error_code=w.error_code,
        error_message=w.error_message,
    )


async def handle(
    ctx: RequestContext, request: Request
) -> v3.FindCoordinatorResponse | v6.FindCoordinatorResponse:
    if isinstance(
        request, (v4.FindCoordinatorRequest, v5.FindCoordinatorRequest, v6.FindCoordinatorRequest)
    ):
        keys_type = int(request.key_type)
        coordinators = await sliced_map(  # a request may name a million keys
            lambda key: _coordinator(ctx, keys_type, key), request.coordinator_keys
        )
        return v6.FindCoordinatorResponse(
            throttle_time=NO_THROTTLE, coordinators=tuple(coordinators)
        )
    key_type = (
        GROUP_KEY_TYPE if isinstance(request, v0.FindCoordinatorRequest) else request.key_type
    )
    w = _where(ctx, key_type, request.key)
    return v3.FindCoordinatorResponse(
        throttle_time=NO_THROTTLE,
        error_code=w.error_code,
        error_message=w.error_message,
        node_id=w.node_id,
        host=w.host,
        port=w.port,
    )


HANDLER = handler(
    handle,
    v0.FindCoordinatorRequest,
    v1.FindCoordinatorRequest,
    v2.FindCoordinatorRequest,
    v3.FindCoordinatorRequest,
    v4.FindCoordinatorRequest,
    v5.FindCoordinatorRequest,
    v6.FindCoordinatorRequest,
    responses=(v3.FindCoordinatorResponse, v6.FindCoordinatorResponse),
    acl=(
        (AclOperation.DESCRIBE, ResourceType.GROUP),
        (AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID),
    ),
)
