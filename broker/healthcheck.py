"""`python -m broker.healthcheck [HOST] [PORT]`: exit 0 if the broker answers ApiVersions.

A real round trip on the Kafka port, not a process check: the container's HEALTHCHECK and
anyone's script can use it. Synchronous and dependency-free beyond `protocol` and the listener
parser. Without arguments it checks the first plain listener of `SHOAL_LISTENERS` (what the
container's broker reads too), so changing the listeners does not break the health check.

With `shoal serve --processes N` every node is checked: the one asked lists the N nodes in its
Metadata, and node i listens on the checked listener's port + i (the supervisor's rule), on the
same host: their advertised addresses may be names only clients outside resolve.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from broker.listeners import PLAINTEXT
from broker.listeners import SASL_PLAINTEXT
from broker.listeners import parse_listeners
from broker.listeners import parse_protocol_map
from protocol.framing import SIZE
from protocol.framing import frame
from protocol.messages import decode_response
from protocol.messages import encode_request


def check(host: str, port: int, timeout_s: float = 3.0) -> str | None:
    """None when every node answers ApiVersions, else what went wrong."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            problem = _api_versions(sock)
            if problem is not None:
                return problem
            ports = _node_ports(sock, port)
    except (OSError, ValueError) as e:
        return f"{host}:{port}: {e}"
    for other in ports:
        try:
            with socket.create_connection((host, other), timeout=timeout_s) as sock:
                problem = _api_versions(sock)
        except (OSError, ValueError) as e:
            problem = f"{e}"
        if problem is not None:
            return f"{host}:{other} (another node of this broker): {problem}"
    return None


def _api_versions(sock: socket.socket) -> str | None:
    request = ApiVersionsRequest(
        client_software_name="shoal-healthcheck", client_software_version="1"
    )
    response = _round_trip(sock, request, 18, 3)
    code = getattr(response, "error_code", ErrorCode.unknown_server_error)
    return None if code == ErrorCode.none else f"ApiVersions answered {ErrorCode(code).name}"


def _node_ports(sock: socket.socket, port: int) -> list[int]:
    """The ports of the other nodes of `--processes N` on this listener: port + (i - asked),
    the asked node found by its advertised port (node 0 when advertised elsewhere)."""
    request = MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    brokers = getattr(_round_trip(sock, request, 3, 12), "brokers", ())
    ids = sorted(int(b.node_id) for b in brokers)
    asked = next((int(b.node_id) for b in brokers if int(b.port) == port), 0)
    return [port + i - asked for i in ids if i != asked]


def _round_trip(sock: socket.socket, request: Any, api_key: int, version: int) -> object:
    sock.sendall(frame(encode_request(request, 1, "shoal-healthcheck")))
    size = SIZE.unpack(_read(sock, 4))[0]
    return decode_response(api_key, version, _read(sock, size))[1]


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed before the response was complete")
        data += chunk
    return data


def target(environ: Mapping[str, str]) -> tuple[str, int]:
    """The first listener without TLS (ApiVersions needs no login), from the environment's
    SHOAL_LISTENERS; a wildcard host is checked on loopback. Kafka's default port otherwise."""
    listeners = parse_listeners(
        environ.get("SHOAL_LISTENERS", "PLAINTEXT://127.0.0.1:9092"),
        parse_protocol_map(environ.get("SHOAL_LISTENER_SECURITY_PROTOCOL_MAP", "")),
    )
    plain = [lst for lst in listeners if lst.security_protocol in (PLAINTEXT, SASL_PLAINTEXT)]
    if not plain:
        return "127.0.0.1", 9092
    host = plain[0].host
    return ("127.0.0.1" if host in ("", "0.0.0.0", "::") else host), plain[0].port


def main(argv: list[str]) -> int:
    try:
        host, port = target(os.environ)
    except ValueError as e:
        print(f"unhealthy: SHOAL_LISTENERS: {e}", file=sys.stderr)
        return 1
    if argv:
        host = argv[0]
        port = int(argv[1]) if len(argv) > 1 else 9092
    problem = check(host, port)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    print("healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
