"""What the stream reader asks the broker about its share group, besides records.

- `MinRecordsGate`: `minOffsetsPerTrigger` / `maxTriggerDelay`, as Spark's Kafka source: a
  trigger plans no batch while the group's backlog is below the minimum, unless the last batch
  is older than the delay. The backlog is the group's lag (records between its start offset
  and the log end not yet acknowledged or archived), from DescribeShareGroupOffsets: nothing is
  acquired to count it. A partition the group has not started has no lag yet: the gate opens.
- `starts_at_log_end`: whether a group that never read the subscribed topics will start them at
  the log end (`share.auto.offset.reset=latest`, the default), so that a Trigger.AvailableNow
  run that reads nothing can say why instead of ending silently.
"""

from __future__ import annotations

import logging
import time

from kio.schema.errors import ErrorCode

from client.admin import Admin
from client.admin import ConfigResourceType
from client.errors import KafkaError
from spark.loop import LoopThread
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
