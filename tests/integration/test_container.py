"""What the container image runs, exercised here (no Docker engine on this machine).

The Dockerfile is a thin shell: its CMD is `shoal serve ...` and its HEALTHCHECK is
`python -m broker.healthcheck`. Both command lines are read from the Dockerfile itself.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from cli.main import parser
from client.admin import Admin
from client.errors import KafkaError
from client.security import Security
from tests.brokers import BrokerProcess
from tests.brokers import free_port
from tests.tls_files import make_tls_files

pytestmark = pytest.mark.integration
DOCKERFILE = Path(__file__).parents[2] / "docker" / "Dockerfile"


def _instruction(name: str) -> list[str]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    match = re.search(rf"^{name}\s.*?(\[.*\])\s*$", text, re.MULTILINE)
    assert match, name
    return list(json.loads(match.group(1)))


def test_the_images_command_line_is_one_the_cli_accepts() -> None:
    cmd = _instruction("CMD")
    assert cmd[0].endswith("shoal")
    args = parser().parse_args(cmd[1:])
    assert (args.command, args.host, args.port, str(args.data_dir), args.metrics_port) == (
        "serve", "0.0.0.0", 9092, "/data", 9308,
    )  # fmt: skip


def test_the_healthcheck_passes_on_a_live_broker_and_fails_on_a_dead_port(
    broker_process: BrokerProcess,
) -> None:
    check = _instruction("HEALTHCHECK.*CMD")
    assert check[1:3] == ["-m", "broker.healthcheck"]
    live = [sys.executable, "-m", "broker.healthcheck", "127.0.0.1", str(broker_process.port)]
    assert subprocess.run(live, capture_output=True, timeout=20).returncode == 0
    dead = [sys.executable, "-m", "broker.healthcheck", "127.0.0.1", str(free_port())]
    result = subprocess.run(dead, capture_output=True, text=True, timeout=20)
    assert result.returncode == 1 and "unhealthy" in result.stderr


SASL_SSL_COMPOSE = DOCKERFILE.parent / "compose.sasl-ssl.yaml"


def test_the_compose_sasl_ssl_set_up_serves_scram_over_tls_with_acls(tmp_path: Path) -> None:
    """The override's environment and command, run as they are (certificates and ports
    swapped for the test's): a SCRAM-SHA-512 client gets in over TLS, on the advertised name;
    admin, the super user, may create a topic, and alice, without ACLs, may not."""
    text = SASL_SSL_COMPOSE.read_text()
    env = dict(re.findall(r'^\s+(SHOAL_[A-Z_]+): "([^"]*)"$', text, re.MULTILINE))
    match = re.search(r"command: (\[.*?\])", text, re.DOTALL)
    assert match is not None
    command = json.loads(match.group(1))
    tls = make_tls_files(tmp_path / "secure")
    plain, sasl = free_port(), free_port()
    env = {
        k: v.replace("/etc/shoal/secure/server.pem", str(tls.keystore))
        .replace("/etc/shoal/secure/ca.pem", str(tls.ca))
        .replace("9093", str(sasl))
        for k, v in env.items()
    }
    data = tmp_path / "data"
    for user in ("admin", "alice"):
        add = [sys.executable, "-m", "cli", "users", "add", user, "--password", "pw",
               "--data-dir", str(data)]  # fmt: skip
        subprocess.run(add, check=True, capture_output=True, timeout=60)
    args = parser().parse_args(command[1:])
    assert (args.host, args.port) == ("127.0.0.1", 9092)
    broker = BrokerProcess(data, port=plain, env=env)

    async def create_topic_as(user: str, topic: str) -> ErrorCode:
        security = Security(protocol="SASL_SSL", username=user, password="pw",
                            ca_file=str(tls.ca))  # fmt: skip
        async with Admin(f"localhost:{sasl}", security=security) as admin:
            try:
                await admin.create_topic(topic)
            except KafkaError as e:
                return e.error_code
        return ErrorCode.none

    with broker:
        assert asyncio.run(create_topic_as("admin", "by-admin")) == ErrorCode.none
        refused = asyncio.run(create_topic_as("alice", "by-alice"))
    assert refused == ErrorCode.topic_authorization_failed
