"""The small-request and latency phases' own parts: stamps, pacing, percentiles, ratios, the
py-spy summary, the plot, and the Redis peer (a real redis-server, skipped if absent)."""

from __future__ import annotations

import logging
import multiprocessing
import shutil
import threading
import time
from pathlib import Path

import pytest

from bench import pyspy
from bench import redis_peer
from bench import report
from bench.phases import Row
from bench.phases import median_rows
from bench.small_phase import _percentile
from bench.small_workers import LogCounter
from bench.small_workers import latency_ms
from bench.small_workers import paced
from bench.small_workers import stamped


def _row(key: str, records: int, seconds: float, cpu: float, **kw: object) -> Row:
    return Row(key=key, label=key, records=records, seconds=seconds, broker_cpu_s=cpu,
               value_bytes=100, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_a_stamped_value_carries_its_send_time_and_whether_it_is_measured() -> None:
    value = stamped(100)
    before = time.monotonic_ns()
    measured, warmup = value(True), value(False)
    assert len(measured) == 100
    received = before + 3_000_000  # 3 ms after `before`: at most 3 ms after the stamp
    ms = latency_ms(measured, received)
    assert ms is not None and 0 < ms <= 3.0
    assert latency_ms(warmup, received) is None
    assert len(stamped(4)(True)) == 9  # never shorter than the stamp itself


def test_paced_sends_warm_up_records_until_told_then_exactly_the_measured_ones() -> None:
    driver, worker = multiprocessing.Pipe()
    sent: list[bytes] = []
    result: dict[str, object] = {}
    thread = threading.Thread(
        target=lambda: result.update(paced(worker, 2_000, 0.05, 20, sent.append))
    )
    thread.start()
    assert driver.recv() == "ready"
    go = time.monotonic()
    driver.send("go")
    while len(sent) < 60:  # some warm-up first
        time.sleep(0.001)
    driver.send("measure")
    thread.join(10)
    flags = [latency_ms(v, time.monotonic_ns()) is not None for v in sent]
    assert result["measured"] == 100 and sum(flags) == 100
    assert result["warmup"] == flags.index(True) >= 60
    assert all(flags[flags.index(True) :])  # no warm-up record once measuring began
    # On schedule from "go": the n-th record is never sent before (n - 1) / rate seconds.
    # (A late sender catches up in a burst, so only this lower bound holds on a busy machine.)
    assert isinstance(result["end"], float)
    assert result["end"] - go >= (len(sent) - 1) / 2_000


def test_percentiles_pick_the_value_below_which_that_share_falls() -> None:
    ordered = [float(i) for i in range(1, 1001)]  # 1..1000
    assert _percentile(ordered, 0.5) == 501.0
    assert _percentile(ordered, 0.99) == 991.0
    assert _percentile(ordered, 0.999) == 1000.0
    assert _percentile([], 0.99) == 0.0


def test_repeated_librdkafka_warnings_are_counted_once_each_kind() -> None:
    counter = LogCounter()
    logger = logging.getLogger("test_bench_small.rdkafka")
    logger.propagate = False
    logger.addHandler(counter)
    try:
        for p in range(3):
            logger.warning("Partition t(abc)[%d]: new leader-1 not found in cache", p)
        logger.warning("something else 7")
        logger.info("not a warning")
    finally:
        logger.removeHandler(counter)
    summary = counter.summary()
    assert summary[0].startswith("3x Partition t(abc)[0]: new leader-1")
    assert summary[1] == "1x something else 7"
    assert len(summary) == 2


def test_small_ratios_compare_cpu_per_record_end_to_end_and_p99() -> None:
    rows = [
        _row("small-produce", 10_000, 1.0, 1.0),  # 100 µs/record
        _row("small-consume", 10_000, 1.0, 0.2),  # 20
        _row("redis-small-produce", 10_000, 0.5, 0.1, peer=True),  # 10
        _row("redis-small-consume", 10_000, 0.5, 0.2, peer=True),  # 20
        _row("small-live", 10_000, 2.0, 1.1),  # 110
        _row("redis-small-live", 10_000, 2.0, 0.55, peer=True),  # 55
        _row("latency-shared", 20_000, 10.0, 6.0, latency_ms=(1.0, 1.0, 3.0)),
        _row("latency", 20_000, 10.0, 8.0, latency_ms=(2.0, 7.0, 12.0)),
        _row("redis-latency", 20_000, 10.0, 1.6, latency_ms=(0.2, 0.4, 2.0), peer=True),
    ]
    lines = report.small_ratios({r.key: r for r in rows})
    assert "small: Shoal broker CPU µs/record, produce + explicit acks = 120.0" in lines
    assert "small: Shoal / Redis CPU per record, produce then consume = 4.00" in lines
    assert "small: Shoal / Redis produce records/s = 0.50" in lines
    assert "small live: Shoal / Redis CPU per record (goal <= 1) = 2.00" in lines
    # Issue 33's goals hold for both shapes: one partition as the one stream (the peer's
    # shape), and a partition per consumer.
    shared, spread = "1 partition as the 1 stream", "a partition per consumer"
    assert f"latency, {shared}: Shoal broker CPU µs/record (goal <= 100) = 300.0" in lines
    assert f"latency, {shared}: Shoal / Redis p99 (goal <= 3) = 2.50" in lines
    assert f"latency, {shared}: Shoal / Redis p50 (goal <= 2) = 5.00" in lines
    cpu = "CPU per record at the fixed rate (goal <= 1)"
    assert f"latency, {shared}: Shoal / Redis {cpu} = 3.75" in lines
    assert f"latency, {spread}: Shoal broker CPU µs/record (goal <= 100) = 400.0" in lines
    assert f"latency, {spread}: Shoal / Redis p99 (goal <= 3) = 17.50" in lines
    assert f"latency, {spread}: Shoal / Redis {cpu} = 5.00" in lines
    assert any(line.endswith("(issue 15 baseline; goal >= 5) = 1.11") for line in lines)
    assert report.small_ratios({"small-produce": rows[0], "small-consume": rows[1]})[-1] == (
        "small: produce records/s / 9,000 (issue 15 baseline; goal >= 5) = 1.11"
    )  # no peer, no peer ratios


def test_repeated_latency_runs_keep_the_run_with_the_median_p99() -> None:
    runs = [[_row("latency", 100, 1.0, 0.1, latency_ms=(1.0, p99, 9.0))] for p99 in (5, 3, 4)]
    (row,) = median_rows(runs)
    assert row.latency_ms == (1.0, 4, 9.0)
    assert row.note.startswith("median of 3: p99 3.00..5.00 ms")


def test_pyspy_summary_counts_self_and_total_shares(tmp_path: Path) -> None:
    stacks = tmp_path / "x.pyspy.txt"
    stacks.write_text(
        "main (broker/main.py:1);handle (broker/handlers/produce.py:74);encode (a/b/c.py:9) 3\n"
        "main (broker/main.py:1);handle (broker/handlers/produce.py:74) 1\n"
        "main (broker/main.py:1);decode (protocol/messages.py:99) 4\n"
    )
    text = pyspy.summary(stacks)
    assert text.startswith("8 samples")
    self_part, total_part = text.split("| total % |")
    assert "| 50.0 | `decode (protocol/messages.py:99)` |" in self_part
    assert "| 37.5 | `encode (b/c.py:9)` |" in self_part
    assert "| 12.5 | `handle (handlers/produce.py:74)` |" in self_part
    assert "| 100.0 | `main (broker/main.py:1)` |" in total_part
    assert "| 50.0 | `handle (handlers/produce.py:74)` |" in total_part


def test_the_plot_is_a_png_of_the_run(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench extra draws the plot")
    from bench import plot

    rows = [
        _row("small-produce", 10_000, 1.0, 1.0),
        _row("latency", 20_000, 10.0, 8.0, latency_ms=(2.0, 7.0, 12.0)),
        _row("redis-latency", 20_000, 10.0, 1.6, latency_ms=(0.2, 0.4, 2.0), peer=True),
    ]
    path = plot.write(rows, tmp_path)
    assert path is not None and path.parent == tmp_path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="apt-get install redis-server")
def test_the_redis_peer_serves_streams_durably_and_reports_its_cpu(tmp_path: Path) -> None:
    redis = pytest.importorskip("redis", reason="the bench extra has redis-py")
    with redis_peer.RedisServer(tmp_path) as server:
        assert redis_peer.missing() is None
        client = redis.Redis(host="127.0.0.1", port=server.port)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        before = server.cpu_seconds()
        for _ in range(2_000):
            client.xadd("s", {b"v": b"x" * 100})
        assert client.xlen("s") == 2_000
        assert server.cpu_seconds() > before
        client.close()
    assert server.proc is not None and server.proc.poll() is not None  # stopped
    assert (tmp_path / "appendonlydir").is_dir()
