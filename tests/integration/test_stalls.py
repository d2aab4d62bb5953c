"""No request holds the event loop for long, whatever its API (issue 27, promise 3).

For each API family the registry serves, the worst request a client could send within the
limits (`stall_cases`: a million partitions, 300,000 topic names, the largest CreateTopics...)
goes to a broker process while a probe (another client, in a thread) times ApiVersions round
trips. The probe's worst round trip must stay under ten times its worst before the request
(measured in the same test, under the same load), and never needs to beat `Probe.LIMIT_S`.

The standing test sends the `quick` size of a request or two per family (far more work than a
slice may hold: unsliced, each stalled every client for seconds); `make stalls`
(SHOAL_STALLS=full) sends every API's request at its `full` size. Frames are built by hand
(`tests.big_frames`), before the probe starts; answers are read raw, and only their
correlation id is checked here (other tests check what they say).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import time

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from client import Admin
from client import ConfigResourceType
from client import Producer
from client.connection import Connection
from protocol.messages import build
from tests.brokers import BrokerProcess
from tests.integration.stall_cases import CASES
from tests.integration.stall_cases import Env
from tests.integration.stall_cases import Hostile
from tests.probe import Probe
from tests.probe import read_frame

# `latency`: measures how long other clients wait, so it runs alone (`make test`).
pytestmark = [pytest.mark.integration, pytest.mark.latency]
FULL = os.environ.get("SHOAL_STALLS") == "full"
TOPIC, PARTITIONS, GROUP, MEMBER = "stall", 8, "stall-share", "s" * 22
# The baseline: at least this long and this many round trips (a share of a loaded machine
# has hiccups of tens of milliseconds; the limit must not fall below them).
BASELINE_S, BASELINE_ROUND_TRIPS = 0.5, 40
TIMES_BASELINE = 10
# Authorization on (every request's checks run), allowing what no ACL forbids.
BROKER_CONFIG = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


def _sized(case: Hostile) -> int | None:
    return case.full if FULL else case.quick


SENT = [pytest.param(c, id=c.name) for c in CASES if _sized(c) is not None]


async def _setup(port: int) -> Env:
    """A topic with records on partition 0; a share-group member holding them."""
    bootstrap = f"127.0.0.1:{port}"
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(TOPIC, PARTITIONS)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, GROUP, {"share.auto.offset.reset": "earliest"}
        )
    assert topic_id is not None
    async with Producer(bootstrap) as producer:
        for i in range(20):
            await producer.send(TOPIC, b"%d" % i, partition=0)
    conn = await Connection.open("127.0.0.1", port)
    try:
        joined = await conn.request(
            build(
                hb_v1.ShareGroupHeartbeatRequest,
                group_id=GROUP,
                member_id=MEMBER,
                member_epoch=0,
                subscribed_topic_names=(TOPIC,),
            )
        )
        assert joined.error_code == ErrorCode.none
        m = fetch_v1
        opened = await conn.request(
            build(m.ShareFetchRequest, group_id=GROUP, member_id=MEMBER, share_session_epoch=0,
                  max_wait=datetime.timedelta(milliseconds=10), max_bytes=1 << 20,
                  max_records=500, batch_size=500, forgotten_topics_data=(),
                  topics=(build(m.FetchTopic, topic_id=topic_id,
                                partitions=(build(m.FetchPartition, partition_index=0),)),))
        )  # fmt: skip
        assert opened.responses[0].partitions[0].acquired_records
    finally:
        await conn.close()
    return Env(TOPIC, topic_id, GROUP, MEMBER)


@pytest.fixture(scope="module")
def prepared(module_broker_process: BrokerProcess) -> tuple[BrokerProcess, Env]:
    """One broker for every request of the module (each builds on what is there), with its
    BROKER_CONFIG, and what the requests name."""
    return module_broker_process, asyncio.run(_setup(module_broker_process.port))


@pytest.mark.parametrize("case", SENT)
def test_the_worst_request_of_each_api_leaves_other_clients_served(
    prepared: tuple[BrokerProcess, Env], case: Hostile
) -> None:
    proc, env = prepared
    count = _sized(case)
    assert count is not None
    frame = case.build(env, count)  # before the probe starts: building costs the test's CPU
    with (
        socket.create_connection(("127.0.0.1", proc.port), timeout=600) as sock,
        Probe(proc.port, timeout=600) as probe,
    ):
        deadline = time.monotonic() + BASELINE_S
        probe.wait_for(BASELINE_ROUND_TRIPS)
        while time.monotonic() < deadline:
            time.sleep(0.01)
        before = len(probe.round_trips)
        baseline = max(probe.round_trips)
        started = time.monotonic()
        sock.sendall(frame)
        answer = read_frame(sock)
        took = time.monotonic() - started
        # The round trip under way when the answer came is the one the request held up.
        probe.wait_for(len(probe.round_trips) + 2)
        during = probe.round_trips[before:]
    assert int.from_bytes(answer[:4], "big") == 1  # the correlation id of every frame built
    worst = max(during)
    limit = max(TIMES_BASELINE * baseline, Probe.LIMIT_S)
    print(
        f"{case.family}/{case.name} x{count}: answered in {took:.2f}s; probe worst "
        f"{worst * 1e3:.0f} ms (baseline worst {baseline * 1e3:.1f} ms, {len(during)} trips)"
    )
    assert worst < limit, (
        f"{case.name}: another client waited {worst * 1e3:.0f} ms "
        f"(limit {limit * 1e3:.0f} ms); slowest: {sorted(during)[-5:]}"
    )
    assert proc.proc is not None and proc.proc.poll() is None


def test_every_api_served_has_a_worst_request() -> None:
    """A new API gets its hostile request here too."""
    from broker.handlers import build_registry

    served = {h.api_key for h in build_registry()}
    covered = {c.api_key for c in CASES}
    # ApiVersions is the probe itself; InitProducerId, Heartbeat, AddOffsetsToTxn, EndTxn,
    # the SASL exchange and Shoal's TxnShareStaged (30001) carry no array a client could grow.
    assert served - covered == {12, 17, 18, 22, 25, 26, 36, 30001}
