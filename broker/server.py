"""The broker process: listen, run background duties, shut down in stages.

Start: topics are read, then the broker listens at once; the partitions' logs are opened
after, in slices between requests (a request for one not open yet opens it first), and new
producer ids wait until every log is open (the allocator must start above every id they hold).

Shutdown follows uvicorn's sequence: stop accepting, stop reading new requests, wait (bounded)
for in-flight requests to be answered, close connections, then flush and close the logs in
parallel, all within `shutdown.timeout.ms`; the recovery points are saved whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import uuid
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from broker.acceptor import Acceptor
from broker.acceptor import open_listening_sockets
from broker.acceptor import resolve_ip_overrides
from broker.acl_manager import AclManager
from broker.authorizer import AuthorizerSettings
from broker.authorizer import parse_super_users
from broker.classic_groups import ClassicGroupService
from broker.clock import Clock
from broker.clock import WallClock
from broker.config import RETENTION_SYNONYMS
from broker.config import BrokerConfig
from broker.config import log_config
from broker.connection import KafkaConnection
from broker.connection_quotas import ConnectionQuotas
from broker.connection_quotas import ConnectionSlot
from broker.connection_sweep import ConnectionSweep
from broker.context import BrokerServices
from broker.dynamic_config import DynamicBrokerConfigs
from broker.failure_episode import FailureEpisode
from broker.group_commit import GroupCommit
from broker.handlers import build_registry
from broker.lag_readings import LagCollector
from broker.lag_readings import LagReader
from broker.lag_readings import LagReadings
from broker.listeners import Listener
from broker.listeners import advertised_endpoint
from broker.log_cleaning import LogCleaner
from broker.loop_readings import LoopReadings
from broker.metrics import BrokerMetrics
from broker.notifier import Notifier
from broker.producer_ids import ProducerIdAllocator
from broker.record_deletion import RecordDeletion
from broker.share.share_fetch_service import ShareFetchService
from broker.share.share_partition_manager import DEAD_LETTER_BUDGET
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_session_cache import ShareSessionCache
from broker.share.share_state_persister import ShareStatePersister
from broker.tls import server_context
from broker.transactions import transaction_coordinator
from broker.txn_metrics import TransactionCollector
from coordinator.classic_group import ClassicGroupCoordinator
from coordinator.classic_group import ClassicLimits
from coordinator.consumer_assignors import parse_assignors
from coordinator.consumer_group import ConsumerGroupCoordinator
from coordinator.consumer_group import ConsumerLimits
from coordinator.group_configs import GroupConfigs
from coordinator.group_registry import GroupKind
from coordinator.group_registry import GroupRegistry
from coordinator.offset_store import OffsetStore
from coordinator.share_group import CoordinatorLimits
from coordinator.share_group import ShareGroupCoordinator
from coordinator.transaction_log import TransactionLog
from storage.acl_store import AclStore
from storage.dir_lock import DataDirLock
from storage.errors import StorageError
from storage.log_manager import LogManager
from storage.scram_credentials import ScramCredentialStore
from storage.segment import PendingSync
from storage.segment import sync_all
from storage.share_state_store import SHARE_STATE_DIR

log = structlog.get_logger("shoal.server")

LOCK_TIMER_TICK_MS = 50  # acquisition locks expire at most this late
DEAD_LETTER_TICK_MS = 100  # given-up records reach the dead-letter topic about this late
MEMBER_CHECK_MS = 250
CLASSIC_GROUP_TICK_MS = 100  # joins end, and sessions expire, at most this late
SNAPSHOT_INTERVAL_MS = 1000  # share snapshot files catch up with their newest checkpoint


def _cluster_id(data_dir: Path) -> str:
    path = data_dir / "meta.properties"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1]
    cluster_id = uuid.uuid4().hex[:22]
    path.write_text(f"version=1\ncluster.id={cluster_id}\n")
    return cluster_id


class Server:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        """`clock`: where share logic reads the time; the wall clock unless a test passes one."""
        unknown = sorted(set(config.unknown) - set(RETENTION_SYNONYMS))
        if unknown or config.unknown_env:
            log.warning(
                "supplied but isn't a known config", names=unknown,
                environment=list(config.unknown_env),
            )  # fmt: skip
        data_dir = config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        # One broker per data dir; offline tools see it held (storage.dir_lock).
        self._dir_lock = DataDirLock(data_dir)
        # Dynamic broker configs stored in the data dir win over file, environment and flags.
        dynamic = DynamicBrokerConfigs(config)
        host, port = config.advertised
        logs = LogManager(
            data_dir, log_config(dynamic.current), max_partitions=config.max_broker_partitions,
            lazy=True, threads=config.num_recovery_threads_per_data_dir,
        )  # fmt: skip
        # The log configs among them reach every log at once, under each topic's own configs.
        dynamic.on_change(lambda changed: logs.reconfigure(log_config(changed)))
        # max.connections(.per.ip): read at each accept; a change wakes waiting listeners.
        self._quotas = ConnectionQuotas(lambda: dynamic.current)
        self._overrides_resolved: str | None = None  # the overrides text the quotas hold
        dynamic.on_change(self._connection_limits_changed)
        # By Kafka name, from the group config table; read afresh as dynamic changes land.
        group_configs = GroupConfigs(data_dir / "share-group-configs.json", dynamic.current_value)

        def limits(group_id: str) -> CoordinatorLimits:
            return CoordinatorLimits(
                max_size=dynamic.current.group_share_max_size,
                session_timeout_ms=group_configs.effective(group_id, "share.session.timeout.ms"),
                heartbeat_interval_ms=group_configs.effective(
                    group_id, "share.heartbeat.interval.ms"
                ),
            )

        def topic_lookup(name: str) -> tuple[uuid.UUID, int] | None:
            topic = logs.topic(name)
            return (topic.topic_id, topic.partitions) if topic else None

        def consumer_limits(group_id: str) -> ConsumerLimits:
            c = dynamic.current
            return ConsumerLimits(  # the group's own configs, else the broker's defaults
                session_timeout_ms=group_configs.effective(group_id, "consumer.session.timeout.ms"),
                heartbeat_interval_ms=group_configs.effective(
                    group_id, "consumer.heartbeat.interval.ms"
                ),
                max_size=c.group_consumer_max_size,
                assignors=parse_assignors(c.group_consumer_assignors),
            )

        notifier = Notifier()
        metrics = BrokerMetrics()
        durable = bool(config.group_share_persister_class_name)
        if not durable:
            log.warning("share state is not durable: group.share.persister.class.name is empty")
        self._share_state = (
            ShareStatePersister(
                logs,
                data_dir / SHARE_STATE_DIR,
                max_deltas=config.share_coordinator_snapshot_update_records_per_snapshot,
            )
            if durable
            else None
        )
        groups = GroupRegistry()  # each kind's coordinator is registered as it is made
        coordinator = ShareGroupCoordinator(limits, topic_lookup)
        consumer_groups = ConsumerGroupCoordinator(
            consumer_limits,
            topic_lookup,
            topic_names=lambda: [t.name for t in logs.topics()],
            other_kind=groups.taken_by_another(GroupKind.CONSUMER),
        )
        share_partitions = SharePartitionManager(
            logs,
            group_configs,
            lambda t, p: notifier.notify((t, p)),
            persister=self._share_state,
            metrics=metrics,
            dead_letter_prefix=lambda: dynamic.current.errors_deadletterqueue_topic_name_prefix,
        )
        groups.register(GroupKind.SHARE, coordinator, durable=share_partitions.durable_groups)
        groups.register(GroupKind.CONSUMER, consumer_groups)

        def partition_count(topic_id: uuid.UUID) -> int | None:
            topic = logs.topic_by_id(topic_id)
            return topic.partitions if topic else None

        share_state = self._share_state

        def earliest_share_offset(topic: str, partition: int) -> int | None:
            return share_state.earliest_share_offset(topic, partition) if share_state else None

        clock = clock or WallClock()

        def classic_limits() -> ClassicLimits:
            c = dynamic.current
            return ClassicLimits(
                min_session_timeout_ms=c.group_min_session_timeout_ms,
                max_session_timeout_ms=c.group_max_session_timeout_ms,
                max_size=c.group_max_size,
                initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
            )

        offsets = OffsetStore.open(logs, clock.now_ms)
        txn_log = TransactionLog.open(logs, clock.now_ms)
        # Above every id any partition or transactional id recorded, whatever happened to its
        # own file: it starts once every log is open (`_start_producer_ids`).
        producer_ids = ProducerIdAllocator(data_dir / "producer-ids", None)
        self._txn_log = txn_log
        transactions = transaction_coordinator(
            logs, txn_log, offsets, producer_ids, notifier, lambda: dynamic.current, clock.now_ms
        )
        # Periodic fsyncs and group commits run here, one at a time, never on the event loop.
        self._flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shoal-flush")
        self.services = BrokerServices(
            logs=logs,
            group_configs=group_configs,
            coordinator=coordinator,
            classic_groups=ClassicGroupService(
                groups.register(GroupKind.CLASSIC, ClassicGroupCoordinator(classic_limits)),
                clock.now_ms,
            ),
            consumer_groups=consumer_groups,
            groups=groups,
            share_partitions=share_partitions,
            share_fetch=ShareFetchService(
                ShareSessionCache(config.group_share_max_share_sessions),
                share_partitions,
                is_member=coordinator.is_member,
                partition_count=partition_count,
            ),
            dynamic_configs=dynamic,
            record_deletion=RecordDeletion(
                logs,
                share_partitions,
                clock.now_ms,
                write_snapshots=self._snapshots,
                min_retained_offset=earliest_share_offset,
            ),
            credentials=ScramCredentialStore.in_data_dir(data_dir),
            offsets=offsets,
            transactions=transactions,
            group_commit=GroupCommit(self._flusher),
            notifier=notifier,
            metrics=metrics,
            registry=build_registry(),
            producer_ids=producer_ids,
            cluster_id=_cluster_id(data_dir),
            node_id=config.node_id,
            host=host,
            port=port,
            clock=clock,
        )
        self._join_offsets_to_groups()
        self._start_producer_ids()  # at once if there is no log to open (a new data dir)
        if config.authorizer_class_name:
            self.services.acls = AclManager(
                AclStore(data_dir),
                AuthorizerSettings(
                    parse_super_users(config.super_users), config.allow_everyone_if_no_acl_found
                ),
            )
        self._watch(metrics)
        self._cleaner = LogCleaner(
            logs, metrics, self.services.now_ms, lambda: self.config.log_cleaner_dedupe_buffer_size
        )
        self._connections: set[KafkaConnection] = set()
        self._acceptors: list[Acceptor] = []
        self._sweep = ConnectionSweep(self._connections, self._quotas, lambda: self.config)
        self._duties: set[asyncio.Task[None]] = set()
        # Share snapshot files are written here, one at a time; stop() waits for the one under
        # way before it writes the rest itself (two writers of one file collide on its .tmp).
        self._snapshotter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shoal-snapshot")
        self._snapshot_episode = FailureEpisode(
            log, "share snapshot not written; retried every second until one is",
            "share snapshots written again",
        )  # fmt: skip
        self._checkpoint_episode = FailureEpisode(
            log, "recovery points not saved; the older ones stay until they are",
            "recovery points saved again",
        )  # fmt: skip
        self._flushing: asyncio.Future[list[tuple[PendingSync, OSError]]] | None = None
        # Set when a stop begins: the flush duty's round starts no new sync (the logs' close
        # syncs what it left, in parallel).
        self._stopping = threading.Event()
        self.port = 0  # the first listener's
        self.ports: dict[str, int] = {}  # listener name -> bound port
        self.metrics_port = -1

    @property
    def config(self) -> BrokerConfig:
        return self.services.config

    def _watch(self, metrics: BrokerMetrics) -> None:
        s = self.services
        partitions = s.share_partitions.all_partitions
        metrics.gauges(
            in_flight=lambda: sum(sp.in_flight_count() for sp in partitions()),
            acquired=lambda: sum(sp.acquired_count() for sp in partitions()),
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
        metrics.consumer_groups(
            s.consumer_groups.counts_by_state, lambda: s.consumer_groups.rebalances
        )

        metrics.share_groups(self._share_groups_by_state, lambda: s.coordinator.rebalances)
        # Lag and log sizes are read on the event loop, when a scrape asks (LoopReadings).
        reader = LagReader(
            s.logs, partitions, s.offsets.committed_snapshot, s.logs.partition_logs, s.now_ms
        )
        self._readings = LoopReadings(reader.read, LagReadings())
        metrics.registry.register(LagCollector(self._readings.read))
        txns = s.transactions.txns
        metrics.registry.register(
            TransactionCollector(lambda: list(txns.values()), s.logs.partition_logs)
        )
        metrics.connections(lambda: self._quotas.listeners)

    def _share_groups_by_state(self) -> dict[str, int]:
        counts = dict.fromkeys(("Empty", "Stable"), 0)  # both series exist from the start
        for group in list(self.services.coordinator.groups.values()):
            counts[group.state] = counts.get(group.state, 0) + 1
        return counts

    def _join_offsets_to_groups(self) -> None:
        """Committed offsets follow the group coordinators' verdicts (generation, membership)."""
        s = self.services
        for group_coordinator in (s.classic_groups.coordinator, s.consumer_groups):
            s.offsets.validators.append(group_coordinator)
            s.offsets.coordinators.append(group_coordinator)

    async def _listen(self) -> None:
        """One acceptor per listener; TLS ones get the keystore's context (read once, here)."""
        config = self.config
        tls = server_context(config) if any(lst.tls for lst in config.listener_list) else None
        await self._resolve_overrides(config)
        for listener in config.listener_list:
            sockets = await open_listening_sockets(
                listener.host, listener.port, config.socket_listen_backlog_size
            )

            def connection(slot: ConnectionSlot, listener: Listener = listener) -> KafkaConnection:
                return KafkaConnection(self.services, self._connections, listener, slot)

            acceptor = Acceptor(
                listener, sockets, self._quotas, connection, tls if listener.tls else None
            )
            self._acceptors.append(acceptor)
            acceptor.start()
            port = sockets[0].getsockname()[1]
            self.ports[listener.name] = port
            self.services.endpoints[listener.name] = advertised_endpoint(
                listener, port, config.advertised_list
            )
            log.info("listening", listener=listener.name, host=listener.host, port=port)

    async def _resolve_overrides(self, config: BrokerConfig) -> None:
        """max.connections.per.ip.overrides, by address, for the quotas."""
        text = config.max_connections_per_ip_overrides
        if text == self._overrides_resolved:
            return
        self._overrides_resolved = text
        resolved = await resolve_ip_overrides(text)
        if text == self._overrides_resolved:  # else a later change is resolving its own
            self._quotas.ip_overrides = resolved

    def _connection_limits_changed(self, config: BrokerConfig) -> None:
        """A dynamic change: waiting listeners look again (a lower max.connections is the
        sweep's to apply); changed overrides are resolved again."""
        self._quotas.limits_changed()
        if config.max_connections_per_ip_overrides != self._overrides_resolved:
            task = asyncio.get_running_loop().create_task(self._resolve_overrides(config))
            self._duties.add(task)
            task.add_done_callback(self._duties.discard)

    async def start(self) -> None:
        host, _ = self.config.listener
        await self._listen()
        self.port = next(iter(self.ports.values()))
        if self.services.port == 0:  # listening on an ephemeral port: advertise the real one
            self.services.port = self.port
        self._spawn(self._open_logs())
        self._every(lambda: self.config.log_flush_interval_ms, self._flush)  # dynamic
        self._every(
            self.config.log_flush_offset_checkpoint_interval_ms, self._checkpoint_recovery_points
        )
        self._every(self.config.log_retention_check_interval_ms, self._retention)
        if self.config.log_cleaner_enable:
            self._every(self.config.log_cleaner_backoff_ms, self._clean)
        self._every(self.config.offsets_retention_check_interval_ms, self._expire_offsets)
        self._every(
            self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            self._transaction_timeouts,
        )
        self._every(
            self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
            self._expire_transactional_ids,
        )
        self._every(LOCK_TIMER_TICK_MS, self._expire_locks)
        self._every(DEAD_LETTER_TICK_MS, self._copy_dead_letters)
        self._every(MEMBER_CHECK_MS, self._expire_members)
        self._every(CLASSIC_GROUP_TICK_MS, self.services.classic_groups.tick)
        self._every(SNAPSHOT_INTERVAL_MS, self._snapshots)
        self._every(self._sweep.interval_ms, self._sweep.run)
        # Share-partitions with recorded state are loaded now, in the background: their lag
        # is known before any member comes back.
        self._spawn(self._load_share_partitions())
        if self.config.metrics_port >= 0:
            self._readings.attach()
            metrics_host = self.config.metrics_bind_address or host
            self.metrics_port = self.services.metrics.serve(metrics_host, self.config.metrics_port)
            log.info("metrics", host=metrics_host, port=self.metrics_port)
        # Everything loaded so far lives as long as the broker: a full garbage collection need
        # not scan it again each time (a big request's objects trigger one, on the loop).
        gc.freeze()
        log.info("started", port=self.port, data_dir=str(self.config.data_dir))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._duties.add(task)
        task.add_done_callback(self._duties.discard)

    async def _load_share_partitions(self) -> None:
        try:
            for _ in self.services.share_partitions.load_recorded(self.services.now_ms):
                await asyncio.sleep(0)
        except Exception:
            log.exception("share-partitions not loaded at start; each loads at its first fetch")

    def _every(
        self, interval_ms: int | Callable[[], int], duty: Callable[[], Awaitable[None] | None]
    ) -> None:
        """Run `duty` every `interval_ms` (a callable: read afresh each time, for dynamic ones)."""

        async def loop() -> None:
            while True:
                wait = interval_ms() if callable(interval_ms) else interval_ms
                await asyncio.sleep(wait / 1000)
                try:
                    result = duty()
                    if result is not None:
                        await result
                except Exception:
                    log.exception("background duty failed", duty=getattr(duty, "__name__", "?"))

        self._spawn(loop())

    async def _open_logs(self) -> None:
        """Open the partitions' logs not opened yet, in slices between requests; then hand out
        producer ids (above every id the logs hold) and save the recovery points."""
        logs = self.services.logs
        try:
            for _ in logs.open_pending():
                await asyncio.sleep(0)
        except Exception:
            log.exception("opening the partition logs failed")
        await self._checkpoint_recovery_points()

    def _start_producer_ids(self) -> None:
        logs, allocator = self.services.logs, self.services.producer_ids
        if not allocator.started and logs.fully_loaded:
            allocator.start(max(logs.max_producer_id(), self._txn_log.max_producer_id()))

    async def _checkpoint_recovery_points(self) -> None:
        """Save every partition's recovery point (Kafka's recovery-point checkpoint), in the
        flush thread."""
        self._start_producer_ids()  # once every log is open (one that failed may since have)
        save = self.services.logs.checkpoint()  # the points taken now, written in order
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._flusher, save)
        except OSError as e:  # a full disk: the older points stay, which is safe
            self._checkpoint_episode.failed(e)
            return
        self._checkpoint_episode.succeeded()

    async def _flush(self) -> None:
        """fsync every dirty segment in the flush thread. The duty loop awaits this before it
        sleeps again, so a slow disk delays the next flush instead of piling flushes up."""
        pending = self.services.logs.start_flush()
        if not pending:
            return
        self._flushing = asyncio.get_running_loop().run_in_executor(
            self._flusher, sync_all, pending, self._stopping
        )
        failed = await asyncio.shield(self._flushing)
        for sync, error in failed:
            sync.segment.dirty = True  # synced again next time
            log.error("log flush failed", error=str(error))

    def _expire_members(self) -> None:
        """The coordinators' session (and rebalance) timeouts and the leave grace period."""
        s, now = self.services, self.services.now_ms()
        s.share_fetch.expire(s.coordinator.expire(now), now)
        s.consumer_groups.expire(now)

    def _expire_offsets(self) -> None:
        """`offsets.retention.minutes` (read afresh: it may be changed while running)."""
        retention_ms = self.config.offsets_retention_minutes * 60_000
        try:
            expired = self.services.offsets.expire(self.services.now_ms(), retention_ms)
        except StorageError as e:  # tried again at the next check
            log.warning("expired committed offsets not deleted", error=str(e))
            return
        if expired:
            log.info("committed offsets expired", offsets=expired)

    def _transaction_timeouts(self) -> None:
        """Abort transactions open past their timeout; finish those a failed write left."""
        now = self.services.now_ms()
        self.services.transactions.complete_prepared(now)
        self.services.transactions.abort_timed_out(now)

    def _expire_transactional_ids(self) -> None:
        self.services.transactions.expire_ids(self.services.now_ms())

    def _expire_locks(self) -> None:
        self.services.share_partitions.expire_locks(self.services.now_ms())

    async def _copy_dead_letters(self) -> None:
        """Passes of at most DEAD_LETTER_BUDGET records until the backlog is gone, letting
        requests run between them."""
        manager = self.services.share_partitions
        while manager.copy_dead_letters(self.services.now_ms()) >= DEAD_LETTER_BUDGET:
            await asyncio.sleep(0)

    def run_timers(self) -> None:
        """Run the time-driven duties now (lock expiry, session timeouts, leave grace, offsets
        retention), as their ticks would: a test calls this when it moves its clock forward."""
        self._expire_locks()
        self.services.share_partitions.copy_dead_letters(self.services.now_ms())
        self._expire_members()
        self._expire_offsets()
        self._transaction_timeouts()
        self.services.classic_groups.tick()
        self._sweep.run()

    def _retention(self) -> None:
        if self.services.logs.loading:  # after the start's opening (as Kafka's LogManager):
            return  # its share-state offsets would open every share-partition's log at once
        eso = self._share_state.earliest_share_offsets() if self._share_state else {}
        self.services.logs.apply_retention(self.services.now_ms(), eso)

    async def _clean(self) -> None:
        if self.services.logs.loading:  # as retention
            return
        eso = self._share_state.earliest_share_offsets() if self._share_state else {}
        await self._cleaner.run(eso)

    async def _snapshots(self) -> None:
        """Snapshot files catch up with their checkpoints; their fsyncs run in a thread."""
        writes = self._share_state.due_snapshots() if self._share_state else []
        if not writes:
            return
        loop = asyncio.get_running_loop()
        for write in writes:
            try:
                await loop.run_in_executor(self._snapshotter, write.run)
            except OSError as e:  # a full disk: the file keeps its older SCO, tried again later
                self._snapshot_episode.failed(e, group=write.group_id)
                continue
            write.done()
            self._snapshot_episode.succeeded()

    async def stop(self) -> None:
        log.info("shutting down", connections=len(self._connections))
        self._stopping.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.shutdown_timeout_ms / 1000
        for acceptor in self._acceptors:
            await acceptor.close()
        for conn in list(self._connections):
            conn.stop_reading()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(deadline):
                while any(not c.idle for c in self._connections):
                    await asyncio.sleep(0.01)
        for conn in list(self._connections):
            conn.close()
        await self.services.ack_slices.drain()  # acknowledgements under way end whole
        for task in list(self._duties):
            task.cancel()
        await asyncio.gather(*self._duties, return_exceptions=True)
        if self._flushing is not None:  # a flush round under way ends after its current sync
            await asyncio.gather(self._flushing, return_exceptions=True)
        self._flusher.shutdown(wait=True)
        self._cleaner.shutdown()
        self._snapshotter.shutdown(wait=True)
        if self._share_state is not None:
            for group, error in self._share_state.flush_snapshots():
                self._snapshot_episode.failed(error, group=group)  # kept: recovery reads back
        self._readings.detach()
        self.services.metrics.stop()
        # What is left of the budget; logs not closed by then are checked past their
        # recovery points at the next start (saved whatever happens).
        self.services.logs.close(max(0.0, deadline - loop.time()))
        self._dir_lock.release()
        log.info("stopped")

    async def serve_forever(self, stop: asyncio.Event) -> None:
        await self.start()
        await stop.wait()
        await self.stop()
