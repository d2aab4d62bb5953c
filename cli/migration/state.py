"""The migration's state directory: which source and target it joins, the topics it made,
and one offset-map file per partition (`offset_map.MapFile`).

A second run over the same state dir must say `--resume` (and name the same clusters): a
fresh copy on top of a half-made target would produce the first records twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cli.common import UsageError
from cli.migration.offset_map import MapFile

STATE_FILE = "migration.json"


class StateDir:
    def __init__(self, path: Path, source: str, target: str) -> None:
        self.path = path
        self.source, self.target = source, target
        self.topics: set[str] = set()

    def open(self, *, resume: bool) -> None:
        """:raises UsageError: a run without --resume over an existing state, or other clusters."""
        state = self.path / STATE_FILE
        if not state.exists():
            return
        if not resume:
            raise UsageError(
                f"{self.path} holds an earlier migration: add --resume to go on with it, "
                "or choose another --state-dir"
            )
        saved = json.loads(state.read_text())
        if (saved["from"], saved["to"]) != (self.source, self.target):
            raise UsageError(
                f"{self.path} is the migration from {saved['from']} to {saved['to']}, "
                f"not from {self.source} to {self.target}"
            )
        self.topics = set(saved["topics"])

    def add_topic(self, name: str) -> None:
        """Record (durably, before any record is copied) that this migration owns the topic."""
        if name in self.topics:
            return
        self.topics.add(name)
        self.path.mkdir(parents=True, exist_ok=True)
        doc = {"from": self.source, "to": self.target, "topics": sorted(self.topics)}
        tmp = self.path / (STATE_FILE + ".tmp")
        with tmp.open("w") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / STATE_FILE)

    def map_file(self, topic: str, partition: int) -> MapFile:
        return MapFile(self.path / "offsets" / f"{topic}-{partition}.map")
