"""AlterConfigs (33): the non-incremental API older clients and tools still use.

Each resource's configs are replaced as a whole: names the request leaves out go back to
their defaults. TOPIC and BROKER resources, as Kafka; group configs are altered only through
IncrementalAlterConfigs (KIP-848). The validation is IncrementalAlterConfigs' own.
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.alter_configs import v0
from kio.schema.alter_configs import v1
from kio.schema.alter_configs import v2
from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.config_changes import ACL_CHECKS
from broker.handlers.config_changes import BROKER
from broker.handlers.config_changes import TOPIC
from broker.handlers.config_changes import Changes
from broker.handlers.config_changes import Result
from broker.handlers.config_changes import alter_configs
from broker.registry import handler
from broker.slicing import Slicer

Request = v0.AlterConfigsRequest | v1.AlterConfigsRequest | v2.AlterConfigsRequest
Resource = (
    v0.request.AlterConfigsResource
    | v1.request.AlterConfigsResource
    | v2.request.AlterConfigsResource
)


async def _replace(ctx: RequestContext, resource: Resource, validate_only: bool) -> Result:
    kind, name = resource.resource_type, resource.resource_name
    if kind not in (TOPIC, BROKER):
        return ErrorCode.invalid_request, f"AlterConfigs does not alter resource type {kind}"
    given = {c.name: c.value for c in resource.configs}

    def replaced(current: Mapping[str, str]) -> Changes:
        changes: Changes = {n: None for n in current if n not in given}
        changes.update(given)
        return changes

    return await alter_configs(ctx, kind, name, replaced, validate_only)


async def handle(ctx: RequestContext, request: Request) -> v2.AlterConfigsResponse:
    # To its end if the client goes (`broker.to_the_end`): resources are changed one after
    # another, a topic's file written off the loop, and a request cancelled in between left
    # some changed and the rest not.
    return await ctx.services.changes.to_the_end(_alter_all(ctx, request))


async def _alter_all(ctx: RequestContext, request: Request) -> v2.AlterConfigsResponse:
    responses = []
    slicer = Slicer()  # a request may name a million resources
    for resource in request.resources:
        await slicer.pause()
        code, message = await _replace(ctx, resource, request.validate_only)
        responses.append(
            v2.response.AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return v2.AlterConfigsResponse(throttle_time=NO_THROTTLE, responses=tuple(responses))


HANDLER = handler(
    handle, v0.AlterConfigsRequest, v1.AlterConfigsRequest, v2.AlterConfigsRequest, acl=ACL_CHECKS
)
