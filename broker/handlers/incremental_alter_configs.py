"""IncrementalAlterConfigs (44): share-group configs (resource type GROUP, 32).

Each change is validated against the broker's bounds (seed 002); a resource's changes apply all
or nothing. SET and DELETE are meaningful for group configs; APPEND and SUBTRACT are for lists.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from coordinator.group_configs import InvalidGroupConfig
from protocol.messages import build

GROUP = 32
SET, DELETE = 0, 1


def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    if resource.resource_type != GROUP:
        return (
            ErrorCode.invalid_request,
            f"altering resource type {resource.resource_type} is not supported yet",
        )
    if not resource.resource_name:
        return ErrorCode.invalid_group_id, "group name is empty"
    changes: dict[str, str | None] = {}
    for c in resource.configs:
        if c.config_operation not in (SET, DELETE):
            return ErrorCode.invalid_config, f"{c.name}: only SET and DELETE apply to group configs"
        changes[c.name] = c.value if c.config_operation == SET else None
    configs = ctx.services.group_configs
    try:
        if validate_only:
            for name, value in changes.items():
                if value is not None:
                    configs.validate(name, value)
        else:
            configs.alter(resource.resource_name, changes)
    except InvalidGroupConfig as e:
        return ErrorCode.invalid_config, str(e)
    return ErrorCode.none, None


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    responses = []
    for resource in request.resources:
        code, message = _alter(ctx, resource, request.validate_only)
        responses.append(
            build(
                r.AlterConfigsResourceResponse,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return build(r.type, responses=tuple(responses))


HANDLER = Handler(
    api_key=44, min_version=0, max_version=1, handle=handle, name="IncrementalAlterConfigs"
)
