"""The simple share assignor: every subscribed partition goes to at least one member.

Per topic, among the members subscribed to it (sorted by id, so the result is deterministic):
with no more members than partitions, partitions are dealt out round-robin (balanced); with more
members than partitions, members are dealt over the partitions so that each member gets one and
a partition is shared by several. A per-topic rotation spreads the remainder over members.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from collections.abc import Sequence

Assignment = dict[uuid.UUID, tuple[int, ...]]


def assign(
    subscriptions: Mapping[str, Sequence[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
) -> dict[str, Assignment]:
    """Member id -> {topic id -> partitions}, from subscriptions (topic ids) and counts."""
    by_topic: dict[uuid.UUID, list[str]] = {}
    for member, topic_ids in subscriptions.items():
        for topic_id in topic_ids:
            if partitions.get(topic_id, 0) > 0:
                by_topic.setdefault(topic_id, []).append(member)
    result: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in subscriptions}
    for rotation, topic_id in enumerate(sorted(by_topic)):
        members = sorted(by_topic[topic_id])
        count = partitions[topic_id]
        if len(members) <= count:
            for p in range(count):
                member = members[(p + rotation) % len(members)]
                result[member].setdefault(topic_id, []).append(p)
        else:
            for i, member in enumerate(members):
                result[member].setdefault(topic_id, []).append((i + rotation) % count)
    return {m: {t: tuple(sorted(ps)) for t, ps in topics.items()} for m, topics in result.items()}
