"""`shoal migrate --dry-run`'s lines: each topic's partitions, records and bytes, and the totals,
when the source's sizes are known, partly known, or not known at all."""

from __future__ import annotations

from cli.migration.dry_run import Sizes
from cli.migration.dry_run import human
from cli.migration.dry_run import report_topics
from cli.migration.report import Report
from cli.migration.topics import TopicPlan


def _plans() -> list[TopicPlan]:
    orders = TopicPlan("orders", 2, {"retention.ms": "1000"}, {0: (0, 10), 1: (5, 25)})
    audit = TopicPlan("audit", 1, {}, {0: (0, 3)})
    return [orders, audit]


def test_sizes_in_binary_units() -> None:
    assert [human(n) for n in (0, 1023, 1024, 1536, 5 * 2**20, 3 * 2**40, 2**60)] == [
        "0 bytes", "1023 bytes", "1.0 KiB", "1.5 KiB", "5.0 MiB", "3.0 TiB", "1048576.0 TiB",
    ]  # fmt: skip


def test_each_topic_and_the_totals_with_their_bytes() -> None:
    report = Report()
    sizes = Sizes({("orders", 0): 1024, ("orders", 1): 2048, ("audit", 0): 100})
    report_topics(_plans(), sizes, report)
    assert report.rows() == [
        ("topic", "orders", "would copy",
         "2 partitions, up to 30 records, 3.0 KiB; configs retention.ms=1000"),
        ("topic", "audit", "would copy", "1 partition, up to 3 records, 100 bytes"),
        ("total", "2 topics", "would copy", "3 partitions, up to 33 records, 3.1 KiB"),
    ]  # fmt: skip
    assert report.to_json()["planned"] == [
        {"topic": "orders", "partitions": 2, "records": 30, "bytes": 3072},
        {"topic": "audit", "partitions": 1, "records": 3, "bytes": 100},
    ]


def test_a_topic_missing_a_partition_is_of_unknown_size_and_the_total_a_floor() -> None:
    report = Report()
    report_topics(_plans(), Sizes({("orders", 0): 1024, ("audit", 0): 100}), report)
    assert report.rows()[0][3] == (
        "2 partitions, up to 30 records, size unknown; configs retention.ms=1000"
    )
    assert report.rows()[2][3] == (
        "3 partitions, up to 33 records, at least 100 bytes (1 topic of unknown size)"
    )


def test_no_sizes_at_all_say_why() -> None:
    report = Report()
    why = "sizes unknown: the source does not serve DescribeLogDirs"
    report_topics(_plans(), Sizes({}, why), report)
    assert [r[3].split(", ")[-1] for r in report.rows()] == [
        "size unknown; configs retention.ms=1000", "size unknown", why,
    ]  # fmt: skip
    assert report.to_json()["planned"][1]["bytes"] is None
