"""A structure-aware fuzzer over every (API key, version) the broker serves, against a `shoal
serve` process: no frame, whatever its bytes, may take the broker down (issue 27).

Frames are built from kio's schemas (tests/kio_requests.py), round robin over the registry's
(api key, version) pairs, in four kinds:
- valid: a random request, with values at the edges of their types and names that meet;
- deep: every array with several elements, down to the schema's deepest struct;
- hostile: a valid request with one count, length, tagged-field count or size rewritten to
  a hostile value (near 2^31 and 2^32, -1, 0, past the frame's end, a 6-byte varint);
- mutated: bit flips, truncation, splices of two requests, duplicated slices, random bytes,
  a length nudged.
A hostile value that declares more than the frame holds, or null for a non-nullable field, is
a frame Kafka refuses to parse (MessageDataGenerator: "Tried to allocate a collection of size
...", "non-nullable field X was serialized as null"), and its SocketServer closes the
connection: so must Shoal. Every other frame gets an answer, a close, or a wait (a long poll,
acks=0). After each batch the broker process must be alive, and answer ApiVersions on a
fresh connection and on one opened before the first frame; at the end its log must hold no
`handler failed` (the TypeErrors of null arrays reaching handlers).

In `make test`: a fixed seed and FRAMES_IN_CI frames (a few seconds). `make fuzz` runs
SHOAL_FUZZ_FRAMES of them (SHOAL_FUZZ_SEED picks another sequence).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import struct
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from client import Admin
from client import Producer
from client.errors import TopicError
from protocol.framing import SIZE
from protocol.messages import decode_response
from protocol.messages import encode_request
from tests.brokers import BrokerProcess
from tests.brokers import free_ports
from tests.brokers import node_pids
from tests.brokers import wait_for_nodes
from tests.kio_requests import TOPIC
from tests.kio_requests import Site
from tests.kio_requests import encode
from tests.kio_requests import random_request
from tests.kio_requests import served
from tests.kio_requests import uvarint

pytestmark = pytest.mark.integration

FRAMES_IN_CI = 1_000
FRAMES = int(os.environ.get("SHOAL_FUZZ_FRAMES", FRAMES_IN_CI))
SEED = int(os.environ.get("SHOAL_FUZZ_SEED", "27"))
BATCH = 250  # frames between two checks that the broker lives
CONCURRENCY = 48  # connections open at once
WAIT_S = 0.25  # how long a frame that may wait (a long poll) is given before we hang up
CLOSE_WITHIN_S = 10.0  # a frame the broker must refuse: closed within this, even under load
KINDS = ("valid", "hostile", "deep", "mutated")
# To node 1 of two: as node 0's own requests (`broker/node_link.py`), and a client's.
CLIENT_IDS_OF_TWO = ("shoal-node-0", "fuzz")
# Work a random request may ask for, kept small: the fuzzer looks for crashes, not stalls.
BROKER_ENV = {"SHOAL_MAX_PARTITIONS_PER_REQUEST": "4", "SHOAL_MAX_BROKER_PARTITIONS": "3000"}


class Case(NamedTuple):
    frame: bytes
    kind: str
    api: str  # "ShareFetchRequest v1"
    must_close: bool  # it declares more than it holds, or null where its version forbids it
    note: str


# --- the frames ------------------------------------------------------------------------------


def hostile_value(rng: random.Random, site: Site, left: int) -> tuple[bytes, bool, str]:
    """A hostile value for `site` (`left`: bytes after it), whether no broker may read the
    frame then, and what it is."""
    if site.encoding == "compact":  # N + 1 elements or bytes, 0 for null
        declared = rng.choice([-1, 0, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1, 2**35 - 2, left + 1])
        raw = uvarint(declared + 1)
        if rng.random() < 0.1:
            return b"\x81\x80\x80\x80\x80\x00", True, "a 6-byte varint"
    elif site.encoding == "uvarint":  # a tagged-field count or size
        declared = rng.choice([0, 2**31, 2**32 - 1, 2**35 - 1, left + 1])
        raw = uvarint(declared)
    else:
        most = 2 ** (15 if site.encoding == "int16" else 31) - 1
        declared = rng.choice([-1, 0, -2, -most - 1, most, min(left + 1, most)])
        raw = struct.pack(">h" if site.encoding == "int16" else ">i", declared)
    left += site.width - len(raw)  # the value's own width may change
    # Null where the version forbids it; a negative length other than null; more than is left.
    refused = not site.nullable if declared == -1 else declared < -1 or declared > left
    return raw, refused, f"{site.path} = {declared}"


def mutate(rng: random.Random, frame: bytes, other: bytes, sites: list[Site]) -> tuple[bytes, str]:
    """A random corruption of a valid frame (its api key and version kept, mostly)."""
    data = bytearray(frame)
    start = 4 if rng.random() < 0.9 else 0
    how = rng.choice(("flip", "truncate", "splice", "duplicate", "bytes", "nudge"))
    if how == "flip" and len(data) > start:
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(start, len(data))
            data[pos] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        del data[rng.randint(start, len(data)) :]
    elif how == "splice":
        data = data[: rng.randint(start, len(data))] + other[rng.randint(0, len(other)) :]
    elif how == "duplicate" and data:
        i = rng.randrange(len(data))
        j = rng.randint(i, min(len(data), i + 64))
        data[j:j] = data[i:j] * rng.randint(1, 4)
    elif how == "bytes" and len(data) > start:
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(start, len(data))] = rng.choice(
                (0, 0x7F, 0x80, 0xFF, rng.getrandbits(8))
            )
    elif how == "nudge" and sites:
        site = rng.choice(sites)
        old = frame[site.pos : site.pos + site.width]
        value = int.from_bytes(old, "big", signed=True) if site.encoding.startswith("int") else 0
        raw = (value + rng.choice((-2, -1, 1, 2, 127, 128))) & (1 << 8 * site.width) - 1
        data[site.pos : site.pos + site.width] = raw.to_bytes(site.width, "big")
    return bytes(data), how


def cases(
    seed: int, count: int, topic_ids: tuple[uuid.UUID, ...], client_ids: tuple[str, ...] = ("fuzz",)
) -> Iterator[Case]:
    """`count` frames: kinds in turn, and every served (api key, version) once per len(KINDS)
    turns; the client ids in turn, (api key, version) by (api key, version)."""
    rng = random.Random(seed)
    pairs = served()
    for i in range(count):
        kind = KINDS[i % len(KINDS)]
        request_type = pairs[(i // len(KINDS)) % len(pairs)]
        api = f"{request_type.__name__} v{request_type.__version__}"
        client_id = client_ids[(i // len(KINDS)) % len(client_ids)]
        yield make_case(rng, kind, request_type, api, topic_ids, client_id)


def make_case(
    rng: random.Random,
    kind: str,
    request_type: type[RequestPayload],
    api: str,
    topic_ids: tuple[uuid.UUID, ...],
    client_id: str = "fuzz",
) -> Case:
    body = random_request(rng, request_type, deep=kind == "deep", uuids=topic_ids)
    frame, sites = encode(body, correlation_id=rng.getrandbits(31), client_id=client_id)
    if kind in ("valid", "deep"):
        return Case(frame, kind, api, False, "")
    if kind == "hostile":
        site = rng.choice(sites)
        left = len(frame) - site.pos - site.width
        raw, refused, note = hostile_value(rng, site, left)
        hostile = frame[: site.pos] + raw + frame[site.pos + site.width :]
        return Case(hostile, kind, api, refused, note)
    other, _ = encode(random_request(rng, request_type, uuids=topic_ids))
    mutated, how = mutate(rng, frame, other, sites)
    return Case(mutated, kind, api, False, how)


# --- talking to the broker ---------------------------------------------------------------------


async def send(port: int, case: Case) -> str:
    """Send one frame on a new connection: "answered", "closed" or "waiting"."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(SIZE.pack(len(case.frame)) + case.frame)
        wait = CLOSE_WITHIN_S if case.must_close else WAIT_S
        data = await asyncio.wait_for(reader.read(1 << 16), wait)
        return "answered" if data else "closed"
    except TimeoutError:
        return "waiting"
    except ConnectionError:
        return "closed"
    finally:
        writer.close()


async def api_versions(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    body = ApiVersionsRequest(client_software_name="fuzz-probe", client_software_version="1")
    payload = encode_request(body, 99, "fuzz-probe")
    writer.write(SIZE.pack(len(payload)) + payload)
    size = await asyncio.wait_for(reader.readexactly(4), 10)
    answer = await reader.readexactly(SIZE.unpack(size)[0])
    _, decoded = decode_response(body.__api_key__, body.__version__, answer)
    assert decoded.error_code == ErrorCode.none


async def probe(port: int) -> None:
    """ApiVersions on a fresh connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await api_versions(reader, writer)
    finally:
        writer.close()


async def prepare(bootstrap: str) -> tuple[uuid.UUID, ...]:
    """A topic with records, for requests to meet."""
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(TOPIC, 2)
    async with Producer(bootstrap) as producer:
        deadline = time.monotonic() + 30
        for i in range(10):
            while True:  # with --processes N, until the leader has followed node 0's topic
                try:
                    await producer.send(TOPIC, b"%d" % i, partition=i % 2)
                    break
                except TopicError:
                    assert time.monotonic() < deadline, "the topic never reached its leader"
                    await asyncio.sleep(0.1)
    return (topic_id,)


def dead(broker: BrokerProcess, batch: list[Case]) -> str:
    """Why the test stops: the broker's exit and what it said, and the batch's suspects."""
    suspects = [c for c in batch if c.must_close][:5]
    shown = "\n".join(f"  {c.api}, {c.note}: {c.frame.hex()}" for c in suspects)
    log = broker.log()
    said = log[log.find("memory allocation") :][:400] if "memory allocation" in log else log[-2000:]
    code = broker.proc.returncode if broker.proc is not None else None
    return f"the broker died (exit {code}); frames of the batch it must refuse:\n{shown}\n{said}"


def handler_failures(log_path: Path) -> list[str]:
    failures = []
    for line in log_path.read_text(errors="replace").splitlines():
        if "handler failed" in line:
            try:
                entry = json.loads(line)
            except ValueError:
                failures.append(line)
                continue
            failures.append(str(entry.get("exception", line))[-600:])
    return failures


async def fuzz(
    broker: BrokerProcess,
    seed: int,
    count: int,
    node: int = 0,
    pids: dict[int, int] | None = None,
    client_ids: tuple[str, ...] = ("fuzz",),
) -> Counter[str]:
    """`count` frames to `node` (of `--processes N`: its port is the broker's + node); with
    `pids` (node id -> pid), every node must keep its process (the supervisor restarts one
    that dies)."""  # fmt: skip
    topic_ids = await prepare(broker.bootstrap)
    port = broker.port + node
    witness = await asyncio.open_connection("127.0.0.1", port)
    outcomes: Counter[str] = Counter()
    limit = asyncio.Semaphore(CONCURRENCY)

    async def run(case: Case) -> None:
        async with limit:
            outcome = await send(port, case)
        outcomes[outcome] += 1
        outcomes[f"{case.kind}:{outcome}"] += 1
        if case.must_close:
            assert outcome == "closed", f"{case.api}, {case.note}: {outcome}, not refused"

    all_cases = cases(seed, count, topic_ids, client_ids)
    try:
        while batch := list(itertools.islice(all_cases, BATCH)):
            try:
                await asyncio.gather(*(run(c) for c in batch))
                assert broker.proc is not None and broker.proc.poll() is None
                if pids is not None:
                    assert node_pids(broker) == pids, "a node died and was restarted"
                await probe(port)
                await api_versions(*witness)
            except (AssertionError, OSError, asyncio.IncompleteReadError) as e:
                if pids is not None and (now := node_pids(broker)) != pids:
                    pytest.fail(f"a node died: pids {pids}, now {now}; {dead(broker, batch)}")
                if broker.proc is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        broker.proc.wait(timeout=10)  # a dying broker may still be writing
                    if broker.proc.returncode is not None:
                        pytest.fail(dead(broker, batch))
                raise AssertionError(f"{e!r}\n{broker.log()[-3000:]}") from e
    finally:
        witness[1].close()
    return outcomes


def test_no_frame_takes_the_broker_down(tmp_path: Path) -> None:
    started = time.monotonic()
    with BrokerProcess(tmp_path / "data", env=BROKER_ENV) as broker:
        outcomes = asyncio.run(fuzz(broker, SEED, FRAMES))
        assert broker.proc is not None and broker.proc.poll() is None, broker.log()[-3000:]
        failures = handler_failures(broker.log_path)
    pairs = len(served())
    covered = min(pairs, FRAMES // len(KINDS))
    print(  # the figures for `make fuzz` (pytest -s)
        f"\n{FRAMES} frames over {covered} of {pairs} (api, version) pairs, seed {SEED}, "
        f"in {time.monotonic() - started:.1f} s: {dict(sorted(outcomes.items()))}"
    )
    assert not failures, f"{len(failures)} handler failures, the first:\n" + "\n".join(failures[:3])


def test_no_frame_takes_a_node_of_two_processes_down(tmp_path: Path) -> None:
    """The same frames to node 1 of `--processes 2` (issue 33): what it forwards to node 0
    (ACL and SCRAM changes, auto-created topics), answers NOT_COORDINATOR or
    NOT_LEADER_OR_FOLLOWER for, or asks the other node about, and Shoal's own keys (30000
    TxnShareAcknowledge, 30001 TxnShareStaged), which any client may send. Every other
    (api key, version) names node 0 as its client id, as the processes' own requests do
    (`broker/node_link.py`): without an authorizer the share-state RPCs are taken from it
    alone (`broker/share_state_peer.py`), so the leader's side of them is fuzzed too.
    Neither node may die (the supervisor would restart it: its pid would change) or log a
    handler failure."""
    broker = BrokerProcess(tmp_path / "data", port=free_ports(2), env=BROKER_ENV,
                           extra=["--processes", "2"])  # fmt: skip
    broker.start(timeout=90)
    try:
        pids = wait_for_nodes(broker, 2, timeout=90)
        outcomes = asyncio.run(fuzz(broker, SEED, FRAMES, 1, pids, CLIENT_IDS_OF_TWO))
        assert node_pids(broker) == pids, broker.log()[-3000:]
        failures = handler_failures(broker.log_path)
    finally:
        broker.stop(60)
    print(f"\n{FRAMES} frames to node 1 of 2, seed {SEED}: {dict(sorted(outcomes.items()))}")
    assert not failures, f"{len(failures)} handler failures, the first:\n" + "\n".join(failures[:3])
