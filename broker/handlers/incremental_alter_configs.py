"""IncrementalAlterConfigs (44): GROUP (32), TOPIC (2) and BROKER (4) configs.

- GROUP: share-group configs, each validated against the broker's bounds (seed 002).
- TOPIC: the configs Shoal's logs act on (`segment.bytes`, `retention.ms`, ...) and a few
  more Kafka topic configs that are stored and described but change nothing here.
- BROKER (node id, or "" for the cluster default): the dynamic `group.share.*` configs,
  persisted in the data dir (see `broker.dynamic_config`); any other name is refused.

A resource's changes apply all or nothing. SET and DELETE apply; APPEND and SUBTRACT are for
list configs, which none of these are.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs import v0
from kio.schema.incremental_alter_configs import v1

from broker.context import RequestContext
from broker.dynamic_config import InvalidBrokerConfig
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from coordinator.group_configs import InvalidGroupConfig
from coordinator.share_group import CoordinatorError
from coordinator.share_group import check_ids
from storage.config import check_topic_config_names
from storage.errors import StorageError

TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE = 0, 1
Result = tuple[ErrorCode, str | None]
Request = v0.IncrementalAlterConfigsRequest | v1.IncrementalAlterConfigsRequest
Resource = v0.request.AlterConfigsResource | v1.request.AlterConfigsResource


def _changes(resource: Resource) -> dict[str, str | None] | Result:
    changes: dict[str, str | None] = {}
    for c in resource.configs:
        if c.config_operation not in (SET, DELETE):
            return ErrorCode.invalid_config, f"{c.name}: only SET and DELETE apply here"
        changes[c.name] = c.value if c.config_operation == SET else None
    return changes


def _group(ctx: RequestContext, name: str, changes: dict[str, str | None], dry: bool) -> Result:
    try:
        check_ids(name)
    except CoordinatorError as e:
        return e.error_code, str(e)
    configs = ctx.services.group_configs
    try:
        if dry:
            for n, value in changes.items():
                if value is not None:
                    configs.validate(n, value)
        else:
            configs.alter(name, changes)
    except InvalidGroupConfig as e:
        return ErrorCode.invalid_config, str(e)
    return ErrorCode.none, None


def _topic(ctx: RequestContext, name: str, changes: dict[str, str | None], dry: bool) -> Result:
    logs = ctx.services.logs
    topic = logs.topic(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"no topic {name!r}"
    try:
        check_topic_config_names(changes)
        if dry:
            merged = {**topic.configs, **{k: v for k, v in changes.items() if v is not None}}
            logs.config.with_overrides(merged)
        else:
            logs.alter_topic_configs(name, changes)
    except StorageError as e:
        return ErrorCode.invalid_config, str(e)
    return ErrorCode.none, None


def _broker(ctx: RequestContext, name: str, changes: dict[str, str | None], dry: bool) -> Result:
    s = ctx.services
    if name not in ("", str(s.node_id)):
        return ErrorCode.invalid_request, f"this broker is node {s.node_id}, not {name!r}"
    try:
        s.dynamic_configs.alter(changes, validate_only=dry)
    except InvalidBrokerConfig as e:
        return ErrorCode.invalid_config, str(e)
    return ErrorCode.none, None


_BY_TYPE = {GROUP: _group, TOPIC: _topic, BROKER: _broker}


def _alter(ctx: RequestContext, resource: Resource, validate_only: bool) -> Result:
    alter = _BY_TYPE.get(resource.resource_type)
    if alter is None:
        return (
            ErrorCode.invalid_request,
            f"altering resource type {resource.resource_type} is not supported",
        )
    changes = _changes(resource)
    if isinstance(changes, tuple):
        return changes
    return alter(ctx, resource.resource_name, changes, validate_only)


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
