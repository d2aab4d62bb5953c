"""What the stream reader asks the broker about its share group, besides records.

- `MinRecordsGate`: `minOffsetsPerTrigger` / `maxTriggerDelay`, as Spark's Kafka source: a
  trigger plans no batch while the group's backlog is below the minimum, unless the last batch
  is older than the delay. The backlog is the group's lag (records between its start offset
  and the log end not yet acknowledged or archived), from DescribeShareGroupOffsets: nothing is
  acquired to count it. A partition the group has not started has no lag yet: the gate opens.
- `starts_at_log_end`: whether a group that never read the subscribed topics will start them at
  the log end (`share.auto.offset.reset=latest`, the default), so that a Trigger.AvailableNow
  run that reads nothing can say why instead of ending silently.
- `group_limits`: the group's delivery-count limit (redelivered records come in batches sized
  by it, `spark.redelivery`) and its record-lock limit per partition, which bounds a
  micro-batch: `window_warning` says so once when the read limit asks for more.
- `read_committed_group`: `kafka.isolation.level=read_committed` on a stream. A share group's
  isolation is the group's (KIP-932's group config `share.isolation.level`), not a member's, so
  the source sets the group's to read_committed before its first fetch when it is not already
  (a warning says so: every member of the group then reads committed records only), and fails
  the query, naming the setting, when it may not (no ALTER_CONFIGS on the group).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from dataclasses import replace

from kio.schema.errors import ErrorCode

from client.admin import Admin
from client.admin import ConfigResourceType
from client.errors import KafkaError
from spark.loop import LoopThread
from spark.options import OptionError
from spark.options import StreamOptions

log = logging.getLogger(__name__)

_RECHECK_S = 0.2


def admin_for(opts: StreamOptions) -> Admin:
    return Admin(opts.bootstrap, client_id=f"{opts.client_id}-admin", security=opts.security)


async def _partitions(admin: Admin, topics: tuple[str, ...]) -> list[tuple[str, int]]:
    await admin.cluster.bootstrap()
    out: list[tuple[str, int]] = []
    for topic in topics:
        info = await admin.cluster.topic(topic)
        out.extend((topic, p) for p in sorted(info.partitions))
    return out


async def backlog(admin: Admin, group: str, topics: tuple[str, ...]) -> int | None:
    """Records of `topics` the group has not acknowledged yet; None when unknown (a partition
    the group never started, or no such group yet)."""
    try:
        offsets = await admin.describe_share_group_offsets(group, await _partitions(admin, topics))
    except KafkaError as e:
        if e.error_code == ErrorCode.group_id_not_found:
            return None
        raise
    if not offsets or any(o.lag < 0 for o in offsets.values()):
        return None
    return sum(o.lag for o in offsets.values())


class MinRecordsGate:
    """Decides whether a trigger may plan a batch; times in ms of one monotonic clock."""

    def __init__(self, min_records: int, max_delay_ms: int, now_ms: float) -> None:
        self.min_records = min_records
        self.max_delay_ms = max_delay_ms
        self.last_batch_ms = now_ms  # Spark counts the delay from the query's start, too

    def ready(self, backlog: int | None, now_ms: float) -> bool:
        if backlog is None or backlog >= self.min_records:
            return True
        return now_ms - self.last_batch_ms >= self.max_delay_ms

    def planned(self, now_ms: float) -> None:
        self.last_batch_ms = now_ms


async def starts_at_log_end(admin: Admin, group: str, topics: tuple[str, ...]) -> bool:
    """True when the group has started none of `topics`' partitions and its
    `share.auto.offset.reset` is latest: it will start them at the log end."""
    try:
        offsets = await admin.describe_share_group_offsets(group, await _partitions(admin, topics))
    except KafkaError as e:
        if e.error_code != ErrorCode.group_id_not_found:
            raise
        offsets = {}
    if any(o.start_offset >= 0 for o in offsets.values()):
        return False
    try:
        configs = await admin.describe_configs(
            ConfigResourceType.GROUP, group, ("share.auto.offset.reset",)
        )
    except KafkaError:
        return False  # cannot tell: say nothing rather than something wrong
    return (configs.get("share.auto.offset.reset") or "latest") == "latest"


@dataclass(frozen=True)
class GroupLimits:
    """The group's limits that shape micro-batches (Kafka's defaults until read)."""

    delivery_count_limit: int = 5
    record_locks: int = 2000  # share.partition.max.record.locks: records in flight per partition
    max_record_locks: int | None = None  # the broker's bound on it, if it could be read
    auto_offset_reset: str = "latest"  # share.auto.offset.reset: where unstarted partitions begin
    isolation_level: str = "read_uncommitted"  # share.isolation.level


async def group_limits(admin: Admin, group: str) -> GroupLimits:
    """The group's effective share.delivery.count.limit and share.partition.max.record.locks
    (DescribeConfigs answers a group's effective values, set or not), and the broker's
    group.share.max.partition.max.record.locks."""
    found = await admin.describe_configs(
        ConfigResourceType.GROUP,
        group,
        (
            "share.delivery.count.limit",
            "share.partition.max.record.locks",
            "share.auto.offset.reset",
            "share.isolation.level",
        ),
    )
    defaults = GroupLimits()
    limits = GroupLimits(
        _int(found.get("share.delivery.count.limit"), defaults.delivery_count_limit),
        _int(found.get("share.partition.max.record.locks"), defaults.record_locks),
        auto_offset_reset=found.get("share.auto.offset.reset") or defaults.auto_offset_reset,
        isolation_level=found.get("share.isolation.level") or defaults.isolation_level,
    )
    try:
        broker = await admin.describe_configs(
            ConfigResourceType.BROKER,
            str(admin.cluster.any_node()),
            ("group.share.max.partition.max.record.locks",),
        )
    except KafkaError:
        return limits  # only the advice loses its number
    bound = _int(broker.get("group.share.max.partition.max.record.locks"), 0) or None
    return replace(limits, max_record_locks=bound)


async def read_committed_group(admin: Admin, group: str, limits: GroupLimits) -> GroupLimits:
    """The group's limits once its `share.isolation.level` is read_committed: set now when it
    is not (or could not be read).

    :raises OptionError: the broker refused to set it.
    """
    if limits.isolation_level == "read_committed":
        return limits
    try:
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, group, {"share.isolation.level": "read_committed"}
        )
    except (KafkaError, OSError) as e:
        raise OptionError(
            f"option kafka.isolation.level=read_committed: a stream reads through share group "
            f"{group}, whose share.isolation.level is {limits.isolation_level} and could not be "
            f"set to read_committed ({e}). Set it with an admin tool (shoal configs alter "
            f"--entity-type groups --entity-name {group} --add-config "
            "share.isolation.level=read_committed), or drop the option"
        ) from None
    log.warning(
        "kafka.isolation.level=read_committed: set share group %s's share.isolation.level to "
        "read_committed (it was %s); every member of the group now reads committed records only",
        group,
        limits.isolation_level,
    )
    return replace(limits, isolation_level="read_committed")


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def window_warning(
    wanted: int, partitions: int, limits: GroupLimits, group: str, option: str
) -> str | None:
    """Why micro-batches stay below the read limit, when the group's lock window cannot hold
    `wanted` records: a member holds at most share.partition.max.record.locks records of each
    partition in flight, and a micro-batch's records stay acquired until Spark commits it."""
    window = limits.record_locks * partitions
    if partitions <= 0 or wanted <= window:
        return None
    per_partition = -(-wanted // partitions)
    bound = limits.max_record_locks
    if bound is None or per_partition <= bound:
        how = (
            f"set the group's share.partition.max.record.locks to {per_partition} (shoal configs "
            f"alter --entity-type groups --entity-name {group} --add-config "
            f"share.partition.max.record.locks={per_partition})"
        )
        if bound is None:
            how += ", within the broker's group.share.max.partition.max.record.locks"
    else:
        how = (
            f"raise the broker's group.share.max.partition.max.record.locks (now {bound}) to "
            f"{per_partition}, then the group's share.partition.max.record.locks to it, or read "
            "more partitions"
        )
    return (
        f"{option}={wanted} cannot be reached: share group {group} lets a member hold "
        f"share.partition.max.record.locks={limits.record_locks} records of each partition in "
        f"flight, and this query has {partitions} partition(s), so a micro-batch holds at most "
        f"{window} records (a batch's records stay acquired until Spark commits it). For "
        f"larger micro-batches, {how}"
    )


def nothing_read_warning(group: str) -> str:
    return (
        f"the Trigger.AvailableNow query read nothing: share group {group} had never read these "
        "topics and its share.auto.offset.reset is latest, so it started at the log end and "
        "records produced before it joined are not delivered to it. To read them, set the "
        "group's share.auto.offset.reset to earliest before its first run (shoal configs alter "
        f"--entity-type groups --entity-name {group} --add-config "
        "share.auto.offset.reset=earliest), or reset its offsets (shoal share-groups "
        "reset-offsets)"
    )


class StreamChecks:
    """The stream reader's questions to the broker besides records, on the reader's loop with
    one Admin (opened on first use), and what it does with the answers."""

    def __init__(self, opts: StreamOptions, loop: LoopThread) -> None:
        self.opts = opts
        self.loop = loop
        self._admin: Admin | None = None
        self.gate: MinRecordsGate | None = None
        if opts.min_records_per_trigger is not None:
            self.gate = MinRecordsGate(
                opts.min_records_per_trigger, opts.max_trigger_delay_ms, _now_ms()
            )
        self.available_now = False
        self.fresh_at_log_end = False
        self.records = 0
        self._warned = False

    def _admin_now(self) -> Admin:
        if self._admin is None:
            self._admin = admin_for(self.opts)
        return self._admin

    def may_plan(self) -> bool:
        """Whether this trigger may plan a batch (`minOffsetsPerTrigger`; never holds back
        Trigger.AvailableNow, as in Spark). A closed gate is asked again every 200 ms for up to
        `pollTimeoutMs`, as a trigger waits that long for records: Spark asks again at once
        when a trigger finds nothing, and the broker should not get a request per asking."""
        if self.gate is None or self.available_now:
            return True
        admin, opts = self._admin_now(), self.opts
        deadline = _now_ms() + opts.poll_timeout_ms
        while True:
            found = self.loop.run(backlog(admin, opts.group, opts.topics))
            if self.gate.ready(found, _now_ms()):
                return True
            if _now_ms() >= deadline:
                return False
            time.sleep(min(_RECHECK_S, max(0.0, (deadline - _now_ms()) / 1000)))

    def planned(self, records: int) -> None:
        self.records += records
        if self.gate is not None:
            self.gate.planned(_now_ms())

    def prepare_available_now(self) -> None:
        """Before the group first polls: note whether it will start at the log end."""
        self.available_now = True
        admin, opts = self._admin_now(), self.opts
        try:
            self.fresh_at_log_end = self.loop.run(starts_at_log_end(admin, opts.group, opts.topics))
        except Exception as e:  # only a hint is lost
            log.info("could not read share group %s's position: %s", opts.group, e)

    def drained(self) -> None:
        """The AvailableNow run is over: if it read nothing because of where the group started,
        say so once."""
        if self.records == 0 and self.fresh_at_log_end and not self._warned:
            self._warned = True
            log.warning(nothing_read_warning(self.opts.group))

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                self.loop.run(admin.close(), timeout=10)
            except Exception as e:  # the reader's own close must still run
                log.warning("closing the admin client failed: %s", e)


def _now_ms() -> float:
    return time.monotonic() * 1000
