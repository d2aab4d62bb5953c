"""How the group tools take positions and partitions on the command line, as Kafka's tools do:
`--to-datetime`, `--by-duration` and `--topic topic[:p,p]`."""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence

from cli.common import NotFound
from cli.common import UsageError
from client.admin import Admin

# ISO 8601 durations as kafka-consumer-groups.sh takes them (java.time.Duration): PnDTnHnMnS.
_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_datetime_ms(text: str) -> int:
    """Milliseconds since the epoch: an ISO 8601 date-time (local time unless it says), or ms."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM]"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """An ISO 8601 duration (`PT10M`, `P1DT2H`) in milliseconds."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper() in ("P", "PT"):
        raise UsageError(f"--by-duration {text!r}: expected an ISO 8601 duration like PT10M")
    days, hours, minutes = (int(match.group(k) or 0) for k in "dhm")
    seconds = float(match.group("s") or 0)
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def topic_partitions(spec: str, partitions: int) -> list[int]:
    """`topic` (every partition) or `topic:0,2`."""
    _, sep, wanted = spec.partition(":")
    if not sep:
        return list(range(partitions))
    try:
        return [int(p) for p in wanted.split(",") if p.strip()]
    except ValueError:
        raise UsageError(f"--topic {spec!r}: partitions must be numbers") from None


async def named_partitions(admin: Admin, specs: Sequence[str]) -> list[tuple[str, int]]:
    """The (topic, partition) pairs `--topic` specs name (`topic` or `topic:0,2`).

    :raises NotFound: a named topic does not exist."""
    out: list[tuple[str, int]] = []
    topics = await admin.list_topics()
    for spec in specs:
        name = spec.partition(":")[0]
        if name not in topics:
            raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: no topic {name!r}")
        out.extend((name, p) for p in topic_partitions(spec, topics[name].partition_count))
    return out
