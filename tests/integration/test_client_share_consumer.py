"""The client's ShareConsumer (KIP-932, RENEW from KIP-1222) against a real broker."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from broker.server import Server
from broker.share.share_session_cache import ShareSessionKey
from client.admin import Admin
from client.admin import ConfigResourceType
from client.errors import ClientStateError
from client.errors import UnsupportedVersionError
from client.producer import Producer
from client.records import AcquiredData
from client.records import AcquiredRange
from client.records import ConsumerRecord
from client.records import Record
from client.records import decode_acquired
from client.share_acks import AcknowledgeType
from client.share_acks import ack_batches
from client.share_consumer import ShareConsumer
from client.share_membership import new_member_id
from coordinator.share_group import DepartureReason
from tests.clock import ManualClock

pytestmark = pytest.mark.integration

GROUP = "workers"
TOPIC = "jobs"


def _bootstrap(server: Server) -> str:
    return f"127.0.0.1:{server.port}"


async def _prepare(
    server: Server, *, partitions: int = 1, group: str = GROUP, **configs: str
) -> None:
    """A topic, and a group that starts at the earliest offset (plus any group configs)."""
    async with Admin(_bootstrap(server)) as admin:
        await admin.create_topic(TOPIC, partitions)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP,
            group,
            {
                "share.auto.offset.reset": "earliest",
                **{k.replace("_", "."): v for k, v in configs.items()},
            },
        )


async def _prepare_group(server: Server, group: str) -> None:
    async with Admin(_bootstrap(server)) as admin:
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, group, {"share.auto.offset.reset": "earliest"}
        )


async def _acquired_once(
    consumer: ShareConsumer, only: list[tuple[str, int]] | None = None
) -> list[AcquiredData]:
    """The first poll that acquires anything (within a few seconds)."""
    for _ in range(20):
        got = await consumer.poll_acquired(0.3, only=only)
        if got:
            return got
    return []


async def _produce(server: Server, count: int, *, partitions: int = 1) -> None:
    async with Producer(_bootstrap(server)) as producer:
        for i in range(count):
            await producer.send(
                TOPIC,
                b"value-%d" % i,
                key=b"key-%d" % i,
                headers=[("n", b"%d" % i), ("empty", None)],
                partition=i % partitions,
                timestamp_ms=1_700_000_000_000 + i,
            )


async def _poll_until(
    consumer: ShareConsumer, count: int, timeout_s: float = 5.0
) -> list[ConsumerRecord]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    out: list[ConsumerRecord] = []
    while len(out) < count and loop.time() < deadline:
        out.extend(await consumer.poll(0.3))
    return out


async def _poll_for(consumer: ShareConsumer, seconds: float) -> list[ConsumerRecord]:
    """Everything a consumer receives during `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    out: list[ConsumerRecord] = []
    while loop.time() < deadline:
        out.extend(await consumer.poll(min(0.2, max(deadline - loop.time(), 0))))
    return out


def test_ack_batches_merge_adjacent_offsets_of_one_type() -> None:
    accept, release = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE
    acks = {5: accept, 1: accept, 2: accept, 3: release, 4: release, 9: accept}
    assert ack_batches(acks) == [(1, 2, [1]), (3, 4, [2]), (5, 5, [1]), (9, 9, [1])]


def test_ack_batches_take_ranges_whole_and_let_a_later_key_win_an_overlap() -> None:
    accept, release = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE
    acks = {(10, 1_000_009): accept, 9: accept, (1_000_010, 1_000_020): release}
    assert ack_batches(acks) == [(9, 1_000_009, [1]), (1_000_010, 1_000_020, [2])]
    assert ack_batches({(1, 5): accept, 3: release}) == [(1, 2, [1]), (3, 3, [2]), (4, 5, [1])]


async def test_acquired_ranges_are_acknowledged_by_range(broker: Server) -> None:
    """`poll_acquired` hands undecoded batches and their ranges; `acknowledge_range` settles
    them: accepted ranges never come back, a released one comes back with count 2."""
    await _prepare(broker)
    async with Producer(_bootstrap(broker)) as producer:
        await producer.send_batch(TOPIC, 0, [Record(b"v%d" % i) for i in range(50)])
    async with ShareConsumer(
        _bootstrap(broker), GROUP, acknowledgement_mode="explicit"
    ) as consumer:
        consumer.subscribe([TOPIC])
        got = []
        for _ in range(20):
            got = await consumer.poll_acquired(0.3)
            if got:
                break
        assert [(a.topic, a.partition, a.ranges) for a in got] == [
            (TOPIC, 0, (AcquiredRange(0, 49, 1),))
        ]
        assert len(decode_acquired(TOPIC, 0, got[0].data, got[0].ranges)) == 50
        consumer.acknowledge_range(TOPIC, 0, 0, 39, AcknowledgeType.ACCEPT)
        consumer.acknowledge_range(TOPIC, 0, 40, 49, AcknowledgeType.RELEASE)
        assert await consumer.commit_sync() == {(TOPIC, 0): ErrorCode.none}
        again = await _poll_until(consumer, 10)
        assert [(r.offset, r.delivery_count) for r in again] == [(o, 2) for o in range(40, 50)]
        with pytest.raises(ClientStateError):
            consumer.acknowledge_range("never-fetched", 0, 0, 1, AcknowledgeType.ACCEPT)


def test_member_id_is_22_urlsafe_characters() -> None:
    ids = {new_member_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) == 22 and "=" not in i and "+" not in i and "/" not in i for i in ids)


async def test_implicit_mode_delivers_every_record_once(broker: Server, clock: ManualClock) -> None:
    await _prepare(broker, partitions=3)
    await _produce(broker, 30, partitions=3)
    async with ShareConsumer(_bootstrap(broker), GROUP) as consumer:
        consumer.subscribe([TOPIC])
        records = await _poll_until(consumer, 30)
        assert consumer.assignment == {(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)}
        more = await _poll_for(consumer, 0.3)  # also carries the acceptance of `records`
        clock.advance(30_000)  # past the lock: only acceptance keeps them from coming back
        more += await _poll_for(consumer, 0.3)
        assert consumer.acquisition_lock_timeout_ms == 30_000
    assert more == []
    assert len(records) == 30
    assert sorted(r.value or b"" for r in records) == sorted(b"value-%d" % i for i in range(30))
    for r in records:
        i = int(r.value.removeprefix(b"value-"))  # type: ignore[union-attr]
        assert (r.topic, r.partition, r.key) == (TOPIC, i % 3, b"key-%d" % i)
        assert r.headers == [("n", b"%d" % i), ("empty", None)]
        assert r.timestamp_ms == 1_700_000_000_000 + i
        assert r.delivery_count == 1


async def test_implicit_acceptance_rides_on_the_next_poll(
    broker: Server, clock: ManualClock
) -> None:
    await _prepare(broker)
    await _produce(broker, 5)
    results: list[dict[tuple[str, int], ErrorCode]] = []
    async with ShareConsumer(
        _bootstrap(broker), GROUP, on_acknowledgement=results.append
    ) as consumer:
        consumer.subscribe([TOPIC])
        assert len(await _poll_until(consumer, 5)) == 5
        assert results == []
        await consumer.poll(0.2)
        assert results == [{(TOPIC, 0): ErrorCode.none}]
        assert consumer.last_ack_results == {(TOPIC, 0): ErrorCode.none}
    # Accepted records never come back, even to a new member, even after the lock duration.
    clock.advance(30_000)
    async with ShareConsumer(_bootstrap(broker), GROUP) as other:
        other.subscribe([TOPIC])
        assert await _poll_assigned(other) == []


async def test_explicit_release_redelivers_with_delivery_count_two(broker: Server) -> None:
    await _prepare(broker)
    await _produce(broker, 3)
    async with ShareConsumer(
        _bootstrap(broker), GROUP, acknowledgement_mode="explicit"
    ) as consumer:
        consumer.subscribe([TOPIC])
        first = await _poll_until(consumer, 3)
        assert [r.offset for r in first] == [0, 1, 2]
        consumer.acknowledge(first[0], AcknowledgeType.ACCEPT)
        consumer.acknowledge(first[1], AcknowledgeType.RELEASE)
        consumer.acknowledge(first[2], AcknowledgeType.ACCEPT)
        again = await _poll_until(consumer, 1)
        assert consumer.last_ack_results == {(TOPIC, 0): ErrorCode.none}
        assert [(r.offset, r.value, r.delivery_count) for r in again] == [(1, b"value-1", 2)]
        consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
        assert await consumer.commit_sync() == {(TOPIC, 0): ErrorCode.none}


async def test_a_dynamic_broker_delivery_limit_reaches_a_loaded_share_partition(
    broker: Server,
) -> None:
    """`group.share.delivery.count.limit` is a dynamic broker config (Kafka's
    `GroupConfigManager` reads the broker's default afresh for a group without its own value);
    lowering it to 2 archives a record released on its second delivery, also on a
    share-partition whose limits were read before the change (they were cached by the group
    configs' version alone, which a broker config change did not move)."""
    await _prepare(broker)
    await _produce(broker, 1)
    async with ShareConsumer(
        _bootstrap(broker), GROUP, acknowledgement_mode="explicit"
    ) as consumer:
        consumer.subscribe([TOPIC])
        first = await _poll_until(consumer, 1)
        assert [(r.offset, r.delivery_count) for r in first] == [(0, 1)]
        consumer.acknowledge(first[0], AcknowledgeType.RELEASE)
        assert await consumer.commit_sync() == {(TOPIC, 0): ErrorCode.none}
        async with Admin(_bootstrap(broker)) as admin:
            await admin.incremental_alter_configs(
                ConfigResourceType.BROKER, "", {"group.share.delivery.count.limit": "2"}
            )
        second = await _poll_until(consumer, 1)
        assert [(r.offset, r.delivery_count) for r in second] == [(0, 2)]
        consumer.acknowledge(second[0], AcknowledgeType.RELEASE)
        assert await consumer.commit_sync() == {(TOPIC, 0): ErrorCode.none}
        assert [(r.offset, r.delivery_count) for r in await _poll_for(consumer, 0.6)] == []


async def test_reject_and_accept_are_never_delivered_again(
    broker: Server, clock: ManualClock
) -> None:
    await _prepare(broker)
    await _produce(broker, 4)
    async with ShareConsumer(
        _bootstrap(broker), GROUP, acknowledgement_mode="explicit"
    ) as consumer:
        consumer.subscribe([TOPIC])
        records = await _poll_until(consumer, 4)
        for r, kind in zip(records, [1, 3, 3, 1], strict=True):
            consumer.acknowledge(r, AcknowledgeType(kind))
        assert await consumer.commit_sync() == {(TOPIC, 0): ErrorCode.none}
        clock.advance(30_000)  # past the lock: nothing is merely held
        assert await _poll_for(consumer, 0.3) == []
    async with ShareConsumer(_bootstrap(broker), GROUP) as other:
        other.subscribe([TOPIC])
        assert await _poll_assigned(other) == []


async def test_acknowledge_checks_mode_and_ownership(broker: Server) -> None:
    await _prepare(broker)
    await _produce(broker, 1)
    async with ShareConsumer(_bootstrap(broker), GROUP) as implicit:
        implicit.subscribe([TOPIC])
        (record,) = await _poll_until(implicit, 1)
        with pytest.raises(ClientStateError):
            implicit.acknowledge(record, AcknowledgeType.ACCEPT)
    async with ShareConsumer(
        _bootstrap(broker), GROUP, acknowledgement_mode="explicit"
    ) as explicit:
        explicit.subscribe([TOPIC])
        with pytest.raises(ClientStateError):
            explicit.acknowledge(record, AcknowledgeType.ACCEPT)  # never delivered to it


async def test_renew_keeps_a_record_past_the_lock_duration(
    broker: Server, clock: ManualClock
) -> None:
    await _prepare(broker, share_record_lock_duration_ms="1000")
    await _produce(broker, 1)
    bootstrap = _bootstrap(broker)
    async with (
        ShareConsumer(bootstrap, GROUP, acknowledgement_mode="explicit") as holder,
        ShareConsumer(bootstrap, GROUP) as rival,
    ):
        holder.subscribe([TOPIC])
        rival.subscribe([TOPIC])
        (record,) = await _poll_until(holder, 1)
        assert holder.acquisition_lock_timeout_ms == 1000
        await _until_assigned(rival)  # it shares the partition: it would get an expired record
        results: list[dict[tuple[str, int], ErrorCode]] = []
        stolen: list[ConsumerRecord] = []
        renewing = True

        async def rival_polls() -> None:
            while renewing:
                stolen.extend(await rival.poll(0.1))

        polling = asyncio.create_task(rival_polls())
        for _ in range(5):  # 3 s of broker time in all: three lock durations
            holder.acknowledge(record, AcknowledgeType.RENEW)
            assert await holder.poll(1.0) == []  # a renew fetch returns no records
            results.append(holder.last_ack_results)
            clock.advance(600)
        await asyncio.sleep(0.3)  # the rival fetches once more after the last jump
        renewing = False
        await polling
        assert stolen == []
        assert results == [{(TOPIC, 0): ErrorCode.none}] * 5
        holder.acknowledge(record, AcknowledgeType.ACCEPT)
        assert await holder.commit_sync() == {(TOPIC, 0): ErrorCode.none}
        clock.advance(1000)  # accepted: no lock left to expire
        assert await _poll_for(rival, 0.5) == []


async def _until_assigned(consumer: ShareConsumer) -> None:
    for _ in range(50):
        if consumer.assignment:
            return
        await consumer.poll(0.1)
    raise AssertionError("no assignment")


async def _poll_assigned(consumer: ShareConsumer) -> list[ConsumerRecord]:
    """What a new member receives once it has its assignment and has fetched for a while."""
    await _until_assigned(consumer)
    return await _poll_for(consumer, 0.3)


async def _collect(consumer: ShareConsumer, seconds: float, into: list[ConsumerRecord]) -> None:
    into.extend(await _poll_for(consumer, seconds))


async def test_without_renew_the_lock_expires_and_another_member_gets_it(
    broker: Server, clock: ManualClock
) -> None:
    """The control for the RENEW test: the same broker time without renewals loses the record."""
    await _prepare(broker, share_record_lock_duration_ms="1000")
    await _produce(broker, 1)
    bootstrap = _bootstrap(broker)
    async with (
        ShareConsumer(bootstrap, GROUP, acknowledgement_mode="explicit") as holder,
        ShareConsumer(bootstrap, GROUP) as rival,
    ):
        holder.subscribe([TOPIC])
        rival.subscribe([TOPIC])
        await _poll_until(holder, 1)
        await _until_assigned(rival)
        clock.advance(600)
        assert await rival.poll(0.2) == []  # still locked
        clock.advance(600)
        stolen = await _poll_until(rival, 1, timeout_s=3.0)
    assert [(r.offset, r.delivery_count) for r in stolen] == [(0, 2)]


async def test_renew_refused_when_the_group_disables_it(broker: Server) -> None:
    await _prepare(broker, share_renew_acknowledge_enable="false")
    await _produce(broker, 2)
    async with ShareConsumer(
        _bootstrap(broker), GROUP, acknowledgement_mode="explicit"
    ) as consumer:
        consumer.subscribe([TOPIC])
        first, second = await _poll_until(consumer, 2)
        consumer.acknowledge(first, AcknowledgeType.RENEW)
        assert await consumer.commit_sync() == {(TOPIC, 0): ErrorCode.invalid_record_state}
        consumer.acknowledge(second, AcknowledgeType.RENEW)
        assert await consumer.poll(0.5) == []
        assert consumer.last_ack_results == {(TOPIC, 0): ErrorCode.invalid_record_state}


async def test_two_consumers_split_records_without_duplicates(broker: Server) -> None:
    await _prepare(broker, partitions=3)
    await _produce(broker, 150, partitions=3)
    bootstrap = _bootstrap(broker)
    async with (
        ShareConsumer(bootstrap, GROUP, max_records=5) as a,
        ShareConsumer(bootstrap, GROUP, max_records=5) as b,
    ):
        a.subscribe([TOPIC])
        b.subscribe([TOPIC])
        got_a: list[ConsumerRecord] = []
        got_b: list[ConsumerRecord] = []

        async def until_all_arrived() -> None:
            while len(got_a) + len(got_b) < 150:  # in step: neither drains alone for long
                more_a, more_b = await asyncio.gather(a.poll(0.2), b.poll(0.2))
                got_a.extend(more_a)
                got_b.extend(more_b)

        await asyncio.wait_for(until_all_arrived(), 10)
        # Polling on finds any record delivered twice.
        await asyncio.gather(_collect(a, 0.3, got_a), _collect(b, 0.3, got_b))
    keys = [(r.partition, r.offset) for r in got_a + got_b]
    assert len(keys) == 150
    assert len(set(keys)) == 150
    assert got_a and got_b


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
async def test_close_releases_unacknowledged_records(broker: Server, mode: str) -> None:
    await _prepare(broker)
    await _produce(broker, 3)
    bootstrap = _bootstrap(broker)
    first = ShareConsumer(bootstrap, GROUP, acknowledgement_mode=mode)  # type: ignore[arg-type]
    first.subscribe([TOPIC])
    try:
        taken = await _poll_until(first, 3)
        assert len(taken) == 3
        if mode == "explicit":
            first.acknowledge(taken[0], AcknowledgeType.ACCEPT)  # sent by the closing ack
    finally:
        await first.close()
    expected = [1, 2] if mode == "explicit" else [0, 1, 2]
    async with ShareConsumer(bootstrap, GROUP) as second:
        second.subscribe([TOPIC])
        # Sooner than the broker's grace for a member that leaves without closing its session.
        again = await _poll_until(second, len(expected), timeout_s=2.0)
        again += await _poll_for(second, 0.3)
    assert sorted(r.offset for r in again) == expected
    assert {r.delivery_count for r in again} == {2}


async def test_rejoins_with_the_same_member_id_after_being_removed(broker: Server) -> None:
    await _prepare(broker)
    await _produce(broker, 1)
    coordinator = broker.services.coordinator
    async with ShareConsumer(_bootstrap(broker), GROUP) as consumer:
        consumer.subscribe([TOPIC])
        assert len(await _poll_until(consumer, 1)) == 1
        member_id = consumer.member_id
        # The coordinator forgets the member, as after a session timeout: the next heartbeat
        # gets UNKNOWN_MEMBER_ID and the client joins again at epoch 0 under the same id.
        coordinator.remove_member(GROUP, member_id, DepartureReason.SESSION_TIMEOUT)
        assert not coordinator.is_member(GROUP, member_id)
        # The broker knows the member again as soon as it handles the join; the client's
        # epoch moves only once it has read the answer: wait for both.
        for _ in range(10):
            await consumer.poll(0.2)
            if coordinator.is_member(GROUP, member_id) and consumer.member_epoch > 0:
                break
        assert coordinator.is_member(GROUP, member_id)
        assert consumer.member_id == member_id
        assert consumer.member_epoch > 0


async def test_a_member_silent_past_its_session_timeout_is_removed(
    broker: Server, clock: ManualClock
) -> None:
    # The lock outlives the session (60 s against 45 s): only the member's removal frees it.
    await _prepare(broker, share_record_lock_duration_ms="60000")
    await _produce(broker, 1)
    services = broker.services
    async with ShareConsumer(
        _bootstrap(broker), GROUP, acknowledgement_mode="explicit"
    ) as consumer:
        consumer.subscribe([TOPIC])
        assert len(await _poll_until(consumer, 1)) == 1
        member_id = consumer.member_id
        topic = services.logs.topic(TOPIC)
        assert topic is not None
        share_partition = services.share_partitions.get(GROUP, topic.topic_id, 0, clock.now_ms())
        assert share_partition is not None and share_partition.acquired_count() == 1
        clock.advance(44_000)  # within group.share.session.timeout.ms (45 s) of its heartbeat
        assert services.coordinator.is_member(GROUP, member_id)
        assert share_partition.acquired_count() == 1
        clock.advance(1_000)  # no heartbeat in between: the session timed out
        assert not services.coordinator.is_member(GROUP, member_id)
        assert share_partition.acquired_count() == 0
        # The client rejoins under the same id and gets the released record again.
        again = await _poll_until(consumer, 1)
    assert [(r.offset, r.delivery_count) for r in again] == [(0, 2)]


async def test_lost_share_session_fails_its_acks_and_opens_a_new_session(broker: Server) -> None:
    await _prepare(broker)
    await _produce(broker, 2)
    async with ShareConsumer(
        _bootstrap(broker), GROUP, acknowledgement_mode="explicit"
    ) as consumer:
        consumer.subscribe([TOPIC])
        first, second = await _poll_until(consumer, 2)
        # The broker forgets the session (evicted from its cache, say).
        broker.services.share_fetch.sessions.close(ShareSessionKey(GROUP, consumer.member_id))
        consumer.acknowledge(first, AcknowledgeType.ACCEPT)
        assert await consumer.poll(0.3) == []
        # The ack went out on a request that failed: reported, not retried.
        assert consumer.last_ack_results == {(TOPIC, 0): ErrorCode.share_session_not_found}
        # The same poll opened a new session (epoch 0), which later requests continue.
        consumer.acknowledge(second, AcknowledgeType.ACCEPT)
        assert await consumer.commit_sync() == {(TOPIC, 0): ErrorCode.none}


async def test_resubscribing_forgets_the_old_topic_partitions(broker: Server) -> None:
    await _prepare(broker)
    async with Admin(_bootstrap(broker)) as admin:
        await admin.create_topic("other", 1)
    async with ShareConsumer(_bootstrap(broker), GROUP) as consumer:
        consumer.subscribe([TOPIC])
        await _produce(broker, 1)
        assert len(await _poll_until(consumer, 1)) == 1
        consumer.subscribe(["other"])
        for _ in range(20):
            await consumer.poll(0.1)
            if consumer.assignment == {("other", 0)}:
                break
        assert consumer.assignment == {("other", 0)}
        await _produce(broker, 1)  # to TOPIC: no longer in the share session
        async with Producer(_bootstrap(broker)) as producer:
            await producer.send("other", b"elsewhere")
        got = await _poll_until(consumer, 1)
        got += await _poll_for(consumer, 0.3)  # and nothing from TOPIC after it
    assert [(r.topic, r.value) for r in got] == [("other", b"elsewhere")]


async def test_renew_is_refused_locally_when_the_broker_lacks_v2(broker: Server) -> None:
    await _prepare(broker)
    await _produce(broker, 1)
    async with ShareConsumer(
        _bootstrap(broker), GROUP, acknowledgement_mode="explicit"
    ) as consumer:
        consumer.subscribe([TOPIC])
        (record,) = await _poll_until(consumer, 1)
        consumer.cluster._api_versions[78] = (1, 1)  # as a broker without KIP-1222 would say
        with pytest.raises(UnsupportedVersionError):
            consumer.acknowledge(record, AcknowledgeType.RENEW)
        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
        assert await consumer.commit_sync() == {(TOPIC, 0): ErrorCode.none}


async def test_record_limit_acquires_exactly_max_records(broker: Server) -> None:
    """KIP-1206: with ShareAcquireMode record_limit, MaxRecords is strict even inside a
    stored batch (batch_optimized hands out the whole batch). Issue 30: the Spark source's
    maxOffsetsPerTrigger is exact."""
    await _prepare(broker)
    async with Producer(_bootstrap(broker)) as producer:
        await producer.send_batch(TOPIC, 0, [Record(b"v%d" % i) for i in range(50)])
    for record_limit, wanted in ((True, [(0, 6, 1)]), (False, [(0, 49, 1)])):
        group = f"{GROUP}-{record_limit}"
        await _prepare_group(broker, group)
        async with ShareConsumer(
            _bootstrap(broker), group, acknowledgement_mode="explicit", max_records=7,
            record_limit=record_limit,
        ) as consumer:  # fmt: skip
            consumer.subscribe([TOPIC])
            got = [r for a in await _acquired_once(consumer) for r in a.ranges]
            assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == wanted


async def test_a_poll_can_take_from_some_partitions_only(broker: Server) -> None:
    """`only`: the other partitions leave the share session for that request (forgotten) and
    come back with the next poll; acknowledgements of theirs wait for it."""
    await _prepare(broker, partitions=3)
    await _produce(broker, 30, partitions=3)
    async with ShareConsumer(_bootstrap(broker), GROUP, acknowledgement_mode="explicit") as c:
        c.subscribe([TOPIC])
        assert await c.assigned(5) == {(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)}
        first = await _acquired_once(c, only=[(TOPIC, 1)])
        assert [(a.partition, a.ranges) for a in first] == [(1, (AcquiredRange(0, 9, 1),))]
        c.acknowledge_range(TOPIC, 1, 0, 9, AcknowledgeType.ACCEPT)
        assert [a.partition for a in await _acquired_once(c, only=[(TOPIC, 2)])] == [2]
        assert c.last_ack_results == {}  # partition 1's acknowledgement waits
        rest = await _acquired_once(c)  # every partition again; partition 1's acks ride on it
        assert [a.partition for a in rest] == [0]
        assert c.last_ack_results == {(TOPIC, 1): ErrorCode.none}
