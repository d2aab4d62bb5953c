"""The broker's composition root, one function per family of services.

`Server` calls these in order: storage (the logs, the share state in them), groups and their
coordinators, share-partitions and share fetches, transactions, security, then metrics. Each
takes what the families before it made and returns what it makes, so the order of the calls
is the order of dependence; none starts a task (that is `Server.start`'s).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import structlog

from broker.acl_manager import AclManager
from broker.authorizer import AuthorizerSettings
from broker.authorizer import parse_super_users
from broker.classic_groups import ClassicGroupService
from broker.config import BrokerConfig
from broker.config import log_config
from broker.connection_quotas import ConnectionQuotas
from broker.context import BrokerServices
from broker.dynamic_config import DynamicBrokerConfigs
from broker.lag_readings import LagCollector
from broker.lag_readings import LagReader
from broker.lag_readings import LagReadings
from broker.loop_readings import LoopReadings
from broker.metrics import BrokerMetrics
from broker.node_identity import NODE_PRINCIPAL
from broker.node_link import NodeLinks
from broker.notifier import Notifier
from broker.producer_ids import ProducerIdAllocator
from broker.share.share_fetch_service import ShareFetchService
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_session_cache import ShareSessionCache
from broker.share.share_state_persister import ShareStatePersister
from broker.share.txn_acks import TxnShareAcks
from broker.to_the_end import Changes
from broker.transactions import RemoteMarkers
from broker.transactions import finishing
from broker.transactions import transaction_coordinator
from broker.txn_markers import MarkerChannel
from broker.txn_metrics import TransactionCollector
from client.security import Security
from coordinator.classic_group import ClassicGroupCoordinator
from coordinator.classic_group import ClassicLimits
from coordinator.consumer_assignors import parse_assignors
from coordinator.consumer_group import ConsumerGroupCoordinator
from coordinator.consumer_group import ConsumerLimits
from coordinator.group_configs import GroupConfigs
from coordinator.group_registry import GroupKind
from coordinator.group_registry import GroupRegistry
from coordinator.offset_store import OFFSETS_LOG_CONFIGS
from coordinator.offset_store import OffsetStore
from coordinator.share_group import CoordinatorLimits
from coordinator.share_group import ShareGroupCoordinator
from coordinator.share_group_records import ShareGroupRecords
from coordinator.transaction_coordinator import TransactionCoordinator
from coordinator.transaction_log import TransactionLog
from storage.acl_store import AclStore
from storage.log_manager import LogManager
from storage.share_state_store import SHARE_STATE_DIR
from storage.topics import CONSUMER_OFFSETS

log = structlog.get_logger("shoal.server")

TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]


# Storage


def partition_logs(config: BrokerConfig, dynamic: DynamicBrokerConfigs) -> LogManager:
    """The partitions' logs, opened lazily (`Server.start` opens the rest in slices); with
    several processes, only those this one leads, its own files in its node dir."""
    owner = config.ownership
    logs = LogManager(
        config.data_dir, log_config(dynamic.current), max_partitions=config.max_broker_partitions,
        lazy=True, threads=config.num_recovery_threads_per_data_dir, node_dir=config.node_dir,
        owns=None if owner.single else owner.leads, writes_topics=owner.is_controller,
    )  # fmt: skip
    # The log configs among them reach every log at once, under each topic's own configs.
    dynamic.on_change(lambda changed: logs.reconfigure(log_config(changed)))
    return logs


def share_state(config: BrokerConfig, logs: LogManager) -> ShareStatePersister | None:
    """Share state in the partitions' own logs, or None when it is not durable."""
    if not config.group_share_persister_class_name:
        log.warning("share state is not durable: group.share.persister.class.name is empty")
        return None
    return ShareStatePersister(
        logs,
        config.data_dir / SHARE_STATE_DIR,
        max_deltas=config.share_coordinator_snapshot_update_records_per_snapshot,
    )


def cluster_id(data_dir: Path) -> str:
    path = data_dir / "meta.properties"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1]
    new_id = uuid.uuid4().hex[:22]
    path.write_text(f"version=1\ncluster.id={new_id}\n")
    return new_id


# Groups and their coordinators


def group_configs(config: BrokerConfig, dynamic: DynamicBrokerConfigs) -> GroupConfigs:
    """By Kafka name, from the group config table; read afresh as dynamic changes land (the
    values cached per group, `broker/share/limits.py`, are told when they do)."""
    configs = GroupConfigs(config.data_dir / "share-group-configs.json", dynamic.current_value)
    dynamic.on_change(lambda _: configs.broker_changed())
    return configs


def topic_lookup(logs: LogManager) -> TopicLookup:
    def lookup(name: str) -> tuple[uuid.UUID, int] | None:
        topic = logs.topic(name)
        if topic is None and logs.refresh_topics():  # made by the controller since
            topic = logs.topic(name)
        return (topic.topic_id, topic.partitions) if topic else None

    return lookup


@dataclass(frozen=True)
class Groups:
    """Every kind of group's coordinator, and the registry that says which holds an id."""

    registry: GroupRegistry
    share: ShareGroupCoordinator
    consumer: ConsumerGroupCoordinator
    classic: ClassicGroupService


def group_coordinators(
    dynamic: DynamicBrokerConfigs,
    configs: GroupConfigs,
    logs: LogManager,
    durable_share_groups: Callable[[], Collection[str]],
    now_ms: Callable[[], int],
) -> Groups:
    """Each kind's coordinator, registered as it is made; limits read afresh per group."""

    def limits(group_id: str) -> CoordinatorLimits:
        return CoordinatorLimits(
            max_size=dynamic.current.group_share_max_size,
            session_timeout_ms=configs.effective(group_id, "share.session.timeout.ms"),
            heartbeat_interval_ms=configs.effective(group_id, "share.heartbeat.interval.ms"),
        )

    def consumer_limits(group_id: str) -> ConsumerLimits:
        c = dynamic.current
        return ConsumerLimits(  # the group's own configs, else the broker's defaults
            session_timeout_ms=configs.effective(group_id, "consumer.session.timeout.ms"),
            heartbeat_interval_ms=configs.effective(group_id, "consumer.heartbeat.interval.ms"),
            max_size=c.group_consumer_max_size,
            assignors=parse_assignors(c.group_consumer_assignors),
        )

    def classic_limits() -> ClassicLimits:
        c = dynamic.current
        return ClassicLimits(
            min_session_timeout_ms=c.group_min_session_timeout_ms,
            max_session_timeout_ms=c.group_max_session_timeout_ms,
            max_size=c.group_max_size,
            initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
        )

    groups = GroupRegistry()
    lookup = topic_lookup(logs)
    share = ShareGroupCoordinator(limits, lookup)
    consumer = ConsumerGroupCoordinator(
        consumer_limits,
        lookup,
        topic_names=lambda: [t.name for t in logs.topics()],
        other_kind=groups.taken_by_another(GroupKind.CONSUMER, durable=True),
    )
    groups.register(GroupKind.SHARE, share, durable=durable_share_groups)
    groups.register(GroupKind.CONSUMER, consumer)
    classic = groups.register(GroupKind.CLASSIC, ClassicGroupCoordinator(classic_limits))
    return Groups(groups, share, consumer, ClassicGroupService(classic, now_ms))


def share_group_records(
    config: BrokerConfig, logs: LogManager, now_ms: Callable[[], int]
) -> ShareGroupRecords:
    """The share groups this coordinator recorded in its offsets log (`--processes N` only);
    replayed with the offsets (`transactions`)."""
    log = logs.internal_log(CONSUMER_OFFSETS, OFFSETS_LOG_CONFIGS)
    owner = config.ownership
    return ShareGroupRecords(log, now_ms, None if owner.single else owner.coordinates)


def join_offsets_to_groups(offsets: OffsetStore, groups: Groups) -> None:
    """Committed offsets follow the group coordinators' verdicts (generation, membership)."""
    for group_coordinator in (groups.classic.coordinator, groups.consumer):
        offsets.validators.append(group_coordinator)
        offsets.coordinators.append(group_coordinator)


# Share-partitions and share fetches


def share_partitions(
    logs: LogManager,
    configs: GroupConfigs,
    notifier: Notifier,
    persister: ShareStatePersister | None,
    metrics: BrokerMetrics,
    dynamic: DynamicBrokerConfigs,
) -> SharePartitionManager:
    return SharePartitionManager(
        logs,
        configs,
        lambda t, p: notifier.notify((t, p)),
        persister=persister,
        metrics=metrics,
        dead_letter_prefix=lambda: dynamic.current.errors_deadletterqueue_topic_name_prefix,
    )


def share_fetch(
    config: BrokerConfig,
    manager: SharePartitionManager,
    coordinator: ShareGroupCoordinator,
    logs: LogManager,
    configs: GroupConfigs,
) -> ShareFetchService:
    def topic_of(topic_id: uuid.UUID) -> tuple[uuid.UUID, int] | None:
        topic = logs.topic_by_id(topic_id)
        if topic is None and logs.refresh_topics():  # made by the controller since
            topic = logs.topic_by_id(topic_id)
        return (topic.topic_id, topic.partitions) if topic else None

    owner = config.ownership
    if owner.single:
        return ShareFetchService(
            ShareSessionCache(config.group_share_max_share_sessions),
            manager,
            is_member=coordinator.is_member,
            topic_of=topic_of,
        )

    def is_member(group_id: str, member_id: str) -> bool:
        """Asked when a share session opens: its share-partitions are made next, under the
        group's configs (share.auto.offset.reset): read them again if node 0 changed them
        since (a stat), not up to a second later. A partition's leader is not its group's
        coordinator when another process coordinates the group: as in Kafka, the leader
        takes the member's word for it."""
        configs.reload()
        return not owner.coordinates(group_id) or coordinator.is_member(group_id, member_id)

    return ShareFetchService(
        ShareSessionCache(config.group_share_max_share_sessions),
        manager,
        is_member=is_member,
        topic_of=topic_of,
        led_elsewhere=lambda topic_id, p: not owner.leads(topic_id, p),
    )


def earliest_share_offset(
    persister: ShareStatePersister | None,
) -> Callable[[str, int], int | None]:
    """The lowest offset share state still needs on a partition (DeleteRecords keeps it)."""

    def earliest(topic: str, partition: int) -> int | None:
        return persister.earliest_share_offset(topic, partition) if persister else None

    return earliest


# Transactions


@dataclass(frozen=True)
class Transactions:
    offsets: OffsetStore  # consumer groups' committed offsets (transactions commit them too)
    txn_log: TransactionLog
    producer_ids: ProducerIdAllocator
    coordinator: TransactionCoordinator
    share_acks: TxnShareAcks  # share acknowledgements staged in transactions (Shoal's own)
    # `--processes N`, N > 1: the other processes, and this one's markers that they write.
    node_links: NodeLinks | None = None
    remote: RemoteMarkers | None = None


def transactions(
    config: BrokerConfig,
    logs: LogManager,
    notifier: Notifier,
    dynamic: DynamicBrokerConfigs,
    now_ms: Callable[[], int],
    share_partitions: SharePartitionManager,
    node_security: Security | None = None,
    share_groups: ShareGroupRecords | None = None,
) -> Transactions:
    offsets = OffsetStore.open(logs, now_ms, share_groups.replay if share_groups else None)
    txn_log = TransactionLog.open(logs, now_ms)
    # Above every id any partition or transactional id recorded, whatever happened to its
    # own file: it starts once every log is open (`Server._start_producer_ids`).
    owner = config.ownership
    producer_ids = ProducerIdAllocator(
        config.node_dir / "producer-ids",
        None,
        stride=owner.nodes,
        offset=0 if owner.single else owner.node_id,
    )
    share_acks = TxnShareAcks(share_partitions)
    links = remote = None
    if not owner.single:
        inter = config.inter_node_listener  # its port here; node n's is that + n - our id
        links = NodeLinks(owner, (inter.host, inter.port), node_security)
        channel = MarkerChannel(links, lambda topic: logs.topic(topic) is not None)
        remote = RemoteMarkers(logs, owner, channel)
    coordinator = transaction_coordinator(
        logs, txn_log, offsets, producer_ids, notifier, lambda: dynamic.current, now_ms,
        share_acks.end, remote,
    )  # fmt: skip
    if remote is not None:  # set before any delivery runs (they start once this returns)
        remote.channel.on_written = finishing(coordinator, now_ms)
    return Transactions(offsets, txn_log, producer_ids, coordinator, share_acks, links, remote)


# Security


def acl_manager(
    config: BrokerConfig, changes: Changes, node_secret: str | None = None
) -> AclManager | None:
    """None when `authorizer.class.name` is empty: every request is allowed. With
    `--processes N` the processes' own principal is a super user (`broker.node_identity`)."""
    if not config.authorizer_class_name:
        return None
    super_users = parse_super_users(config.super_users)
    if node_secret is not None:
        super_users |= {NODE_PRINCIPAL}
    return AclManager(
        AclStore(config.data_dir),
        AuthorizerSettings(super_users, config.allow_everyone_if_no_acl_found),
        changes,
    )


# Metrics and operations


def watch(services: BrokerServices, quotas: ConnectionQuotas) -> LoopReadings[LagReadings]:
    """The metrics' gauges and collectors over the services; returns the lag readings, which
    the server attaches when it serves metrics."""
    s, metrics = services, services.metrics
    partitions = s.share_partitions.partitions  # by key
    metrics.gauges(
        in_flight=lambda: sum(sp.in_flight_count() for sp in partitions().values()),
        acquired=lambda: sum(sp.acquired_count() for sp in partitions().values()),
        sessions=lambda: len(s.share_fetch.sessions),
        members=lambda: sum(len(g.members) for g in s.coordinator.groups.values()),
        share_partitions=lambda: len(partitions()),
        damaged_records=s.logs.damaged_records,
        missing_records=s.logs.missing_records,
    )
    classic = s.classic_groups.coordinator
    metrics.classic_groups(
        lambda: {state.value: n for state, n in classic.counts_by_state().items()},
        lambda: classic.rebalances,
    )
    metrics.consumer_groups(s.consumer_groups.counts_by_state, lambda: s.consumer_groups.rebalances)

    def share_groups_by_state() -> dict[str, int]:
        counts = dict.fromkeys(("Empty", "Stable"), 0)  # both series exist from the start
        for group in list(s.coordinator.groups.values()):
            counts[group.state] = counts.get(group.state, 0) + 1
        return counts

    metrics.share_groups(share_groups_by_state, lambda: s.coordinator.rebalances)
    # Lag and log sizes are read on the event loop, when a scrape asks (LoopReadings).
    reader = LagReader(
        s.logs,
        lambda: list(partitions().values()),
        s.offsets.committed_snapshot,
        s.logs.partition_logs,
        s.now_ms,
    )
    readings = LoopReadings(reader.read, LagReadings())
    metrics.registry.register(LagCollector(readings.read))
    txns = s.transactions.txns
    metrics.registry.register(
        TransactionCollector(lambda: list(txns.values()), s.logs.partition_logs)
    )
    metrics.connections(lambda: quotas.listeners)
    return readings
