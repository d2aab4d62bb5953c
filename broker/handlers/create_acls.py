"""CreateAcls (30): add bindings; each is refused or created on its own, all in one write.

With `--processes N` node 0 writes the ACLs: another process forwards the request to it,
once the client is authorized here (`broker.controller_forward`), and follows the file at once.
"""

from __future__ import annotations

import structlog
from kio.schema.create_acls import v1
from kio.schema.create_acls import v2
from kio.schema.create_acls import v3
from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.controller_forward import NotForwarded
from broker.controller_forward import fields
from broker.controller_forward import forward
from broker.controller_forward import forwards
from broker.handlers.acl_common import code
from broker.handlers.acl_common import refusal
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.slicing import Slicer
from broker.slicing import sliced_map
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import InvalidAcl
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType

log: structlog.typing.FilteringBoundLogger = structlog.get_logger("shoal.acls")

Request = v1.CreateAclsRequest | v2.CreateAclsRequest | v3.CreateAclsRequest
Creation = v1.request.AclCreation | v2.request.AclCreation | v3.request.AclCreation
Result = v3.response.AclCreationResult


def _binding(c: Creation) -> AclBinding:
    """:raises InvalidAcl: a code Kafka does not define."""
    return AclBinding(
        ResourcePattern(
            code(ResourceType, c.resource_type),
            c.resource_name,
            code(PatternType, c.resource_pattern_type),
        ),
        AccessControlEntry(
            c.principal,
            c.host,
            code(AclOperation, c.operation),
            code(AclPermissionType, c.permission_type),
        ),
    )


def _all(error: ErrorCode, message: str | None, n: int) -> tuple[Result, ...]:
    return tuple(Result(error_code=error, error_message=message) for _ in range(n))


async def handle(ctx: RequestContext, request: Request) -> v3.CreateAclsResponse:
    n = len(request.creations)
    acls, refused = refusal(ctx, AclOperation.ALTER)
    if acls is None:
        error, message = refused or (ErrorCode.unknown_server_error, None)
        return v3.CreateAclsResponse(throttle_time=NO_THROTTLE, results=_all(error, message, n))
    if forwards(ctx.services):
        try:
            answer: v3.CreateAclsResponse = await forward(ctx.services, await _newest(request))
        except NotForwarded as e:
            return v3.CreateAclsResponse(
                throttle_time=NO_THROTTLE, results=_all(e.error_code, str(e), n)
            )
        await acls.follow()
        return answer
    bindings: list[AclBinding | str] = []
    slicer = Slicer()  # a request may list a million bindings
    for c in request.creations:
        try:
            bindings.append(_binding(c))
        except InvalidAcl as e:
            bindings.append(str(e))
        await slicer.pause()
    valid = [b for b in bindings if isinstance(b, AclBinding)]
    try:
        errors = iter(await acls.create(valid))
    except OSError as e:
        log.error("acl file not written", error=str(e))
        results = _all(ErrorCode.kafka_storage_error, str(e), n)
        return v3.CreateAclsResponse(throttle_time=NO_THROTTLE, results=results)
    out = []
    for b in bindings:
        problem = b if isinstance(b, str) else next(errors)
        out.append(
            Result(error_code=ErrorCode.invalid_request, error_message=problem)
            if problem
            else Result(error_code=ErrorCode.none, error_message=None)
        )
        await slicer.pause()
    return v3.CreateAclsResponse(throttle_time=NO_THROTTLE, results=tuple(out))


async def _newest(request: Request) -> v3.CreateAclsRequest:
    """The same request as v3 (v1 and v2 have the same fields), to forward."""
    if isinstance(request, v3.CreateAclsRequest):
        return request
    return v3.CreateAclsRequest(
        creations=tuple(await sliced_map(lambda c: v3.request.AclCreation(**fields(c)),
                                         request.creations))
    )  # fmt: skip


HANDLER = handler(
    handle,
    v1.CreateAclsRequest,
    v2.CreateAclsRequest,
    v3.CreateAclsRequest,
    acl=((AclOperation.ALTER, ResourceType.CLUSTER),),
)
