"""DescribeLogDirs over a broker of 50,000 partitions: every one described, the event loop never
held long (promise 3).

The broker's services are real (`make_server`, not started) but its logs are in memory: 50,000
partitions on disk take minutes to make. Each turn of the loop is timed in the loop thread's CPU
time, which other processes on a loaded machine do not inflate.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator

import pytest
from kio.schema.describe_log_dirs import v5
from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.server import Server
from protocol.messages import RequestHeader
from protocol.record_batch import build_batch
from storage import LogManager
from tests.brokers import make_server

# Timed: run with the other timing tests, alone (`make test`'s latency pass).
pytestmark = [pytest.mark.slow, pytest.mark.latency]
PARTITIONS = 50_000
TURN_LIMIT_S = 0.050  # promise 3; a slice takes ~10 ms


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = make_server(tmp_path_factory.mktemp("ld") / "data")
    srv.services.logs.close()
    logs = LogManager(None, memory=True, max_partitions=None)
    logs.create_topic("wide", PARTITIONS)
    for p in range(0, PARTITIONS, 1000):  # a few with records
        plog = logs.log("wide", p)
        assert plog is not None
        plog.append(build_batch([(None, b"v" * p)], timestamp_ms=1), now_ms=1)
    srv.services.logs = logs
    # As the broker freezes what it opened at start (broker.server): a full collection would
    # otherwise walk the 50,000 logs in whichever loop turn it falls, a stall of the test's
    # making (395 ms seen at load 10), not the handler's.
    gc.collect()
    gc.freeze()
    yield srv
    gc.unfreeze()


async def _answer_timing_turns(server: Server) -> tuple[v5.DescribeLogDirsResponse, float]:
    """The answer to DescribeLogDirs of every partition, and the longest turn of the loop (CPU
    seconds of this thread) while it was made."""
    h = server.services.registry.get(35)
    assert h is not None
    ctx = RequestContext(server.services, RequestHeader(35, 5, 1, "test"), "127.0.0.1:1")
    task = asyncio.create_task(h.dispatch(ctx, v5.DescribeLogDirsRequest(topics=None)))
    longest = 0.0
    while not task.done():
        started = time.thread_time()
        await asyncio.sleep(0)
        longest = max(longest, time.thread_time() - started)
    answer = await task
    assert isinstance(answer, v5.DescribeLogDirsResponse)
    return answer, longest


async def test_fifty_thousand_partitions_are_described_a_slice_at_a_time(server: Server) -> None:
    answer, longest = await _answer_timing_turns(server)
    assert answer.error_code == ErrorCode.none
    (result,) = answer.results
    (topic,) = result.topics
    assert topic.name == "wide"
    assert [p.partition_index for p in topic.partitions] == list(range(PARTITIONS))
    logs = server.services.logs
    sizes = {p.partition_index: p.partition_size for p in topic.partitions}
    assert sizes == {p: logs.log("wide", p).size_bytes for p in range(PARTITIONS)}  # type: ignore[union-attr]
    assert sizes[1000] > sizes[0] > 0
    assert longest < TURN_LIMIT_S, f"the loop was held {longest * 1e3:.0f} ms"
