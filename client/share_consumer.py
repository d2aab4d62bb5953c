"""A KIP-932 share consumer on asyncio: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge.

Implicit mode accepts every record of a poll on the next poll (piggybacked on ShareFetch).
Explicit mode acknowledges record by record; acknowledgements ride on the next poll or go in a
ShareAcknowledge from `commit_sync`. RENEW (KIP-1222) extends a record's acquisition lock and
keeps it acquired by us: on a poll it goes as a renew-only ShareFetch that returns no records.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from collections.abc import Iterable
from types import TracebackType
from typing import Any
from typing import Literal

from kio.schema.errors import ErrorCode

from client.cluster import API_SHARE_ACKNOWLEDGE
from client.cluster import API_SHARE_FETCH
from client.cluster import Cluster
from client.connection import ConnectionClosed
from client.errors import ClientStateError
from client.errors import KafkaError
from client.errors import UnsupportedVersionError
from client.errors import error_for
from client.records import AcquiredData
from client.records import AcquiredRange
from client.records import ConsumerRecord
from client.records import decode_acquired
from client.security import Security
from client.share_acks import AcknowledgeType
from client.share_membership import ShareMembership
from client.share_session import CLOSE_EPOCH
from client.share_session import FetchPlan
from client.share_session import PartitionAcks
from client.share_session import ShareSession
from client.share_session import TopicPartitionId
from client.share_session import share_acknowledge_request
from client.share_session import share_fetch_request

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
AckResults = dict[TopicPartition, ErrorCode]
AckCallback = Callable[[AckResults], None]

_MAX_WAIT_MS = 500  # one ShareFetch waits at most this long, as librdkafka does
_SESSION_ERRORS = (ErrorCode.share_session_not_found, ErrorCode.invalid_share_session_epoch)
_LEADER_ERRORS = (
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.unknown_topic_id,
    ErrorCode.fenced_leader_epoch,
)
_ERROR_BACKOFF_S = 0.05
# ShareFetch long-polls: its own connection keeps metadata lookups from queueing behind it.
SHARE_CHANNEL = "share"


class ShareConsumer:
    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        *,
        acknowledgement_mode: Literal["implicit", "explicit"] = "implicit",
        max_records: int = 500,
        client_id: str = "shoal-share-consumer",
        on_acknowledgement: AckCallback | None = None,
        security: Security | None = None,
        record_limit: bool = False,
    ) -> None:
        """`record_limit`: each poll acquires at most `max_records` records, the last range
        possibly ending inside a stored batch (KIP-1206's record_limit acquire mode, asked in
        ShareFetch v2; a broker with only v1 hands out whole batches, as it does otherwise)."""
        if acknowledgement_mode not in ("implicit", "explicit"):
            raise ValueError("acknowledgement_mode must be 'implicit' or 'explicit'")
        self.cluster = Cluster(bootstrap, client_id=client_id, security=security)
        self.group_id = group_id
        self.acknowledgement_mode = acknowledgement_mode
        self.max_records = max_records
        self.record_limit = record_limit
        self.on_acknowledgement = on_acknowledgement
        self.last_ack_results: AckResults = {}
        self._membership = ShareMembership(self.cluster, group_id)
        self._sessions: dict[int, ShareSession] = {}
        # Acknowledgements not yet sent, and records we hold that may still be acknowledged.
        self._pending: dict[TopicPartitionId, PartitionAcks] = {}
        self._delivered: dict[TopicPartitionId, dict[int, ConsumerRecord]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._lock_timeout_ms: int | None = None
        self._io = asyncio.Lock()  # one request round at a time keeps session epochs in order
        self._closed = False

    # -- public API -----------------------------------------------------------------------

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    @property
    def member_epoch(self) -> int:
        return self._membership.member_epoch

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """The lock duration the broker reported in the last ShareFetch/ShareAcknowledge."""
        return self._lock_timeout_ms

    @property
    def assignment(self) -> set[TopicPartition]:
        """Assigned partitions whose topic names are known."""
        out: set[TopicPartition] = set()
        for topic_id, partition in self._membership.assignment:
            info = self.cluster.cached_topic_by_id(topic_id)
            if info is not None:
                out.add((info.name, partition))
        return out

    @property
    def subscription(self) -> tuple[str, ...]:
        return self._membership.subscription

    async def __aenter__(self) -> ShareConsumer:
        await self.cluster.bootstrap()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def subscribe(self, topics: Iterable[str]) -> None:
        """Subscribe to topics (replacing the previous subscription); joins on the next poll."""
        self._check_open()
        self._membership.subscribe(tuple(sorted(set(topics))))

    async def poll(self, timeout_s: float = 1.0) -> list[ConsumerRecord]:
        """Records acquired for this member, waiting up to `timeout_s` for some.

        Pending acknowledgements ride on the ShareFetch. With a RENEW among them, the poll only
        sends them (a renew ShareFetch) and returns no records.
        :raises KafkaError: the group or the broker failed in a way a retry will not fix.
        """
        if self.acknowledgement_mode == "implicit":
            self._check_open()
            self._accept_delivered()
        records: list[ConsumerRecord] = []
        for a in await self.poll_acquired(timeout_s):
            records.extend(decode_acquired(a.topic, a.partition, a.data, a.ranges))
        for r in records:
            self._delivered.setdefault((self._topic_ids[r.topic], r.partition), {})[r.offset] = r
        return records

    async def assigned(self, timeout_s: float = 1.0) -> set[TopicPartition] | None:
        """The partitions assigned to this member, by name, once it has joined (waiting up to
        `timeout_s` for that); None if it has not joined by then."""
        if not await self._join(timeout_s):
            return None
        out: set[TopicPartition] = set()
        for topic_id, partition in self._membership.assignment:
            try:
                out.add(((await self.cluster.topic_by_id(topic_id)).name, partition))
            except KafkaError:
                continue  # deleted, or not yet in the metadata
        return out

    async def _join(self, timeout_s: float) -> bool:
        self._check_open()
        if not self._membership.subscription:
            raise ClientStateError("poll() before subscribe()")
        await self.cluster.bootstrap()
        self._membership.start()
        joined = await self._membership.wait_joined(max(timeout_s, 0.0))
        self._raise_fatal()
        return joined

    async def poll_acquired(
        self, timeout_s: float = 1.0, *, only: Iterable[TopicPartition] | None = None
    ) -> list[AcquiredData]:
        """As `poll`, but the acquired ranges and their stored batches, undecoded.

        Records acquired this way are acknowledged with `acknowledge_range` (explicit mode):
        the consumer keeps no per-record state for them. With `only`, records are acquired
        from those of the assigned partitions alone: the others leave the share session for
        this request (KIP-932's ForgottenTopicsData) and join it again on the next poll that
        wants them; acknowledgements pending for them wait for that poll or `commit_sync`.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        if not await self._join(timeout_s):
            return []
        wanted = None if only is None else await self._ids(only)
        async with self._io:
            if any(AcknowledgeType.RENEW in a.values() for a in self._pending.values()):
                renew_plans = await self._plans(renew=True)
                if renew_plans:  # else no session holds them yet: fetch normally
                    await self._fetch_round(renew_plans, renew=True, max_wait_ms=0)
                    return []
            while True:
                left_ms = int((deadline - loop.time()) * 1000)
                acquired = await self._fetch_round(
                    await self._plans(renew=False, only=wanted),
                    renew=False,
                    max_wait_ms=max(0, min(left_ms, _MAX_WAIT_MS)),
                )
                if acquired or loop.time() >= deadline:
                    return acquired

    def acknowledge(
        self, record: ConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge a delivered record (explicit mode); sent on the next poll or commit.

        :raises ClientStateError: implicit mode, or the record is not held by this consumer.
        :raises UnsupportedVersionError: RENEW, and the broker lacks ShareFetch/Acknowledge v2.
        """
        type = self._explicit_type("acknowledge()", type)
        topic_id = self._topic_ids.get(record.topic)
        held = self._delivered.get((topic_id, record.partition)) if topic_id else None
        if topic_id is None or held is None or record.offset not in held:
            raise ClientStateError(
                f"{record.topic}-{record.partition}@{record.offset} is not held by this consumer"
            )
        self._pending.setdefault((topic_id, record.partition), {})[record.offset] = type
        if type is not AcknowledgeType.RENEW:  # RENEW keeps the record acquired by us
            del held[record.offset]

    def acknowledge_range(
        self, topic: str, partition: int, first: int, last: int, type: AcknowledgeType
    ) -> None:
        """Acknowledge offsets `first..last` of a partition alike (explicit mode), as one
        range whatever its length; sent on the next poll or commit. Meant for ranges from
        `poll_acquired`: the broker, not this client, checks that we hold them.

        :raises ClientStateError: implicit mode, or the topic was never fetched.
        :raises UnsupportedVersionError: RENEW, and the broker lacks ShareFetch/Acknowledge v2.
        """
        type = self._explicit_type("acknowledge_range()", type)
        topic_id = self._topic_ids.get(topic)
        if topic_id is None:
            raise ClientStateError(f"{topic} was never fetched by this consumer")
        if first > last:
            raise ValueError(f"empty range {first}..{last}")
        self._pending.setdefault((topic_id, partition), {})[(first, last)] = type

    async def commit_sync(self) -> AckResults:
        """Send pending acknowledgements in ShareAcknowledge; the result of each partition.

        In implicit mode this accepts every record delivered so far.
        """
        self._check_open()
        if self.acknowledgement_mode == "implicit":
            self._accept_delivered()
        async with self._io:
            return await self._acknowledge_round(close=False)

    async def close(self) -> None:
        """Send pending acknowledgements with the closing ShareAcknowledge (epoch -1), leave
        the group (epoch -1) and close connections.

        In implicit mode the last poll's records are not accepted: they are released, as
        librdkafka does.
        """
        if self._closed:
            return
        self._closed = True
        try:
            async with self._io:
                self._delivered.clear()
                try:
                    await self._acknowledge_round(close=True)
                except (KafkaError, ConnectionError) as e:
                    log.info("closing share sessions of %s: %s", self.member_id, e)
            await self._membership.leave()
        finally:
            await self.cluster.close()

    # -- fetching -------------------------------------------------------------------------

    async def _fetch_round(
        self, plans: list[FetchPlan], *, renew: bool, max_wait_ms: int
    ) -> list[AcquiredData]:
        if not plans:
            await asyncio.sleep(min(max_wait_ms, 100) / 1000)
            return []
        results = await asyncio.gather(*(self._share_fetch(p, renew, max_wait_ms) for p in plans))
        acked: AckResults = {}
        records: list[AcquiredData] = []
        for recs, acks in results:
            records.extend(recs)
            acked.update(acks)
        if acked:
            self._ack_done(acked)
        return records

    async def _ids(self, partitions: Iterable[TopicPartition]) -> set[TopicPartitionId]:
        out: set[TopicPartitionId] = set()
        for topic, partition in partitions:
            topic_id = self._topic_ids.get(topic)
            if topic_id is None:
                try:
                    topic_id = (await self.cluster.topic(topic)).topic_id
                except KafkaError:
                    continue
                self._topic_ids[topic] = topic_id
            out.add((topic_id, partition))
        return out

    async def _plans(
        self, renew: bool, only: set[TopicPartitionId] | None = None
    ) -> list[FetchPlan]:
        """One ShareFetch per leader: the assigned partitions (those in `only`, if given) and
        the pending acknowledgements of the partitions it lists."""
        wanted: dict[int, set[TopicPartitionId]] = {}
        for tp in self._membership.assignment:
            leader = await self._leader(tp)
            if leader is not None and (only is None or tp in only):
                wanted.setdefault(leader, set()).add(tp)
        acks: dict[int, dict[TopicPartitionId, PartitionAcks]] = {}
        for tp, partition_acks in self._pending.items():
            if only is not None and tp not in only:
                continue  # a partition this request leaves out: a later one carries them
            leader = await self._leader(tp)
            if leader is not None:
                acks.setdefault(leader, {})[tp] = partition_acks
        nodes = set(wanted) | set(acks) | {n for n, s in self._sessions.items() if s.partitions}
        plans: list[FetchPlan] = []
        for node in sorted(nodes):
            session = self._sessions.setdefault(node, ShareSession(node))
            # Kafka refuses acknowledgements on the request that opens a session.
            node_acks = acks.get(node, {}) if session.is_open else {}
            plan = FetchPlan(session, wanted.get(node, set()), node_acks)
            if renew and not node_acks:
                continue
            if plan.wanted or plan.acks or plan.forgotten:
                for tp in node_acks:
                    del self._pending[tp]  # sent now; a failure is reported, not retried
                plans.append(plan)
        return plans

    async def _share_fetch(
        self, plan: FetchPlan, renew: bool, max_wait_ms: int
    ) -> tuple[list[AcquiredData], AckResults]:
        version = 2 if self.cluster.supports(API_SHARE_FETCH, 2) else 1
        epoch = plan.session.take_epoch()
        req = share_fetch_request(
            version, self.group_id, self.member_id, epoch, plan,
            max_wait_ms=max_wait_ms, max_records=self.max_records, renew=renew,
            record_limit=self.record_limit,
        )  # fmt: skip
        try:
            resp = await self.cluster.request(
                req, node_id=plan.session.node_id, channel=SHARE_CHANNEL
            )
        except (ConnectionClosed, OSError) as e:
            log.info("ShareFetch to node %d failed: %s", plan.session.node_id, e)
            plan.session.reset()
            await asyncio.sleep(_ERROR_BACKOFF_S)
            return [], await self._named(dict.fromkeys(plan.acks, ErrorCode.network_exception))
        if resp.error_code != ErrorCode.none:
            return [], await self._session_failed(plan.session, plan.acks, resp)
        plan.settle(epoch)
        self._note_lock_timeout(resp)
        records: list[AcquiredData] = []
        acked: dict[TopicPartitionId, ErrorCode] = dict.fromkeys(plan.acks, ErrorCode.none)
        for topic in resp.responses:
            for p in topic.partitions:
                tp = (topic.topic_id, int(p.partition_index))
                if tp in acked:
                    acked[tp] = ErrorCode(p.acknowledge_error_code)
                if p.error_code in _LEADER_ERRORS:
                    self.cluster.forget(topic.topic_id)
                elif p.error_code != ErrorCode.none:
                    log.warning("ShareFetch %s: %s", tp, p.error_code.name)
                if p.acquired_records:
                    records.append(await self._acquired(tp, p))
        return records, await self._named(acked)

    async def _acquired(self, tp: TopicPartitionId, p: Any) -> AcquiredData:
        info = await self.cluster.topic_by_id(tp[0])
        self._topic_ids[info.name] = tp[0]
        ranges = tuple(
            AcquiredRange(int(a.first_offset), int(a.last_offset), int(a.delivery_count))
            for a in p.acquired_records
        )
        return AcquiredData(info.name, tp[1], ranges, bytes(p.records or b""))

    async def _session_failed(
        self, session: ShareSession, acks: dict[TopicPartitionId, PartitionAcks], resp: Any
    ) -> AckResults:
        """A top-level error: the session starts again at epoch 0 and its acks failed."""
        session.reset()
        failed = await self._named(dict.fromkeys(acks, resp.error_code))
        if resp.error_code in _SESSION_ERRORS:
            return failed
        if resp.error_code in (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch):
            self._membership.poke()
            await asyncio.sleep(_ERROR_BACKOFF_S)
            return failed
        self._ack_done(failed)
        raise error_for(resp.error_code, resp.error_message)

    # -- acknowledging --------------------------------------------------------------------

    async def _acknowledge_round(self, *, close: bool) -> AckResults:
        by_node: dict[int, dict[TopicPartitionId, PartitionAcks]] = {}
        results: AckResults = {}
        for tp, acks in self._pending.items():
            leader = await self._leader(tp)
            session = self._sessions.get(leader) if leader is not None else None
            if session is None or not session.is_open:
                results.update(await self._named({tp: ErrorCode.share_session_not_found}))
            else:
                by_node.setdefault(session.node_id, {})[tp] = acks
        self._pending.clear()
        if close:  # every open session is closed, with or without acknowledgements
            for node, session in self._sessions.items():
                if session.is_open:
                    by_node.setdefault(node, {})
        sent = await asyncio.gather(
            *(
                self._share_acknowledge(self._sessions[n], acks, close)
                for n, acks in by_node.items()
            )
        )
        for r in sent:
            results.update(r)
        if results:
            self._ack_done(results)
        return results

    async def _share_acknowledge(
        self, session: ShareSession, acks: dict[TopicPartitionId, PartitionAcks], close: bool
    ) -> AckResults:
        version = 2 if self.cluster.supports(API_SHARE_ACKNOWLEDGE, 2) else 1
        epoch = CLOSE_EPOCH if close else session.take_epoch()
        req = share_acknowledge_request(version, self.group_id, self.member_id, epoch, acks)
        try:
            resp = await self.cluster.request(req, node_id=session.node_id, channel=SHARE_CHANNEL)
        except (ConnectionClosed, OSError):
            session.reset()
            return await self._named(dict.fromkeys(acks, ErrorCode.network_exception))
        if close:
            session.reset()
        if resp.error_code != ErrorCode.none:
            session.reset()
            return await self._named(dict.fromkeys(acks, resp.error_code))
        self._note_lock_timeout(resp)
        acked: dict[TopicPartitionId, ErrorCode] = dict.fromkeys(acks, ErrorCode.none)
        for topic in resp.responses:
            for p in topic.partitions:
                tp = (topic.topic_id, int(p.partition_index))
                if tp in acked:
                    acked[tp] = p.error_code
        return await self._named(acked)

    # -- helpers --------------------------------------------------------------------------

    def _accept_delivered(self) -> None:
        """Implicit mode: everything the last poll returned is accepted."""
        for tp, held in self._delivered.items():
            if held:
                self._pending.setdefault(tp, {}).update(dict.fromkeys(held, AcknowledgeType.ACCEPT))
        self._delivered.clear()

    def _ack_done(self, results: AckResults) -> None:
        self.last_ack_results = results
        if self.on_acknowledgement is not None:
            self.on_acknowledgement(dict(results))

    async def _leader(self, tp: TopicPartitionId) -> int | None:
        try:
            info = await self.cluster.topic_by_id(tp[0])
        except KafkaError:
            return None  # deleted, or not yet known: skipped until metadata says otherwise
        p = info.partitions.get(tp[1])
        return p.leader_id if p is not None and p.leader_id >= 0 else None

    async def _named(self, results: dict[TopicPartitionId, ErrorCode]) -> AckResults:
        out: AckResults = {}
        for (topic_id, partition), code in results.items():
            info = self.cluster.cached_topic_by_id(topic_id)
            out[(info.name if info else str(topic_id), partition)] = ErrorCode(code)
        return out

    def _note_lock_timeout(self, resp: Any) -> None:
        timeout = getattr(resp, "acquisition_lock_timeout", None)
        if timeout is not None:
            self._lock_timeout_ms = int(timeout.total_seconds() * 1000)

    def _explicit_type(self, caller: str, type: AcknowledgeType) -> AcknowledgeType:
        """The checks every explicit acknowledgement makes first; `type` as an AcknowledgeType.

        :raises ClientStateError: closed, or implicit mode.
        :raises UnsupportedVersionError: RENEW, and the broker lacks ShareFetch/Acknowledge v2.
        """
        self._check_open()
        if self.acknowledgement_mode != "explicit":
            raise ClientStateError(f"{caller} needs acknowledgement_mode='explicit'")
        type = AcknowledgeType(type)
        if type is AcknowledgeType.RENEW and not self._renew_supported():
            raise UnsupportedVersionError("RENEW needs ShareFetch and ShareAcknowledge v2")
        return type

    def _renew_supported(self) -> bool:
        return self.cluster.supports(API_SHARE_FETCH, 2) and self.cluster.supports(
            API_SHARE_ACKNOWLEDGE, 2
        )

    def _raise_fatal(self) -> None:
        if self._membership.fatal is not None:
            raise self._membership.fatal

    def _check_open(self) -> None:
        if self._closed:
            raise ClientStateError("share consumer is closed")
