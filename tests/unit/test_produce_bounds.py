"""The hand-written bounds check of one-partition Produce requests (`protocol.produce_bounds`)
against the generated walk it stands in front of: on every frame it either answers what the
walk answers or hands the frame to the walk, and it answers alone exactly for its one shape."""

from __future__ import annotations

import datetime
import random
from typing import Any

import pytest

from protocol.messages import build
from protocol.messages import encode_request
from protocol.messages import request_type
from protocol.produce_bounds import produce_walker
from protocol.request_bounds import compile_walker
from protocol.request_bounds import request_walker
from tests.unit.hand_walk_support import mutated
from tests.unit.hand_walk_support import outcome
from tests.unit.hand_walk_support import refusing

VERSIONS = range(3, 13)  # the Produce versions served
SEED = 932
MS = datetime.timedelta(milliseconds=1)


def _produce(
    version: int,
    rng: random.Random,
    *,
    topics: int = 1,
    partitions: int = 1,
    name_len: int | None = None,
    records_len: int | None = None,
) -> bytes:
    m = request_type(0, version)
    module: Any = __import__(m.__module__, fromlist=["x"])

    def records() -> bytes | None:
        sizes = [0, 1, 70, 127, 200, 5_000, 16_382]
        size = rng.choice(sizes) if records_len is None else records_len
        return None if size < 0 else rng.randbytes(size)

    def name() -> str:
        return "t" * (rng.randint(1, 120) if name_len is None else name_len)

    body = build(
        m,
        transactional_id=rng.choice([None, "", "txn-" * rng.randint(1, 20)]),
        acks=rng.choice([-1, 0, 1]),
        timeout=rng.randint(0, 60_000) * MS,
        topic_data=tuple(
            module.TopicProduceData(
                name=name(),
                partition_data=tuple(
                    module.PartitionProduceData(index=i, records=records())
                    for i in range(partitions)
                ),
            )
            for _ in range(topics)
        ),
    )
    client_id = rng.choice([None, "", "rdkafka", "c" * rng.randint(1, 300)])
    return encode_request(body, rng.randint(0, 2**31 - 1), client_id)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_one_partition_shape_is_checked_by_hand_and_ends_where_the_walk_ends(
    version: int,
) -> None:
    rng = random.Random(SEED + version)
    generated = compile_walker(request_type(0, version))[0]
    by_hand = produce_walker(version, refusing)
    for _ in range(100):
        frame = _produce(version, rng)
        assert by_hand(frame) == generated(frame)
    # Null records are the handler's to refuse (INVALID_RECORD), as the walk lets them by.
    frame = _produce(version, rng, records_len=-1)
    assert by_hand(frame) == generated(frame)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "shape",
    [
        {"topics": 2},
        {"partitions": 2},
        {"topics": 0},
        {"name_len": 200},  # two varint bytes in a compact string
        {"records_len": 20_000},  # three varint bytes
    ],
)
def test_other_shapes_go_to_the_generated_walk(version: int, shape: dict[str, int]) -> None:
    flexible_only = "name_len" in shape or "records_len" in shape
    if flexible_only and version < 9:
        pytest.skip("legacy lengths are fixed-width: the hand check takes any")
    rng = random.Random(SEED)
    handed: list[bytes] = []
    generated = compile_walker(request_type(0, version))[0]

    def walk(frame: Any) -> int:
        handed.append(frame)
        return generated(frame)

    frame = _produce(version, rng, **shape)
    assert produce_walker(version, walk)(frame) == generated(frame)
    assert handed == [frame]


@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_frames_get_the_walks_answer(version: int) -> None:
    """Flipped, truncated, stretched and hostile-length frames: whatever the hand check does
    alone, the generated walk would have done the same; a refusal is the walk's own."""
    rng = random.Random(SEED * 7 + version)
    generated = compile_walker(request_type(0, version))[0]
    served = request_walker(request_type(0, version))
    handed: list[bytes] = []

    def walk(b: Any) -> int:
        handed.append(b)
        return generated(b)

    alone = 0
    for _ in range(600):
        data = mutated(_produce(version, rng, records_len=rng.choice([0, 30, 300])), rng)
        handed.clear()
        assert outcome(produce_walker(version, walk), data) == outcome(generated, data)
        assert outcome(served, data) == outcome(generated, data)
        alone += not handed
    assert alone > 40  # the mutations left many frames in the shape checked by hand


@pytest.mark.parametrize("version", range(9, 13))
def test_a_producer_s_repeated_bytes_are_compared_whole_and_mutations_get_the_walks_answer(
    version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A producer repeats the bytes from its client id to the partition index in every request
    to a topic: once read, the check compares them whole (it reads no client id length then).
    One frame and its mutations, in turn, through one check: mutated past those bytes, the
    comparison holds and the rest is read; within them, it fails and the frame is read whole;
    every answer is the walk's."""
    import protocol.produce_bounds as bounds

    reads: list[int] = []
    i16 = bounds._I16

    def counted_i16(b: Any, pos: int) -> tuple[int]:
        reads.append(pos)
        return i16(b, pos)

    monkeypatch.setattr(bounds, "_I16", counted_i16)
    rng = random.Random(SEED * 11 + version)
    generated = compile_walker(request_type(0, version))[0]
    handed: list[bytes] = []

    def walk(b: Any) -> int:
        handed.append(b)
        return generated(b)

    by_hand = produce_walker(version, walk)
    compared = 0
    for _ in range(20):
        frame = _produce(version, rng, records_len=rng.choice([0, 30, 300]))
        assert by_hand(frame) == generated(frame)  # read whole: the bytes to compare next
        for _ in range(30):
            mutated = bytearray(frame)
            pos = rng.randrange(8, len(frame))
            if rng.randrange(2):
                mutated[pos] = rng.randrange(256)
            else:
                del mutated[pos:]
            data = bytes(mutated)
            reads.clear()
            handed.clear()
            assert outcome(by_hand, data) == outcome(generated, data)
            compared += not reads and not handed
            assert by_hand(frame) == generated(frame)
    assert compared > 40  # many mutations left the repeated bytes as they were
