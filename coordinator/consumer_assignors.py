"""Server-side assignors of KIP-848 consumer groups: `uniform` and `range`, by Kafka's names.

Both take every member's subscribed topics (by id), the topics' partition counts and the
current target assignment, and return the new target. Revocation is not their business: the
group moves members towards the target one released partition at a time.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

from coordinator.assignor import Assignment

TopicPartition = tuple[uuid.UUID, int]
Subscriptions = Mapping[str, Sequence[uuid.UUID]]
Assignor = Callable[
    [Subscriptions, Mapping[uuid.UUID, int], Mapping[str, Assignment]], dict[str, Assignment]
]


def _grouped(owned: Mapping[str, list[TopicPartition]]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for member, pairs in owned.items():
        topics: dict[uuid.UUID, list[int]] = {}
        for topic_id, p in pairs:
            topics.setdefault(topic_id, []).append(p)
        out[member] = {t: tuple(sorted(ps)) for t, ps in topics.items()}
    return out


def uniform(
    subscriptions: Subscriptions,
    partitions: Mapping[uuid.UUID, int],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Balanced and sticky: a member keeps what it had up to its fair share (one more for as
    many members as the division leaves over); the rest goes to the subscribed member holding
    the fewest partitions (ties by member id)."""
    members = sorted(subscriptions)
    subscribed = {m: {t for t in subscriptions[m] if partitions.get(t, 0) > 0} for m in members}
    # The most constrained topics (fewest subscribers) are dealt first, to keep the balance.
    takers = Counter(t for ts in subscribed.values() for t in ts)
    every = sorted(
        ((t, p) for t in takers for p in range(partitions[t])), key=lambda tp: (takers[tp[0]], tp)
    )
    base, extra = divmod(len(every), len(members)) if members else (0, 0)
    kept = {m: _still_valid(previous.get(m, {}), subscribed[m], partitions) for m in members}
    owned: dict[str, list[TopicPartition]] = {m: kept[m][:base] for m in members}
    for m in members:  # the left-over slots go to members that had one more
        if extra > 0 and len(kept[m]) > base:
            owned[m].append(kept[m][base])
            extra -= 1
    taken = {tp for tps in owned.values() for tp in tps}
    for tp in every:
        if tp not in taken:
            candidates = [m for m in members if tp[0] in subscribed[m]]
            owned[min(candidates, key=lambda m: (len(owned[m]), m))].append(tp)
    return _grouped(owned)


def _still_valid(
    assignment: Assignment, subscribed: set[uuid.UUID], partitions: Mapping[uuid.UUID, int]
) -> list[TopicPartition]:
    """The previously assigned partitions a member may keep: still subscribed and existing."""
    return [
        (t, p)
        for t, parts in sorted(assignment.items())
        if t in subscribed
        for p in parts
        if p < partitions[t]
    ]


def range_(
    subscriptions: Subscriptions,
    partitions: Mapping[uuid.UUID, int],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Per topic, contiguous ranges over its subscribers sorted by member id; the first
    `count % subscribers` get one more (as the client-side RangeAssignor does)."""
    del previous  # deterministic from the subscriptions alone
    owned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    topics = sorted({t for ts in subscriptions.values() for t in ts if partitions.get(t, 0) > 0})
    for topic_id in topics:
        members = sorted(m for m, ts in subscriptions.items() if topic_id in ts)
        count = partitions[topic_id]
        base, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            size = base + (1 if i < extra else 0)
            owned[m].extend((topic_id, p) for p in range(start, start + size))
            start += size
    return _grouped(owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
# Kafka's group.consumer.assignors also takes its own classes' full names.
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def parse_assignors(value: str) -> tuple[str, ...]:
    """`group.consumer.assignors` as assignor names, the default first.

    :raises ValueError: an assignor Shoal does not have.
    """
    names = []
    for raw in value.split(","):
        name = CLASS_NAMES.get(raw.strip(), raw.strip())
        if name not in ASSIGNORS:
            raise ValueError(f"group.consumer.assignors: unknown assignor {raw.strip()!r}")
        names.append(name)
    if not names:
        raise ValueError("group.consumer.assignors must name at least one assignor")
    return tuple(names)
