"""A read_committed share group on the wire (raw requests over a real socket): an open
transaction holds acquisition at its first offset, a ShareFetch waiting there wakes when the
COMMIT marker moves the LSO (no produce follows it), and an aborted transaction's records are
archived, never acquired.

Kafka: `GroupConfig.SHARE_ISOLATION_LEVEL_CONFIG`; `SharePartition.acquire` reads a
read_committed group's log up to the LSO and archives aborted transactions' records
(`maybeFilterAbortedTransactionalAcquiredRecords`); a ShareFetch's delayed operation is
completed when the partition's LSO moves, as a read_committed Fetch's is (KIP-932).
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import threading
import time
import uuid
from typing import Any

import pytest
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v10 import request as produce_v10
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from broker.server import Server
from client import Admin
from client import ConfigResourceType
from protocol.framing import frame
from protocol.messages import RequestPayload
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import build_batch
from tests.probe import read_frame
from tests.scrape import scrape

pytestmark = pytest.mark.integration

TOPIC, TXN, MEMBER = "orders", "orders-txn", "m" * 22
MINUTE = datetime.timedelta(minutes=1)
LONG_POLL_MS = 20_000  # a fetch woken by the commit answers long before this


def call(sock: socket.socket, body: RequestPayload) -> Any:
    sock.sendall(frame(encode_request(body, 1, "rc")))
    return decode_response(body.__api_key__, body.__version__, read_frame(sock))[1]


class Txn:
    """One transactional producer on partition 0, by raw requests."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.seq = sock, 0
        init = call(sock, build(InitProducerIdRequest, transactional_id=TXN, producer_id=-1,
                                transaction_timeout=MINUTE, producer_epoch=-1))  # fmt: skip
        assert init.error_code == ErrorCode.none
        self.pid = int(init.producer_id)

    def send(self, *values: bytes, transactional: bool = True) -> None:
        if transactional:
            topic = build(add_v3.AddPartitionsToTxnTopic, name=TOPIC, partitions=(0,))
            call(self.sock, build(add_v3.AddPartitionsToTxnRequest,
                                  v3_and_below_transactional_id=TXN,
                                  v3_and_below_producer_id=self.pid, v3_and_below_producer_epoch=0,
                                  v3_and_below_topics=(topic,)))  # fmt: skip
            records = build_batch(
                [(None, v) for v in values], timestamp_ms=1, producer_id=self.pid,
                producer_epoch=0, base_sequence=self.seq, attributes=TRANSACTIONAL_MASK,
            )  # fmt: skip
            self.seq += len(values)
        else:
            records = build_batch([(None, v) for v in values], timestamp_ms=1)
        data = build(produce_v10.PartitionProduceData, index=0, records=records)
        topic_data = build(produce_v10.TopicProduceData, name=TOPIC, partition_data=(data,))
        answer = call(self.sock, build(produce_v10.ProduceRequest,
                                       transactional_id=TXN if transactional else None, acks=-1,
                                       timeout=MINUTE, topic_data=(topic_data,)))  # fmt: skip
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none

    def end(self, commit: bool) -> None:
        end = call(self.sock, build(EndTxnRequest, transactional_id=TXN, producer_id=self.pid,
                                    producer_epoch=0, committed=commit))  # fmt: skip
        assert end.error_code == ErrorCode.none


class Member:
    """One share-group member fetching partition 0, on its own socket."""

    def __init__(self, port: int, group: str, topic_id: uuid.UUID) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.group, self.topic_id, self.epoch = group, topic_id, 0
        joined = call(self.sock, build(hb_v1.ShareGroupHeartbeatRequest, group_id=group,
                                       member_id=MEMBER, member_epoch=0,
                                       subscribed_topic_names=(TOPIC,)))  # fmt: skip
        assert joined.error_code == ErrorCode.none

    def fetch(
        self, max_wait_ms: int, accept: tuple[tuple[int, int], ...] = ()
    ) -> list[tuple[int, int]]:
        """Acquired (first, last) ranges; `accept` rides on the request."""
        acks = tuple(
            build(fetch_v1.AcknowledgementBatch, first_offset=f, last_offset=last,
                  acknowledge_types=(1,))
            for f, last in accept
        )  # fmt: skip
        partition = build(fetch_v1.FetchPartition, partition_index=0, acknowledgement_batches=acks)
        request = build(
            fetch_v1.ShareFetchRequest, group_id=self.group, member_id=MEMBER,
            share_session_epoch=self.epoch, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
            min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500,
            topics=(build(fetch_v1.FetchTopic, topic_id=self.topic_id, partitions=(partition,)),),
            forgotten_topics_data=(),
        )  # fmt: skip
        answer = call(self.sock, request)
        self.epoch += 1
        assert answer.error_code == ErrorCode.none
        parts = [p for t in answer.responses for p in t.partitions]  # none: nothing to say
        assert all(p.error_code == ErrorCode.none for p in parts)
        assert all(p.acknowledge_error_code == 0 for p in parts)
        acquired = [a for p in parts for a in p.acquired_records]
        return [(int(a.first_offset), int(a.last_offset)) for a in acquired]


async def _setup(broker: Server, group: str, isolation: str) -> uuid.UUID:
    topic_id = broker.services.logs.create_topic(TOPIC, 1).topic_id
    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, group,
            {"share.auto.offset.reset": "earliest", "share.isolation.level": isolation},
        )  # fmt: skip
    return topic_id


def _waiting(broker: Server) -> bool:
    """Whether a long poll waits on the partition now (the Notifier's own table)."""
    return bool(broker.services.notifier._waiters.get((TOPIC, 0)))


async def test_an_open_transaction_holds_acquisition_and_its_commit_wakes_the_fetch(
    broker: Server,
) -> None:
    topic_id = await _setup(broker, "rc", "read_committed")

    def scenario() -> None:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=60) as sock:
            txn = Txn(sock)
            member = Member(broker.port, "rc", topic_id)
            txn.send(b"a", b"b", b"c")  # offsets 0-2, the transaction open
            assert member.fetch(100) == []  # the LSO is 0: nothing may be acquired
            txn.send(b"plain", transactional=False)  # offset 3: after the LSO, it waits too
            assert member.fetch(100) == []

            got: list[list[tuple[int, int]]] = []
            waiter = threading.Thread(target=lambda: got.append(member.fetch(LONG_POLL_MS)))
            started = time.monotonic()
            waiter.start()
            deadline = time.monotonic() + 10
            while not _waiting(broker):  # the fetch is parked on the partition
                assert time.monotonic() < deadline, "the ShareFetch never waited"
                time.sleep(0.01)
            txn.end(commit=True)  # the marker at 4 moves the LSO to 5; nothing else is written
            waiter.join(LONG_POLL_MS / 1000 + 5)
            # 3 holds the share-partition's state (written at its first fetch), 5 the marker:
            # neither is ever acquired.
            assert got == [[(0, 2), (4, 4)]]
            assert time.monotonic() - started < LONG_POLL_MS / 1000 / 2, "not woken by the commit"
            member.sock.close()

    await asyncio.to_thread(scenario)  # blocking clients, off the broker's loop


async def test_an_aborted_transaction_is_archived_never_acquired(broker: Server) -> None:
    topic_id = await _setup(broker, "rc", "read_committed")

    def scenario() -> None:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=60) as sock:
            txn = Txn(sock)
            member = Member(broker.port, "rc", topic_id)
            txn.send(b"a1", b"a2")  # 0-1
            txn.send(b"plain", transactional=False)  # 2: inside the transaction's range
            txn.send(b"a3")  # 3
            txn.end(commit=False)  # ABORT marker at 4
            txn.send(b"c1")  # 5
            txn.end(commit=True)  # COMMIT marker at 6
            assert member.fetch(1_000) == [(2, 2), (5, 5)]
            assert member.fetch(100, accept=((2, 2), (5, 5))) == []
            member.sock.close()

    await asyncio.to_thread(scenario)
    (sp,) = broker.services.share_partitions.partitions_of("rc")
    assert sp.open_records() == 0 and sp.spso >= 7  # the aborted records count as done


async def _lags(broker: Server, group: str) -> tuple[int, float | None, bool]:
    """The group's lag on partition 0 as DescribeShareGroupOffsets and the metrics say it, and
    whether the metrics show a record waiting (the oldest available record's age)."""
    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        offsets = await admin.describe_share_group_offsets(group, [(TOPIC, 0)])
    samples = await scrape(broker.metrics_port)
    labels = f'group="{group}",partition="0",topic="{TOPIC}"'
    age = samples[f"kafka_sharegroup_oldest_available_age_seconds{{{labels}}}"]
    return offsets[(TOPIC, 0)].lag, samples.get(f"kafka_sharegroup_lag{{{labels}}}"), age > 0


@pytest.mark.parametrize("broker_overrides", [{"metrics.port": 0}])
async def test_a_read_committed_groups_lag_counts_only_to_the_lso(broker: Server) -> None:
    """Lag of a read_committed group ends at the LSO (as a read_committed consumer's lag does,
    KIP-98), and so does the search for its oldest available record: an open transaction's
    records, and what follows them, are not yet the group's to deliver. Kafka 4.2 counts lag
    to the high watermark here (`NetworkPartitionMetadataClient` lists latest offsets
    READ_UNCOMMITTED); see `broker.share.lag`."""
    topic_id = await _setup(broker, "rc", "read_committed")

    def open_transaction() -> Txn:
        sock = socket.create_connection(("127.0.0.1", broker.port), timeout=60)
        txn = Txn(sock)
        member = Member(broker.port, "rc", topic_id)
        txn.send(b"a", b"b", b"c")  # 0-2, the transaction open: the LSO is 0
        assert member.fetch(100) == []  # starts the share-partition (its state at 3)
        txn.send(b"plain", transactional=False)  # 4: past the LSO
        member.sock.close()
        return txn

    txn = await asyncio.to_thread(open_transaction)
    # Nothing below the LSO is left to deliver, and no record waits for the group.
    assert await _lags(broker, "rc") == (0, 0.0, False)

    await asyncio.to_thread(txn.end, True)  # the COMMIT marker: the LSO is the log end
    assert await _lags(broker, "rc") == (4, 4.0, True)  # a, b, c and plain; a waits
    txn.sock.close()
