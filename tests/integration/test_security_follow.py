"""ACL and SCRAM changes across `--processes 2`: forwarded to node 0, followed by node 1.

Two in-process nodes over real sockets (PLAINTEXT, the authorizer on, `User:ANONYMOUS` a super
user: on a PLAINTEXT listener the processes' own requests are ANONYMOUS, as Kafka's brokers
are on a PLAINTEXT inter-broker listener) and raw requests. Kafka's brokers forward CreateAcls,
DeleteAcls and AlterUserScramCredentials to the controller (KIP-590, `ForwardingManager`), and
answer a forward that timed out with REQUEST_TIMED_OUT (`ForwardingManagerImpl.onTimeout`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.alter_user_scram_credentials import v0 as alter_users
from kio.schema.create_acls import v1 as create_v1
from kio.schema.describe_acls import v3 as describe_acls
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8
from kio.static.primitive import i32

from broker import controller_forward
from broker.acl_manager import AclManager
from broker.authorizer import AuthorizerSettings
from broker.security_follow import follow_credentials
from broker.server import Server
from broker.to_the_end import Changes
from client.connection import Connection
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation as Op
from protocol.acl import AclPermissionType as Perm
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType as RT
from storage.acl_store import ACL_FILE
from storage.acl_store import AclStore
from storage.scram_credentials import ScramCredentialStore
from tests.brokers import free_ports
from tests.brokers import make_server

pytestmark = pytest.mark.integration

SECURED = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


def _binding(name: str) -> AclBinding:
    return AclBinding(
        ResourcePattern(RT.TOPIC, name, PatternType.LITERAL),
        AccessControlEntry("User:alice", "*", Op.READ, Perm.ALLOW),
    )


def _node(data: Path, port: int, node: int) -> Server:
    return make_server(
        data, listeners=f"PLAINTEXT://127.0.0.1:{port + node}", processes=2,
        **{"node.id": node}, **SECURED,
    )  # fmt: skip


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[Server, Server]]:
    port = free_ports(2)
    zero, one = _node(tmp_path, port, 0), _node(tmp_path, port, 1)
    await zero.start()
    await one.start()
    try:
        yield zero, one
    finally:
        await one.stop()
        await zero.stop()


async def _ask(server: Server, body: Any) -> Any:
    conn = await Connection.open("127.0.0.1", server.port, "test")
    try:
        return await conn.request(body)
    finally:
        await conn.close()


def _creation(name: str) -> Any:
    return create_v1.request.AclCreation(
        resource_type=i8(RT.TOPIC), resource_name=name,
        resource_pattern_type=i8(PatternType.LITERAL), principal="User:alice", host="*",
        operation=i8(Op.READ), permission_type=i8(Perm.ALLOW),
    )  # fmt: skip


async def _listed(server: Server) -> list[str]:
    answer = await _ask(server, describe_acls.DescribeAclsRequest(
        resource_type_filter=i8(RT.ANY), resource_name_filter=None,
        pattern_type_filter=i8(PatternType.ANY), principal_filter=None, host_filter=None,
        operation=i8(Op.ANY), permission_type=i8(Perm.ANY),
    ))  # fmt: skip
    return sorted(r.resource_name for r in answer.resources)


async def test_an_acl_made_through_node_1_is_written_by_node_0_and_listed_by_both(
    pair: tuple[Server, Server],
) -> None:
    """CreateAcls v1 (forwarded as v3, the same fields) through node 1: node 0 writes it, node
    1 lists it as soon as it answered."""
    zero, one = pair
    answer = await _ask(one, create_v1.CreateAclsRequest(creations=(_creation("orders"),)))
    assert [r.error_code for r in answer.results] == [ErrorCode.none]
    assert AclStore(zero.config.data_dir).load() == [_binding("orders")]
    assert await _listed(one) == ["orders"]
    assert await _listed(zero) == ["orders"]


def _upsertion(user: str) -> Any:
    salt = b"s" * 32
    return alter_users.request.ScramCredentialUpsertion(
        name=user, mechanism=i8(2), iterations=i32(4096), salt=salt,
        salted_password=hashlib.pbkdf2_hmac("sha512", b"pw", salt, 4096),
    )  # fmt: skip


async def test_users_made_through_both_nodes_at_once_are_all_in_node_0s_file(
    pair: tuple[Server, Server],
) -> None:
    """Before, each node wrote the one file from its own memory: the last writer dropped the
    other's users."""
    zero, one = pair
    users = [f"u{i}" for i in range(10)]
    answers = await asyncio.gather(*(
        _ask((zero, one)[i % 2], alter_users.AlterUserScramCredentialsRequest(
            deletions=(), upsertions=(_upsertion(u),)))
        for i, u in enumerate(users)
    ))  # fmt: skip
    assert [a.results[0].error_code for a in answers] == [ErrorCode.none] * len(users)
    assert ScramCredentialStore.in_data_dir(zero.config.data_dir).users() == users
    assert zero.services.credentials.users() == users
    # Node 1 took the file after each change it forwarded; the last may have been node 0's.
    deadline = time.monotonic() + 10
    while one.services.credentials.users() != users:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_a_change_node_0_cannot_take_is_answered_request_timed_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Node 0 is not running: node 1 tries until the deadline, then answers as Kafka's
    forwarding broker does, and has written nothing itself."""
    monkeypatch.setattr(controller_forward, "FORWARD_TIMEOUT_S", 0.5)
    port = free_ports(2)
    one = _node(tmp_path, port, 1)
    await one.start()
    try:
        answer = await _ask(one, create_v1.CreateAclsRequest(creations=(_creation("orders"),)))
        assert [r.error_code for r in answer.results] == [ErrorCode.request_timed_out]
        users = await _ask(one, alter_users.AlterUserScramCredentialsRequest(
            deletions=(), upsertions=(_upsertion("u"),)))  # fmt: skip
        assert [r.error_code for r in users.results] == [ErrorCode.request_timed_out]
    finally:
        await one.stop()
    assert not (tmp_path / ACL_FILE).exists()
    assert not (tmp_path / "scram-credentials.json").exists()


# -- Following the ACL file -------------------------------------------------------------------


async def test_a_follower_takes_the_file_node_0_wrote_and_drops_its_cached_decisions(
    tmp_path: Path,
) -> None:
    settings = AuthorizerSettings()
    writer, follower = (
        AclManager(AclStore(tmp_path), settings, Changes()),
        AclManager(AclStore(tmp_path), settings, Changes()),
    )
    assert not await follower.follow()  # nothing changed: a stat
    before = follower.authorizer.version
    await writer.create([_binding("a")])
    await writer.create([_binding("b")])  # two writes in one tick of the clock: other inodes
    assert await follower.follow()
    assert sorted(follower.authorizer) == [_binding("a"), _binding("b")]
    assert follower.authorizer.version > before  # connections' cached decisions are stale
    await writer.delete([AclBindingFilter(RT.TOPIC, "a")])
    assert await follower.follow()
    assert list(follower.authorizer) == [_binding("b")]


async def test_a_damaged_file_keeps_the_acls_in_force(tmp_path: Path) -> None:
    store = AclStore(tmp_path)
    store.save([_binding("a")])
    follower = AclManager(AclStore(tmp_path), AuthorizerSettings(), Changes())
    (tmp_path / ACL_FILE).write_bytes(b'{"version": 1, "acls": [\n{"host": "*"')
    assert not await follower.follow()
    assert list(follower.authorizer) == [_binding("a")]


def _big_file(path: Path, n: int) -> None:
    """`n` bindings in the format AclStore writes, made by hand (saving them takes longer)."""
    line = (
        b'{"host": "*", "name": "t-%d", "operation": "READ", "pattern_type": "LITERAL", '
        b'"permission": "ALLOW", "principal": "User:alice", "resource_type": "TOPIC"}'
    )
    body = b",\n".join(line % i for i in range(n))
    path.write_bytes(b'{"version": 1, "acls": [\n%s\n]}\n' % body)


async def _worst_wait(work: Awaitable[object]) -> float:
    """The longest the loop went without turning while `work` ran (a 1 ms ticker)."""
    worst = 0.0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst, last = max(worst, now - last), now

    ticker = asyncio.create_task(tick())
    await work
    done.set()
    await ticker
    return worst


@pytest.mark.latency  # the loop's waits: alone, not beside other tests
async def test_following_a_big_credentials_file_leaves_the_event_loop_free(
    tmp_path: Path,
) -> None:
    """As the ACL file: a batch of lines per json.loads, in a thread, collection paused and
    the users frozen. One json.loads of the whole file held the loop 0.2-1.4 s for 200,000
    users (1 ms ticker, load 7.5 on the 2-core VM); 48-64 ms after, 100,000 here."""
    n = 100_000
    credential = json.dumps({"SCRAM-SHA-512": {"salt": "c2FsdA==", "iterations": 4096,
                             "stored_key": "a2V5", "server_key": "a2V5"}}).encode()  # fmt: skip
    body = b",\n".join(b'"user-%d": %s' % (i, credential) for i in range(n))
    store = ScramCredentialStore.in_data_dir(tmp_path)
    (tmp_path / "scram-credentials.json").write_bytes(b'{"version": 1, "users": {\n%s\n}}\n' % body)
    # The two services follow_credentials reads (a stand-in: no broker needed).
    services = SimpleNamespace(credentials=store, credentials_lock=asyncio.Lock())
    worst = await _worst_wait(follow_credentials(services))  # type: ignore[arg-type]
    assert len(store.users()) == n
    assert worst < 0.1, f"the loop waited {worst * 1000:.0f} ms"


@pytest.mark.latency  # the loop's waits: alone, not beside other tests
async def test_following_a_big_file_leaves_the_event_loop_free(tmp_path: Path) -> None:
    """Read and parsed in a thread, a batch of lines per json.loads, the authorizer built there
    too, with automatic garbage collection paused meanwhile (`broker.gc_pause`): the loop
    keeps turning (worst wait 32-34 ms measured at load 5-7 on the 2-core VM). One json.loads
    of the whole file, and the collections that making 100,000 bindings triggered, held it
    120-255 ms at a time."""
    n = 100_000
    follower = AclManager(AclStore(tmp_path), AuthorizerSettings(), Changes())
    _big_file(tmp_path / ACL_FILE, n)
    worst = await _worst_wait(follower.follow())
    assert len(follower.authorizer) == n
    assert worst < 0.1, f"the loop waited {worst * 1000:.0f} ms"
