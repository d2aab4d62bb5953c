"""`shoal migrate --dry-run`: what would be created and copied, with counts and sizes; nothing
is written to the target or the state dir.

Per topic: its partitions, the records it would copy (at most its offset span: control records
hold offsets too) and the bytes its partitions' logs take on the source, from DescribeLogDirs
(`client.log_dirs`, the sizes Kafka's `kafka-log-dirs.sh` shows); then the totals. A source
that does not serve DescribeLogDirs (an older Shoal) or refuses it (no DESCRIBE on the cluster)
gets the counts, and the sizes said to be unknown, and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from cli.migration.report import Report
from cli.migration.topics import TopicPlan
from client.admin import Admin
from client.errors import KafkaError
from client.errors import UnsupportedVersionError
from client.log_dirs import describe_log_dirs
from client.log_dirs import partition_sizes

WOULD_COPY = "would copy"
UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB")


@dataclass(frozen=True, slots=True)
class Sizes:
    """Bytes per (topic, partition) on the source; `unknown`: why there are none."""

    by_partition: dict[tuple[str, int], int]
    unknown: str | None = None

    def topic(self, plan: TopicPlan) -> int | None:
        """The topic's bytes; None: not known for every one of its partitions."""
        sizes = [self.by_partition.get((plan.name, p)) for p in plan.spans]
        return None if self.unknown or None in sizes else sum(s or 0 for s in sizes)


async def source_sizes(src: Admin, plans: list[TopicPlan]) -> Sizes:
    asked = {plan.name: list(plan.spans) for plan in plans}
    try:
        return Sizes(partition_sizes(await describe_log_dirs(src.cluster, asked)))
    except UnsupportedVersionError:
        return Sizes({}, "sizes unknown: the source does not serve DescribeLogDirs")
    except KafkaError as e:
        return Sizes({}, f"sizes unknown: the source refused DescribeLogDirs ({e})")


def human(size: int) -> str:
    """`size` bytes in binary units, as `du -h` and Kafka's tools round them."""
    value, unit = float(size), 0
    while value >= 1024 and unit < len(UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{size} bytes" if unit == 0 else f"{value:.1f} {UNITS[unit]}"


def report_topics(plans: list[TopicPlan], sizes: Sizes, report: Report) -> None:
    """A line per topic and one of totals (kind `total`), and the figures in `report.planned`."""
    records = partitions = size_total = 0
    unsized = 0
    for plan in plans:
        size = sizes.topic(plan)
        configs = ", ".join(f"{k}={v}" for k, v in sorted(plan.configs.items()))
        report.add(
            "topic",
            plan.name,
            WOULD_COPY,
            f"{_count(plan.partitions, 'partition')}, up to {plan.offset_span} records, "
            + ("size unknown" if size is None else human(size))
            + (f"; configs {configs}" if configs else ""),
        )
        report.planned[plan.name] = {
            "partitions": plan.partitions, "records": plan.offset_span, "bytes": size,
        }  # fmt: skip
        records += plan.offset_span
        partitions += plan.partitions
        if size is None:
            unsized += 1
        else:
            size_total += size
    if sizes.unknown:
        size_text = sizes.unknown
    elif unsized:
        size_text = f"at least {human(size_total)} ({_count(unsized, 'topic')} of unknown size)"
    else:
        size_text = human(size_total)
    report.add(
        "total",
        _count(len(plans), "topic"),
        WOULD_COPY,
        f"{_count(partitions, 'partition')}, up to {records} records, {size_text}",
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
