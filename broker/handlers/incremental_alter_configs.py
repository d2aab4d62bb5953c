"""IncrementalAlterConfigs (44): GROUP (32), TOPIC (2) and BROKER (4) configs.

- GROUP: share-group configs, each validated against the broker's bounds (seed 002).
- TOPIC: the configs Shoal's logs act on (`segment.bytes`, `retention.ms`, ...) and a few
  more Kafka topic configs that are stored and described but change nothing here.
- BROKER (node id, or "" for the cluster default): the dynamic `group.share.*` and `log.*`
  configs, persisted in the data dir (see `broker.dynamic_config`); any other name is refused.

A resource's changes apply all or nothing. SET and DELETE apply; APPEND and SUBTRACT are for
list configs, which none of these are.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs import v0
from kio.schema.incremental_alter_configs import v1

from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.config_changes import Result
from broker.handlers.config_changes import alter_configs
from broker.registry import handler

SET, DELETE = 0, 1
Request = v0.IncrementalAlterConfigsRequest | v1.IncrementalAlterConfigsRequest
Resource = v0.request.AlterConfigsResource | v1.request.AlterConfigsResource


def _changes(resource: Resource) -> dict[str, str | None] | Result:
    changes: dict[str, str | None] = {}
    for c in resource.configs:
        if c.config_operation not in (SET, DELETE):
            return ErrorCode.invalid_config, f"{c.name}: only SET and DELETE apply here"
        changes[c.name] = c.value if c.config_operation == SET else None
    return changes


def _alter(ctx: RequestContext, resource: Resource, validate_only: bool) -> Result:
    changes = _changes(resource)
    if isinstance(changes, tuple):
        return changes
    return alter_configs(
        ctx, resource.resource_type, resource.resource_name, changes, validate_only
    )


async def handle(ctx: RequestContext, request: Request) -> v1.IncrementalAlterConfigsResponse:
    responses = []
    for resource in request.resources:
        code, message = _alter(ctx, resource, request.validate_only)
        responses.append(
            v1.response.AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return v1.IncrementalAlterConfigsResponse(throttle_time=NO_THROTTLE, responses=tuple(responses))


HANDLER = handler(handle, v0.IncrementalAlterConfigsRequest, v1.IncrementalAlterConfigsRequest)
