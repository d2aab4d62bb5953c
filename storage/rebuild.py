"""Topics rebuilt from their partition directories when their metadata file is gone or garbled.

A partition directory `<topic>-<n>` holds `partition.metadata` with its topic's id (as in
Kafka), so a lost, unreadable or never-written `__topics/<id>.json` costs no data: the topic
comes back with its name, id and partition count (configs, kept only in that file, fall back
to the broker's defaults). A directory of a known topic beyond its recorded partition count (a
CreatePartitions cut short) is adopted too. Nothing here deletes or moves anything.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import structlog

from storage.topics import TopicInfo
from storage.topics import partition_dir_name
from storage.topics import read_partition_metadata

_log = structlog.get_logger("shoal.storage")


def _unclaimed(
    data_dir: Path, known: dict[str, TopicInfo]
) -> dict[str, dict[int, uuid.UUID | None]]:
    """topic -> partition -> the id its directory names, for directories no topic covers."""
    found: dict[str, dict[int, uuid.UUID | None]] = {}
    with os.scandir(data_dir) as entries:  # names and types in one listing: no stat per entry
        names = sorted(e.name for e in entries if e.is_dir())
    for entry in names:
        parsed = partition_dir_name(entry)
        if parsed is None:
            continue
        name, partition = parsed
        info = known.get(name)
        if info is not None and partition < info.partitions:
            continue
        found.setdefault(name, {})[partition] = read_partition_metadata(data_dir / entry)
    return found


def rebuild_topics(
    data_dir: Path, topics: Iterable[TopicInfo], unreadable: Mapping[uuid.UUID, str] | None = None
) -> list[TopicInfo]:
    """Topics to (re)register: rebuilt from directories alone, or grown to cover them.

    ``unreadable``: topic id -> what became of its metadata file that did not parse, said in
    the rebuilt topic's one log line (a file that is simply gone is "missing").
    """
    unreadable = unreadable or {}
    known = {t.name: t for t in topics}
    out: list[TopicInfo] = []
    for name, partitions in _unclaimed(data_dir, known).items():
        ids = {i for i in partitions.values() if i is not None}
        info = known.get(name)
        if len(ids) > 1 or (info is not None and ids - {info.topic_id}):
            _log.error(
                "partition directories disagree on their topic id; left as they are",
                topic=name, partitions=sorted(partitions), ids=sorted(map(str, ids)),
            )  # fmt: skip
            continue
        count = max(partitions) + 1
        if info is not None:
            out.append(replace(info, partitions=count))
            _log.warning("topic grown to the partition directories found", topic=name,
                         partitions=count)  # fmt: skip
            continue
        from_file = bool(ids)
        topic_id = ids.pop() if ids else uuid.uuid4()
        missing = sorted(set(range(count)) - set(partitions))
        out.append(TopicInfo(name, topic_id, count, {}))
        _log.warning(
            "topic rebuilt from its partition directories (its metadata file was missing or "
            "unreadable); its configs are the broker's defaults now",
            topic=name, topic_id=str(topic_id), partitions=count, recreated_empty=missing,
            id_from="partition.metadata" if from_file else "new",
            metadata_file=unreadable.get(topic_id, "missing"),
        )  # fmt: skip
    return out
