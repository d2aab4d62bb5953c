"""A broker restarts without reading again what its last stop or its recovery points cover.

18,100 partitions took 41 s to start after a clean stop and 76 s after kill -9, with 9,520
`index_rebuilt` lines (issue 28): every start checked every partition's newest segment. As
Kafka's LogManager does (`LogManager.loadLogs`, core/src/main/scala/kafka/log/LogManager.scala:
the `.kafka_cleanshutdown` marker, and `recovery-point-offset-checkpoint` read into each log's
recovery point; `LogLoader.recoverLog`, storage/src/main/java/org/apache/kafka/storage/internals/
log/LogLoader.java, recovers only the segments from the recovery point on), a clean start now
scans nothing, and a start after kill -9 scans only what was written past the recovery points,
and says so in one line. A stop saves the recovery points even when `shutdown.timeout.ms` cuts
it short.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from protocol.record_batch import build_batch
from storage import LogManager
from storage.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from storage.dir_checkpoints import read_recovery_points
from tests.brokers import BrokerProcess
from tests.brokers import closed_wide_topic
from tests.brokers import count_opened_per_turn
from tests.brokers import make_server
from tests.compat.support import QUIET
from tests.compat.support import admin
from tests.compat.support import start_broker
from tests.probe import Probe

pytestmark = pytest.mark.integration
TOPIC, PARTITIONS, RECORDS = "wide", 20, 30
LOADED = "logs loaded"


def lines(broker: BrokerProcess) -> list[dict[str, Any]]:
    out = []
    for line in broker.log_path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            out.append({"event": line, "level": "error"})  # a traceback, say
    return out


def loaded(broker: BrokerProcess, since: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The start's one line about its logs (waited for), and every line it logged."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        said = lines(broker)[since:]
        found = [e for e in said if str(e["event"]).startswith(LOADED)]
        if found:
            return found[0], said
        time.sleep(0.05)
    raise TimeoutError(f"no {LOADED!r} line:\n{broker.log()}")


def produce(bootstrap: str, partitions: range, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **QUIET})
    for p in partitions:
        for i in range(records):
            producer.produce(TOPIC, value=b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0


def ends(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", **QUIET})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def start(data: Path, config: dict[str, object]) -> BrokerProcess:
    broker = start_broker(data, config)
    client = admin(broker.bootstrap)  # kept until the answer: its futures need it
    topics = client.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 1, config={"segment.bytes": "2048"})]
    )
    topics[TOPIC].result(30)
    produce(broker.bootstrap, range(PARTITIONS), RECORDS)  # a few segments each
    return broker


def test_a_clean_restart_scans_nothing_and_one_after_kill_only_what_was_not_checkpointed(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    broker = start(data, {})
    assert broker.stop() == 0
    assert (data / CLEAN_SHUTDOWN_FILE).exists()
    points = read_recovery_points(data)
    assert [points[(TOPIC, p)] for p in range(PARTITIONS)] == [RECORDS] * PARTITIONS

    since = len(lines(broker))
    broker.start()
    line, said = loaded(broker, since)
    assert line["clean_shutdown"] is True and line["partitions"] >= PARTITIONS
    assert (line["recovered"], line["segments_scanned"], line["indexes_rebuilt"]) == (0, 0, 0)
    assert not [e for e in said if e["level"] in ("warning", "error")]
    assert ends(broker.bootstrap) == [RECORDS] * PARTITIONS

    # Written after the start saved the recovery points: only partition 3's newest segment.
    produce(broker.bootstrap, range(3, 4), 5)
    broker.kill()
    since = len(lines(broker))
    broker.start()
    line, said = loaded(broker, since)
    assert line["clean_shutdown"] is False
    assert (line["segments_scanned"], line["truncated"], line["indexes_rebuilt"]) == (1, 0, 0)
    assert [e["event"] for e in said if e["level"] in ("warning", "error")] == [line["event"]]
    assert ends(broker.bootstrap) == [RECORDS + 5 * (p == 3) for p in range(PARTITIONS)]
    assert broker.stop() == 0


def test_a_stop_cut_short_by_its_timeout_saves_the_recovery_points(tmp_path: Path) -> None:
    """With no time at all to close the logs, a stop still says where each was synced up to:
    the next start reads again only what lies past that, and loses nothing."""
    data = tmp_path / "data"
    broker = start(data, {"shutdown.timeout.ms": 0})
    assert broker.stop() == 0
    points = read_recovery_points(data)
    assert all(0 <= points[(TOPIC, p)] <= RECORDS for p in range(PARTITIONS))

    since = len(lines(broker))
    broker.start()
    line, _ = loaded(broker, since)
    unsynced = sum(points[(TOPIC, p)] < RECORDS for p in range(PARTITIONS))
    assert line["segments_scanned"] <= unsynced + 1  # (+ __consumer_offsets, if it was late)
    assert ends(broker.bootstrap) == [RECORDS] * PARTITIONS
    assert broker.stop() == 0


WIDE, TS = 1000, 1_700_000_000_000


def latest_offsets(bootstrap: str) -> list[int]:
    """Every partition's end in one ListOffsets request (librdkafka sends one per leader)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", **QUIET})
    try:
        asked = [TopicPartition(TOPIC, p, -1) for p in range(WIDE)]
        return [tp.offset for tp in consumer.offsets_for_times(asked, timeout=60)]
    finally:
        consumer.close()


@pytest.mark.latency
async def test_a_request_for_thousands_of_logs_not_open_yet_does_not_hold_the_loop(
    tmp_path: Path,
) -> None:
    """The broker listens before its logs are open; a request naming a thousand of them opened
    each on the spot, all in one turn of the event loop: they are opened in slices."""
    data = tmp_path / "data"
    closed_wide_topic(data, TOPIC, WIDE, TS)
    server = make_server(data)
    await server.start()
    turns: list[int] = []  # logs opened in each turn of the loop
    counting = asyncio.create_task(count_opened_per_turn(server, turns))
    try:
        assert server.services.logs.loading  # opened after the broker listens
        with Probe(server.port) as probe:
            bootstrap = f"127.0.0.1:{server.port}"
            ends = await asyncio.to_thread(latest_offsets, bootstrap)
        assert ends == [1 + p % 3 for p in range(WIDE)]
        await counting
        assert max(turns) < WIDE // 4, sorted(turns)[-5:]
        assert probe.slowest < 5 * Probe.LIMIT_S, sorted(probe.round_trips)[-5:]
    finally:
        counting.cancel()
        await server.stop()


@pytest.mark.latency
async def test_a_big_unsynced_tail_is_recovered_in_slices_while_others_are_answered(
    tmp_path: Path,
) -> None:
    """After kill -9 a log's active segment is checked from its recovery point to its end, up
    to a whole segment (1 GiB by default): that was done in one go, on the event loop, by the
    background opening or by the first request naming the partition. Now in slices: the probe
    is answered all along, and the request naming it is answered once it is recovered."""
    data = tmp_path / "data"
    logs = LogManager(data)
    logs.create_topic("big", 1)
    plog = logs.log("big", 0)
    assert plog is not None
    chunk = b"".join(build_batch([(None, b"v" * 100)], timestamp_ms=TS) for _ in range(2000))
    for _ in range(40):  # 80,000 batches, ~14 MB, never synced nor checkpointed
        plog.append(chunk, now_ms=TS)
    end = plog.log_end_offset
    del logs, plog  # kill -9: no clean mark, no recovery point

    server = make_server(data)
    await server.start()
    loading = server.services.logs
    turns = 0  # turns of the loop while the log was being recovered

    async def count_turns() -> None:
        nonlocal turns
        while loading.loading:
            await asyncio.sleep(0)
            turns += 1

    counting = asyncio.create_task(count_turns())
    try:
        assert loading.loading
        with Probe(server.port) as probe:
            bootstrap = f"127.0.0.1:{server.port}"
            ends = await asyncio.to_thread(big_end, bootstrap)
        await counting
        assert ends == end
        assert loading.load_stats.bytes_scanned > 10_000_000
        assert turns > 5  # the scan let the loop run between its slices
        assert probe.slowest < 5 * Probe.LIMIT_S, sorted(probe.round_trips)[-5:]
    finally:
        counting.cancel()
        await server.stop()


def big_end(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", **QUIET})
    try:
        (found,) = consumer.offsets_for_times([TopicPartition("big", 0, -1)], timeout=60)
        return int(found.offset)
    finally:
        consumer.close()
