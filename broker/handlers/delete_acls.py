"""DeleteAcls (31): remove what each filter selects, all filters in one write.

With `--processes N` node 0 writes the ACLs: another process forwards the request to it,
once the client is authorized here (`broker.controller_forward`), and follows the file at once.
"""

from __future__ import annotations

import structlog
from kio.schema.delete_acls import v1
from kio.schema.delete_acls import v2
from kio.schema.delete_acls import v3
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.context import RequestContext
from broker.controller_forward import NotForwarded
from broker.controller_forward import fields
from broker.controller_forward import forward
from broker.controller_forward import forwards
from broker.handlers.acl_common import binding_filter
from broker.handlers.acl_common import refusal
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.slicing import Slicer
from broker.slicing import sliced_map
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation
from protocol.acl import InvalidAcl
from protocol.acl import ResourceType

log: structlog.typing.FilteringBoundLogger = structlog.get_logger("shoal.acls")

Request = v1.DeleteAclsRequest | v2.DeleteAclsRequest | v3.DeleteAclsRequest
r = v3.response


def _matching(b: AclBinding) -> r.DeleteAclsMatchingAcl:
    return r.DeleteAclsMatchingAcl(
        error_code=ErrorCode.none,
        error_message=None,
        resource_type=i8(b.pattern.resource_type),
        resource_name=b.pattern.name,
        pattern_type=i8(b.pattern.pattern_type),
        principal=b.entry.principal,
        host=b.entry.host,
        operation=i8(b.entry.operation),
        permission_type=i8(b.entry.permission),
    )


def _failed(error: ErrorCode, message: str | None) -> r.DeleteAclsFilterResult:
    return r.DeleteAclsFilterResult(error_code=error, error_message=message, matching_acls=())


async def handle(ctx: RequestContext, request: Request) -> v3.DeleteAclsResponse:
    n = len(request.filters)
    acls, refused = refusal(ctx, AclOperation.ALTER)
    if acls is None:
        failed = _failed(*(refused or (ErrorCode.unknown_server_error, None)))
        return v3.DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=(failed,) * n)
    if forwards(ctx.services):
        try:
            answer: v3.DeleteAclsResponse = await forward(ctx.services, await _newest(request))
        except NotForwarded as e:
            failed = _failed(e.error_code, str(e))
            return v3.DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=(failed,) * n)
        await acls.follow()
        return answer
    filters: list[AclBindingFilter | str] = []
    slicer = Slicer()  # a request may list a million filters
    for f in request.filters:
        try:
            filters.append(binding_filter(f))
        except InvalidAcl as e:
            filters.append(str(e))
        await slicer.pause()
    valid = [f for f in filters if isinstance(f, AclBindingFilter)]
    try:
        removed = iter(await acls.delete(valid))
    except OSError as e:
        log.error("acl file not written", error=str(e))
        failed = _failed(ErrorCode.kafka_storage_error, str(e))
        return v3.DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=(failed,) * n)
    results = await slicer.map(
        lambda f: (
            _failed(ErrorCode.invalid_request, f)
            if isinstance(f, str)
            else r.DeleteAclsFilterResult(
                error_code=ErrorCode.none,
                error_message=None,
                matching_acls=tuple(_matching(b) for b in next(removed)),
            )
        ),
        filters,
    )
    return v3.DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=tuple(results))


async def _newest(request: Request) -> v3.DeleteAclsRequest:
    """The same request as v3 (v1 and v2 have the same fields), to forward."""
    if isinstance(request, v3.DeleteAclsRequest):
        return request
    return v3.DeleteAclsRequest(
        filters=tuple(await sliced_map(lambda f: v3.request.DeleteAclsFilter(**fields(f)),
                                       request.filters))
    )  # fmt: skip


HANDLER = handler(
    handle,
    v1.DeleteAclsRequest,
    v2.DeleteAclsRequest,
    v3.DeleteAclsRequest,
    acl=((AclOperation.ALTER, ResourceType.CLUSTER),),
)
