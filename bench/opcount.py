"""Bytecodes per one-record Produce: `python bench/opcount.py [--requests N] [--top K]`.

Drives one-record Produce v10 requests (4 partitions in turn, as librdkafka sends them) through
a `KafkaConnection` of a real broker's services on a null transport (`bench.request_bounds
--requests` runs it too), and counts the Python opcodes executed inside `data_received` with
`sys.settrace` opcode events (`frame.f_trace_opcodes`). C code (kio's native reader, `os.write`,
dict lookups) counts for nothing, so this is a count of interpreted steps, stable from run to run
and independent of the machine's load: it tells where Python work was added or removed, not how
long a request takes (`python -m bench --only small` does that).

`--top K` prints the K functions with the most opcodes per request. `--cpu` traces nothing and
prints the CPU time per request instead (best and median of chunks of 1,000), of the whole
process (with the threads that sync the logs) and of the event loop's thread alone: CPU time,
so a busy machine slows it less than a wall clock would, but still some. To compare trees, run the
file by its path from inside the other checkout (its own imports come from the working
directory, which Python puts first on the path), with this worktree's interpreter:

    cd /work/wt/base753 && /work/wt/hotpath2/.venv/bin/python /work/wt/hotpath2/bench/opcount.py

It imports nothing of this package but what every tree since 753420f has (`Server`,
`KafkaConnection`, `build`, `encode_request`, `build_batch`), so older trees run it unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import sys
import tempfile
import time
from collections import Counter
from types import FrameType
from typing import Any

sys.path.insert(0, os.getcwd())  # the tree measured is the one run from, not this file's

from kio.schema.produce.v10 import request as produce_v10
from kio.static.primitive import i32

from broker.config import BrokerConfig
from broker.connection import KafkaConnection
from broker.server import Server
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import encode_request
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch

WARM_UP = 1_000
CHUNK = 1_000  # requests per CPU-time reading (`--cpu`)


def produce(partition: int, correlation_id: int) -> bytes:
    """A whole Produce v10 frame of one 100-byte record to one partition of topic `bench`."""
    batch = build_batch([NewRecord(None, b"x" * 100)], timestamp_ms=1_700_000_000_000)
    m = produce_v10
    body = build(
        m.ProduceRequest,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            m.TopicProduceData(
                name="bench",  # type: ignore[arg-type]
                partition_data=(m.PartitionProduceData(index=i32(partition), records=batch),),  # type: ignore[arg-type]
            ),
        ),
    )
    return frame(encode_request(body, correlation_id, "rdkafka"))


class _NullTransport(asyncio.Transport):
    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def abort(self) -> None:
        raise SystemExit("the connection was aborted")


class OpcodeCounter:
    """Opcodes executed while tracing, in all and by function (file:line name)."""

    def __init__(self) -> None:
        self.total = 0
        self.by_function: Counter[str] = Counter()
        self.chunks: list[float] = []  # `--cpu`: seconds of CPU per chunk of requests
        self.loop_chunks: list[float] = []  # the same, of the event loop's thread alone

    def _start(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        code = frame.f_code
        key = f"{_short(code.co_filename)}:{code.co_firstlineno} {code.co_qualname}"

        def step(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                self.total += 1
                self.by_function[key] += 1
            return step

        return step

    def __enter__(self) -> OpcodeCounter:
        sys.settrace(self._start)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)


def _short(path: str) -> str:
    cwd = os.getcwd() + os.sep
    if path.startswith(cwd):
        return path[len(cwd) :]
    marker = "site-packages" + os.sep
    return path[path.index(marker) + len(marker) :] if marker in path else path


async def count(requests: int, cpu: bool = False) -> OpcodeCounter:
    """Opcodes of `requests` requests; with `cpu`, no tracing: the CPU time of each chunk of
    `CHUNK` requests instead (`OpcodeCounter.chunks`, seconds)."""
    counter = OpcodeCounter()
    with tempfile.TemporaryDirectory() as tmp:
        overrides = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": tmp, "metrics.port": -1}
        server = Server(BrokerConfig.load(environ={}, overrides=overrides))
        await server.start()
        server.services.logs.create_topic("bench", 4, {})
        connection = KafkaConnection(server.services, set())
        connection.connection_made(_NullTransport())
        frames = [produce(p, p + 1) for p in range(4)]
        started, loop_started = time.process_time(), time.thread_time()
        for i in range(WARM_UP + requests):
            if i < WARM_UP or cpu:
                connection.data_received(frames[i % 4])
            else:
                with counter:
                    connection.data_received(frames[i % 4])
            if i % 32 == 0:  # the loop's own duties (group commit, flush) run between reads
                await asyncio.sleep(0)
            if cpu and (i + 1 - WARM_UP) % CHUNK == 0:
                now, loop_now = time.process_time(), time.thread_time()
                if i >= WARM_UP:
                    counter.chunks.append(now - started)
                    counter.loop_chunks.append(loop_now - loop_started)
                started, loop_started = now, loop_now
        await server.stop()
    return counter


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=2_000)
    p.add_argument("--top", type=int, default=0, help="also list the K costliest functions")
    p.add_argument(
        "--cpu",
        action="store_true",
        help="no tracing: CPU µs per request, the best and the median of chunks of 1,000",
    )
    args = p.parse_args()
    counter = asyncio.run(count(args.requests, args.cpu))
    n = args.requests
    if args.cpu:
        if not counter.chunks:
            print(f"--cpu times chunks of {CHUNK:,} requests: ask for at least that many")
            return
        for what, chunks in (("process", counter.chunks), ("loop thread", counter.loop_chunks)):
            chunks = sorted(chunks)
            best, median = chunks[0] / CHUNK * 1e6, chunks[len(chunks) // 2] / CHUNK * 1e6
            print(f"tree {os.getcwd()}: {best:.2f} µs CPU per request at best, {median:.2f}"
                  f" median ({what})")  # fmt: skip
        return
    print(f"tree {os.getcwd()}: {counter.total / n:,.1f} opcodes per one-record Produce ({n:,})")
    for key, ops in counter.by_function.most_common(args.top):
        print(f"{ops / n:9.1f}  {key}")


if __name__ == "__main__":
    main()
