"""What a dead-letter record says, and what its redrive sends back (`shoal dlq redrive`).

A dead letter (KIP-1191, as Kafka 4.4's broker and Shoal's write it) names its source in
headers: `__dlq.errors.topic`, `.partition`, `.offset`, `.group`, and, when known,
`.delivery.count` and `.message`. Its key and value are the source record's only with the
group's `errors.deadletterqueue.copy.record.enable=true`; without it (the default) both are
null, and there is nothing to send back. Neither broker copies the source record's own headers
into the letter (Kafka's `ShareGroupDLQStateManager` writes the six above only), so what goes
back is the letter's non-`__dlq.` headers: those a producer of the dead-letter topic added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field

from protocol.dead_letter import HEADER_OFFSET
from protocol.dead_letter import HEADER_PARTITION
from protocol.dead_letter import HEADER_TOPIC

DLQ_PREFIX = "__dlq."
REDRIVE_COUNT = "shoal.redrive.count"

Header = tuple[str, bytes | None]

# Why a letter is not sent back.
NO_RECORD = "no key and value (copied with errors.deadletterqueue.copy.record.enable=false)"
NO_SOURCE = f"no {HEADER_TOPIC} header (not a share group's dead letter)"
NO_TOPIC = "the source topic does not exist"


@dataclass(frozen=True, slots=True)
class Letter:
    """One dead letter: where it came from, and what a redrive would send (`problem` None)."""

    source_topic: str | None
    source: str  # `topic-partition@offset` as the headers say, for reports
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]  # to send back: the letter's own, redrive count updated
    problem: str | None


def read_letter(key: bytes | None, value: bytes | None, headers: Sequence[Header]) -> Letter:
    """The letter as read from the dead-letter topic (headers in their order)."""
    context = {k: v for k, v in headers if k.startswith(DLQ_PREFIX)}
    topic = _text(context.get(HEADER_TOPIC))
    where = f"{topic or '?'}-{_text(context.get(HEADER_PARTITION)) or '?'}"
    source = f"{where}@{_text(context.get(HEADER_OFFSET)) or '?'}"
    problem = None
    if not topic:
        problem = NO_SOURCE
    elif key is None and value is None:
        # A source record with neither key nor value looks the same: there is nothing to send
        # back in either case.
        problem = NO_RECORD
    kept = [(k, v) for k, v in headers if not k.startswith(DLQ_PREFIX)]
    return Letter(topic, source, key, value, redrive_headers(kept), problem)


def redrive_headers(headers: Sequence[Header]) -> tuple[Header, ...]:
    """`headers` with `shoal.redrive.count` set to one more than it was (1 when absent or
    unreadable), in the place of the first one it had, else last."""
    count = 0
    out: list[Header] = []
    placed = -1
    for k, v in headers:
        if k == REDRIVE_COUNT:
            if placed < 0:
                placed, count = len(out), _count(v)
                out.append((k, None))
            continue
        out.append((k, v))
    new = (REDRIVE_COUNT, str(count + 1).encode())
    if placed < 0:
        out.append(new)
    else:
        out[placed] = new
    return tuple(out)


def _count(v: bytes | None) -> int:
    text = _text(v)
    return int(text) if text is not None and text.isdigit() else 0


def _text(v: bytes | None) -> str | None:
    return None if v is None else v.decode("utf-8", errors="replace")


@dataclass
class TopicTally:
    redriven: int = 0  # acknowledged by the source topic (a dry run: would be)
    not_redriven: dict[str, int] = field(default_factory=dict)  # problem -> count
    examples: list[str] = field(default_factory=list)  # the first few sources not redriven


EXAMPLES = 5


@dataclass
class Tally:
    """Counts per source topic ("-" for letters naming none), for the final summary."""

    topics: dict[str, TopicTally] = field(default_factory=dict)

    def of(self, letter: Letter) -> TopicTally:
        return self.topics.setdefault(letter.source_topic or "-", TopicTally())

    def skipped(self, letter: Letter) -> None:
        assert letter.problem is not None
        t = self.of(letter)
        t.not_redriven[letter.problem] = t.not_redriven.get(letter.problem, 0) + 1
        if len(t.examples) < EXAMPLES:
            t.examples.append(letter.source)

    @property
    def redriven(self) -> int:
        return sum(t.redriven for t in self.topics.values())

    @property
    def not_redriven(self) -> int:
        return sum(sum(t.not_redriven.values()) for t in self.topics.values())
