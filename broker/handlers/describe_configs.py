"""DescribeConfigs (32): GROUP (share and consumer groups' configs), TOPIC and BROKER resources.

A topic lists every config Shoal acts on with its effective value (the topic's own, else the
broker's `log.*` default, with that one's source), plus any other config stored on it. The
broker lists its configs; the dynamic ones (`group.share.*` and the `log.*` defaults, see
`broker.dynamic_config`) are writable, the rest read-only. Asked for them (v1+
IncludeSynonyms), each entry lists its synonyms, the value at each layer it has one, in the
order the first of them wins, as Kafka's ConfigHelper does (`configSynonyms`); the entry's
source is the first one's.
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.describe_configs import v1
from kio.schema.describe_configs import v2
from kio.schema.describe_configs import v3
from kio.schema.describe_configs import v4
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.authorization import config_refusal
from broker.config import DEFAULTS
from broker.config import LOG_CONFIG_SYNONYMS
from broker.config import SENSITIVE
from broker.context import RequestContext
from broker.dynamic_config import DYNAMIC
from broker.handlers.common import NO_THROTTLE
from broker.handlers.config_changes import other_broker
from broker.registry import handler
from broker.slicing import sliced_map
from coordinator.group_configs import DEFS as GROUP_CONFIGS
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.config import DLQ_GROUP_ENABLE
from storage.config import TOPIC_CONFIG_FIELDS

TOPIC, BROKER, GROUP = 2, 4, 32
# ConfigSource values of DescribeConfigs v1+ (Kafka's DescribeConfigsResponse.ConfigSource).
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER = 1, 2, 3
STATIC_BROKER, DEFAULT, DYNAMIC_GROUP = 4, 5, 8

Synonym = tuple[str, str, int]  # name, value, source
Row = tuple[str, str, int, bool, tuple[Synonym, ...]]  # name, value, source, read only, synonyms
Request = (
    v1.DescribeConfigsRequest
    | v2.DescribeConfigsRequest
    | v3.DescribeConfigsRequest
    | v4.DescribeConfigsRequest
)
Resource = (
    v1.request.DescribeConfigsResource
    | v2.request.DescribeConfigsResource
    | v3.request.DescribeConfigsResource
    | v4.request.DescribeConfigsResource
)


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _group(ctx: RequestContext, name: str) -> tuple[ErrorCode, str | None, list[Row]]:
    """Every group config; one the group has not set shows its broker default, with that
    setting's source (Kafka's `ConfigHelper.createGroupConfigEntry`)."""
    if not name:
        return ErrorCode.invalid_group_id, "group name is empty", []
    rows = ctx.services.group_configs.describe(name)
    return ErrorCode.none, None, [_row(ctx, n, v, own, DYNAMIC_GROUP) for n, v, own in rows]


def _row(ctx: RequestContext, name: str, value: str, own: bool, own_source: int) -> Row:
    """A topic's or group's config: its own value (if set) over its broker default's
    synonyms (Kafka's `createTopicConfigEntry`, `createGroupConfigEntry`)."""
    broker_name = (
        GROUP_CONFIGS[name].broker_default
        if own_source == DYNAMIC_GROUP
        else LOG_CONFIG_SYNONYMS.get(name)
    )
    synonyms = tuple(_broker_synonyms(ctx, broker_name)) if broker_name is not None else ()
    if own:
        synonyms = ((name, value, own_source), *synonyms)
    return name, value, synonyms[0][2] if synonyms else DEFAULT, False, synonyms


def _topic(ctx: RequestContext, name: str) -> tuple[ErrorCode, str | None, list[Row]]:
    logs = ctx.services.logs
    topic = logs.topic(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"no topic {name!r}", []
    own = topic.configs
    rows: dict[str, Row] = {
        n: _row(ctx, n, own[n] if n in own else _text(getattr(logs.config, f)), n in own,
                DYNAMIC_TOPIC)
        for n, f in TOPIC_CONFIG_FIELDS.items()
    }  # fmt: skip
    rows[DLQ_GROUP_ENABLE] = (DLQ_GROUP_ENABLE, "false", DEFAULT, False, ())  # KIP-1191's default
    for n, v in own.items():
        if n not in TOPIC_CONFIG_FIELDS:  # stored, not acted on: no broker default here
            rows[n] = (n, v, DYNAMIC_TOPIC, False, ((n, v, DYNAMIC_TOPIC),))
    return ErrorCode.none, None, [rows[n] for n in sorted(rows)]


def _broker(ctx: RequestContext, name: str) -> tuple[ErrorCode, str | None, list[Row]]:
    s = ctx.services
    refused = other_broker(s.node_id, name, describing=True)
    if refused is not None:
        return ErrorCode.invalid_request, refused, []
    dynamic = s.dynamic_configs
    # --processes N: "" is the cluster default, without this node's own configs over it.
    values = dynamic.cluster if dynamic.per_node and not name else s.config
    rows = []
    for n, v in sorted(values.values.items()):
        synonyms = tuple(_broker_synonyms(ctx, n, node_layer=bool(name), this_broker=bool(name)))
        rows.append((n, _text(v), synonyms[0][2] if synonyms else DEFAULT, n not in DYNAMIC,
                     synonyms))  # fmt: skip
    return ErrorCode.none, None, rows


def _broker_synonyms(
    ctx: RequestContext, name: str, *, node_layer: bool = True, this_broker: bool = False
) -> list[Synonym]:
    """Broker setting `name` at each layer that has it, in Kafka's order
    (core/src/main/scala/kafka/server/ConfigHelper.scala, `configSynonyms`): this broker's own
    dynamic value (DYNAMIC_BROKER_CONFIG: N > 1, this node's), the cluster default
    (DYNAMIC_DEFAULT_BROKER_CONFIG), the properties file (STATIC_BROKER_CONFIG: a value other
    than the default), the default (DEFAULT_CONFIG); the first is where the value in force
    comes from. A topic's or group's default is sourced so too (`createTopicConfigEntry`,
    `createGroupConfigEntry`). `node_layer` False: BROKER "", the cluster default without this
    node's own values (Kafka leaves DYNAMIC_BROKER_CONFIG out of a default resource's). With
    N = 1 the one broker's dynamic configs are the cluster's, described as its own only for its
    BROKER "<id>" (`this_broker`)."""
    dynamic = ctx.services.dynamic_configs
    out: list[Synonym] = []
    if node_layer and name in dynamic.node_stored:
        out.append((name, dynamic.node_stored[name], DYNAMIC_BROKER))
    if name in dynamic.stored:
        own = this_broker and not dynamic.per_node
        out.append((name, dynamic.stored[name], DYNAMIC_BROKER if own else DYNAMIC_DEFAULT_BROKER))
    static = dynamic.static.by_name(name)
    default = DEFAULTS.get(name)
    if default is None or default[0] != static:
        out.append((name, _text(static), STATIC_BROKER))
    if default is not None:
        out.append((name, _text(default[0]), DEFAULT))
    return out


_BY_TYPE = {GROUP: _group, TOPIC: _topic, BROKER: _broker}


def _entries(ctx: RequestContext, resource: Resource) -> tuple[ErrorCode, str | None, list[Row]]:
    kind, name = resource.resource_type, resource.resource_name
    refused = config_refusal(ctx, kind, name, AclOperation.DESCRIBE_CONFIGS)
    if refused is not None:
        return refused, None, []
    describe = _BY_TYPE.get(resource.resource_type)
    if describe is None:
        return (
            ErrorCode.invalid_request,
            f"resource type {resource.resource_type} is not supported",
            [],
        )
    return describe(ctx, resource.resource_name)


def _result(
    ctx: RequestContext, resource: Resource, with_synonyms: bool
) -> v4.response.DescribeConfigsResult:
    code, message, rows = _entries(ctx, resource)
    wanted = set(resource.configuration_keys) if resource.configuration_keys is not None else None
    configs = tuple(
        v4.response.DescribeConfigsResourceResult(
            name=name,
            value=None if name in SENSITIVE else value,
            read_only=read_only,
            config_source=i8(source),
            is_sensitive=name in SENSITIVE,
            synonyms=tuple(
                v4.response.DescribeConfigsSynonym(
                    name=n, value=None if n in SENSITIVE else v, source=i8(src)
                )
                for n, v, src in synonyms
            )
            if with_synonyms
            else (),
            documentation=None,
        )
        for name, value, source, read_only, synonyms in rows
        if wanted is None or name in wanted
    )
    return v4.response.DescribeConfigsResult(
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


async def handle(ctx: RequestContext, request: Request) -> v4.DescribeConfigsResponse:
    # A request may name a million resources; one named again is answered with the same entry.
    described: dict[tuple[int, str, tuple[str, ...] | None], v4.response.DescribeConfigsResult]
    described = {}

    def result(resource: Resource) -> v4.response.DescribeConfigsResult:
        keys = resource.configuration_keys
        key = (resource.resource_type, resource.resource_name, tuple(keys) if keys else keys)
        if (found := described.get(key)) is None:
            found = described[key] = _result(ctx, resource, request.include_synonyms)
        return found

    resources: Sequence[Resource] = request.resources
    results = await sliced_map(result, resources)
    return v4.DescribeConfigsResponse(throttle_time=NO_THROTTLE, results=tuple(results))


HANDLER = handler(
    handle,
    v1.DescribeConfigsRequest,
    v2.DescribeConfigsRequest,
    v3.DescribeConfigsRequest,
    v4.DescribeConfigsRequest,
    acl=(
        (AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC),
        (AclOperation.DESCRIBE_CONFIGS, ResourceType.GROUP),
        (AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER),
    ),
)
