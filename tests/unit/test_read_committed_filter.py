"""`client.read_committed.committed_batches`: Kafka's read_committed consumer rule
(`CompletedFetch.nextFetchedRecord` / `isBatchAborted` / `consumeAbortedTransactionsUpTo`,
apache/kafka clients/.../consumer/internals/) from batch headers: the cases a single producer's
log in the compat test does not reach (interleaved producers, a transaction aborted before the
data read starts, the same producer's next transaction)."""

from __future__ import annotations

import pytest

from client.errors import KafkaError
from client.read_committed import committed_batches
from client.records import AcquiredRange
from client.records import ConsumerRecord
from client.records import decode_acquired
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import ControlRecordType
from protocol.record_batch import build_batch
from protocol.record_batch import build_control_batch
from protocol.record_batch import control_record_key

A, B = 7, 9  # producer ids


def data(offset: int, pid: int = -1, value: str | None = None) -> bytes:
    txn = TRANSACTIONAL_MASK if pid >= 0 else 0
    text = value or f"{pid}@{offset}"
    return build_batch([(None, text.encode())], timestamp_ms=1, base_offset=offset,
                       producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                       base_sequence=0 if pid >= 0 else -1, attributes=txn)  # fmt: skip


def marker(offset: int, pid: int, kind: ControlRecordType) -> bytes:
    return build_control_batch(offset, pid, 0, 1, [(control_record_key(kind), b"\0\0\0\0\0\0")])


def values(fetched: bytes) -> list[str]:
    got: list[ConsumerRecord] = decode_acquired("t", 0, fetched, [AcquiredRange(0, 2**62, 1)])
    return [(r.value or b"").decode() for r in got]


def test_interleaved_producers_keep_what_was_not_aborted() -> None:
    log = b"".join([
        data(0, A), data(1, B), data(2, -1, "plain"), data(3, A),
        marker(4, A, ControlRecordType.ABORT),  # A's first transaction: aborted
        data(5, B), marker(6, B, ControlRecordType.COMMIT),
        data(7, A), marker(8, A, ControlRecordType.COMMIT),  # A again: committed
    ])  # fmt: skip
    assert values(committed_batches(log, [(A, 0)])) == ["9@1", "plain", "9@5", "7@7"]
    assert values(committed_batches(log, [])) == [
        "7@0",
        "9@1",
        "plain",
        "7@3",
        "9@5",
        "7@7",
    ]  # read_uncommitted: only the markers go


def test_a_transaction_aborted_before_the_read_starts_is_still_skipped() -> None:
    """The broker lists aborted transactions whose range reaches the fetch offset; the first
    offset may lie before the data (a fetch from the middle of it)."""
    log = b"".join([data(10, A), data(11, B), marker(12, A, ControlRecordType.ABORT)])
    assert values(committed_batches(log, [(A, 3)])) == ["9@11"]


def test_an_aborted_transaction_counts_from_its_first_offset_only() -> None:
    """A's batches before the first offset of its aborted transaction are another (committed)
    transaction's; listed order does not matter."""
    log = b"".join([
        data(0, A), marker(1, A, ControlRecordType.COMMIT),
        data(2, B), data(3, A), marker(4, A, ControlRecordType.ABORT),
        marker(5, B, ControlRecordType.ABORT),
    ])  # fmt: skip
    assert values(committed_batches(log, [(B, 2), (A, 3)])) == ["7@0"]


def test_a_header_that_is_no_batch_is_corrupt_not_a_crash() -> None:
    bad = bytearray(data(0, A))
    bad[16] = 1  # magic
    with pytest.raises(KafkaError):
        committed_batches(bytes(bad), [(A, 0)])
