"""One PNG per run in `bench/out/`: records/s and CPU per record of every row, and the latency
percentiles.

Left: throughput per phase row; middle: broker (or peer server) CPU µs per record, both on log
scales with the peers' rows in another colour. Right: p50, p99 and p99.9 of every latency row.
Needs matplotlib (the `bench` extra); without it the run says so and writes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.phases import Row

OUT = Path(__file__).resolve().parent / "out"
OURS, PEER = "#1f77b4", "#d62728"
PERCENTILES = ("p50", "p99", "p99.9")


def _bars(ax: Any, rows: list[Row], values: list[float], title: str, labels: bool) -> None:
    y = list(range(len(rows)))
    ax.barh(y, values, color=[PEER if r.peer else OURS for r in rows])
    ax.set_yticks(y, [r.label for r in rows] if labels else [], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    positive = [v for v in values if v > 0]
    if positive:  # bars on a log scale start at the left edge: keep the smallest visible
        ax.set_xlim(left=min(positive) / 3, right=max(positive) * 4)
    ax.set_title(title, fontsize=10)
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:,.0f}" if v >= 10 else f" {v:.2f}", va="center", fontsize=7)


def _latency(ax: Any, rows: list[Row]) -> None:
    shown = [r for r in rows if r.latency_ms is not None]
    if not shown:
        ax.text(0.5, 0.5, "no latency phase in this run", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    width = 0.8 / len(PERCENTILES)
    for j, name in enumerate(PERCENTILES):
        values = [r.latency_ms[j] if r.latency_ms else 0.0 for r in shown]
        xs = [i + (j - 1) * width for i in range(len(shown))]
        bars = ax.bar(xs, values, width, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(range(len(shown)), [r.label.replace(", ", ",\n") for r in shown], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("end-to-end latency, ms (log)")
    ax.set_title("latency percentiles")
    ax.legend(fontsize=8)


def write(rows: list[Row], out_dir: Path = OUT) -> Path | None:
    """Draw the run's rows; the PNG's path, or None without matplotlib or rows to draw."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display on a server or in CI
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    if not rows:
        return None
    height = max(4.0, 0.35 * len(rows) + 1.5)
    fig, (rate, cpu, latency) = plt.subplots(
        1, 3, figsize=(20, height), gridspec_kw={"width_ratios": [3, 1.4, 2]}
    )
    shown = [r for r in rows if r.records and r.seconds > 0]
    _bars(rate, shown, [r.rate for r in shown], "records/s (log; red: peer)", labels=True)
    _bars(cpu, shown, [r.cpu_us_per_record for r in shown], "server CPU µs/record", labels=False)
    _latency(latency, rows)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
