"""The marker channel of `--processes N` (`broker/txn_markers.py`) and `finish` over it, with a
fake link to the other node (a unit: the real link is exercised by tests/compat and
tests/integration): a delivery is retried until the leader has written it, as Kafka's
`TransactionMarkerChannelManager` retries, and `finish` waits on deliveries under way only."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from typing import cast

from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers import v1

from broker.node_link import NodeLinks
from broker.transactions import RemoteMarkers
from broker.transactions import finish
from broker.txn_markers import MarkerChannel
from storage.log_manager import LogManager
from tests.unit.test_transaction_coordinator import T0
from tests.unit.test_transaction_coordinator import TP
from tests.unit.test_transaction_coordinator import World
from tests.unit.test_transaction_coordinator import ready

REMOTE = ("ledger", 1)


class FakeLink:
    """Node 1: refuses `failures` requests (not reachable), then writes every marker."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.requests: list[Any] = []

    async def request(self, node: int, body: Any) -> Any:
        self.requests.append(body)
        if self.failures:
            self.failures -= 1
            raise ConnectionRefusedError("node 1 is restarting")
        r = v1.response
        return v1.WriteTxnMarkersResponse(markers=tuple(
            r.WritableTxnMarkerResult(producer_id=m.producer_id, topics=tuple(
                r.WritableTxnMarkerTopicResult(name=t.name, partitions=tuple(
                    r.WritableTxnMarkerPartitionResult(partition_index=p,
                                                       error_code=ErrorCode.none)
                    for p in t.partition_indexes))
                for t in m.topics))
            for m in body.markers))  # fmt: skip


async def test_a_marker_is_sent_again_until_the_leader_wrote_it() -> None:
    link = FakeLink(failures=2)
    channel = MarkerChannel(cast(NodeLinks, link), lambda topic: True)
    assert channel.write(1, [REMOTE], 7, 0, True) == {REMOTE}
    assert channel.write(1, [REMOTE], 7, 0, True) == {REMOTE}  # under way: not sent twice
    assert await channel.delivered(7, 0, True, timeout_s=10)
    assert len(link.requests) == 3  # two refused, the third written
    assert channel.write(1, [REMOTE], 7, 0, True) == set()  # written: counted once
    assert channel.write(1, [REMOTE], 7, 0, True) == {REMOTE}  # a new delivery
    assert await channel.delivered(7, 0, True, timeout_s=10)


async def test_finish_waits_on_deliveries_only_never_spins_on_a_failed_local_write() -> None:
    """A local marker that cannot be written (a full disk) while nothing is on its way to
    another process: `finish` gives up at once (the timer retries), it does not go round."""
    world = World()
    c, pid, epoch = ready(world)
    c.add_partitions("t", pid, epoch, [TP], T0)
    world.broken = {TP}
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.none
    channel = MarkerChannel(cast(NodeLinks, FakeLink(failures=0)), lambda topic: True)
    remote = RemoteMarkers(cast(LogManager, None), cast(Any, None), channel)
    started = time.monotonic()
    assert await asyncio.wait_for(finish(c, "t", T0, remote=remote), 5) is False
    assert time.monotonic() - started < 1
    assert c.txns["t"].state == "PrepareCommit"
