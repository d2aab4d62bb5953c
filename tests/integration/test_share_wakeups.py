"""Waiting ShareFetches are woken one per record appended, oldest first (issue 33), over real
sockets with raw kio requests: at a steady rate every produce used to wake every waiting
consumer of the partition, and all but one found nothing.

Kafka parks a ShareFetch in `DelayedShareFetch` and completes it when the partition's log end
moves (`DelayedShareFetch.tryComplete`, core/src/main/java/kafka/server/share/); which parked
fetch gets the records is not specified there. Here a record goes to the fetch that has
waited longest, and the others stay parked.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable
from typing import Any

import pytest

from broker.server import Server
from client import Admin
from client import ConfigResourceType
from client import Producer
from client.connection import Connection
from tests.integration.share_wire import acquired
from tests.integration.share_wire import join
from tests.integration.share_wire import share_fetch

pytestmark = pytest.mark.integration
GROUP, TOPIC = "wakeups", "wakeups-topic"
MEMBERS = ("a" * 22, "b" * 22, "c" * 22)


async def _until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def _until_parked(server: Server, count: int) -> None:
    await _until(lambda: len(_waiters(server)) == count, f"{count} fetches to park")


def _waiters(server: Server) -> list[object]:
    """The futures of the long polls parked on the partition, in line (the Notifier's table)."""
    return list(server.services.notifier._waiters.get((TOPIC, 0), {}))


async def _park_all(
    server: Server, configs: dict[str, str]
) -> tuple[list[Connection], list[asyncio.Task[Any]]]:
    """Each member joins and parks a ShareFetch on the empty partition, one after the other."""
    async with Admin(f"127.0.0.1:{server.port}") as admin:
        topic_id = await admin.create_topic(TOPIC, 1)
        await admin.incremental_alter_configs(ConfigResourceType.GROUP, GROUP, configs)
    assert topic_id is not None
    conns = [await Connection.open("127.0.0.1", server.port) for _ in MEMBERS]
    fetches: list[asyncio.Task[Any]] = []
    for conn, member in zip(conns, MEMBERS, strict=True):
        await join(conn, GROUP, member, TOPIC)
        fetch = share_fetch(GROUP, member, topic_id, max_wait=datetime.timedelta(seconds=20))
        fetches.append(asyncio.create_task(conn.request(fetch)))
        await _until_parked(server, len(fetches))
    return conns, fetches


async def test_one_record_wakes_the_longest_waiting_fetch_and_leaves_the_others_parked(
    server: Server,
) -> None:
    bootstrap = f"127.0.0.1:{server.port}"
    conns, fetches = await _park_all(server, {"share.auto.offset.reset": "earliest"})
    try:
        in_line = _waiters(server)
        async with Producer(bootstrap) as producer:
            await producer.send(TOPIC, b"first", partition=0)
            first = acquired(await asyncio.wait_for(fetches[0], 5))
            assert len(first) == 1 and first[0][0] == first[0][1]  # the one record
            # The other two were not woken (a woken one parks again with a new future).
            assert _waiters(server) == in_line[1:]
            assert not fetches[1].done() and not fetches[2].done()
            await producer.send(TOPIC, b"second", partition=0)
            second = acquired(await asyncio.wait_for(fetches[1], 5))
            assert second == [(first[0][1] + 1,) * 2]
            assert not fetches[2].done()
            await producer.send(TOPIC, b"third", partition=0)
            third = acquired(await asyncio.wait_for(fetches[2], 5))
            assert third == [(second[0][1] + 1,) * 2]
    finally:
        for conn in conns:
            await conn.close()


async def test_a_key_ordered_group_wakes_every_waiting_fetch(server: Server) -> None:
    """A record of a key-ordered group may be for one member only (its key's), so one wake in
    line could go to a member that may not take it: every waiter is woken."""
    configs = {"share.auto.offset.reset": "earliest", "share.key.ordering.enable": "true"}
    conns, fetches = await _park_all(server, configs)
    try:
        in_line = _waiters(server)
        async with Producer(f"127.0.0.1:{server.port}") as producer:
            await producer.send(TOPIC, b"v", key=b"k", partition=0)
            done, _ = await asyncio.wait(fetches, timeout=5, return_when=asyncio.FIRST_COMPLETED)
            assert len(done) == 1
            # Those that found nothing were woken and parked again (new futures, none of the old).
            await _until_parked(server, len(MEMBERS) - 1)
            assert not set(_waiters(server)) & set(in_line)
    finally:
        for conn in conns:
            await conn.close()
