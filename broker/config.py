"""Broker configuration under Kafka's own names.

Sources, later ones winning: built-in defaults (sized for a laptop), a Java-style properties file,
environment variables (`SHOAL_LOG_DIRS` sets `log.dirs`: upper case, dots as underscores), and
the command line.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from coordinator.group_configs import BROKER_DEFAULTS

# name -> (default, type). Only names Shoal reads are listed; unknown names are kept and ignored.
DEFAULTS: dict[str, tuple[Any, type]] = {
    "node.id": (1, int),
    "listeners": ("PLAINTEXT://127.0.0.1:9092", str),
    "advertised.listeners": ("", str),
    "log.dirs": ("./data", str),
    "socket.request.max.bytes": (100 * 1024 * 1024, int),
    "queued.max.requests": (500, int),
    "auto.create.topics.enable": (True, bool),
    "num.partitions": (1, int),
    # Partition limits, checked before anything is created: the broker's total (KIP-578's
    # name) and what one CreateTopics or CreatePartitions request may add (Shoal's).
    "max.broker.partitions": (50_000, int),
    "max.partitions.per.request": (10_000, int),
    "log.segment.bytes": (1024**3, int),
    "log.roll.ms": (7 * 24 * 3600 * 1000, int),
    "log.retention.ms": (7 * 24 * 3600 * 1000, int),
    "log.retention.bytes": (-1, int),
    "log.retention.check.interval.ms": (300_000, int),
    "log.index.interval.bytes": (4096, int),
    "log.flush.interval.messages": (2**63 - 1, int),
    "log.flush.interval.ms": (1000, int),
    "metrics.port": (9308, int),
    "shutdown.timeout.ms": (5000, int),
    "group.share.max.share.sessions": (2000, int),
    # Kafka's name; empty means no persister (share state is not durable; for benchmarks).
    "group.share.persister.class.name": ("SHARE_CHECKPOINT", str),
    # Deltas after which the share-partition leader writes a new SHARE_CHECKPOINT.
    "share.coordinator.snapshot.update.records.per.snapshot": (100, int),
    **BROKER_DEFAULTS,
}


def parse_properties(text: str) -> dict[str, str]:
    """The subset of Java's properties syntax that Kafka's config files use."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            props[line] = ""
            continue
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


def env_overrides(environ: Mapping[str, str], names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        key = "SHOAL_" + name.upper().replace(".", "_")
        if key in environ:
            out[name] = environ[key]
    return out


def _coerce(name: str, value: Any, kind: type) -> Any:
    if kind is bool and isinstance(value, str):
        if value.lower() not in ("true", "false"):
            raise ValueError(f"{name}: expected true or false, got {value!r}")
        return value.lower() == "true"
    try:
        return kind(value)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


@dataclass(frozen=True)
class BrokerConfig:
    values: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        *,
        file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> BrokerConfig:
        """:raises ValueError: a value does not parse as its type."""
        raw: dict[str, Any] = {}
        if file is not None:
            raw.update(parse_properties(file.read_text()))
        known = list(DEFAULTS) + [n for n in raw if n not in DEFAULTS]
        raw.update(env_overrides(os.environ if environ is None else environ, known))
        raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
        values = {name: default for name, (default, _) in DEFAULTS.items()}
        for name, value in raw.items():
            kind = DEFAULTS[name][1] if name in DEFAULTS else str
            values[name] = _coerce(name, value, kind)
        return cls(values)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    @property
    def listener(self) -> tuple[str, int]:
        """Host and port of the first listener."""
        return parse_listener(self["listeners"].split(",")[0])

    @property
    def advertised(self) -> tuple[str, int]:
        """What Metadata tells clients; a wildcard listener advertises this host's name."""
        adv = self["advertised.listeners"]
        host, port = parse_listener(adv.split(",")[0]) if adv else self.listener
        if host in ("0.0.0.0", "::"):
            host = socket.getfqdn()
        return host, port

    @property
    def data_dir(self) -> Path:
        return Path(self["log.dirs"].split(",")[0])


def parse_listener(listener: str) -> tuple[str, int]:
    """`PLAINTEXT://host:port` -> (host, port); an empty host means all interfaces."""
    _, _, address = listener.strip().rpartition("://")
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"listener {listener!r} has no port")
    return host.strip("[]") or "0.0.0.0", int(port)
