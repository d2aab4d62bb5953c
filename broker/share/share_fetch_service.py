"""The share-fetch service: share sessions, acquisition across a session's partitions, and
acknowledgements, for ShareFetch and ShareAcknowledge (KIP-932).

Synchronous and sans-IO: time comes in as `now_ms`, and what it needs of the coordinator and the
topics is passed in as functions, so it is tested without sockets or sleeps. The handlers
validate the request, call this, wait (the long poll) and build the response.

Sessions: epoch 0 opens one (only for a member of the group), -1 closes it, and any other
epoch must be the session's next one. Partitions that do not exist are answered once with
their error and never kept in the session.

Acquisition visits the session's partitions starting one further at each session epoch, so no
partition starves, shares MaxBytes evenly among those that can acquire, and stops when the
request's record or byte budget is spent (Kafka's rules: see `acquire`).

Departures: librdkafka sends its closing ShareAcknowledge before or after its leave heartbeat,
so a member that leaves with its session still open keeps its records for a short grace
period, or until it closes the session, whichever is first; a member that times out loses them
at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.share.ack_job import AckJob
from broker.share.acknowledgements import AckBatchLike
from broker.share.acknowledgements import AckOutcome
from broker.share.acknowledgements import apply
from broker.share.acknowledgements import begin
from broker.share.partition_reads import FetchedPartition
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_session_cache import CLOSE_EPOCH
from broker.share.share_session_cache import OPEN_EPOCH
from broker.share.share_session_cache import ShareSession
from broker.share.share_session_cache import ShareSessionCache
from broker.share.share_session_cache import ShareSessionError
from broker.share.share_session_cache import ShareSessionKey
from broker.share.share_session_cache import TopicIdPartition
from coordinator.share_group import Departure

LEAVE_GRACE_MS = 5_000


def _rotated(keys: list[TopicIdPartition], session_epoch: int) -> list[TopicIdPartition]:
    """`keys` turned left by the epoch (Kafka's `PartitionRotateStrategy.rotateRoundRobin`):
    not at all when opening or closing the session (epoch 0 or -1)."""
    if len(keys) < 2 or session_epoch < 1:
        return keys
    at = session_epoch % len(keys)
    return keys[at:] + keys[:at]


@dataclass(frozen=True, slots=True)
class SessionUpdate:
    """What a ShareFetch's epoch did to its session."""

    session: ShareSession | None  # None: the request closed the session (epoch -1)
    unknown: dict[TopicIdPartition, FetchedPartition]  # partitions refused, answered once


class ShareFetchService:
    def __init__(
        self,
        sessions: ShareSessionCache,
        partitions: SharePartitionManager,
        *,
        is_member: Callable[[str, str], bool],
        topic_of: Callable[[uuid.UUID], tuple[uuid.UUID, int] | None],
        led_elsewhere: Callable[[uuid.UUID, int], bool] | None = None,
    ) -> None:
        """`topic_of`: a topic id's partition count and the broker's own object of that id
        (session keys made of it hit by identity in every look-up after: `UUID.__eq__` is
        Python). `led_elsewhere`: with `--processes N`, whether another process leads a partition
        (it is refused with NOT_LEADER_OR_FOLLOWER: the client goes to the leader)."""
        self.sessions = sessions
        self.partitions = partitions
        self._is_member = is_member
        self._topic_of = topic_of
        self._led_elsewhere = led_elsewhere

    # Sessions

    def update_session(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicIdPartition],
        forgotten: Iterable[TopicIdPartition],
        principal: str = "",
    ) -> SessionUpdate:
        """Open, advance or close a ShareFetch's session and apply its partition changes.

        :raises ShareSessionError:"""
        if epoch == CLOSE_EPOCH:
            return SessionUpdate(None, {})
        key = ShareSessionKey(group_id, member_id)
        if epoch == OPEN_EPOCH:
            if not self._is_member(group_id, member_id):
                raise ShareSessionError(
                    ErrorCode.unknown_member_id, "not a member of the share group"
                )
            session = self.sessions.open(key)
            session.principal = principal
        else:
            session = self.sessions.advance(key, epoch)
        return SessionUpdate(session, self.change_partitions(session, added, forgotten))

    def change_partitions(
        self,
        session: ShareSession,
        added: Iterable[TopicIdPartition],
        forgotten: Iterable[TopicIdPartition],
    ) -> dict[TopicIdPartition, FetchedPartition]:
        """Add and forget partitions of an open session; those it cannot hold, with why."""
        unknown: dict[TopicIdPartition, FetchedPartition] = {}
        for tp in added:
            code, known = self._unknown(tp)
            if code is None:
                session.partitions[known] = None
            else:
                unknown[tp] = FetchedPartition(code, b"", [])
        for tp in forgotten:
            session.partitions.pop(tp, None)
        return unknown

    def check_principal(self, group_id: str, member_id: str, principal: str) -> None:
        """A member's share session is used only by the principal that opened it.

        :raises ShareSessionError: GROUP_AUTHORIZATION_FAILED for any other principal."""
        session = self.sessions.get(ShareSessionKey(group_id, member_id))
        if session is not None and session.principal != principal:
            raise ShareSessionError(
                ErrorCode.group_authorization_failed,
                f"the share session of member {member_id} belongs to another principal",
            )

    def advance_for_acknowledge(self, group_id: str, member_id: str, epoch: int) -> None:
        """A ShareAcknowledge's epoch: it may close a session but never open one.

        :raises ShareSessionError:"""
        if epoch == OPEN_EPOCH:
            raise ShareSessionError(
                ErrorCode.invalid_share_session_epoch, "a share session is opened by ShareFetch"
            )
        if epoch != CLOSE_EPOCH:
            self.sessions.advance(ShareSessionKey(group_id, member_id), epoch)

    def _unknown(self, tp: TopicIdPartition) -> tuple[ErrorCode | None, TopicIdPartition]:
        """Why the session cannot hold `tp`, or None and `tp` with the broker's own id."""
        topic = self._topic_of(tp[0])
        if topic is None:
            return ErrorCode.unknown_topic_id, tp
        if not 0 <= tp[1] < topic[1]:
            return ErrorCode.unknown_topic_or_partition, tp
        if self._led_elsewhere is not None and self._led_elsewhere(*tp):
            return ErrorCode.not_leader_or_follower, tp
        return None, (topic[0], tp[1])

    # Acquisition

    def acquire(
        self,
        session: ShareSession,
        *,
        session_epoch: int,
        max_records: int,
        max_bytes: int,
        now_ms: int,
        record_limit: bool = False,
    ) -> dict[TopicIdPartition, FetchedPartition]:
        """Acquire from the session's partitions within the request's budgets, as Kafka's
        `DelayedShareFetch` and `ShareFetchUtils.processFetchResponse` do (`record_limit`:
        MaxRecords is strict whatever the group's share.acquire.mode).

        The partitions are visited from one further along at each `session_epoch`
        (`PartitionRotateStrategy` round robin), so none starves. MaxBytes is shared evenly by
        the partitions that can acquire (`PartitionMaxBytesStrategy` UNIFORM), and read as
        `ReplicaManager.readFromLog` reads: each within its share and what is left of MaxBytes,
        the first partition to return bytes with its first batch whole whatever its size
        (KIP-74). MaxRecords is spent in the same order.

        Only partitions that acquired something or failed are in the result."""
        keys = _rotated(list(session.partitions), session_epoch)
        if not keys:
            return {}
        group_id, member_id = session.key.group_id, session.key.member_id
        share = max_bytes  # one partition (most consumers) needs no count
        if len(keys) > 1:
            share = max_bytes // max(self.partitions.acquirable(group_id, keys, now_ms), 1)
        records_left, bytes_left = max_records, max_bytes
        min_one = True
        out: dict[TopicIdPartition, FetchedPartition] = {}
        for topic_id, partition in keys:
            if records_left <= 0 or bytes_left <= 0:
                break
            budget = min(share, bytes_left)
            fetched = self.partitions.fetch(
                group_id, member_id, topic_id, partition,
                max_bytes=budget, first_batch_max=None if min_one else budget,
                max_records=records_left, now_ms=now_ms, record_limit=record_limit,
            )  # fmt: skip
            if fetched.acquired or fetched.error_code != ErrorCode.none:
                out[(topic_id, partition)] = fetched
                records_left -= sum(a.last_offset - a.first_offset + 1 for a in fetched.acquired)
            if fetched.records:
                min_one = False
                bytes_left -= len(fetched.records)
        return out

    # Acknowledgements

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        tp: TopicIdPartition,
        listed: Sequence[Sequence[AckBatchLike]],
        *,
        renew_allowed: bool,
        now_ms: int,
    ) -> AckOutcome:
        """One partition's acknowledgement batches (every listing of it), all or none, in
        one go (tools and tests; the handlers step `begin_acknowledge`)."""
        return apply(
            self.partitions, group_id, member_id, tp, listed,
            renew_allowed=renew_allowed, now_ms=now_ms,
        )  # fmt: skip

    def begin_acknowledge(
        self,
        group_id: str,
        member_id: str,
        tp: TopicIdPartition,
        listed: Sequence[Sequence[AckBatchLike]],
        *,
        renew_allowed: bool,
        now_ms: int,
    ) -> AckJob | AckOutcome:
        """Start one partition's acknowledgement: a job to step to its end, or the answer."""
        return begin(
            self.partitions, group_id, member_id, tp, listed,
            renew_allowed=renew_allowed, now_ms=now_ms,
        )  # fmt: skip

    def lock_duration_ms(self, group_id: str) -> int:
        return self.partitions.lock_duration_ms(group_id)

    def key_ordered(self, group_id: str) -> bool:
        return self.partitions.key_ordered(group_id)

    # Endings

    def close_session(self, group_id: str, member_id: str, now_ms: int) -> None:
        """A share session ended (epoch -1): records the member still holds are released."""
        self.sessions.close(ShareSessionKey(group_id, member_id))
        self.partitions.release_member(group_id, member_id, now_ms)

    def member_departed(self, departure: Departure, now_ms: int) -> None:
        key = ShareSessionKey(departure.group_id, departure.member_id)
        session = self.sessions.get(key)
        if departure.reason == "left" and session is not None:
            session.release_deadline_ms = now_ms + LEAVE_GRACE_MS
            return
        self.close_session(departure.group_id, departure.member_id, now_ms)

    def expire(self, departures: Iterable[Departure], now_ms: int) -> None:
        """Members the coordinator timed out, and sessions whose leave grace has run out."""
        for departure in departures:
            self.member_departed(departure, now_ms)
        for session in self.sessions.sessions():
            if session.release_deadline_ms is not None and session.release_deadline_ms <= now_ms:
                self.close_session(session.key.group_id, session.key.member_id, now_ms)
