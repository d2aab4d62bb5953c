"""The final report: per topic, group, ACL set and user, what was done, skipped and why."""

from __future__ import annotations

from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from typing import Any

COPIED, CREATED, TRANSLATED, SKIPPED, REFUSED, TODO = (
    "copied",
    "created",
    "translated",
    "skipped",
    "refused",
    "to do",
)


@dataclass(frozen=True, slots=True)
class Line:
    kind: str  # topic, config, consumer-group, share-group, acls, user
    name: str
    outcome: str  # one of the words above
    detail: str = ""


@dataclass
class Report:
    lines: list[Line] = field(default_factory=list)
    # share group -> (topic, partition) -> records delivered again on the target
    redelivered: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    # --dry-run: topic -> its partitions, records and bytes (None: unknown) on the source
    planned: dict[str, dict[str, int | None]] = field(default_factory=dict)

    def add(self, kind: str, name: str, outcome: str, detail: str = "") -> None:
        self.lines.append(Line(kind, name, outcome, detail))

    @property
    def failed(self) -> bool:
        return any(line.outcome == REFUSED for line in self.lines)

    def rows(self) -> list[tuple[str, str, str, str]]:
        return [(x.kind, x.name, x.outcome, x.detail) for x in self.lines]

    def to_json(self) -> dict[str, Any]:
        out = {
            "lines": [asdict(x) for x in self.lines],
            "redelivered": {
                g: [{"topic": t, "partition": p, "records": n} for (t, p), n in parts.items()]
                for g, parts in self.redelivered.items()
            },
        }
        if self.planned:
            out["planned"] = [{"topic": t, **figures} for t, figures in self.planned.items()]
        return out
