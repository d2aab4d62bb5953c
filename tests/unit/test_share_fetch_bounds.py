"""The hand-written bounds check of one-partition ShareFetch requests
(`protocol.share_fetch_bounds`) against the generated walk it stands in front of: on every
frame it either answers what the walk answers or hands the frame to the walk, and it answers
alone exactly for its one shape."""

from __future__ import annotations

import datetime
import random
import uuid
from typing import Any

import pytest

from protocol.messages import build
from protocol.messages import encode_request
from protocol.messages import request_type
from protocol.request_bounds import OutOfBounds
from protocol.request_bounds import compile_walker
from protocol.request_bounds import request_walker
from protocol.share_fetch_bounds import MAX_BATCHES
from protocol.share_fetch_bounds import share_fetch_walker
from tests.unit.hand_walk_support import mutated
from tests.unit.hand_walk_support import outcome
from tests.unit.hand_walk_support import refusing

VERSIONS = (1, 2)  # the ShareFetch versions served
SEED = 33


def _share_fetch(
    version: int,
    rng: random.Random,
    *,
    topics: int = 1,
    partitions: int = 1,
    batches: int | None = None,
    forgotten: int = 0,
    id_len: int | None = None,
) -> bytes:
    m = request_type(78, version)
    module: Any = __import__(m.__module__, fromlist=["x"])

    def ident() -> str | None:
        n = rng.choice([-1, 0, 22, 126]) if id_len is None else id_len
        return None if n < 0 else "m" * n

    def acks() -> tuple[Any, ...]:
        n = rng.randint(0, MAX_BATCHES) if batches is None else batches
        return tuple(
            module.AcknowledgementBatch(
                first_offset=rng.randint(0, 2**40),
                last_offset=rng.randint(0, 2**40),
                acknowledge_types=tuple(rng.randint(0, 4) for _ in range(rng.randint(1, 5))),
            )
            for _ in range(n)
        )

    body = build(
        m,
        group_id=ident(),
        member_id=ident(),
        share_session_epoch=rng.randint(-1, 2**31 - 1),
        max_wait=datetime.timedelta(milliseconds=rng.randint(0, 5_000)),
        min_bytes=1,
        max_bytes=rng.randint(0, 2**31 - 1),
        max_records=rng.randint(0, 500),
        batch_size=500,
        share_acquire_mode=rng.choice([0, 1]),
        is_renew_ack=rng.choice([False, True]),
        topics=tuple(
            module.FetchTopic(
                topic_id=uuid.UUID(int=rng.getrandbits(128)),
                partitions=tuple(
                    module.FetchPartition(partition_index=i, acknowledgement_batches=acks())
                    for i in range(partitions)
                ),
            )
            for _ in range(topics)
        ),
        forgotten_topics_data=tuple(
            module.ForgottenTopic(topic_id=uuid.UUID(int=i), partitions=(0, 1))
            for i in range(forgotten)
        ),
    )
    client_id = rng.choice([None, "", "rdkafka", "c" * rng.randint(1, 300)])
    return encode_request(body, rng.randint(0, 2**31 - 1), client_id)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_one_partition_shape_is_checked_by_hand_and_ends_where_the_walk_ends(
    version: int,
) -> None:
    rng = random.Random(SEED + version)
    generated = compile_walker(request_type(78, version))[0]
    by_hand = share_fetch_walker(version, refusing)
    for _ in range(200):
        frame = _share_fetch(version, rng)
        assert by_hand(frame) == generated(frame)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "shape",
    [
        {"topics": 2},
        {"partitions": 2},
        {"topics": 0},
        {"batches": MAX_BATCHES + 1},  # many batches: the walk's strides
        {"forgotten": 1},
        {"id_len": 200},  # two varint bytes in a compact string
        {"id_len": 127},  # the first length of two varint bytes
    ],
)
def test_other_shapes_go_to_the_generated_walk(version: int, shape: dict[str, int]) -> None:
    rng = random.Random(SEED)
    handed: list[bytes] = []
    generated = compile_walker(request_type(78, version))[0]

    def walk(frame: Any) -> int:
        handed.append(frame)
        return generated(frame)

    frame = _share_fetch(version, rng, **shape)
    assert share_fetch_walker(version, walk)(frame) == generated(frame)
    assert handed == [frame]


@pytest.mark.parametrize("version", VERSIONS)
def test_null_arrays_are_refused_by_the_walk(version: int) -> None:
    """A null acknowledgement batch array, or a null acknowledge types array (a count byte of
    0): neither is nullable, and the walk refuses both (kio would read None)."""
    rng = random.Random(SEED)
    generated = compile_walker(request_type(78, version))[0]
    served = request_walker(request_type(78, version))
    no_batches = _share_fetch(version, rng, batches=0)
    assert no_batches[-5:] == b"\x01\x00\x00\x01\x00"  # count, tags, forgotten, tags
    one_batch = _share_fetch(version, rng, batches=1)
    while one_batch[-7] != 2:  # one acknowledge type
        one_batch = _share_fetch(version, rng, batches=1)
    for frame in (
        no_batches[:-5] + b"\x00" + no_batches[-4:],
        one_batch[:-7] + b"\x00" + one_batch[-5:],
    ):
        with pytest.raises(OutOfBounds):
            generated(frame)
        with pytest.raises(OutOfBounds):
            served(frame)


@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_frames_get_the_walks_answer(version: int) -> None:
    """Flipped, truncated, stretched and hostile-length frames: whatever the hand check does
    alone, the generated walk would have done the same; a refusal is the walk's own."""
    rng = random.Random(SEED * 7 + version)
    generated = compile_walker(request_type(78, version))[0]
    served = request_walker(request_type(78, version))
    handed: list[bytes] = []

    def walk(b: Any) -> int:
        handed.append(b)
        return generated(b)

    by_hand = share_fetch_walker(version, walk)
    alone = 0
    for _ in range(800):
        data = mutated(_share_fetch(version, rng, batches=rng.randint(0, 3)), rng)
        handed.clear()
        assert outcome(by_hand, data) == outcome(generated, data)
        assert outcome(served, data) == outcome(generated, data)
        alone += not handed
    assert alone > 60  # the mutations left many frames in the shape checked by hand
