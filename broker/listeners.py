"""Listeners as Kafka names them: `NAME://host:port`, each with a security protocol.

A listener's name is its security protocol unless `listener.security.protocol.map` maps a
custom name (`INTERNAL:SASL_SSL`). `advertised.listeners` is matched to listeners by name; a
listener with no advertised entry advertises its own address.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    security_protocol: str
    host: str  # "0.0.0.0" for all interfaces
    port: int

    @property
    def tls(self) -> bool:
        return self.security_protocol in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self.security_protocol in (SASL_PLAINTEXT, SASL_SSL)


def parse_protocol_map(text: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...` over Kafka's default (each protocol maps to itself).

    :raises ValueError: an entry without a colon, or an unknown security protocol.
    """
    mapping = {p: p for p in SECURITY_PROTOCOLS}
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ValueError(f"listener.security.protocol.map: bad entry {item!r}")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def parse_address(listener: str) -> tuple[str, int]:
    """`NAME://host:port` -> (host, port); an empty host means all interfaces."""
    _, _, address = listener.strip().rpartition("://")
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"listener {listener!r} has no port (0 to 65535)")
    return host.strip("[]") or "0.0.0.0", int(port)


def parse_listeners(text: str, protocol_map: dict[str, str]) -> list[Listener]:
    """:raises ValueError: no listener, a bad address, an unmapped or repeated name."""
    listeners: list[Listener] = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, sep, _ = item.partition("://")
        name = name.strip().upper() if sep else PLAINTEXT
        if name not in protocol_map:
            raise ValueError(f"listener {item!r}: {name} is not in listener.security.protocol.map")
        if any(other.name == name for other in listeners):
            raise ValueError(f"listeners: {name} is named twice")
        host, port = parse_address(item)
        listeners.append(Listener(name, protocol_map[name], host, port))
    if not listeners:
        raise ValueError("listeners is empty")
    return listeners


def moved(text: str, by: int) -> str:
    """`listeners` or `advertised.listeners` text with every port moved by `by` (names, hosts
    and order kept): node `by` of `shoal serve --processes N` (docs/multicore.md).

    :raises ValueError: a bad address (as `parse_address`).
    """
    items = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        _, port = parse_address(item)
        head, _, _ = item.rpartition(":")
        items.append(f"{head}:{port + by}")
    return ",".join(items)


def inter_node_listener(listeners: list[Listener], name: str) -> Listener:
    """The listener the processes of `--processes N` reach each other on: `name`
    (inter.broker.listener.name) when set, else the one named PLAINTEXT, Kafka's default
    (`KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol`: the listener named by
    security.inter.broker.protocol, itself PLAINTEXT by default), else the first.

    :raises ValueError: `name` names no listener (Kafka refuses it too).
    """
    wanted = name.strip().upper()
    if wanted:
        found = next((lst for lst in listeners if lst.name == wanted), None)
        if found is None:
            names = ",".join(lst.name for lst in listeners)
            raise ValueError(
                f"inter.broker.listener.name={name} is not one of the listeners ({names})"
            )
        return found
    return next((lst for lst in listeners if lst.name == PLAINTEXT), listeners[0])


def advertised_endpoint(
    listener: Listener, bound_port: int, advertised: list[Listener]
) -> tuple[str, int]:
    """What Metadata tells a client of `listener`: its advertised entry, or its own address
    (the port it really bound, and this host's name for a wildcard)."""
    entry = next((a for a in advertised if a.name == listener.name), None)
    host, port = (entry.host, entry.port) if entry else (listener.host, bound_port)
    if host in ("0.0.0.0", "::"):
        host = socket.getfqdn()
    return host, port
