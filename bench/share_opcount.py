"""Bytecodes per steady-rate ShareFetch: `python bench/share_opcount.py [--top K] [--cpu]
[--records K] [--no-ack]`.

The steady-rate phase's cycle, driven through a real broker's `KafkaConnection`s on null
transports (as `bench/opcount.py` drives Produce): one share consumer (a ShareGroupHeartbeat
joins it, a ShareFetch at epoch 0 opens its session), then per cycle a one-record Produce on a
second connection and a ShareFetch v1 of the one partition that ACCEPTs the record of the
cycle before and takes the new one, as librdkafka's ShareConsumer does at a steady rate.

`--wait`: the ShareFetch comes first and waits (its long poll), the Produce wakes it, and the
loop runs it on: the "records after one wait" case. Without it the record is there already.
The loop is the broker's (uvloop unless SHOAL_LOOP=asyncio).

`--records K`: each cycle is K one-record Produces, then one ShareFetch that ACCEPTs the K
records of the cycle before (one range) and takes the K new ones: how the cost of a ShareFetch
splits into a part per request and a part per record (at a fixed rate a busy broker hands out
more records per ShareFetch). `--no-ack`: the ShareFetches acknowledge nothing (the cost of the
piggybacked ACCEPT, by difference; the records stay acquired, so at most 4,000 in a run).

Counts the Python opcodes executed inside the ShareFetch's `data_received` (and, with
`--wait`, inside the loop passes that resume it), `sys.settrace` opcode events; C code counts
for nothing. `--cpu` traces nothing and prints the CPU time of the whole cycle (Produce
included) per record instead, the best and the median of chunks of 1,000. Run it from the tree
to measure, with any tree's interpreter (its imports come from the working directory):

    cd /work/wt/direct-base && ../direct/.venv/bin/python ../direct/bench/share_opcount.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.getcwd())  # the tree measured is the one run from, not this file's

from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from bench.opcount import WARM_UP
from bench.opcount import OpcodeCounter
from bench.opcount import produce
from broker.config import BrokerConfig
from broker.connection import KafkaConnection
from broker.loops import loop_factory
from broker.server import Server
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request

CHUNK = 1_000
SESSION_MS = 3_600_000
NO_ACK_LOCKS = 4_000  # group.share.max.partition.max.record.locks' default
GROUP, MEMBER = "bench", "m" * 22
ACCEPT = 1


class _Transport(asyncio.Transport):
    """Keeps what the broker writes: the answers are checked (a cycle that took no record
    measures nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def abort(self) -> None:
        raise SystemExit("the connection was aborted")

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def share_fetch(
    epoch: int, topic_id: Any, ack: tuple[int, int] | None, cid: int, wait_ms: int
) -> bytes:
    """A ShareFetch v1 of partition 0 that ACCEPTs the offsets `ack` (first, last)."""
    m = fetch_v1
    batches = (
        ()
        if ack is None
        else (build(m.AcknowledgementBatch, first_offset=ack[0], last_offset=ack[1],
                    acknowledge_types=(ACCEPT,)),)
    )  # fmt: skip
    body = build(
        m.ShareFetchRequest, group_id=GROUP, member_id=MEMBER, share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1, max_bytes=52_428_800,
        max_records=500, batch_size=500,
        topics=(build(m.FetchTopic, topic_id=topic_id, partitions=(
            build(m.FetchPartition, partition_index=0, acknowledgement_batches=batches),)),),
        forgotten_topics_data=(),
    )  # fmt: skip
    return frame(encode_request(body, cid, "rdkafka"))


def _answer(transport: _Transport, key: int, version: int) -> Any:
    assert transport.written, "no answer"
    data = b"".join(transport.written)
    transport.written.clear()
    return decode_response(key, version, data[4:])[1]


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def _cycle(
    producer: KafkaConnection,
    consumer: KafkaConnection,
    producer_frame: bytes,
    request: bytes,
    wait: bool,
    counter: OpcodeCounter | None,
    records: int = 1,
) -> None:
    """`records` Produces and one ShareFetch; the ShareFetch's steps traced into `counter`."""
    traced = counter if counter is not None else contextlib.nullcontext()
    if wait:
        with traced:
            consumer.data_received(request)
        await _settle()
        producer.data_received(producer_frame)
        with traced:
            await _settle()
    else:
        for _ in range(records):
            producer.data_received(producer_frame)
            await _settle()
        with traced:
            consumer.data_received(request)
        await _settle()


def _taken(got: Any) -> tuple[int | None, int]:
    """The last offset an answer acquired, and how many records."""
    assert got.error_code == 0, got
    last, n = None, 0
    for t in got.responses:
        for p in t.partitions:
            assert p.error_code == 0 and p.acknowledge_error_code == 0, p
            for a in p.acquired_records:
                last = a.last_offset
                n += a.last_offset - a.first_offset + 1
    return last, n


async def run(
    cycles: int, wait: bool, cpu: bool, records: int = 1, acks: bool = True
) -> tuple[OpcodeCounter, int]:
    counter = OpcodeCounter()
    taken = 0
    with tempfile.TemporaryDirectory() as tmp:
        overrides = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": tmp, "metrics.port": -1}
        # The harness sends no heartbeats: a traced run may outlast the default 45 s session.
        overrides["group.share.max.session.timeout.ms"] = SESSION_MS
        overrides["group.share.session.timeout.ms"] = SESSION_MS
        if not acks:  # every record stays acquired: the most a share-partition may hold
            overrides["group.share.partition.max.record.locks"] = NO_ACK_LOCKS
        server = Server(BrokerConfig.load(environ={}, overrides=overrides))
        await server.start()
        server.services.logs.create_topic("bench", 1, {})
        info = server.services.logs.topic("bench")
        assert info is not None
        topic_id = info.topic_id
        producer_t, consumer_t = _Transport(), _Transport()
        producer = KafkaConnection(server.services, set())
        producer.connection_made(producer_t)
        consumer = KafkaConnection(server.services, set())
        consumer.connection_made(consumer_t)
        hb = build(hb_v1.ShareGroupHeartbeatRequest, group_id=GROUP, member_id=MEMBER,
                   member_epoch=0, subscribed_topic_names=("bench",))  # fmt: skip
        consumer.data_received(frame(encode_request(hb, 1, "rdkafka")))
        await _settle()
        assert _answer(consumer_t, 76, 1).error_code == 0
        consumer.data_received(share_fetch(0, topic_id, None, 2, 0))
        await _settle()
        _answer(consumer_t, 78, 1)
        producer_frame = produce(0, 1)
        ack: tuple[int, int] | None = None
        spent = 0.0  # `--cpu`: the loop thread's CPU inside the broker's steps of this chunk
        for i in range(WARM_UP + cycles):
            traced = not cpu and i >= WARM_UP
            # kio's writer costs more than the broker's answer: kept off the clock.
            request = share_fetch(i + 1, topic_id, ack, i + 3, 500 if wait else 0)
            started = time.thread_time()
            await _cycle(
                producer, consumer, producer_frame, request, wait, counter if traced else None,
                records,
            )  # fmt: skip
            spent += time.thread_time() - started
            producer_t.written.clear()
            got = _answer(consumer_t, 78, 1)
            last, n = _taken(got)
            taken += n
            assert last is not None and n == records, f"cycle {i} took {n} of {records} records"
            ack = (last - n + 1, last) if acks else None
            if cpu and (i + 1 - WARM_UP) % min(CHUNK, cycles) == 0:
                if i >= WARM_UP:
                    counter.loop_chunks.append(spent)
                spent = 0.0
        await server.stop()
    return counter, taken


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=2_000)
    p.add_argument("--top", type=int, default=0, help="also list the K costliest functions")
    p.add_argument("--wait", action="store_true", help="the ShareFetch waits, a Produce wakes it")
    p.add_argument("--cpu", action="store_true", help="no tracing: CPU µs per cycle")
    p.add_argument("--records", type=int, default=1, help="K Produces, one ShareFetch of K")
    p.add_argument("--no-ack", action="store_true", help="the ShareFetches ACCEPT nothing")
    args = p.parse_args()
    if args.wait and args.records != 1:
        p.error("--records K > 1 is the records-there cycle: not with --wait")
    if args.no_ack and (WARM_UP + args.cycles) * args.records > NO_ACK_LOCKS:
        p.error(f"--no-ack holds every record acquired: ({WARM_UP:,} + cycles) x records"
                f" <= {NO_ACK_LOCKS:,}")  # fmt: skip
    # The broker's own loop (uvloop unless SHOAL_LOOP=asyncio): asyncio's pure-Python loop
    # would add its own opcodes to every wait.
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        counter, taken = runner.run(
            run(args.cycles, args.wait, args.cpu, args.records, not args.no_ack)
        )
    n, k = args.cycles, args.records
    mode = "after a wait" if args.wait else "record there" if k == 1 else f"{k} records there"
    mode += ", no acknowledgement" if args.no_ack else ""
    if args.cpu:
        chunks = sorted(counter.loop_chunks)
        chunk = min(CHUNK, n)
        best, median = chunks[0] / chunk / k * 1e6, chunks[len(chunks) // 2] / chunk / k * 1e6
        print(f"tree {os.getcwd()} ({mode}): {best:.2f} µs CPU per record (its Produce and its"
              f" share of the ShareFetch) at best, {median:.2f} median")  # fmt: skip
        return
    print(f"tree {os.getcwd()} ({mode}): {counter.total / n:,.1f} opcodes per ShareFetch"
          f" ({n:,}, {taken:,} records taken)")  # fmt: skip
    for key, ops in counter.by_function.most_common(args.top):
        print(f"{ops / n:9.1f}  {key}")


if __name__ == "__main__":
    main()
