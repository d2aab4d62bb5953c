"""DescribeConfigs (32): GROUP (share-group configs), TOPIC and BROKER resources."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from protocol.messages import build

TOPIC, BROKER, GROUP = 2, 4, 32
# ConfigSource values of DescribeConfigs v1+.
DYNAMIC_TOPIC, DYNAMIC_GROUP, STATIC_BROKER, DEFAULT = 1, 8, 4, 5


def _entries(
    ctx: RequestContext, resource: Any
) -> tuple[ErrorCode, str | None, list[tuple[str, str, int, bool]]]:
    """(error, message, [(name, value, source, read_only)])."""
    s = ctx.services
    if resource.resource_type == GROUP:
        if not resource.resource_name:
            return ErrorCode.invalid_group_id, "group name is empty", []
        rows = s.group_configs.describe(resource.resource_name)
        return (
            ErrorCode.none,
            None,
            [(n, v, DYNAMIC_GROUP if own else DEFAULT, False) for n, v, own in rows],
        )
    if resource.resource_type == TOPIC:
        topic = s.logs.topic(resource.resource_name)
        if topic is None:
            return ErrorCode.unknown_topic_or_partition, f"no topic {resource.resource_name!r}", []
        return (
            ErrorCode.none,
            None,
            [(n, v, DYNAMIC_TOPIC, False) for n, v in sorted(topic.configs.items())],
        )
    if resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(s.node_id)):
            return ErrorCode.invalid_request, f"this broker is node {s.node_id}", []
        values = s.config.values
        return (
            ErrorCode.none,
            None,
            [
                (n, str(v).lower() if isinstance(v, bool) else str(v), STATIC_BROKER, True)
                for n, v in sorted(values.items())
            ],
        )
    return ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported", []


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    results = []
    for resource in request.resources:
        code, message, rows = _entries(ctx, resource)
        wanted = (
            set(resource.configuration_keys) if resource.configuration_keys is not None else None
        )
        configs = tuple(
            build(
                r.DescribeConfigsResourceResult,
                name=name,
                value=value,
                read_only=read_only,
                config_source=source,
                is_default=source == DEFAULT,
                is_sensitive=False,
                synonyms=(),
                documentation=None,
            )
            for name, value, source, read_only in rows
            if wanted is None or name in wanted
        )
        results.append(
            build(
                r.DescribeConfigsResult,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return build(r.type, results=tuple(results))


HANDLER = Handler(api_key=32, min_version=1, max_version=4, handle=handle, name="DescribeConfigs")
