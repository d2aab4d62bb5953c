"""DescribeAcls (29): the bindings a filter selects, grouped by resource pattern.

With `--processes N` a process other than node 0 first takes node 0's file if it changed (a
stat when it did not), so every process lists what node 0 last wrote.
"""

from __future__ import annotations

import asyncio
from itertools import groupby

from kio.schema.describe_acls import v1
from kio.schema.describe_acls import v2
from kio.schema.describe_acls import v3
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.context import RequestContext
from broker.controller_forward import forwards
from broker.handlers.acl_common import binding_filter
from broker.handlers.acl_common import refusal
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from protocol.acl import AclBinding
from protocol.acl import AclOperation
from protocol.acl import InvalidAcl
from protocol.acl import ResourceType

Request = v1.DescribeAclsRequest | v2.DescribeAclsRequest | v3.DescribeAclsRequest
Response = v3.DescribeAclsResponse
r = v3.response


def _resources(bindings: list[AclBinding]) -> tuple[r.DescribeAclsResource, ...]:
    """Bindings come sorted by pattern, so each pattern's entries are adjacent."""
    return tuple(
        r.DescribeAclsResource(
            resource_type=i8(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=i8(pattern.pattern_type),
            acls=tuple(
                r.AclDescription(
                    principal=b.entry.principal,
                    host=b.entry.host,
                    operation=i8(b.entry.operation),
                    permission_type=i8(b.entry.permission),
                )
                for b in group
            ),
        )
        for pattern, group in groupby(bindings, key=lambda b: b.pattern)
    )


def _error(error: ErrorCode, message: str) -> Response:
    return Response(
        throttle_time=NO_THROTTLE, error_code=error, error_message=message, resources=()
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    acls, refused = refusal(ctx, AclOperation.DESCRIBE)
    if acls is None:
        return _error(*(refused or (ErrorCode.unknown_server_error, "")))
    try:
        wanted = binding_filter(request)
    except InvalidAcl as e:
        return _error(ErrorCode.invalid_request, str(e))
    if forwards(ctx.services):
        await acls.follow()
    # In a thread: there may be a million bindings to walk and answer. The authorizer in force
    # is never changed in place (AclManager swaps in a new one).
    resources = await asyncio.to_thread(lambda: _resources(acls.describe(wanted)))
    return Response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        resources=resources,
    )


HANDLER = handler(
    handle,
    v1.DescribeAclsRequest,
    v2.DescribeAclsRequest,
    v3.DescribeAclsRequest,
    acl=((AclOperation.DESCRIBE, ResourceType.CLUSTER),),
)
