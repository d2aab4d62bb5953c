"""Topic metadata: names, ids, partition counts and configs, one JSON file per topic."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from storage.errors import InvalidTopic
from storage.fsutil import atomic_write

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


def validate_topic_name(name: str) -> None:
    """Kafka's rules (org.apache.kafka.common.internals.Topic.validate)."""
    if not name:
        raise InvalidTopic("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopic(f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopic(f"topic name longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopic(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


def collision_key(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses topics differing only there."""
    return name.replace(".", "_")


def topic_file(directory: Path, info: TopicInfo) -> Path:
    # Named by id: a 249-character topic name plus a suffix would pass NAME_MAX (255).
    return directory / f"{info.topic_id}.json"


def save_topic(directory: Path, info: TopicInfo) -> None:
    doc = {
        "version": 1,
        "name": info.name,
        "topic_id": str(info.topic_id),
        "partitions": info.partitions,
        "configs": dict(info.configs),
    }
    atomic_write(topic_file(directory, info), json.dumps(doc, indent=1).encode())


def load_topics(directory: Path) -> list[TopicInfo]:
    topics = []
    for path in sorted(directory.glob("*.json")):
        doc = json.loads(path.read_bytes())
        topics.append(
            TopicInfo(
                name=str(doc["name"]),
                topic_id=uuid.UUID(doc["topic_id"]),
                partitions=int(doc["partitions"]),
                configs={str(k): str(v) for k, v in doc["configs"].items()},
            )
        )
    return topics
