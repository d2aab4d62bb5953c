"""The stream reader's entry points driven as Spark drives them, without Spark: a real broker
process and the reader object, so minOffsetsPerTrigger, subscribePattern and the warning of
an AvailableNow run that reads nothing are checked in seconds (no JVM)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from tests.brokers import BrokerProcess
from tests.spark.conftest import configure_group
from tests.spark.conftest import create_topic
from tests.spark.conftest import produce

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark.options import OptionError
from spark.options import StreamOptions
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
        assert early.latestOffset(early.initialOffset(), ReadAllAvailable()) == {"seq": 1}
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
    assert first.latestOffset(first.initialOffset(), ReadAllAvailable()) == {"seq": 1}
    first.commit({"seq": 1})  # accepts the five
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
    assert _next_batch(by_backlog, start) == {"seq": 1}  # 10: go (once joined)
    by_backlog.commit({"seq": 1})
    by_backlog.stop()

    by_delay = _reader(broker, **options, minOffsetsPerTrigger="10", maxTriggerDelay="2s")
    stopped.append(by_delay)
    produce(broker.bootstrap, "trickle", 1, prefix="last")
    began = time.monotonic()
    start = by_delay.initialOffset()
    assert by_delay.latestOffset(start, ReadAllAvailable()) == start  # 1 < 10, not 2 s yet
    assert _next_batch(by_delay, start) == {"seq": 1}
    assert time.monotonic() - began >= 2  # the delay was up


def _next_batch(reader: ShoalStreamReader, start: dict[str, int]) -> dict[str, int]:
    """The next offset the reader plans, asking as Spark does until it moves (joining the
    group may take more than one trigger)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        end = reader.latestOffset(start, ReadAllAvailable())
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
