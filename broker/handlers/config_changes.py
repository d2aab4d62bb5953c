"""Config changes of one resource, all or nothing: what IncrementalAlterConfigs and
AlterConfigs share. A change maps a name to its new value, or to None to remove it.

- GROUP: share and consumer groups' configs, each validated against the broker's bounds
  (seed 002).
- TOPIC: the configs Shoal's logs act on, and a few Kafka topic configs that are stored.
- BROKER (node id, or "" for the cluster default): the dynamic `group.share.*` and `log.*`
  configs (`broker.dynamic_config`). With `--processes N` node i alone writes its own ("i"),
  in its node dir, whatever node the controller is; node 0 the cluster default.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from typing import Final

import structlog
from kio.schema.errors import ErrorCode

from broker.authorization import config_refusal
from broker.config_ops import InvalidOperation
from broker.context import RequestContext
from broker.dynamic_config import InvalidBrokerConfig
from broker.handlers.common import NOT_CONTROLLER_MESSAGE
from broker.handlers.common import not_controller
from coordinator.group_configs import InvalidGroupConfig
from coordinator.share_group import CoordinatorError
from coordinator.share_group import check_ids
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.config import check_topic_config_names
from storage.config import check_topic_config_values
from storage.errors import StorageError
from storage.errors import UnknownTopicOrPartition

TOPIC, BROKER, GROUP = 2, 4, 32
_NAMES: Final = {TOPIC: "topic", BROKER: "broker", GROUP: "group"}
SECRET_WORDS: Final = ("password", "jaas", "secret", "keystore.key", "private")
_SHOWN_CHARS: Final = 200  # of a value, in the log line of a change
log = structlog.get_logger("shoal.configs")
# What both handlers check: ALTER_CONFIGS on the topic, group, or cluster (for a broker).
ACL_CHECKS: Final = (
    (AclOperation.ALTER_CONFIGS, ResourceType.TOPIC),
    (AclOperation.ALTER_CONFIGS, ResourceType.GROUP),
    (AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER),
)
Result = tuple[ErrorCode, str | None]
Changes = dict[str, str | None]
# A resource's changes worked out from the values set on it (IncrementalAlterConfigs' APPEND
# reads them): for a topic, once the change before it has ended.
ChangesOf = Callable[[Mapping[str, str]], Mapping[str, str | None]]


def _group(ctx: RequestContext, name: str, changes: dict[str, str | None], dry: bool) -> Result:
    try:
        check_ids(name)
    except CoordinatorError as e:
        return e.error_code, str(e)
    configs = ctx.services.group_configs
    try:
        if dry:
            configs.check(name, changes)
        else:
            configs.change(name, changes)  # written before the answer (`durable`)
    except InvalidGroupConfig as e:
        return ErrorCode.invalid_config, str(e)
    return ErrorCode.none, None


async def _topic(
    ctx: RequestContext, name: str, changes_of: ChangesOf, dry: bool, made: Changes
) -> Result:
    """`made`: filled with the changes worked out (for the log line)."""
    logs = ctx.services.logs
    topic = logs.topic(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"no topic {name!r}"

    def recorded(configs: Mapping[str, str]) -> Mapping[str, str | None]:
        made.update(changes := changes_of(configs))
        return changes

    try:
        if dry:
            changes = recorded(topic.configs)
            check_topic_config_names(changes)
            check_topic_config_values(changes)
            merged = {**topic.configs, **{k: v for k, v in changes.items() if v is not None}}
            logs.config.with_overrides(merged)
        else:  # after any change of the topic under way, its file written off the loop
            await ctx.services.topic_admin.alter_configs(logs, name, recorded)
    except InvalidOperation as e:
        return e.error_code, str(e)
    except UnknownTopicOrPartition as e:  # deleted while its change waited
        return e.error_code, str(e)
    except StorageError as e:
        return ErrorCode.invalid_config, str(e)
    except OSError as e:
        log.error("topic configs not written", topic=name, error=str(e))
        return ErrorCode.kafka_storage_error, f"the topic's configs were not written: {e}"
    return ErrorCode.none, None


def other_broker(node_id: int, name: str, *, describing: bool = False) -> str | None:
    """Kafka's INVALID_REQUEST message for a BROKER resource that names no broker or another
    one (`ConfigAdminManager.validateResourceNameIsCurrentNodeId`, and
    `ConfigHelper.describeConfigs`), or None for "" or this node's id."""
    if not name or name == str(node_id):
        return None
    if describing:
        return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
    if not name.lstrip("-").isdigit():
        return f"Node id must be an integer, but it is: {name}"
    return f"Unexpected broker id, expected {node_id}, but received {name}"


async def _broker(
    ctx: RequestContext, name: str, changes_of: ChangesOf, dry: bool, made: Changes
) -> Result:
    """`made`: filled with the changes worked out (for the log line)."""
    s = ctx.services
    refused = other_broker(s.node_id, name)
    if refused is not None:
        return ErrorCode.invalid_request, refused

    def worked_out() -> Mapping[str, str | None]:
        made.update(changes := changes_of(current_configs(ctx, BROKER, name)))
        return changes

    try:  # --processes N: "<id>" is this node's own configs, "" the cluster default
        await s.dynamic_configs.alter_durably(worked_out, validate_only=dry, node=bool(name))
    except (InvalidBrokerConfig, InvalidOperation) as e:
        return e.error_code, str(e)
    return ErrorCode.none, None


async def alter_configs(
    ctx: RequestContext, resource_type: int, name: str, changes_of: ChangesOf, dry: bool
) -> Result:
    """Change a resource's configs by `changes_of(the values set on it now)`: for a topic,
    worked out once the topic's change before it has ended (`TopicAdmin.alter_configs`)."""
    refused = config_refusal(ctx, resource_type, name, AclOperation.ALTER_CONFIGS)
    if refused is not None:
        return refused, None
    # A named broker is this node's own file, or refused here (Kafka's brokers check the name
    # before they forward: `ConfigAdminManager.preprocess`); "" is the cluster's, node 0's.
    named_broker = resource_type == BROKER and name != ""
    if not_controller(ctx) and not named_broker:
        return ErrorCode.not_controller, NOT_CONTROLLER_MESSAGE
    changes: Changes = {}
    if resource_type == TOPIC:
        result = await _topic(ctx, name, changes_of, dry, changes)
    elif resource_type == BROKER:
        result = await _broker(ctx, name, changes_of, dry, changes)
    elif resource_type == GROUP:
        try:
            changes = dict(changes_of(current_configs(ctx, GROUP, name)))
        except InvalidOperation as e:
            return e.error_code, str(e)
        result = _group(ctx, name, changes, dry)
    else:
        return ErrorCode.invalid_request, f"altering resource type {resource_type} is not supported"
    if result[0] == ErrorCode.none and not dry:
        log.info(
            "configs altered", resource_type=_NAMES[resource_type], resource=name,
            set={k: _shown(k, v) for k, v in changes.items() if v is not None},
            deleted=sorted(k for k, v in changes.items() if v is None),
        )  # fmt: skip
    return result


def _shown(name: str, value: str) -> str:
    """Secrets (passwords, JAAS lines, keys) are never written to the log, nor the whole of a
    long value (a stored topic config may be megabytes: rendered on the loop)."""
    if any(w in name for w in SECRET_WORDS):
        return "[hidden]"
    if len(value) > _SHOWN_CHARS:
        return f"{value[:_SHOWN_CHARS]}... ({len(value)} characters)"
    return value


def current_configs(ctx: RequestContext, resource_type: int, name: str) -> Mapping[str, str]:
    """The values set on a resource (not its defaults): what AlterConfigs replaces."""
    if resource_type == TOPIC:
        topic = ctx.services.logs.topic(name)
        return topic.configs if topic else {}
    if resource_type == BROKER:
        dynamic = ctx.services.dynamic_configs
        return dynamic.node_stored if name and dynamic.per_node else dynamic.stored
    return {}
