"""`shoal serve --processes N`: what each node is started with, and what the supervisor refuses.

Node i listens on every listener's port + i and advertises every advertised port + i, as a
Kafka cluster whose brokers each advertise their own port; the processes reach each other on
the inter-broker listener (Kafka's `inter.broker.listener.name`, by default the listener named
PLAINTEXT: `KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.listeners import moved
from broker.main import _load
from broker.main import parser
from broker.supervisor import ADVERTISED_ENV
from broker.supervisor import LISTENERS_ENV
from broker.supervisor import check
from broker.supervisor import child_commands
from broker.supervisor import supervise

TWO = {
    "listeners": "EXTERNAL://0.0.0.0:9094,INTERNAL://127.0.0.1:9092",
    "listener.security.protocol.map": "EXTERNAL:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
    "advertised.listeners": "EXTERNAL://broker.example:19094",
    "inter.broker.listener.name": "INTERNAL",
}


def _config(**values: object) -> BrokerConfig:
    return BrokerConfig.load(environ={}, overrides={"metrics.port": -1, **values})


def test_moved_moves_every_port_and_keeps_names_hosts_and_order() -> None:
    text = "PLAINTEXT://127.0.0.1:9092, SASL_SSL://[::1]:9192,INTERNAL://:9292"
    assert moved(text, 3) == "PLAINTEXT://127.0.0.1:9095,SASL_SSL://[::1]:9195,INTERNAL://:9295"
    assert moved(text, 0) == text.replace(" ", "")


def test_each_node_gets_every_listener_and_advertised_listener_moved_by_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child, loading its config as `python -m broker` does (file, its environment, its
    command line), listens on each listener at port + id and advertises each port + id."""
    props = tmp_path / "broker.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in TWO.items()))
    args = parser().parse_args(["--config", str(props), "--data-dir", str(tmp_path / "d")])
    config = _load(args)
    nodes = child_commands(args, config, 3)
    assert [n.node_id for n in nodes] == [0, 1, 2]
    for node in nodes:
        assert "--port" not in node.argv and "--host" not in node.argv
        i = node.node_id
        for name, value in node.env.items():
            monkeypatch.setenv(name, value)
        child = _load(parser().parse_args(node.argv[node.argv.index("-m") + 2 :]))
        assert (child.node_id, child.processes) == (i, 3)
        assert [(x.name, x.security_protocol, x.host, x.port) for x in child.listener_list] == [
            ("EXTERNAL", "SASL_PLAINTEXT", "0.0.0.0", 9094 + i),
            ("INTERNAL", "PLAINTEXT", "127.0.0.1", 9092 + i),
        ]
        assert [(x.name, x.host, x.port) for x in child.advertised_list] == [
            ("EXTERNAL", "broker.example", 19094 + i)
        ]
        assert child.inter_node_listener.port == 9092 + i


def test_the_command_line_port_is_moved_with_the_rest(tmp_path: Path) -> None:
    """`--host/--port` given to the supervisor move its first listener; each node gets that
    listener at the port + its id, with no advertised listeners when none are set."""
    args = parser().parse_args(
        ["--host", "0.0.0.0", "--port", "9192", "--data-dir", str(tmp_path / "d")]
    )
    nodes = child_commands(args, _load(args), 2)
    assert [n.env for n in nodes] == [
        {LISTENERS_ENV: "PLAINTEXT://0.0.0.0:9192"},
        {LISTENERS_ENV: "PLAINTEXT://0.0.0.0:9193"},
    ]
    assert ADVERTISED_ENV not in nodes[0].env


def test_two_listeners_and_advertised_listeners_are_served() -> None:
    assert check(_config(**TWO), 2) is None
    # Without inter.broker.listener.name: the listener named PLAINTEXT, as Kafka's default.
    plain_second = "SASL_PLAINTEXT://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092"
    config = _config(listeners=plain_second)
    assert check(config, 2) is None
    assert config.inter_node_listener.name == "PLAINTEXT"
    # An IPv4 and an IPv6 listener may share ports (KIP-797), so their ranges may overlap.
    dual = "PLAINTEXT://0.0.0.0:9092,V6://[::]:9092"
    assert (
        check(_config(listeners=dual, **{"listener.security.protocol.map": "V6:PLAINTEXT"}), 2)
        is None
    )
    # None named PLAINTEXT: the first (the one listener of before), here a SASL_PLAINTEXT one
    # with SCRAM, on which the processes log in as their own user (broker.node_identity).
    config = _config(**{**TWO, "inter.broker.listener.name": ""})
    assert config.inter_node_listener.name == "EXTERNAL"
    assert check(config, 2) is None
    # An authorizer with N > 1: the ACLs are forwarded to node 0 and followed.
    authorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert check(_config(**TWO, **{"authorizer.class.name": authorizer}), 2) is None


@pytest.mark.parametrize(
    ("values", "processes", "reason"),
    [
        ({"listeners": "PLAINTEXT://127.0.0.1:0"}, 2, "listener PLAINTEXT has port 0"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:0"},
            2,
            "listener SASL_PLAINTEXT has port 0",
        ),
        ({"listeners": "PLAINTEXT://127.0.0.1:65535"}, 2, "65535 + 1 is above 65535"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094"},
            3,
            "listeners PLAINTEXT (9092-9094) and SASL_PLAINTEXT (9094-9096) overlap",
        ),
        (
            {"advertised.listeners": "PLAINTEXT://localhost:0"},
            2,
            "advertised listener PLAINTEXT: node i advertises its port + i",
        ),
        (
            {
                **TWO,
                "listener.security.protocol.map": "EXTERNAL:SASL_SSL,INTERNAL:PLAINTEXT",
                "inter.broker.listener.name": "",
                "ssl.keystore.location": "/etc/shoal/broker.pem",  # missing: tried here
            },
            2,
            "over TLS on listener EXTERNAL (inter.broker.listener.name) with its ssl.* settings,"
            " which do not load",
        ),
        (
            {**TWO, "inter.broker.listener.name": "REPLICATION"},
            2,
            "inter.broker.listener.name=REPLICATION is not one of the listeners",
        ),
    ],
)
def test_what_n_processes_cannot_serve_is_refused_with_the_reason(
    values: dict[str, object], processes: int, reason: str
) -> None:
    refused = check(_config(**values), processes)
    assert refused is not None and reason in refused


def test_the_supervisor_refuses_at_start_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit code 2 and the reason on stderr; no process started, no data dir made."""
    props = tmp_path / "broker.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093\n")
    data = tmp_path / "data"
    args = parser().parse_args(
        ["--processes", "2", "--config", str(props), "--data-dir", str(data)]
    )
    assert supervise(args, _load(args), 2) == 2
    err = capsys.readouterr().err
    assert "bad configuration" in err and "overlap" in err and "at least 2 apart" in err
    assert not data.exists()  # refused before the data dir, its lock or any process
