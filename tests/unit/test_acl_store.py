"""The ACL file and the manager that changes it two-phase, and the authorizer's settings."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from broker.acl_manager import AclManager
from broker.authorizer import AuthorizerSettings
from broker.authorizer import parse_super_users
from broker.config import BrokerConfig
from broker.to_the_end import Changes
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation as Op
from protocol.acl import AclPermissionType as Perm
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType as RT
from storage.acl_store import AclFileDamaged
from storage.acl_store import AclStore
from storage.scram_credentials import SCRAM_SHA_512
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore

READ_ORDERS = AclBinding(
    ResourcePattern(RT.TOPIC, "orders", PatternType.LITERAL),
    AccessControlEntry("User:alice", "*", Op.READ, Perm.ALLOW),
)
DENY_PAY = AclBinding(
    ResourcePattern(RT.TOPIC, "pay", PatternType.PREFIXED),
    AccessControlEntry("User:*", "10.0.0.1", Op.ALL, Perm.DENY),
)


def test_bindings_round_trip_through_the_file(tmp_path: Path) -> None:
    store = AclStore(tmp_path)
    assert store.load() == []
    store.save([READ_ORDERS, DENY_PAY])
    assert sorted(AclStore(tmp_path).load()) == sorted([READ_ORDERS, DENY_PAY])
    assert not list(tmp_path.glob("*.tmp"))


def test_a_damaged_file_stops_the_broker_rather_than_open_everything(tmp_path: Path) -> None:
    (tmp_path / "acls.json").write_text('{"acls": [{"resource_type": "TOPIC"')
    with pytest.raises(AclFileDamaged):
        AclStore(tmp_path).load()
    (tmp_path / "acls.json").write_text('{"acls": [{"resource_type": "NOPE"}]}')
    with pytest.raises(AclFileDamaged):
        AclStore(tmp_path).load()


def test_the_file_has_a_binding_per_line_and_stays_one_json_document(tmp_path: Path) -> None:
    """A reader parses it a batch of lines at a time (`--processes N` followers, in a thread),
    any JSON reader whole; the indented document written before is still read."""
    store = AclStore(tmp_path)
    store.save([READ_ORDERS, DENY_PAY])
    lines = store.path.read_bytes().splitlines()
    assert len(lines) == 4  # header, two bindings, end
    assert len(json.loads(store.path.read_bytes())["acls"]) == 2
    store.save([])
    assert AclStore(tmp_path).load() == []
    before = {"version": 1, "acls": [READ_ORDERS.fields(), DENY_PAY.fields()]}
    store.path.write_text(json.dumps(before, indent=1))
    assert sorted(AclStore(tmp_path).load()) == sorted([READ_ORDERS, DENY_PAY])


@pytest.mark.parametrize("cut", ["end", "binding", "after"])
def test_a_file_cut_short_or_followed_by_more_is_damaged(tmp_path: Path, cut: str) -> None:
    store = AclStore(tmp_path)
    store.save([READ_ORDERS, DENY_PAY])
    data = store.path.read_bytes()
    damaged = {
        "end": data[: data.rindex(b"]}")],  # every binding, no end
        "binding": data[: data.index(b"\n") + 30],  # half a binding
        "after": data + b'{"more": 1}\n',
    }[cut]
    store.path.write_bytes(damaged)
    with pytest.raises(AclFileDamaged):
        store.load()


def test_the_credentials_file_has_a_user_per_line_and_reads_the_one_of_before(
    tmp_path: Path,
) -> None:
    store = ScramCredentialStore.in_data_dir(tmp_path)
    credential = ScramCredential.from_password(SCRAM_SHA_512, "pw", 4096)
    for user in ("alice", '"}}', "bob\n"):  # names JSON escapes, or the end's characters
        store.upsert(user, SCRAM_SHA_512.name, credential)
    store.save()
    path = tmp_path / "scram-credentials.json"
    assert len(path.read_bytes().splitlines()) == 5  # header, three users, end
    assert len(json.loads(path.read_bytes())["users"]) == 3
    assert ScramCredentialStore.in_data_dir(tmp_path).export() == store.export()
    before = {"version": 1, "users": {"alice": {SCRAM_SHA_512.name: credential.to_json()}}}
    path.write_text(json.dumps(before, indent=2))
    assert ScramCredentialStore.in_data_dir(tmp_path).users() == ["alice"]
    store.save()
    path.write_bytes(path.read_bytes()[: path.read_bytes().rindex(b"}}")])
    with pytest.raises(ValueError):
        ScramCredentialStore.in_data_dir(tmp_path)


async def test_a_failed_write_changes_nothing(tmp_path: Path) -> None:
    """Two-phase: the data dir is gone, so the file cannot be written; the ACLs in force and
    those a restart would load stay as they were."""
    data = tmp_path / "data"
    data.mkdir()
    manager = AclManager(AclStore(data), AuthorizerSettings(), Changes())
    await manager.create([READ_ORDERS])
    before = manager.authorizer
    data.rename(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        await manager.create([DENY_PAY])
    assert manager.authorizer is before and len(before) == 1
    with pytest.raises(OSError):
        await manager.delete([AclBindingFilter()])
    assert manager.describe(AclBindingFilter()) == [READ_ORDERS]
    assert AclStore(tmp_path / "elsewhere").load() == [READ_ORDERS]


async def test_invalid_bindings_are_refused_one_by_one(tmp_path: Path) -> None:
    manager = AclManager(AclStore(tmp_path), AuthorizerSettings(), Changes())
    no_type = AclBinding(ResourcePattern(RT.ANY, "x", PatternType.LITERAL), READ_ORDERS.entry)
    bad_principal = AclBinding(
        READ_ORDERS.pattern, AccessControlEntry("alice", "*", Op.READ, Perm.ALLOW)
    )
    errors = await manager.create([no_type, READ_ORDERS, bad_principal])
    assert [e is None for e in errors] == [False, True, False]
    assert manager.describe(AclBindingFilter()) == [READ_ORDERS]


def test_authorizer_settings_use_kafkas_names() -> None:
    config = BrokerConfig.load(
        environ={},
        overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin; User:ops",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    assert parse_super_users(config.super_users) == {"User:admin", "User:ops"}
    assert config.allow_everyone_if_no_acl_found is True
    assert BrokerConfig.load(environ={}).allow_everyone_if_no_acl_found is False
    with pytest.raises(ValueError, match=r"authorizer\.class\.name"):
        BrokerConfig.load(environ={}, overrides={"authorizer.class.name": "kafka.Other"})


@pytest.mark.parametrize("kind", ["acls", "credentials"])
def test_files_of_access_rules_and_secrets_are_the_brokers_alone(tmp_path: Path, kind: str) -> None:
    """acls.json was created 0644 (issue 28): who may do what, readable by every local user.
    Both it and the SCRAM credentials are 0600 from their first byte (the tmp file too, even
    one a crash left behind 0666), whatever the umask."""
    name = "acls.json" if kind == "acls" else "scram-credentials.json"
    stale = tmp_path / f"{name}.tmp"
    stale.write_bytes(b"half")
    stale.chmod(0o666)
    umask = os.umask(0)
    try:
        if kind == "acls":
            AclStore(tmp_path).save([READ_ORDERS])
        else:
            store = ScramCredentialStore.in_data_dir(tmp_path)
            store.upsert("a", SCRAM_SHA_512.name, ScramCredential.from_password(SCRAM_SHA_512, "p"))
            store.save()
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
