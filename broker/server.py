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
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from broker import gc_freeze
from broker import wiring
from broker.acceptor import Acceptor
from broker.acceptor import open_listening_sockets
from broker.acceptor import resolve_ip_overrides
from broker.clock import Clock
from broker.clock import WallClock
from broker.config import RETENTION_SYNONYMS
from broker.config import BrokerConfig
from broker.connection import KafkaConnection
from broker.connection_quotas import ConnectionQuotas
from broker.connection_quotas import ConnectionSlot
from broker.connection_sweep import ConnectionSweep
from broker.context import BrokerServices
from broker.controller_link import FOLLOW_INTERVAL_MS
from broker.controller_link import follow_controller
from broker.controller_link import recheck_topic_files
from broker.dynamic_config import DynamicBrokerConfigs
from broker.failure_episode import FailureEpisode
from broker.group_commit import GroupCommit
from broker.group_config_saves import GroupConfigSaves
from broker.group_duties import CLASSIC_GROUP_TICK_MS
from broker.group_duties import DEAD_LETTER_TICK_MS
from broker.group_duties import LOCK_TIMER_TICK_MS
from broker.group_duties import MEMBER_CHECK_MS
from broker.group_duties import GroupDuties
from broker.handlers import build_registry
from broker.listeners import Listener
from broker.listeners import advertised_endpoint
from broker.log_cleaning import LogCleaner
from broker.metrics import BrokerMetrics
from broker.node_identity import node_secret
from broker.node_identity import node_security
from broker.node_identity import reserve
from broker.notifier import Notifier
from broker.record_deletion import RecordDeletion
from broker.security_follow import follow_security
from broker.tls import server_context
from broker.to_the_end import Changes
from broker.topic_admin import TopicAdmin
from coordinator.share_group_admin import ShareGroupAdmin
from coordinator.share_group_records import known_share_groups
from storage.dir_lock import DataDirLock
from storage.scram_credentials import ScramCredentialStore
from storage.segment import PendingSync
from storage.segment import sync_all

log = structlog.get_logger("shoal.server")

SNAPSHOT_INTERVAL_MS = 1000  # share snapshot files catch up with their newest checkpoint


class Server:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        """`clock`: where share logic reads the time; the wall clock unless a test passes one.

        The services are made by `broker.wiring`, a family at a time, in the order they depend
        on each other; what is left here is what start and stop use themselves."""
        unknown = sorted(set(config.unknown) - set(RETENTION_SYNONYMS))
        if unknown or config.unknown_env:
            log.warning(
                "supplied but isn't a known config", names=unknown,
                environment=list(config.unknown_env),
            )  # fmt: skip
        data_dir = config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        # One broker per data dir; offline tools see it held (storage.dir_lock).
        # With several processes, each locks its own node dir (docs/multicore.md).
        config.node_dir.mkdir(parents=True, exist_ok=True)
        self._dir_lock = DataDirLock(config.node_dir)
        # Dynamic broker configs stored in the data dir win over file, environment and flags.
        # --processes N: this node's own (BROKER "<id>") in its node dir, over the cluster's.
        dynamic = DynamicBrokerConfigs(config, None if config.ownership.single else config.node_dir)
        host, port = config.advertised
        logs = wiring.partition_logs(config, dynamic)
        # max.connections(.per.ip): read at each accept; a change wakes waiting listeners.
        self._quotas = ConnectionQuotas(lambda: dynamic.current)
        self._overrides_resolved: str | None = None  # the overrides text the quotas hold
        dynamic.on_change(self._connection_limits_changed)
        group_configs = wiring.group_configs(config, dynamic)
        notifier = Notifier()
        metrics = BrokerMetrics()
        self._share_state = wiring.share_state(config, logs)
        share_partitions = wiring.share_partitions(
            logs, group_configs, notifier, self._share_state, metrics, dynamic
        )
        clock = clock or WallClock()
        # --processes N: the share groups this process coordinates, recorded in its own
        # offsets log, are known after a restart whichever nodes hold their state.
        share_groups = wiring.share_group_records(config, logs, clock.now_ms)
        known_share = known_share_groups(
            share_groups, share_partitions.durable_groups, single=config.ownership.single
        )
        groups = wiring.group_coordinators(dynamic, group_configs, logs, known_share, clock.now_ms)
        # --processes N: how the processes log in to one another (None with N = 1).
        secret = node_secret(config)
        credentials = ScramCredentialStore.in_data_dir(data_dir)
        if secret is not None:
            reserve(credentials, secret)
        txns = wiring.transactions(
            config, logs, notifier, dynamic, clock.now_ms, share_partitions,
            None if config.ownership.single else node_security(config, secret), share_groups,
        )  # fmt: skip
        self._txn_log = txns.txn_log
        # Periodic fsyncs and group commits run here, one at a time, never on the event loop.
        self._flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shoal-flush")
        changes = Changes()  # this server's own: another in this process has its own
        self.services = BrokerServices(
            logs=logs,
            group_configs=group_configs,
            coordinator=groups.share,
            share_groups=share_groups,
            share_group_admin=ShareGroupAdmin(groups.share, known_share),
            classic_groups=groups.classic,
            consumer_groups=groups.consumer,
            groups=groups.registry,
            share_partitions=share_partitions,
            share_fetch=wiring.share_fetch(
                config, share_partitions, groups.share, logs, group_configs
            ),
            dynamic_configs=dynamic,
            record_deletion=RecordDeletion(
                logs,
                share_partitions,
                clock.now_ms,
                write_snapshots=self._snapshots,
                min_retained_offset=wiring.earliest_share_offset(self._share_state),
                changes=changes,
            ),
            changes=changes,
            group_config_saves=GroupConfigSaves(changes),
            topic_admin=TopicAdmin(changes),
            credentials=credentials,
            offsets=txns.offsets,
            transactions=txns.coordinator,
            txn_share_acks=txns.share_acks,
            node_links=txns.node_links,
            txn_remote=txns.remote,
            group_commit=GroupCommit(self._flusher),
            notifier=notifier,
            metrics=metrics,
            registry=build_registry(),
            producer_ids=txns.producer_ids,
            cluster_id=wiring.cluster_id(data_dir),
            node_id=config.node_id,
            host=host,
            port=port,
            clock=clock,
            acls=wiring.acl_manager(config, changes, secret),
        )
        wiring.join_offsets_to_groups(txns.offsets, groups)
        self._start_producer_ids()  # at once if there is no log to open (a new data dir)
        self._readings = wiring.watch(self.services, self._quotas)
        self._group_duties = GroupDuties(self.services)
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
        duties = self._group_duties
        self._every(self.config.offsets_retention_check_interval_ms, duties.expire_offsets)
        self._every(
            self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            duties.transaction_timeouts,
        )
        self._every(
            self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
            duties.expire_transactional_ids,
        )
        self._every(LOCK_TIMER_TICK_MS, duties.expire_locks)
        self._every(DEAD_LETTER_TICK_MS, duties.copy_dead_letters)
        self._every(MEMBER_CHECK_MS, duties.expire_members)
        self._every(CLASSIC_GROUP_TICK_MS, self.services.classic_groups.tick)
        self._every(SNAPSHOT_INTERVAL_MS, self._snapshots)
        if not self.config.ownership.is_controller:  # --processes N: node 0 writes, we read
            self._every(FOLLOW_INTERVAL_MS, lambda: follow_controller(self.services))
            self._every(FOLLOW_INTERVAL_MS, lambda: recheck_topic_files(self.services))
            self._every(FOLLOW_INTERVAL_MS, lambda: follow_security(self.services))
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
        gc_freeze.after_bulk(logs.opened_at_start)  # they live as long as the broker
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

    def run_timers(self) -> None:
        """Run the time-driven duties now (lock expiry, session timeouts, leave grace, offsets
        retention), as their ticks would: a test calls this when it moves its clock forward."""
        self._group_duties.run_now()
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
            if not write.current():  # its share-partition deleted since the listing
                continue
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
        # Changes the closed connections' requests began run to their end (`to_the_end`):
        # before the logs close, within what is left of the budget.
        await self.services.changes.drain(deadline - loop.time())
        for task in list(self._duties):
            task.cancel()
        await asyncio.gather(*self._duties, return_exceptions=True)
        await self._close_links()
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

    async def _close_links(self) -> None:
        """`--processes N`: markers not delivered are sent again after the next start."""
        if self.services.txn_remote is not None:
            await self.services.txn_remote.channel.close()
        if self.services.node_links is not None:
            await self.services.node_links.close()

    async def serve_forever(self, stop: asyncio.Event) -> None:
        await self.start()
        await stop.wait()
        await self.stop()
