"""The table, the ratios, and (with --profile) pstats summaries."""

from __future__ import annotations

import io
import pstats
from collections.abc import Callable
from pathlib import Path

from bench.phases import Row
from bench.spark_phase import spark_ratios

PRODUCE_GOAL = 500_000  # records/s
SHARE_GOAL = 300_000  # records/s with 4 consumers
CPU_GOAL_US = 1.0  # broker CPU per record


def table(rows: list[Row]) -> str:
    header = (
        "phase",
        "records",
        "seconds",
        "records/s",
        "MB/s",
        "broker CPU s",
        "broker CPU µs/record",
        "note",
    )
    body = [
        (
            r.label,
            f"{r.records:,}",
            f"{r.seconds:.2f}",
            f"{r.rate:,.0f}",
            f"{r.mb_s:.1f}",
            f"{r.broker_cpu_s:.2f}",
            f"{r.cpu_us_per_record:.2f}",
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    right = {1, 2, 3, 4, 5, 6}

    def fmt(line: tuple[str, ...]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        return " | ".join(cells).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(line) for line in body)])


def ratios(rows: list[Row]) -> list[str]:
    by = {r.key: r for r in rows}
    out: list[str] = []

    def ratio(text: str, keys: tuple[str, ...], value: Callable[..., float]) -> None:
        if all(k in by and by[k].records for k in keys):
            out.append(f"{text} = {value(*(by[k] for k in keys)):.2f}")

    ratio("produce records/s / 500,000 goal", ("produce",), lambda p: p.rate / PRODUCE_GOAL)
    ratio(
        "produce broker CPU µs/record / 1 µs goal",
        ("produce",),
        lambda p: p.cpu_us_per_record / CPU_GOAL_US,
    )
    ratio("fetch records/s / produce records/s", ("fetch", "produce"), lambda f, p: f.rate / p.rate)
    ratio(
        "share (4 consumers) / plain fetch records/s",
        ("share-4", "fetch"),
        lambda s, f: s.rate / f.rate,
    )
    ratio(
        "share (4 consumers) / share (1 consumer) records/s",
        ("share-4", "share-1"),
        lambda s4, s1: s4.rate / s1.rate,
    )
    ratio(
        "share (4 consumers) records/s / 300,000 goal",
        ("share-4",),
        lambda s: s.rate / SHARE_GOAL,
    )
    ratio(
        "share (4 consumers) broker CPU µs/record / 1 µs goal",
        ("share-4",),
        lambda s: s.cpu_us_per_record / CPU_GOAL_US,
    )
    ratio(
        "share (4) / fetch broker CPU per record",
        ("share-4", "fetch"),
        lambda s, f: s.cpu_us_per_record / f.cpu_us_per_record,
    )
    ratio(
        "share (4) with durable share state / without records/s",
        ("share-4-durable", "share-4-volatile"),
        lambda on, off: on.rate / off.rate,
    )
    out.extend(spark_ratios(by))
    return out


def profile_summary(path: Path, top: int = 15) -> str:
    """Top functions by cumulative and by self time from one cProfile dump."""
    out = io.StringIO()
    for sort in ("cumulative", "tottime"):
        stats = pstats.Stats(str(path), stream=out)
        stats.strip_dirs().sort_stats(sort).print_stats(top)
    return out.getvalue()
