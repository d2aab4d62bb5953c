"""What `shoal dlq redrive` makes of a dead letter (`cli/dlq_letters.py`).

The header names are Kafka's (KIP-1191; `ShareGroupDLQStateManager` in apache/kafka): the
letter's `__dlq.*` headers say where it came from and do not go back; its key and value are
the record's only when the group copied them.
"""

from __future__ import annotations

from cli.dlq_letters import NO_RECORD
from cli.dlq_letters import NO_SOURCE
from cli.dlq_letters import REDRIVE_COUNT
from cli.dlq_letters import Tally
from cli.dlq_letters import read_letter
from cli.dlq_letters import redrive_headers

CONTEXT = [
    ("__dlq.errors.topic", b"orders"),
    ("__dlq.errors.partition", b"2"),
    ("__dlq.errors.offset", b"41"),
    ("__dlq.errors.group", b"g"),
    ("__dlq.errors.delivery.count", b"3"),
    ("__dlq.errors.message", b"Offset rejected by client."),
]


def test_a_copied_letter_goes_back_without_its_context_headers() -> None:
    letter = read_letter(b"k", b"v", [("trace", b"t1"), *CONTEXT])
    assert (letter.source_topic, letter.source, letter.problem) == ("orders", "orders-2@41", None)
    assert (letter.key, letter.value) == (b"k", b"v")
    assert letter.headers == (("trace", b"t1"), (REDRIVE_COUNT, b"1"))


def test_a_letter_with_a_key_or_a_value_alone_goes_back() -> None:
    assert read_letter(None, b"v", CONTEXT).problem is None
    assert read_letter(b"k", None, CONTEXT).problem is None  # a tombstone keeps its key
    assert read_letter(None, b"", CONTEXT).problem is None  # an empty value is a value


def test_a_letter_without_key_and_value_is_not_sent() -> None:
    assert read_letter(None, None, CONTEXT).problem == NO_RECORD


def test_a_record_naming_no_source_is_not_sent() -> None:
    letter = read_letter(b"k", b"v", [("__dlq.errors.partition", b"0")])
    assert (letter.source_topic, letter.source, letter.problem) == (None, "?-0@?", NO_SOURCE)


def test_the_redrive_count_is_incremented_in_place() -> None:
    assert redrive_headers([]) == ((REDRIVE_COUNT, b"1"),)
    assert redrive_headers([(REDRIVE_COUNT, b"2"), ("a", None)]) == (
        (REDRIVE_COUNT, b"3"),
        ("a", None),
    )
    # Unreadable counts as 0; a second copy of the header is dropped, the first one counts.
    assert redrive_headers([(REDRIVE_COUNT, b"x")]) == ((REDRIVE_COUNT, b"1"),)
    assert redrive_headers([(REDRIVE_COUNT, b"4"), (REDRIVE_COUNT, b"9")]) == (
        (REDRIVE_COUNT, b"5"),
    )


def test_the_tally_counts_per_source_topic_with_examples() -> None:
    tally = Tally()
    for offset in range(7):
        headers = [("__dlq.errors.topic", b"t"), ("__dlq.errors.partition", b"0"),
                   ("__dlq.errors.offset", str(offset).encode())]  # fmt: skip
        tally.skipped(read_letter(None, None, headers))
    tally.of(read_letter(b"k", b"v", CONTEXT)).redriven += 1
    assert (tally.redriven, tally.not_redriven) == (1, 7)
    assert tally.topics["t"].not_redriven == {NO_RECORD: 7}
    assert tally.topics["t"].examples == [f"t-0@{o}" for o in range(5)]
