"""Topic metadata: names, ids, partition counts and configs, one JSON file per topic.

Each partition directory also carries its topic's identity in `partition.metadata`, in
Kafka's format, so that the partition directories alone are enough to rebuild every topic
(name from the directory, id from the file, partition count from the directories found).
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from storage.errors import InvalidTopic
from storage.fsutil import atomic_write

MAX_NAME_LENGTH = 249
# Logs the broker keeps for itself in the data dir, beside the topics' partitions: no user
# topic may take (or collide with) their names, so they never show up as topics.
CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
INTERNAL_LOGS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})
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
    if collision_key(name) in {collision_key(n) for n in INTERNAL_LOGS}:
        raise InvalidTopic(f"topic name {name!r} is reserved for the broker's internal use")


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


@dataclass(frozen=True, slots=True)
class UnreadableTopicFile:
    """A topic metadata file that does not parse (garbled bytes, a hand edit gone wrong)."""

    path: Path
    error: str

    @property
    def topic_id(self) -> uuid.UUID | None:
        """The id its name carries (`<topic id>.json`), if it does."""
        try:
            return uuid.UUID(self.path.stem)
        except ValueError:
            return None


def _read_topic(path: Path) -> TopicInfo:
    doc = json.loads(path.read_bytes())
    info = TopicInfo(
        name=str(doc["name"]),
        topic_id=uuid.UUID(doc["topic_id"]),
        partitions=int(doc["partitions"]),
        configs={str(k): str(v) for k, v in doc["configs"].items()},
    )
    validate_topic_name(info.name)
    if info.partitions < 1:
        raise ValueError(f"{info.partitions} partitions")
    return info


def load_topics(directory: Path) -> tuple[list[TopicInfo], list[UnreadableTopicFile]]:
    """Every topic file that reads, and those that do not: one garbled file must not keep the
    broker from serving every other topic (its own is rebuilt from its partition directories)."""
    return read_topic_files(sorted(directory.glob("*.json")))


def read_topic_files(
    paths: Iterable[Path],
) -> tuple[list[TopicInfo], list[UnreadableTopicFile]]:
    """`load_topics` of these files only."""
    topics, unreadable = [], []
    for path in paths:
        try:
            topics.append(_read_topic(path))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError,
                InvalidTopic) as e:  # fmt: skip
            unreadable.append(UnreadableTopicFile(path, repr(e)[:200]))
    return topics, unreadable


def topic_file_versions(directory: Path) -> dict[str, int]:
    """Each topic file's name and inode, from one listing of the directory: no file is read or
    stat'ed (the inode comes with the entry). A topic file is only ever replaced by renaming a
    new file into place (`atomic_write`), so a new inode is a new version of it; the same inode
    is not always the same version (`topic_file_stats`)."""
    with os.scandir(directory) as entries:
        return {
            e.name: e.inode()
            for e in entries
            if e.name.endswith(".json") and not e.name.startswith(".")
        }


FileStat = tuple[int, int, int]  # inode, modification time (ns), size


def topic_file_stats(directory: Path) -> dict[str, FileStat]:
    """Each topic file's inode, modification time and size: a stat per file (~3-7 us each
    here: run it in a thread). ext4 gives a new file the inode just freed, so a file replaced
    twice between two listings can show the inode it had at the first (seen on this machine's
    ext4: 718, 719, 718); its modification time tells them apart."""
    out: dict[str, FileStat] = {}
    with os.scandir(directory) as entries:
        for e in entries:
            if e.name.endswith(".json") and not e.name.startswith("."):
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:  # removed since the listing
                    continue
                out[e.name] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return out


PARTITION_METADATA = "partition.metadata"
_PARTITION_DIR = re.compile(r"(.+)-(\d+)")


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of its 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    body = f"version: 0\ntopic_id: {encode_topic_id(topic_id)}\n"
    atomic_write(directory / PARTITION_METADATA, body.encode())


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id a partition directory names, or None (no file, or one that does not parse)."""
    try:
        text = (directory / PARTITION_METADATA).read_text()
        fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
        return uuid.UUID(bytes=base64.urlsafe_b64decode(fields["topic_id"] + "=="))
    except (OSError, KeyError, ValueError):
        return None


def partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a directory named like `orders-3`, else None."""
    match = _PARTITION_DIR.fullmatch(name)
    if match is None:
        return None
    try:
        validate_topic_name(match.group(1))
    except InvalidTopic:
        return None
    return match.group(1), int(match.group(2))
