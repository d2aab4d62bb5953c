"""Client loops of the Redis Streams peer, the same workloads as `bench.small_workers`.

Every command is its own round trip, as a web service or worker issuing them one at a time
would: one XADD per record; consumers in one group read with XREADGROUP COUNT 50 (blocking
100 ms when there is nothing new) and XACK each entry on its own. Same handshakes and reports
as the Shoal side. Imported only when redis-py is installed.
"""

from __future__ import annotations

import time
from array import array
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from multiprocessing.synchronize import Event
from typing import Any

import redis

from bench.small_workers import Out
from bench.small_workers import latency_ms
from bench.small_workers import paced

FIELD = b"v"
READ_COUNT = 50


def _client(port: int) -> redis.Redis:
    client = redis.Redis(host="127.0.0.1", port=port)
    client.ping()
    return client


def xadd_worker(conn: Connection, port: int, stream: str, records: int, value_size: int) -> None:
    client = _client(port)
    conn.send("ready")
    conn.recv()
    value = bytes(value_size)
    xadd = client.xadd
    start = time.monotonic()
    for _ in range(records):
        xadd(stream, {FIELD: value})
    end = time.monotonic()
    conn.send({"start": start, "end": end, "unflushed": 0, "errors": []})


def paced_xadd_worker(
    conn: Connection, port: int, stream: str, rate: int, seconds: float, value_size: int
) -> None:
    client = _client(port)

    def send(value: bytes) -> None:
        client.xadd(stream, {FIELD: value})

    result = paced(conn, rate, seconds, value_size, send)
    result["unflushed"] = 0
    result["errors"] = []
    conn.send(result)


def xreadgroup_worker(
    index: int,
    port: int,
    group: str,
    stream: str,
    barrier: Barrier,
    done: Event,
    out: Out,
    latency: bool,
) -> None:
    client = _client(port)
    name = f"consumer-{index}"
    latencies = array("d")
    barrier.wait()
    while not done.is_set():
        reply: Any = client.xreadgroup(group, name, {stream: ">"}, count=READ_COUNT, block=100)
        received = time.monotonic_ns()
        delivered = 0
        for _stream, entries in reply or ():
            for entry_id, fields in entries:
                client.xack(stream, group, entry_id)
                delivered += 1
                if latency:
                    ms = latency_ms(fields[FIELD], received)
                    if ms is not None:
                        latencies.append(ms)
        if delivered:
            out.put(("n", index, delivered, len(latencies), received / 1e9))
    out.put(
        (
            "end",
            index,
            {
                "acked": time.monotonic(),
                "latencies": latencies.tobytes(),
                "errors": [],
                "commit_errors": 0,
            },
        )
    )
