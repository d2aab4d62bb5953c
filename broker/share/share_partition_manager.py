"""SharePartitionManager: the share-partition leaders of this broker.

Owns every SharePartition, the broker-wide acquisition-lock timer, and the path from a
ShareFetch to log bytes: ask the SharePartition where to read, read stored batches once (with
their header spans), acquire ranges over those spans, and return the bytes of the batches that
hold acquired records, unchanged. Records are never decoded.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass

import structlog
from kio.schema.errors import ErrorCode

from broker.share.acquisition_lock_timer import AcquisitionLockTimer
from broker.share.share_partition import AckBatch
from broker.share.share_partition import AcquiredRecords
from broker.share.share_partition import BatchSpan
from broker.share.share_partition import ShareLimits
from broker.share.share_partition import SharePartition
from coordinator.group_configs import GroupConfigs
from storage.errors import OffsetOutOfRange
from storage.log_manager import LogManager

log = structlog.get_logger("shoal.share")

SharePartitionKey = tuple[str, uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    error_code: ErrorCode
    records: bytes
    acquired: list[AcquiredRecords]


def limits_of(configs: GroupConfigs, group_id: str) -> Callable[[], ShareLimits]:
    def limits() -> ShareLimits:
        return ShareLimits(
            delivery_count_limit=configs.effective(group_id, "share.delivery.count.limit"),
            max_record_locks=configs.effective(group_id, "share.partition.max.record.locks"),
            lock_duration_ms=configs.effective(group_id, "share.record.lock.duration.ms"),
            renew_enabled=configs.effective(group_id, "share.renew.acknowledge.enable"),
        )

    return limits


class SharePartitionManager:
    def __init__(
        self,
        logs: LogManager,
        configs: GroupConfigs,
        on_available: Callable[[str, int], None] = lambda topic, partition: None,
    ) -> None:
        self._logs = logs
        self._configs = configs
        self._on_available = on_available  # wakes long polls when records come back
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        self._timer: AcquisitionLockTimer[SharePartitionKey] = AcquisitionLockTimer()

    # lookup ------------------------------------------------------------------------------------

    def get(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The share-partition, made on first use with SPSO from `share.auto.offset.reset`."""
        key = (group_id, topic_id, partition)
        sp = self._partitions.get(key)
        if sp is not None:
            return sp
        topic = self._logs.topic_by_id(topic_id)
        plog = self._logs.log(topic.name, partition) if topic else None
        if plog is None:
            return None
        earliest = self._configs.effective(group_id, "share.auto.offset.reset") == "earliest"
        start = plog.log_start_offset if earliest else plog.log_end_offset
        sp = SharePartition(
            group_id,
            topic_id,
            partition,
            start_offset=start,
            limits=limits_of(self._configs, group_id),
        )
        self._partitions[key] = sp
        return sp

    def partitions_of(self, group_id: str) -> list[SharePartition]:
        return [sp for (g, _, _), sp in self._partitions.items() if g == group_id]

    def drop_group(self, group_id: str) -> None:
        for key in [k for k in self._partitions if k[0] == group_id]:
            del self._partitions[key]

    def lock_duration_ms(self, group_id: str) -> int:
        value: int = self._configs.effective(group_id, "share.record.lock.duration.ms")
        return value

    # fetch and acknowledge ---------------------------------------------------------------------

    def fetch(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        max_bytes: int,
        max_records: int,
        now_ms: int,
    ) -> FetchedPartition:
        sp = self.get(group_id, topic_id, partition)
        topic = self._logs.topic_by_id(topic_id)
        plog = self._logs.log(topic.name, partition) if topic else None
        if sp is None or plog is None:
            return FetchedPartition(ErrorCode.unknown_topic_or_partition, b"", [])
        offset = sp.next_fetch_offset()
        if offset is None or offset >= plog.log_end_offset or max_records <= 0:
            return FetchedPartition(ErrorCode.none, b"", [])
        # Enough batches for max_records new records past whatever is in flight after `offset`.
        wanted = max_records + max(0, sp.speo - offset)
        try:
            data, spans = plog.read_with_spans(max(offset, plog.log_start_offset), max_bytes, wanted)
        except OffsetOutOfRange:
            return FetchedPartition(ErrorCode.none, b"", [])
        acquired = sp.acquire(
            member_id,
            [BatchSpan(s.base_offset, s.last_offset, s.is_control) for s in spans],
            max_records=max_records,
            now_ms=now_ms,
        )
        self._after(sp)
        if not acquired:
            return FetchedPartition(ErrorCode.none, b"", [])
        # Trim to the batches that hold acquired records; the client drops the rest anyway.
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        kept = [s for s in spans if s.last_offset >= first and s.base_offset <= last]
        start, end = kept[0].position_in_result, kept[-1].position_in_result + kept[-1].size
        return FetchedPartition(ErrorCode.none, data[start:end], acquired)

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        batches: Sequence[AckBatch],
        now_ms: int,
    ) -> ErrorCode:
        sp = self.get(group_id, topic_id, partition)
        if sp is None:
            return ErrorCode.unknown_topic_or_partition
        code = sp.acknowledge(member_id, batches, now_ms=now_ms)
        if code == ErrorCode.none:
            self._after(sp)
        return code

    def release_member(self, group_id: str, member_id: str, now_ms: int) -> int:
        """A member left or timed out: everything it holds becomes available at once."""
        released = 0
        for sp in self.partitions_of(group_id):
            n = sp.release_member(member_id, now_ms)
            if n:
                released += n
                self._after(sp)
        if released:
            log.info(
                "released records of departed member",
                group=group_id,
                member=member_id,
                records=released,
            )
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Run the acquisition-lock timer: expire every share-partition with a lock due."""
        expired = 0
        for key in self._timer.pop_due(now_ms):
            sp = self._partitions.get(key)
            if sp is None:
                continue
            n = sp.expire_locks(now_ms)
            if n:
                expired += n
                log.info(
                    "acquisition locks expired",
                    group=key[0],
                    topic_id=str(key[1]),
                    partition=key[2],
                    records=n,
                )
            self._after(sp)
        return expired

    def _after(self, sp: SharePartition) -> None:
        """Bookkeeping after any change: re-arm the timer, hand changes on, wake fetchers."""
        deadline = sp.next_deadline()
        if deadline is not None:
            self._timer.schedule((sp.group_id, sp.topic_id, sp.partition), deadline)
        changes = sp.take_changes()  # durable share state writes these (issue 4)
        if changes and sp.next_fetch_offset() is not None and sp.next_fetch_offset() != sp.speo:
            topic = self._logs.topic_by_id(sp.topic_id)
            if topic is not None:
                self._on_available(topic.name, sp.partition)
