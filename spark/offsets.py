"""Where a batch read starts and ends in each partition, checked as Spark's Kafka source does.

Resolved once on the driver when Spark plans the read. JSON offsets (`startingOffsets`,
`endingOffsets`, `startingOffsetsByTimestamp`) must name every partition read, as in Spark;
a start past the log end, or an end past it, is an error; a start below the log start (records
removed by retention or DeleteRecords) is an error unless `failOnDataLoss=false`, which starts
at the log start instead. Precedence of the starts, as Spark's: `startingTimestamp`, then
`startingOffsetsByTimestamp`, then `startingOffsets`; of the ends likewise `endingTimestamp`,
`endingOffsetsByTimestamp`, `endingOffsets` (a time ends a partition before its first record at
or after it, or at the log end when there is none).
"""

from __future__ import annotations

import asyncio
import logging

from client.admin import Admin
from spark.fetcher import OffsetRange
from spark.options import BatchOptions
from spark.options import OffsetBound
from spark.options import OptionError
from spark.options import StreamOptions
from spark.options import Subscription

log = logging.getLogger(__name__)

_EARLIEST, _LATEST = -2, -1


async def topic_partitions(admin: Admin, sub: Subscription) -> list[tuple[str, int]]:
    """The (topic, partition) pairs a subscription reads, sorted.

    :raises OptionError: a subscribed or assigned topic or partition that does not exist, or
        a pattern that matches no topic.
    """
    existing = await admin.list_topics()
    if sub.pattern is not None:
        # Internal topics (__consumer_offsets...) are left out, as Kafka's clients do.
        names = sorted(t for t in existing if sub.matches(t) and not t.startswith("__"))
        if not names:
            raise OptionError(f"option subscribePattern {sub.pattern!r} matches no topic")
    else:
        names = list(sub.assign) if sub.assign is not None else list(sub.topics)
    out: list[tuple[str, int]] = []
    for topic in names:
        info = existing.get(topic)
        if info is None:
            raise OptionError(f"topic {topic} ({sub.describe()}) does not exist")
        partitions = sorted(info.partitions)
        if sub.assign is not None:
            missing = sorted(set(sub.assign[topic]) - set(partitions))
            if missing:
                raise OptionError(
                    f"option assign names {', '.join(f'{topic}-{p}' for p in missing)}, "
                    f"but {topic} has partitions 0-{len(partitions) - 1}"
                )
            partitions = list(sub.assign[topic])
        out.extend((topic, p) for p in partitions)
    return out


async def pattern_topics(opts: StreamOptions) -> tuple[str, ...]:
    """The topics a stream's `subscribePattern` matches now (a share group subscribes by
    names: topics created later are read after the query restarts).

    :raises OptionError: the pattern matches no topic.
    """
    async with Admin(
        opts.bootstrap, client_id=f"{opts.client_id}-admin", security=opts.security
    ) as admin:
        tps = await topic_partitions(admin, Subscription(pattern=opts.pattern))
    return tuple(dict.fromkeys(t for t, _ in tps))


def _check_covers(name: str, bound: dict[str, dict[str, int]], tps: list[tuple[str, int]]) -> None:
    named = {(t, int(p)) for t, parts in bound.items() for p in parts}
    missing, extra = sorted(set(tps) - named), sorted(named - set(tps))
    if missing:
        raise OptionError(
            f"option {name} must name every partition read, as Spark's Kafka source: it lacks "
            f"{', '.join(f'{t}-{p}' for t, p in missing)} (-2 means earliest, -1 latest)"
        )
    if extra:
        raise OptionError(
            f"option {name} names {', '.join(f'{t}-{p}' for t, p in extra)}, "
            "which this read does not subscribe to"
        )


def _spec(bound: OffsetBound, topic: str, partition: int) -> int:
    """-2 (earliest), -1 (latest) or an offset."""
    if isinstance(bound, str):
        return _EARLIEST if bound == "earliest" else _LATEST
    return bound[topic][str(partition)]


async def _end(
    admin: Admin, opts: BatchOptions, topic: str, p: int, bounds: tuple[int, int]
) -> tuple[int, int]:
    """Where the read of `topic`-`p` ends: (the spec given, the offset), checked."""
    earliest, latest = bounds
    tp = f"{topic}-{p}"
    end_time = opts.ending_timestamp
    if end_time is None and opts.ending_by_timestamp is not None:
        end_time = opts.ending_by_timestamp[topic][str(p)]
    if end_time is not None:  # Spark's: the first offset at or after the time, else the log end
        found = await admin.list_offsets(topic, p, end_time)
        end_spec = end = latest if found < 0 else found
    else:
        end_spec = _spec(opts.ending, topic, p)
        end = earliest if end_spec == _EARLIEST else latest if end_spec == _LATEST else end_spec
    if end > latest:
        raise OptionError(f"option endingOffsets ends {tp} at {end}, past its log end ({latest})")
    if end_spec >= 0 and end < earliest and opts.fail_on_data_loss:
        raise OptionError(
            f"option endingOffsets ends {tp} at {end}, but its records before {earliest} are gone "
            "(retention or DeleteRecords); failOnDataLoss=false reads nothing there instead"
        )
    return end_spec, end


async def _one(
    admin: Admin, opts: BatchOptions, topic: str, p: int
) -> tuple[OffsetRange, str | None]:
    """The partition's range, and a warning to log (records lost but skipped), if any."""
    earliest, latest = await asyncio.gather(
        admin.list_offsets(topic, p, "earliest"),
        admin.list_offsets(topic, p, "latest", opts.isolation_level),  # read_committed: the LSO
    )
    tp = f"{topic}-{p}"

    def resolve(spec: int) -> int:
        return earliest if spec == _EARLIEST else latest if spec == _LATEST else spec

    end_spec, end = await _end(admin, opts, topic, p, (earliest, latest))

    by_time: int | None = opts.starting_timestamp
    if by_time is None and opts.starting_by_timestamp is not None:
        by_time = opts.starting_by_timestamp[topic][str(p)]
    if by_time is not None:
        found = await admin.list_offsets(topic, p, by_time)
        return OffsetRange(topic, p, latest if found < 0 else found, end), None

    start_spec = _spec(opts.starting, topic, p)
    start = resolve(start_spec)
    warning = None
    if start > latest:
        raise OptionError(
            f"option startingOffsets starts {tp} at {start}, past its log end ({latest})"
        )
    if start < earliest:
        if opts.fail_on_data_loss:
            raise OptionError(
                f"option startingOffsets starts {tp} at {start}, but its records before "
                f"{earliest} are gone (retention or DeleteRecords); failOnDataLoss=false starts "
                f"at {earliest} instead"
            )
        warning = f"{tp}: records {start}..{earliest - 1} are gone, reading from {earliest}"
        start = earliest
    if start > end and start_spec >= 0 and end_spec >= 0:
        raise OptionError(
            f"options startingOffsets and endingOffsets: {tp} starts at {start}, after its end "
            f"({end})"
        )
    return OffsetRange(topic, p, start, end), warning  # start >= end: nothing to read


async def plan(opts: BatchOptions) -> list[OffsetRange]:
    """The [start, end) range of every partition a batch read covers (`plan_ranges`)."""
    async with Admin(
        opts.bootstrap, client_id="shoal-spark-planner", security=opts.security
    ) as admin:
        return await plan_ranges(admin, opts)


async def plan_ranges(admin: Admin, opts: BatchOptions) -> list[OffsetRange]:
    """The non-empty [start, end) range of every partition the read covers.

    :raises OptionError: see the module docstring.
    """
    tps = await topic_partitions(admin, opts.subscription)
    for name, bound in (
        ("startingOffsets", opts.starting),
        ("endingOffsets", opts.ending),
        ("startingOffsetsByTimestamp", opts.starting_by_timestamp),
        ("endingOffsetsByTimestamp", opts.ending_by_timestamp),
    ):
        if isinstance(bound, dict):
            _check_covers(name, bound, tps)
    results = await asyncio.gather(*(_one(admin, opts, t, p) for t, p in tps))
    for _, warning in results:
        if warning is not None:
            log.warning("failOnDataLoss=false: %s", warning)
    return [r for r, _ in results if r.start < r.end]
