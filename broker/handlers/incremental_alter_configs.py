"""IncrementalAlterConfigs (44): GROUP (32), TOPIC (2) and BROKER (4) configs.

- GROUP: share-group configs, each validated against the broker's bounds (seed 002).
- TOPIC: the configs Shoal's logs act on (`segment.bytes`, `retention.ms`, ...) and a few
  more Kafka topic configs that are stored and described but change nothing here.
- BROKER (node id, or "" for the cluster default): the dynamic `group.share.*` and `log.*`
  configs, persisted in the data dir (see `broker.dynamic_config`); any other name is refused.

A resource's changes apply all or nothing. SET and DELETE apply to every config; APPEND and
SUBTRACT to list configs (a topic's `cleanup.policy`), as Kafka (`broker.config_ops`).
"""

from __future__ import annotations

from kio.schema.incremental_alter_configs import v0
from kio.schema.incremental_alter_configs import v1

from broker.config_ops import TOPIC_LIST_CONFIGS
from broker.config_ops import resolve
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.config_changes import ACL_CHECKS
from broker.handlers.config_changes import TOPIC
from broker.handlers.config_changes import Result
from broker.handlers.config_changes import alter_configs
from broker.registry import handler
from broker.slicing import Slicer

Request = v0.IncrementalAlterConfigsRequest | v1.IncrementalAlterConfigsRequest
Resource = v0.request.AlterConfigsResource | v1.request.AlterConfigsResource


async def _alter(ctx: RequestContext, resource: Resource, validate_only: bool) -> Result:
    kind, name = resource.resource_type, resource.resource_name
    ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
    lists = TOPIC_LIST_CONFIGS if kind == TOPIC else {}
    # From the values set when the change runs (a topic's after the change before it).
    return await alter_configs(
        ctx, kind, name, lambda current: resolve(ops, current, lists), validate_only
    )


async def handle(ctx: RequestContext, request: Request) -> v1.IncrementalAlterConfigsResponse:
    # To its end if the client goes (`broker.to_the_end`), as Kafka's controller commits a
    # request's config records whatever became of it: resources are changed a slice at a time,
    # and a request cancelled between slices left some changed (in memory only) and the rest not.
    return await ctx.services.changes.to_the_end(_alter_all(ctx, request))


async def _alter_all(ctx: RequestContext, request: Request) -> v1.IncrementalAlterConfigsResponse:
    responses = []
    slicer = Slicer()  # a request may name a million resources
    for resource in request.resources:
        await slicer.pause()
        code, message = await _alter(ctx, resource, request.validate_only)
        responses.append(
            v1.response.AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    # Group configs changed are written off the loop, before the answer.
    await ctx.services.group_config_saves.durable(ctx.services.group_configs)
    return v1.IncrementalAlterConfigsResponse(throttle_time=NO_THROTTLE, responses=tuple(responses))


HANDLER = handler(
    handle, v0.IncrementalAlterConfigsRequest, v1.IncrementalAlterConfigsRequest, acl=ACL_CHECKS
)
