"""protocol.request_bounds: a frame whose lengths cannot be in it is refused before kio reads it.

kio 0.6.5's reader sizes a collection by its declared count before reading an element, so one
30-byte frame aborts the process (issue 27). Kafka refuses such a count ("Tried to allocate a
collection of size ...": MessageDataGenerator.generateVariableLengthReader, KAFKA-14063) and a
null for a non-nullable field ("non-nullable field X was serialized as null"). No test here
runs a hostile frame through kio in this process: the one that shows `decode_request` whole
runs it in a child.
"""

from __future__ import annotations

import datetime
import random
import struct
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from typing import NamedTuple

import pytest
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.produce.v8 import request as produce_v8
from kio.schema.share_acknowledge.v1 import request as share_ack_v1
from kio.schema.share_fetch.v1 import request as share_fetch_v1
from kio.static.protocol import RequestPayload

from protocol.messages import build
from protocol.messages import decode_request
from protocol.messages import encode_request
from protocol.messages import request_type
from protocol.request_bounds import MAX_ARRAY_ELEMENTS
from protocol.request_bounds import OutOfBounds
from protocol.request_bounds import compile_walker
from protocol.request_bounds import request_walker
from protocol.request_bounds import walker_source
from tests.kio_requests import Site
from tests.kio_requests import encode
from tests.kio_requests import random_request
from tests.kio_requests import served
from tests.kio_requests import uvarint

# The issue's frame (size prefix left out): ShareGroupDescribe v1 whose group-id array
# declares 0xffffffff - 1 elements in 6 bytes.
ISSUE_FRAME = bytes.fromhex("004d000100000074000466757a7a00ffffffff0f020366670100")
# The APIs the issue reproduced the crash on, (api key, version).
ISSUE_APIS = [(3, 12), (10, 4), (32, 4), (19, 7), (15, 5), (16, 4), (76, 1), (77, 1)]


def check(frame: bytes) -> int:
    key, version = struct.unpack_from(">hh", frame)
    return request_walker(request_type(key, version))(frame)


def rewrite(frame: bytes, site: Site, raw: bytes) -> bytes:
    return frame[: site.pos] + raw + frame[site.pos + site.width :]


def first_site(sites: list[Site], path: str) -> Site:
    return next(s for s in sites if s.path == path)


def test_the_issues_frame_is_refused() -> None:
    with pytest.raises(OutOfBounds, match=r"group_ids: 4294967294 elements declared, 6 bytes"):
        check(ISSUE_FRAME)


@pytest.mark.parametrize(("key", "version"), ISSUE_APIS)
def test_a_compact_count_near_2_to_the_32_is_refused_on_every_api_the_issue_names(
    key: int, version: int
) -> None:
    rng = random.Random(27)
    body = random_request(rng, request_type(key, version), deep=True)
    frame, sites = encode(body)
    arrays = [s for s in sites if s.role == "array"]
    assert arrays, "the issue's APIs all have an array"
    for site in arrays:
        hostile = rewrite(frame, site, uvarint(2**32 - 1))
        with pytest.raises(OutOfBounds, match="elements declared"):
            check(hostile)


def produce_v8_frame() -> tuple[bytes, list[Site]]:
    body = produce_v8.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=3),  # type: ignore[arg-type]
        topic_data=(
            produce_v8.TopicProduceData(
                name="t",  # type: ignore[arg-type]
                partition_data=(produce_v8.PartitionProduceData(index=0, records=b"r" * 61),),  # type: ignore[arg-type]
            ),
        ),
    )
    return encode(body)


@pytest.mark.parametrize("count", [2**31 - 1, 2**16, 12])
def test_a_legacy_count_past_the_frames_end_is_refused(count: int) -> None:
    frame, sites = produce_v8_frame()
    assert check(frame) == len(frame)
    site = first_site(sites, "TopicProduceData.partition_data")
    with pytest.raises(OutOfBounds, match=f"partition_data: {count} elements declared"):
        check(rewrite(frame, site, struct.pack(">i", count)))


def test_a_legacy_negative_count_other_than_null_is_refused() -> None:
    frame, sites = produce_v8_frame()
    site = first_site(sites, "ProduceRequest.topic_data")
    with pytest.raises(OutOfBounds, match="negative count -2"):
        check(rewrite(frame, site, struct.pack(">i", -2)))
    with pytest.raises(OutOfBounds, match="negative count"):
        check(rewrite(frame, site, struct.pack(">i", -(2**31))))


def test_legacy_bytes_past_the_end_or_negative_are_refused() -> None:
    frame, sites = produce_v8_frame()
    site = first_site(sites, "PartitionProduceData.records")
    with pytest.raises(OutOfBounds, match="records: 2147483647 bytes declared"):
        check(rewrite(frame, site, struct.pack(">i", 2**31 - 1)))
    with pytest.raises(OutOfBounds, match="negative length -5"):
        check(rewrite(frame, site, struct.pack(">i", -5)))
    assert check(rewrite(frame, site, struct.pack(">i", -1))) < len(frame)  # null: nullable


def metadata_v12_frame(*names: str) -> tuple[bytes, list[Site]]:
    body = metadata_v12.MetadataRequest(
        topics=tuple(metadata_v12.MetadataRequestTopic(topic_id=None, name=n) for n in names),  # type: ignore[arg-type]
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    return encode(body)


@pytest.mark.parametrize("length", [2**32 - 1, 2**31, 2**35 - 2, 200])
def test_a_huge_compact_string_length_is_refused(length: int) -> None:
    frame, sites = metadata_v12_frame("topic")
    site = first_site(sites, "MetadataRequestTopic.name")
    with pytest.raises(OutOfBounds, match=r"MetadataRequestTopic\.name"):
        check(rewrite(frame, site, uvarint(length + 1)))


def test_a_huge_compact_bytes_length_is_refused() -> None:
    rng = random.Random(1)
    body = random_request(rng, request_type(36, 2))  # SaslAuthenticate v2: auth bytes
    frame, sites = encode(body)
    site = first_site(sites, "SaslAuthenticateRequest.auth_bytes")
    with pytest.raises(OutOfBounds, match=r"auth_bytes: 4294967294 bytes declared"):
        check(rewrite(frame, site, uvarint(2**32 - 1)))


def test_a_string_longer_than_kafka_reads_is_refused_even_when_the_frame_holds_it() -> None:
    frame, _ = metadata_v12_frame("x" * 0x7FFF)
    assert check(frame) == len(frame)
    frame, _ = metadata_v12_frame("x" * 0x8000)
    with pytest.raises(OutOfBounds, match="a string of 32768 bytes"):
        check(frame)


def test_a_varint_of_more_than_five_bytes_is_refused() -> None:
    frame, sites = metadata_v12_frame("topic")
    site = first_site(sites, "MetadataRequest.topics")
    with pytest.raises(OutOfBounds, match="runs past 5 bytes"):
        check(rewrite(frame, site, b"\x82\x80\x80\x80\x80\x00"))


def with_header_tags(frame: bytes, tags: bytes) -> bytes:
    """A flexible request's frame with its header's (empty) tagged-field section replaced."""
    (client_id_length,) = struct.unpack_from(">h", frame, 8)
    section = 10 + client_id_length
    assert frame[section] == 0
    return frame[:section] + tags + frame[section + 1 :]


def test_tagged_field_counts_and_sizes_past_the_end_are_refused() -> None:
    frame, _ = metadata_v12_frame("topic")
    with pytest.raises(OutOfBounds, match="tagged field: 2147483648 bytes declared"):
        check(with_header_tags(frame, b"\x01\x00" + uvarint(2**31)))
    with pytest.raises(OutOfBounds, match="tagged fields: 4294967295 elements declared"):
        check(with_header_tags(frame, uvarint(2**32 - 1)))
    # An unknown tag is skipped by its size, as Kafka does (kio refuses it later).
    skipped = with_header_tags(frame, b"\x01\x07\x03abc")
    assert check(skipped) == len(skipped)


def fetch_v12_frame(cluster_id: str | None) -> tuple[bytes, list[Site]]:
    body = build(
        fetch_v12.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
        cluster_id=cluster_id,
    )
    return encode(body)


def test_a_known_tagged_field_must_take_exactly_its_declared_size() -> None:
    frame, sites = fetch_v12_frame("cluster")
    assert check(frame) == len(frame)
    assert decode_request(frame).body.cluster_id == "cluster"  # type: ignore[attr-defined]
    size = first_site(sites, "FetchRequest.cluster_id size")
    with pytest.raises(OutOfBounds, match="tagged field 0 of 7 bytes holds a value of 8"):
        check(rewrite(frame, size, uvarint(7)))


def share_fetch_v1_frame() -> tuple[bytes, list[Site]]:
    body = share_fetch_v1.ShareFetchRequest(
        group_id="g",
        member_id="m",
        share_session_epoch=0,
        max_wait=datetime.timedelta(milliseconds=500),  # type: ignore[arg-type]
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=500,
        batch_size=500,
        topics=(
            share_fetch_v1.FetchTopic(
                topic_id=uuid.UUID(int=7),
                partitions=(
                    share_fetch_v1.FetchPartition(
                        partition_index=0,
                        acknowledgement_batches=(
                            share_fetch_v1.AcknowledgementBatch(
                                first_offset=0, last_offset=4, acknowledge_types=(1,)
                            ),
                        ),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )  # type: ignore[arg-type]
    return encode(body)


@pytest.mark.parametrize(
    "path",
    [
        "ShareFetchRequest.topics",
        "FetchTopic.partitions",
        "FetchPartition.acknowledgement_batches",
        "AcknowledgementBatch.acknowledge_types",
        "ShareFetchRequest.forgotten_topics_data",
    ],
)
def test_null_for_an_array_the_version_does_not_allow_null_is_refused(path: str) -> None:
    """kio reads it as None, and the handler then fails on it (41 TypeErrors in issue 27)."""
    frame, sites = share_fetch_v1_frame()
    with pytest.raises(OutOfBounds, match=f"non-nullable field {path} was serialized as null"):
        check(rewrite(frame, first_site(sites, path), b"\x00"))


def test_null_where_the_version_allows_it_passes() -> None:
    body = metadata_v12.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    frame = encode_request(body, 1, "c")
    assert check(frame) == len(frame)
    assert decode_request(frame).body == body
    legacy, sites = produce_v8_frame()
    with pytest.raises(OutOfBounds, match=r"non-nullable field ProduceRequest\.topic_data"):
        check(rewrite(legacy, first_site(sites, "ProduceRequest.topic_data"), b"\xff" * 4))


def test_no_array_may_declare_more_than_a_million_elements() -> None:
    """Checked on a frame that does hold them (a byte each): the cap, not the bytes left."""
    frame, sites = share_fetch_v1_frame()
    site = first_site(sites, "AcknowledgementBatch.acknowledge_types")
    assert frame[site.pos : site.pos + 2] == b"\x02\x01"  # one element: ACCEPT

    def with_types(count: int) -> bytes:
        return rewrite(frame, site._replace(width=2), uvarint(count + 1) + b"\x01" * count)

    allowed = with_types(MAX_ARRAY_ELEMENTS)
    assert check(allowed) == len(allowed)
    with pytest.raises(OutOfBounds, match=r"1000001 elements declared, \d+ bytes left \(at most"):
        check(with_types(MAX_ARRAY_ELEMENTS + 1))


def test_an_element_is_counted_at_its_smallest_encoding() -> None:
    """ShareAcknowledge v1 topics: a uuid, an array and a tagged-field count, 18 bytes at
    least; a count that would fit one-byte elements but not these is refused."""
    rng = random.Random(3)
    body = random_request(rng, share_ack_v1.ShareAcknowledgeRequest)
    frame, sites = encode(body)
    site = first_site(sites, "ShareAcknowledgeRequest.topics")
    left = len(frame) - site.pos - 1
    with pytest.raises(OutOfBounds, match="topics"):
        check(rewrite(frame, site, uvarint(left // 18 + 2)))


def test_a_frame_that_ends_inside_a_field_is_refused() -> None:
    frame, _ = share_fetch_v1_frame()
    walk = request_walker(share_fetch_v1.ShareFetchRequest)
    for cut in range(len(frame)):
        with pytest.raises(OutOfBounds):
            walk(frame[:cut])


@pytest.mark.parametrize("request_class", served(), ids=lambda r: f"{r.__name__}-v{r.__version__}")
def test_valid_frames_of_every_served_version_pass_and_decode_unchanged(
    request_class: type[RequestPayload],
) -> None:
    rng = random.Random(f"{request_class.__module__}")
    for i in range(6):
        body = random_request(rng, request_class, deep=i % 3 == 0)
        frame = encode_request(body, 1, "client")
        assert encode(body, 1, "client")[0] == frame, "the fuzzer's encoder drifted from kio"
        assert request_walker(request_class)(frame) == len(frame)
        assert decode_request(frame).body == body


class LongArray(NamedTuple):
    request_class: type[RequestPayload]
    frame: bytes
    sites: list[Site]
    path: str  # of the long array


def long_arrays(n: int = 100) -> list[LongArray]:
    """Requests with a long array of alike elements, as clients send them: share-fetch
    partitions without acks, acknowledgement ranges, fetch partitions, topics by name and by
    id (a null name)."""
    ack = share_ack_v1
    ranges = tuple(
        ack.AcknowledgementBatch(first_offset=i, last_offset=i, acknowledge_types=(1 + i % 2,))
        for i in range(3 * n)
    )
    acknowledge = build(
        ack.ShareAcknowledgeRequest,
        member_id="m",
        topics=(
            build(
                ack.AcknowledgeTopic,
                topic_id=uuid.UUID(int=9),
                partitions=(build(ack.AcknowledgePartition, acknowledgement_batches=ranges),),
            ),
        ),
    )
    fetch = build(
        fetch_v12.FetchRequest,
        max_wait=datetime.timedelta(milliseconds=500),
        topics=(
            build(
                fetch_v12.FetchTopic,
                topic="t",
                partitions=tuple(
                    build(fetch_v12.FetchPartition, partition=i, fetch_offset=7) for i in range(n)
                ),
            ),
        ),
    )
    share_fetch = build(
        share_fetch_v1.ShareFetchRequest,
        member_id="m",
        max_wait=datetime.timedelta(milliseconds=500),
        topics=(
            build(
                share_fetch_v1.FetchTopic,
                topic_id=uuid.UUID(int=9),
                # As a consumer's first fetch lists its partitions: no acks.
                partitions=tuple(
                    build(share_fetch_v1.FetchPartition, partition_index=i) for i in range(n)
                ),
            ),
        ),
    )
    metadata = metadata_v12_frame(*(f"topic-{i:02d}" for i in range(n)))
    by_id = metadata_v12.MetadataRequest(
        topics=tuple(
            metadata_v12.MetadataRequestTopic(topic_id=uuid.UUID(int=i + 1), name=None)
            for i in range(n)
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return [
        LongArray(share_fetch_v1.ShareFetchRequest, *encode(share_fetch), "FetchTopic.partitions"),
        LongArray(
            ack.ShareAcknowledgeRequest,
            *encode(acknowledge),
            "AcknowledgePartition.acknowledgement_batches",
        ),
        LongArray(fetch_v12.FetchRequest, *encode(fetch), "FetchTopic.partitions"),
        LongArray(metadata_v12.MetadataRequest, *metadata, "MetadataRequest.topics"),
        LongArray(metadata_v12.MetadataRequest, *encode(by_id), "MetadataRequest.topics"),
    ]


def decode_count(frame: bytes, site: Site) -> int:
    """The element count at a compact array's site."""
    value, shift = 0, 0
    for byte in frame[site.pos : site.pos + site.width]:
        value |= (byte & 0x7F) << shift
        shift += 7
    return value - 1


def spoil(rng: random.Random, frame: bytes, sites: list[Site]) -> bytes:
    """One element of a long array made unlike the others, or the frame broken."""
    how = rng.randrange(4)
    site = rng.choice(sites)
    if how == 0:  # another length or count, of one byte or more, null, empty or huge
        value = rng.choice((0, 1, 2, 3, 0x7F, 0x80, 300, 2**31))
        return rewrite(frame, site, uvarint(value))
    if how == 1:  # a tagged field where the others have none
        tags = [s for s in sites if s.role == "tags"]
        return rewrite(frame, rng.choice(tags), rng.choice((b"\x01\x05\x02ab", b"\x01", b"\x02")))
    if how == 2:
        data = bytearray(frame)
        data[rng.randrange(8, len(data))] = rng.getrandbits(8)
        return bytes(data)
    return frame[: rng.randrange(8, len(frame))]


def outcome(walk: Callable[[bytes], int], frame: bytes) -> int | str:
    try:
        return walk(frame)
    except OutOfBounds as e:
        return f"refused: {e}"


def test_a_long_array_checked_whole_when_alike_agrees_with_the_element_by_element_walk() -> None:
    """The strided check of alike elements (request_bounds `alike_function`) against the plain
    walk: on arrays all alike, one element unlike the rest, tagged fields, broken bytes."""
    rng = random.Random(932)
    for long in long_arrays():
        fast = request_walker(long.request_class)
        reference = compile_walker(long.request_class, alike=False)[0]
        assert fast(long.frame) == reference(long.frame) == len(long.frame)
        # ... and the array was checked whole, by one of the walk's strided checks.
        count = first_site(long.sites, long.path)
        start, elements = count.pos + count.width, decode_count(long.frame, count)
        # The generated walk's own (a hand check, as ShareFetch's, stands in front of it).
        generated = compile_walker(long.request_class)[0]
        checks = [f for name, f in generated.__globals__.items() if name.startswith("_alike_")]
        whole = [f(long.frame, start, len(long.frame), elements) for f in checks]
        assert any(c == 0 and p > start for p, c in whole), long.path
        for _ in range(300):
            spoiled = spoil(rng, long.frame, long.sites)
            assert outcome(fast, spoiled) == outcome(reference, spoiled), spoiled.hex()


def test_arrays_of_a_repeated_unit_get_the_element_by_element_walks_verdict() -> None:
    """Long arrays whose elements are one random unit of bytes over and over, all alike by
    construction: the strided check must accept exactly what the plain walk accepts, whatever
    the unit's bytes mean (a count that is not one byte, a struct array that is not empty...)."""
    rng = random.Random(14063)
    for long in long_arrays(0):
        fast = request_walker(long.request_class)
        reference = compile_walker(long.request_class, alike=False)[0]
        empty = first_site(long.sites, long.path)
        before, after = long.frame[: empty.pos], long.frame[empty.pos + empty.width :]
        for _ in range(400):
            unit = rng.randbytes(rng.randint(1, 24))
            if rng.random() < 0.5:  # mostly small values: counts and lengths of one byte
                unit = bytes(b % rng.choice((2, 3, 4, 0x80, 0x100)) for b in unit)
            n = rng.randint(16, 60)
            spoiled = before + uvarint(n + 1) + unit * n + after
            assert outcome(fast, spoiled) == outcome(reference, spoiled), (unit.hex(), n)


def test_a_frame_in_a_memoryview_walks_as_in_bytes() -> None:
    for long in long_arrays():
        walk = request_walker(long.request_class)
        assert walk(memoryview(long.frame)) == walk(long.frame) == len(long.frame)


def test_the_walk_is_built_once_per_request_class() -> None:
    walker = request_walker(share_ack_v1.ShareAcknowledgeRequest)
    assert request_walker(share_ack_v1.ShareAcknowledgeRequest) is walker
    assert "for _ in range(c):" in walker_source(share_ack_v1.ShareAcknowledgeRequest)


def hostile_frames() -> list[bytes]:
    """One frame of each refusal above, for the run through the whole decode."""
    produce, produce_sites = produce_v8_frame()
    fetch, fetch_sites = share_fetch_v1_frame()
    metadata, _ = metadata_v12_frame("topic")
    return [
        ISSUE_FRAME,
        rewrite(produce, produce_sites[1], struct.pack(">i", 2**31 - 1)),
        rewrite(fetch, first_site(fetch_sites, "ShareFetchRequest.topics"), b"\x00"),
        rewrite(fetch, first_site(fetch_sites, "FetchTopic.partitions"), uvarint(2**32 - 1)),
        with_header_tags(metadata, b"\x01\x00" + uvarint(2**31)),
    ]


def test_decode_request_refuses_them_all_without_taking_the_process_down() -> None:
    """In a child: before the check, kio aborted the whole process on the first of these."""
    script = textwrap.dedent(
        """
        import sys
        from protocol.messages import UndecodableRequest, decode_request
        for line in sys.stdin.read().split():
            try:
                decode_request(bytes.fromhex(line))
            except UndecodableRequest as e:
                print("refused:", e)
            else:
                print("decoded")
        """
    )
    frames = "\n".join(f.hex() for f in hostile_frames())
    done = subprocess.run(
        [sys.executable, "-c", script], input=frames, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    lines = done.stdout.splitlines()
    assert len(lines) == len(hostile_frames())
    assert all(line.startswith("refused:") for line in lines), lines
