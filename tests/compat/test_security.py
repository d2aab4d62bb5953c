"""confluent-kafka's Producer, ShareConsumer and AdminClient over every secured listener.

One `shoal serve` process listens on PLAINTEXT, SSL (mutual TLS), SASL_PLAINTEXT and SASL_SSL
at once, with certificates made at test time and SCRAM credentials written by `shoal users
add` (offline, before the broker starts). Each client reaches the broker only through the
listener it was given, so Metadata must answer with that listener's address.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import NewTopic
from confluent_kafka.admin import ScramCredentialInfo
from confluent_kafka.admin import ScramMechanism
from confluent_kafka.admin import UserScramCredentialUpsertion

from bench.broker import free_port
from cli.main import main as shoal
from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import poll_records
from tests.compat.support import start_broker
from tests.tls_files import CLIENT_SUBJECT
from tests.tls_files import TlsFiles
from tests.tls_files import make_tls_files

pytestmark = [pytest.mark.compat, pytest.mark.slow]

PASSWORD = "alice-secret"
N = 20


@dataclass(frozen=True, slots=True)
class Secured:
    broker: BrokerProcess
    tls: TlsFiles
    ports: dict[str, int]  # listener name -> port

    def client(self, listener: str, **extra: object) -> dict[str, object]:
        """Client settings (librdkafka's names) for a listener: alice's credentials by default."""
        config: dict[str, object] = {
            "bootstrap.servers": f"127.0.0.1:{self.ports[listener]}",
            "security.protocol": listener,
            **QUIET,
        }
        if "SSL" in listener:
            config["ssl.ca.location"] = str(self.tls.ca)
        if "SASL" in listener:
            config.update({"sasl.username": "alice", "sasl.password": PASSWORD})
        config.update(extra)
        return config


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("secured")
    tls = make_tls_files(base / "tls")
    data_dir = base / "data"
    for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        code = shoal(
            ["users", "add", "alice", "--password", PASSWORD, "--mechanism", mechanism,
             "--data-dir", str(data_dir)]
        )  # fmt: skip
        assert code == 0
    ports = {p: free_port() for p in ("SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    config: dict[str, object] = {
        # `--host/--port` of the launcher move the first listener (PLAINTEXT).
        "listeners": ",".join(
            ["PLAINTEXT://127.0.0.1:0"] + [f"{n}://127.0.0.1:{p}" for n, p in ports.items()]
        ),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": tls.keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": tls.ca,
        "ssl.client.auth": "requested",
        "group.share.auto.offset.reset": "earliest",
    }
    broker = start_broker(data_dir, config)
    ports["PLAINTEXT"] = broker.port
    yield Secured(broker, tls, ports)
    broker.stop()


def _roundtrip(config: dict[str, object], topic: str) -> None:
    """Create a topic, produce N records and share-consume them all, over one listener."""
    admin = AdminClient(config)
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    assert topic in admin.list_topics(timeout=30).topics
    producer = Producer(config)
    for i in range(N):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = ShareConsumer({**config, "group.id": f"g-{topic}"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < N and time.monotonic() < deadline:
        got.extend(m.value() for m in poll_records(consumer, 0.5))
    consumer.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(N))


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_SSL", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "PLAIN"),
    ],
)
def test_clients_over_sasl(secured: Secured, listener: str, mechanism: str) -> None:
    topic = f"{listener}-{mechanism}".lower()
    _roundtrip(secured.client(listener, **{"sasl.mechanism": mechanism}), topic)
    assert f'"principal": "User:alice", "mechanism": "{mechanism}"' in secured.broker.log()


def test_clients_over_mutual_tls(secured: Secured) -> None:
    config = secured.client(
        "SSL",
        **{
            "ssl.certificate.location": str(secured.tls.client_cert),
            "ssl.key.location": str(secured.tls.client_key),
        },
    )
    _roundtrip(config, "mutual-tls")
    assert f'"principal": "User:{CLIENT_SUBJECT}"' in secured.broker.log()


def _refused(config: dict[str, object]) -> list[KafkaError]:
    """The client cannot even list topics; the errors its error callback was given."""
    errors: list[KafkaError] = []
    client = AdminClient({**config, "error_cb": errors.append})
    with pytest.raises(KafkaException):
        client.list_topics(timeout=5)
    client.poll(1)  # serves the error callback
    return errors


@pytest.mark.parametrize(
    ("user", "password"), [("alice", "not-her-password"), ("mallory", PASSWORD)]
)
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_bad_credentials_are_refused(
    secured: Secured, user: str, password: str, mechanism: str
) -> None:
    config = secured.client(
        "SASL_SSL",
        **{"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password},
    )
    errors = _refused(config)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    log = secured.broker.log()
    assert '"event": "authentication failed"' in log
    assert password not in log


def test_plaintext_client_on_tls_port_is_refused(secured: Secured) -> None:
    config = secured.client("PLAINTEXT")
    config["bootstrap.servers"] = f"127.0.0.1:{secured.ports['SSL']}"
    _refused(config)


def test_unauthenticated_requests_on_sasl_port_are_refused(secured: Secured) -> None:
    """A client that skips SASL on a SASL listener gets its connection closed."""
    config = secured.client("PLAINTEXT")
    config["bootstrap.servers"] = f"127.0.0.1:{secured.ports['SASL_PLAINTEXT']}"
    _refused(config)
    assert "before SASL authentication completed" in secured.broker.log()


def test_admin_manages_scram_users_online(secured: Secured) -> None:
    """AlterUserScramCredentials / DescribeUserScramCredentials, and the new user logs in."""
    admin = AdminClient(secured.client("SASL_SSL", **{"sasl.mechanism": "SCRAM-SHA-512"}))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion("bob", info, b"bob-secret")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(30)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_256, 4096)]
    bob = secured.client(
        "SASL_SSL",
        **{
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "bob",
            "sasl.password": "bob-secret",
        },
    )
    AdminClient(bob).list_topics(timeout=30)


def test_group_configs_over_sasl(secured: Secured) -> None:
    """IncrementalAlterConfigs on a group resource works for an authenticated admin."""
    admin = AdminClient(secured.client("SASL_SSL", **{"sasl.mechanism": "SCRAM-SHA-512"}))
    resource = ConfigResource(
        "group",
        "g-secured",
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


@pytest.mark.skipif(
    shutil.which("kcat") is None, reason="kcat is not installed (apt-get install kcat)"
)
def test_kcat_over_sasl_ssl(secured: Secured) -> None:
    """kcat (librdkafka built by Debian) as a second, independent client."""
    common = [
        "kcat", "-b", f"127.0.0.1:{secured.ports['SASL_SSL']}",
        "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
        "-X", "sasl.username=alice", "-X", f"sasl.password={PASSWORD}",
        "-X", f"ssl.ca.location={secured.tls.ca}",
    ]  # fmt: skip
    lines = "".join(f"kcat-{i}\n" for i in range(5))
    subprocess.run([*common, "-P", "-t", "kcat"], input=lines.encode(), check=True, timeout=60)
    out = subprocess.run(
        [*common, "-C", "-t", "kcat", "-o", "beginning", "-e", "-J"],
        check=True,
        timeout=60,
        capture_output=True,
    )
    values = [json.loads(line)["payload"] for line in out.stdout.decode().splitlines()]
    assert values == [f"kcat-{i}" for i in range(5)]


def _shoal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=60
    )


def test_shoal_users_online_with_a_command_config(secured: Secured, tmp_path: Path) -> None:
    """`shoal users` against the running broker over SASL_SSL, settings as Kafka's tools read
    them (a Java client's sasl.jaas.config and a PEM truststore)."""
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{PASSWORD}";\n'
        f"ssl.truststore.location={secured.tls.ca}\n"
    )
    target = ["--bootstrap-server", f"127.0.0.1:{secured.ports['SASL_SSL']}",
              "--command-config", str(props)]  # fmt: skip
    added = _shoal("users", "add", "carol", "--password", "carol-pw", *target)
    assert added.returncode == 0, added.stderr
    described = _shoal("users", "describe", "carol", "--json", *target)
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout) == {"carol": {"SCRAM-SHA-512": 4096}}
    carol = {
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "carol",
        "sasl.password": "carol-pw",
    }
    AdminClient(secured.client("SASL_SSL", **carol)).list_topics(timeout=30)

    # Every tool takes the same settings (here topics, over the same listener).
    created = _shoal("topics", "create", "--topic", "via-cli", *target)
    assert created.returncode == 0, created.stderr
    listed = _shoal("topics", "list", *target)
    assert "via-cli" in listed.stdout.split()

    props.write_text(props.read_text().replace(PASSWORD, "wrong"))
    refused = _shoal("users", "describe", *target)
    assert refused.returncode == 1
    assert "SASL_AUTHENTICATION_FAILED" in refused.stderr


def test_dlq_redrive_with_a_command_config(secured: Secured, tmp_path: Path) -> None:
    """`shoal dlq redrive` reads the same --command-config (Kafka's names) and hands it to
    librdkafka in librdkafka's names: a letter goes back over SASL_SSL."""
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{PASSWORD}";\n'
        f"ssl.truststore.location={secured.tls.ca}\n"
    )
    config = secured.client("SASL_SSL", **{"sasl.mechanism": "SCRAM-SHA-512"})
    client = AdminClient(config)
    for f in client.create_topics(
        [NewTopic("redrive-sec", 1, 1), NewTopic("dlq.sec", 1, 1)]
    ).values():
        f.result(30)
    p = Producer(config)
    p.produce("dlq.sec", key=b"k", value=b"v", headers=[("__dlq.errors.topic", b"redrive-sec")])
    assert p.flush(30) == 0
    target = ["--bootstrap-server", f"127.0.0.1:{secured.ports['SASL_SSL']}",
              "--command-config", str(props)]  # fmt: skip
    done = _shoal("dlq", "redrive", "--dlq-topic", "dlq.sec", "--json", *target)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["topics"][0]["redriven"] == 1

    props.write_text(props.read_text().replace(PASSWORD, "wrong"))
    refused = _shoal("dlq", "redrive", "--dlq-topic", "dlq.sec", "--command-timeout", "10", *target)
    assert refused.returncode == 1  # as every shoal tool: refused, not unreachable (3)
    assert "SASL_AUTHENTICATION_FAILED" in refused.stderr
