"""Small pieces every handler uses: topic lookup and creation, partition limits, constants."""

from __future__ import annotations

import datetime
from typing import Final

import structlog
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from broker.context import RequestContext
from broker.controller_link import create_on_controller
from storage.errors import TopicAlreadyExists
from storage.topics import TopicInfo

log = structlog.get_logger("shoal.topics")

# Shoal never throttles a client.
NO_THROTTLE: Final = i32Timedelta.parse(datetime.timedelta(0))


async def topic_or_create(
    ctx: RequestContext, name: str, allow_create: bool
) -> tuple[TopicInfo | None, ErrorCode]:
    """Find a topic, creating it when auto-creation is on and the client allows it."""
    s = ctx.services
    topic = s.logs.topic(name)
    if topic is None and s.logs.refresh_topics():  # made by the controller since the last look
        topic = s.logs.topic(name)
    if topic is not None:
        return topic, ErrorCode.none
    if not (allow_create and s.config.auto_create_topics_enable):
        return None, ErrorCode.unknown_topic_or_partition
    if not s.config.ownership.is_controller:
        made = await create_on_controller(s, name, s.config.num_partitions)
        return (made, ErrorCode.none) if made else (None, ErrorCode.leader_not_available)
    try:
        created = await s.topic_admin.create_topic(
            s.logs, name, s.config.num_partitions, {}, _logged_auto
        )
    except TopicAlreadyExists:  # made meanwhile, by another request
        topic = s.logs.topic(name)
        return (topic, ErrorCode.none) if topic else (None, ErrorCode.leader_not_available)
    except Exception as e:  # an invalid name, most often
        return None, getattr(e, "error_code", ErrorCode.invalid_topic_exception)
    return created, ErrorCode.none


def _logged_auto(created: TopicInfo) -> None:
    """Said by the creation itself (`TopicAdmin`): the client may have gone meanwhile."""
    log.info("topic created", topic=created.name, partitions=created.partitions,
             topic_id=str(created.topic_id), auto=True)  # fmt: skip


NOT_CONTROLLER_MESSAGE = "node 0 is the controller: it alone writes topics and configs"


def not_controller(ctx: RequestContext) -> bool:
    """With `--processes N`, only node 0 writes topics and configs (one writer per file); the
    others answer such requests NOT_CONTROLLER, as a Kafka broker that is not the controller
    did before KIP-590. librdkafka's admin client sends them to the controller Metadata names
    (rdkafka_admin.c: every admin request defaults to RD_KAFKA_ADMIN_TARGET_CONTROLLER)."""
    return not ctx.services.config.ownership.is_controller


def not_coordinator(ctx: RequestContext, key: str) -> bool:
    """With `--processes N`, whether another process coordinates this group id or
    transactional id (`Ownership.coordinator`: crc32 % N). Kafka's coordinator answers
    NOT_COORDINATOR where the key's `__consumer_offsets` or `__transaction_state` partition is
    not loaded (`CoordinatorRuntime` throws NotCoordinatorException for a shard that is not
    local; `TransactionStateManager.getTransactionState` returns NOT_COORDINATOR), and every
    client then asks FindCoordinator again and retries there. Checked after authorization, as
    KafkaApis authorizes before it calls the coordinator, and before any state is read or
    made: a group made on the wrong node would be a second group of the same name. With N = 1
    every key is local (no hash)."""
    owner = ctx.services.config.ownership
    return not owner.single and owner.coordinator(key) != owner.node_id


NOT_COORDINATOR_MESSAGE = "another node of --processes N coordinates it: ask FindCoordinator"


def missing_partition(ctx: RequestContext, topic: str, partition: int) -> ErrorCode:
    """The code for a partition whose log this process does not have: another process of
    `--processes N` leads it (NOT_LEADER_OR_FOLLOWER: the client refreshes its metadata and
    goes to the leader, as after a leader change in Kafka), or it does not exist."""
    if ctx.services.logs.led_elsewhere(topic, partition):
        return ErrorCode.not_leader_or_follower
    return ErrorCode.unknown_topic_or_partition


def too_many_subscribed(ctx: RequestContext, count: int) -> str | None:
    """Why a subscription (a group heartbeat's topic names or owned partitions) is refused,
    if it is: more than the broker could ever hold (max.broker.partitions; a topic has one
    partition at least). No client sends that; each heartbeat of its group would walk it
    (a million names held the loop for seconds). Kafka has no such limit, nor a broker this
    small."""
    limit = ctx.services.config.max_broker_partitions
    if count > limit:
        return f"{count} subscribed, over max.broker.partitions ({limit})"
    return None


def too_many_partitions(ctx: RequestContext, added: int) -> str | None:
    """Why a request adding `added` partitions is refused before anything is created, if it is."""
    limit = ctx.services.config.max_partitions_per_request
    if added > limit:
        return f"the request adds {added} partitions, over max.partitions.per.request ({limit})"
    total, cap = ctx.services.logs.partition_count() + added, ctx.services.logs.max_partitions
    if cap is not None and total > cap:
        return f"{added} more partitions would make {total}, over max.broker.partitions ({cap})"
    return None
