"""The stream reader's entry points driven as Spark drives them, without Spark: a real broker
process and the reader object, so minOffsetsPerTrigger, subscribePattern and the warning of
an AvailableNow run that reads nothing are checked in seconds (no JVM)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokers import BrokerProcess
from tests.spark.conftest import configure_group
from tests.spark.conftest import create_topic
from tests.spark.conftest import produce

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.streaming.datasource import ReadLimit

from spark.options import OptionError
from spark.options import StreamOptions
from spark.progress import batch_of
from spark.stream import ShoalStreamReader

pytestmark = pytest.mark.spark


def _reader(broker: BrokerProcess, **options: str) -> ShoalStreamReader:
    base = {"kafka.bootstrap.servers": broker.bootstrap, "pollTimeoutMs": "300"}
    merged = {**base, **options}
    return ShoalStreamReader(StreamOptions.parse({k.lower(): v for k, v in merged.items()}))


@pytest.fixture
def stopped() -> Iterator[list[ShoalStreamReader]]:
    """Readers to stop at the end of the test, whatever happens."""
    readers: list[ShoalStreamReader] = []
    yield readers
    for r in readers:
        r.stop()


def test_available_now_on_a_fresh_latest_group_warns_why_it_read_nothing(
    broker: BrokerProcess, stopped: list[ShoalStreamReader], caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(broker.bootstrap, "late", 1)
    produce(broker.bootstrap, "late", 20)
    reader = _reader(broker, subscribe="late", group="late-joiner")
    stopped.append(reader)
    with caplog.at_level(logging.WARNING, logger="spark.group_state"):
        reader.prepareForTriggerAvailableNow()
        start = reader.initialOffset()
        for _ in range(20):  # Spark asks until the offset stops moving
            if reader.latestOffset(start, ReadAllAvailable()) == start:
                break
        assert reader.latestOffset(start, ReadAllAvailable()) == start
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "read nothing: share group late-joiner" in warnings[0]
    assert "share.auto.offset.reset is latest" in warnings[0]

    # A group that starts at earliest reads the records and says nothing of the kind.
    caplog.clear()
    configure_group(broker.bootstrap, "early-joiner")
    early = _reader(broker, subscribe="late", group="early-joiner")
    stopped.append(early)
    with caplog.at_level(logging.WARNING, logger="spark.group_state"):
        early.prepareForTriggerAvailableNow()
        assert batch_of(early.latestOffset(early.initialOffset(), ReadAllAvailable())) == 1
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_min_offsets_per_trigger_waits_for_the_backlog_or_the_delay(
    broker: BrokerProcess, stopped: list[ShoalStreamReader]
) -> None:
    create_topic(broker.bootstrap, "trickle", 1)
    configure_group(broker.bootstrap, "patient")
    produce(broker.bootstrap, "trickle", 5)
    # Read once so the group has started the partition (before that its backlog is unknown,
    # and the gate lets a trigger through).
    first = _reader(broker, subscribe="trickle", group="patient", pollTimeoutMs="5000")
    stopped.append(first)
    end = first.latestOffset(first.initialOffset(), ReadAllAvailable())
    assert end == {"trickle": {"0": 5}, "shoal:batch": 1}
    first.commit(end)  # accepts the five
    first.stop()

    # Each trigger waits up to pollTimeoutMs for the gate (then for records), as Spark's
    # triggers are asked again at once.
    options = {"subscribe": "trickle", "group": "patient", "pollTimeoutMs": "500"}
    by_backlog = _reader(broker, **options, minOffsetsPerTrigger="10", maxTriggerDelay="10m")
    stopped.append(by_backlog)
    start = by_backlog.initialOffset()
    assert by_backlog.latestOffset(start, ReadAllAvailable()) == start  # backlog 0 < 10
    produce(broker.bootstrap, "trickle", 9, prefix="more")
    assert by_backlog.latestOffset(start, ReadAllAvailable()) == start  # 9 < 10
    produce(broker.bootstrap, "trickle", 1, prefix="tenth")
    end = _next_batch(by_backlog, start)
    assert batch_of(end) == 1  # 10: go (once joined)
    by_backlog.commit(end)
    by_backlog.stop()

    by_delay = _reader(broker, **options, minOffsetsPerTrigger="10", maxTriggerDelay="2s")
    stopped.append(by_delay)
    produce(broker.bootstrap, "trickle", 1, prefix="last")
    began = time.monotonic()
    start = by_delay.initialOffset()
    assert by_delay.latestOffset(start, ReadAllAvailable()) == start  # 1 < 10, not 2 s yet
    assert batch_of(_next_batch(by_delay, start)) == 1
    assert time.monotonic() - began >= 2  # the delay was up


def _next_batch(
    reader: ShoalStreamReader, start: dict[str, Any], limit: ReadLimit | None = None
) -> dict[str, Any]:
    """The next offset the reader plans, asking as Spark does until it moves (joining the
    group may take more than one trigger)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        end = reader.latestOffset(start, limit or ReadAllAvailable())
        if end != start:
            return end
    return start


def test_subscribe_pattern_is_matched_when_the_query_starts(
    broker: BrokerProcess, stopped: list[ShoalStreamReader]
) -> None:
    for topic in ("clicks-eu", "clicks-us", "clicks"):
        create_topic(broker.bootstrap, topic, 1)
        produce(broker.bootstrap, topic, 3, prefix=topic)
    configure_group(broker.bootstrap, "clickers")
    reader = _reader(broker, subscribePattern="clicks-.*", group="clickers")
    stopped.append(reader)
    start = reader.initialOffset()
    seen: set[str] = set()
    deadline = time.monotonic() + 30
    while len(seen) < 6 and time.monotonic() < deadline:
        end = reader.latestOffset(start, ReadAllAvailable())
        for part in reader.partitions(start, end):
            for batch in reader.read(part):
                seen.update(v.decode() for v in batch.column("value").to_pylist())
        reader.commit(end)
        start = end
    assert seen == {f"clicks-{r}{i}" for r in ("eu", "us") for i in range(3)}

    nothing = _reader(broker, subscribePattern="nothing-.*", group="clickers")
    with pytest.raises(OptionError, match="matches no topic"):
        nothing.latestOffset(nothing.initialOffset(), ReadAllAvailable())


def test_offsets_are_per_partition_and_the_latest_offset_carries_lag_metrics(
    broker: BrokerProcess, stopped: list[ShoalStreamReader]
) -> None:
    """Issue 30 item 3: the progress's offsets in Spark's Kafka shape (`{"topic": {"0": n}}`,
    KafkaSourceOffset), and the Kafka source's `metrics` (min/max/avgOffsetsBehindLatest, as
    KafkaMicroBatchStream.metrics computes them: latest minus consumed, per partition) plus
    the share group's lag in records, under `shoal:metrics` of the latest offset."""
    create_topic(broker.bootstrap, "lagging", 2)
    produce(broker.bootstrap, "lagging", 40, partitions=2)  # 20 per partition
    configure_group(broker.bootstrap, "laggards")
    reader = _reader(broker, subscribe="lagging", group="laggards", maxRecordsPerTrigger="10")
    stopped.append(reader)
    start = reader.initialOffset()
    end = _next_batch(reader, start, reader.getDefaultReadLimit())
    assert batch_of(end) == 1
    read = {p: o for p, o in end["lagging"].items()}
    assert sum(read.values()) == 10  # offsets after the ten records read (from 0)
    latest = reader.reportLatestOffset()
    assert latest is not None
    # Log end offsets: the share group's state is written to the partition as control
    # records, so they may be past the 20 records (offsets behind are offsets, as Kafka's).
    ends = latest["lagging"]
    assert sorted(ends) == ["0", "1"] and all(ends[p] >= 20 for p in ends)
    metrics = latest["shoal:metrics"]
    behind = sorted(ends[p] - read.get(p, 0) for p in ("0", "1"))
    assert metrics["maxOffsetsBehindLatest"] == str(behind[1])
    assert metrics["minOffsetsBehindLatest"] == str(behind[0])
    assert metrics["avgOffsetsBehindLatest"] == str(sum(behind) / 2)
    # The group's lag in records, over the partitions it has started (those read so far):
    # ten acquired there, none acknowledged yet.
    assert metrics["shareGroupLag"] == str(20 * len(read))

    # Each batch starts from the last one's offsets; once Spark has committed them all, the
    # group's lag is 0 (the group's own state records, written to the partitions, are not
    # records to read; offsets behind count them, as Kafka's count markers).
    start, total = end, 10
    while total < 40:
        nxt = _next_batch(reader, start, reader.getDefaultReadLimit())
        assert batch_of(nxt) == batch_of(start) + 1
        assert all(nxt["lagging"][p] >= o for p, o in start["lagging"].items())
        total += sum(nxt["lagging"].values()) - sum(start["lagging"].values())
        start = nxt
    reader.commit(start)
    # The lag is asked of the broker at most every 5 s (spark.share_session._LAG_EVERY_S).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        latest = reader.reportLatestOffset()
        assert latest is not None
        if latest["shoal:metrics"]["shareGroupLag"] == "0":
            break
        time.sleep(0.2)
    assert latest["shoal:metrics"]["shareGroupLag"] == "0"


def test_a_lock_window_that_caps_micro_batches_is_named_once(
    broker: BrokerProcess, stopped: list[ShoalStreamReader], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 30 item 2: a micro-batch is held in flight until Spark commits it, so the group's
    share.partition.max.record.locks caps it (Kafka 4's default 2,000 per partition). The query
    says so once, naming the setting and how to raise it, at the first batch it caps; a
    backlog too small to reach either limit says nothing."""
    create_topic(broker.bootstrap, "windowed", 1)
    configure_group(broker.bootstrap, "windowed-small", share_partition_max_record_locks="100")
    configure_group(broker.bootstrap, "windowed-few", share_partition_max_record_locks="100")
    produce(broker.bootstrap, "windowed", 60)
    few = _reader(broker, subscribe="windowed", group="windowed-few", maxRecordsPerTrigger="250")
    stopped.append(few)
    with caplog.at_level(logging.WARNING, logger="spark.share_session"):
        end = _next_batch(few, few.initialOffset(), few.getDefaultReadLimit())
        assert sum(end["windowed"].values()) == 60
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    few.stop()

    produce(broker.bootstrap, "windowed", 240)
    reader = _reader(
        broker, subscribe="windowed", group="windowed-small", maxRecordsPerTrigger="250"
    )
    stopped.append(reader)
    with caplog.at_level(logging.WARNING, logger="spark.share_session"):
        start, sizes = reader.initialOffset(), []
        for _ in range(3):
            end = _next_batch(reader, start, reader.getDefaultReadLimit())
            parts = reader.partitions(start, end)
            sizes.append(sum(b.num_rows for p in parts for b in reader.read(p)))
            reader.commit(end)
            start = end
    # The window admits a stored batch that starts inside it whole (as Kafka's), so batches
    # are about the window's size, well under the read limit.
    assert sum(sizes) == 300 and max(sizes) < 250, sizes
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "maxRecordsPerTrigger=250 cannot be reached" in warnings[0]
    assert "share.partition.max.record.locks=100" in warnings[0]
    assert "--add-config share.partition.max.record.locks=250" in warnings[0]
