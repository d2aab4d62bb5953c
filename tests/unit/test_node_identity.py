"""How the processes of `shoal serve --processes N` log in to one another, and the supervisor
that now lets them run with an authorizer (docs/multicore.md)."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from broker.node_identity import NODE_USER
from broker.node_identity import SECRET_ENV
from broker.node_identity import node_secret
from broker.node_identity import node_security
from broker.node_identity import reserve
from broker.supervisor import NodeCommand
from broker.supervisor import Supervisor
from broker.supervisor import check
from storage.scram_credentials import SCRAM_SHA_256
from storage.scram_credentials import SCRAM_SHA_512
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore


def _config(**values: object) -> BrokerConfig:
    return BrokerConfig.load(environ={}, overrides={"listeners": "PLAINTEXT://127.0.0.1:9092",
                                                    **values})  # fmt: skip


def test_n_processes_may_run_with_an_authorizer() -> None:
    authorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert check(_config(**{"authorizer.class.name": authorizer}), 2) is None
    assert check(_config(listeners="PLAINTEXT://127.0.0.1:0"), 2) is not None  # the others stay


def test_every_child_gets_the_same_secret_in_its_environment_not_its_command_line() -> None:
    nodes = [NodeCommand(0, ["broker", "0"], {}), NodeCommand(1, ["broker", "1"], {})]
    supervisor = Supervisor(nodes, 1.0)
    secrets = {child.env[SECRET_ENV] for child in supervisor.children}
    assert len(secrets) == 1 and len(secrets.pop()) >= 32
    assert all(SECRET_ENV not in " ".join(child.command) for child in supervisor.children)
    assert Supervisor(nodes[:1], 1.0).children[0].env[SECRET_ENV] not in {
        child.env[SECRET_ENV] for child in supervisor.children
    }  # one per run


def test_the_secret_is_read_only_by_one_of_n_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "s3cret")
    assert node_secret(_config()) is None  # N = 1: nothing changes
    assert node_secret(_config(processes=2, **{"node.id": 1})) == "s3cret"


def test_the_processes_log_in_by_their_secret_whatever_user_is_stored(tmp_path: object) -> None:
    store = ScramCredentialStore.in_data_dir(tmp_path)  # type: ignore[arg-type]
    stored = ScramCredential.from_password(SCRAM_SHA_512, "chosen-by-an-admin")
    store.upsert(NODE_USER, SCRAM_SHA_512.name, stored)
    reserve(store, "s3cret")
    for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        credential = store.login(NODE_USER, mechanism.name)
        assert credential is not None and credential.matches_password(mechanism, "s3cret")
    assert store.login(NODE_USER, SCRAM_SHA_512.name) != stored
    assert store.get(NODE_USER, SCRAM_SHA_512.name) == stored  # files and answers: the stored
    assert b"s3cret" not in store.snapshot()
    assert store.copy().login(NODE_USER, SCRAM_SHA_512.name) == stored  # plans never see it


@pytest.mark.parametrize(
    ("mechanisms", "expected"),
    [("SCRAM-SHA-256,SCRAM-SHA-512", "SCRAM-SHA-512"), ("SCRAM-SHA-256", "SCRAM-SHA-256"),
     ("PLAIN", "PLAIN")],
)  # fmt: skip
def test_the_processes_log_in_by_a_mechanism_the_listener_enables(
    mechanisms: str, expected: str
) -> None:
    config = _config(listeners="SASL_PLAINTEXT://127.0.0.1:9092",
                     **{"sasl.enabled.mechanisms": mechanisms})  # fmt: skip
    security = node_security(config, "s3cret")
    assert security is not None
    assert (security.mechanism, security.username, security.password) == (
        expected,
        NODE_USER,
        "s3cret",
    )
    assert node_security(config, None) is None
    assert node_security(_config(), "s3cret") is None  # PLAINTEXT: ANONYMOUS, as Kafka
