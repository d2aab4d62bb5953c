"""Log behaviour shared by SegmentLog (files) and MemoryLog (bytearrays).

Segments differ only in where their bytes live, so everything here (offset
assignment, producer de-duplication, rolling, reads, retention) is written once and
both implementations have the same semantics by construction.
"""

from __future__ import annotations

import struct
from abc import ABC
from abc import abstractmethod
from bisect import bisect_right
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence

import structlog

from protocol.record_batch import BASE_OFFSET_POS
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import CONTROL_MASK
from protocol.record_batch import LOG_OVERHEAD
from protocol.record_batch import RECORD_COUNT_POS
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import BatchHeader
from protocol.record_batch import Buffer
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import iter_batch_headers
from protocol.record_batch import record_timestamps
from protocol.record_batch import validate_batches
from protocol.txn_markers import build_marker
from storage.cleaned_segment import CleanedCopy
from storage.compacted import require_keys
from storage.config import LogConfig
from storage.damage import DamagedRange
from storage.damage import stand_in
from storage.errors import CorruptRecords
from storage.errors import KafkaStorageError
from storage.errors import OffsetOutOfRange
from storage.log import AppendResult
from storage.log import BatchSpan
from storage.producer_state import AbortedTxn
from storage.producer_state import ProducerStateManager
from storage.segment import PendingSync
from storage.segment import Segment
from storage.segment_ranges import MissingOffsets
from storage.segment_ranges import first_offsets

_log = structlog.get_logger("shoal.storage")
_BASE_OFFSET = struct.Struct(">q")  # rewritten in place: the CRC does not cover it
MAX_DAMAGED_PASSES = 64
# A read of empty batches goes on to at most this many more stretches (an emptied segment is
# one): 64 take ~3 ms the first time (files opened, CRCs checked), ~0.6 ms after, and a
# ShareFetch may make 8 such reads; a log of thousands of emptied segments takes more fetches.
MAX_EMPTY_STRETCHES = 64
_RECORD_COUNT = struct.Struct(">i")


def _fitting(batch: bytes, first_batch_max: int | None) -> bytes:
    """`batch` (a read's first and only one), or nothing when it is above `first_batch_max`."""
    return batch if first_batch_max is None or len(batch) <= first_batch_max else b""


def _after_empty(data: bytes) -> int | None:
    """The offset after `data` when every batch in it is empty (no record), else None."""
    after = None
    for _, header in iter_batch_headers(data):
        if header.record_count:
            return None
        after = header.last_offset + 1
    return after


class SegmentedLog(ABC):
    def __init__(
        self, config: LogConfig, segments: list[Segment], producers: ProducerStateManager
    ) -> None:
        assert segments, "a log always has an active segment"
        self.config = config
        self._segments = segments
        self._bases = first_offsets(segments)  # a segment's own base, unless overlapped
        self._producers = producers
        self._unflushed_messages = 0
        self._failing = False  # in a failed-write episode: logged once, until a write succeeds
        # May lie inside the first segment (DeleteRecords); never below its base.
        self._log_start = segments[0].base_offset
        self.name = "memory"
        self.topic, self.partition = "", -1  # for log lines; set by the log manager
        # Offsets no segment held at open (a lost or cut segment file), logged then.
        self.missing: list[MissingOffsets] = []

    @abstractmethod
    def _new_segment(self, base_offset: int) -> Segment: ...

    @abstractmethod
    def cleaning_copy(self, segment: Segment) -> CleanedCopy:
        """Where the cleaner writes the cleaned copy of the sealed `segment`."""

    def _after_roll(self) -> None:
        """Hook: the disk log snapshots producer state here."""
        return None

    def _save_log_start(self, offset: int) -> None:
        """Hook: the disk log makes the log start durable here (it may run in a thread)."""
        return None

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        """Every offset below it is synced, and was checked when it was appended (Kafka's
        recovery point): after a crash, only what lies past it is read again. Sealed segments
        are synced when they are sealed, so it lies in the active one."""
        return self._segments[-1].durable_offset

    @property
    def segments(self) -> Sequence[Segment]:
        return tuple(self._segments)

    @property
    def max_producer_id(self) -> int:
        """The highest producer id this log ever recorded (-1: none), expired ones included."""
        return self._producers.max_producer_id

    def damaged_ranges(self) -> list[DamagedRange]:
        """Damaged stretches found so far (at open or on reads), oldest segment first; a
        segment not used since the start (opened lazily) has none known."""
        return [d for s in self._segments if s.loaded for d in s.damage.ranges]

    def missing_records(self) -> int:
        """Offsets found missing between segments at open, and not deleted since."""
        start = self._log_start
        return sum(m.last_offset - max(m.first_offset, start) + 1
                   for m in self.missing if m.last_offset >= start)  # fmt: skip

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # --- appending --------------------------------------------------------------------

    def append(
        self, records: Buffer, *, now_ms: int, defer_sync: bool = False, keyed: bool = False
    ) -> AppendResult:
        headers = validate_batches(records)
        for h in headers:
            if h.attributes & CONTROL_MASK:
                raise InvalidRecordBatch("control", "clients may not write control batches")
            if h.attributes & TRANSACTIONAL_MASK and len(headers) > 1:
                # Only the first batch of a partition's records is verified against its
                # transaction; Kafka takes one batch per partition (ProduceRequest).
                raise InvalidRecordBatch("transactional", "a transactional batch must be alone")
        if self.config.compact and not keyed:
            require_keys(records, headers)
        # Only idempotent producers (an id) are checked; the rest pay one comparison.
        idempotent = len(headers) > 1 or headers[0].producer_id >= 0
        duplicate = self._producers.check(headers) if idempotent else None
        if duplicate is not None:
            return AppendResult(
                base_offset=duplicate.base_offset,
                last_offset=duplicate.last_offset,
                log_start_offset=self.log_start_offset,
                duplicate=True,
            )
        return self._append(records, headers, now_ms, defer_sync)

    def append_control(
        self, batch: Buffer, *, now_ms: int, header: BatchHeader | None = None
    ) -> AppendResult:
        # A batch the broker built with its header in hand (`share_state.encode_control_batch`)
        # is not parsed and CRC-checked again as a client's would be.
        if header is not None:
            return self._append(batch, [header], now_ms)
        headers = validate_batches(batch)
        if not all(h.is_control for h in headers):
            raise InvalidRecordBatch("control", "append_control takes control batches only")
        return self._append(batch, headers, now_ms)

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        now_ms: int,
        coordinator_epoch: int = 0,
    ) -> AppendResult:
        """Write the COMMIT or ABORT marker of `producer_id`'s transaction, then end it in the
        producer state (its records become stable; an abort joins the aborted index).

        :raises storage.errors.KafkaStorageError: not written; the state is as it was.
        """
        batch = build_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        result = self._append(batch, validate_batches(batch), now_ms)
        self._producers.end_txn(producer_id, producer_epoch, commit, result.base_offset)
        return result

    @property
    def last_stable_offset(self) -> int:
        """Below the first offset of every open transaction (the log end when none is open):
        where read_committed reads stop (Kafka's LSO)."""
        first = self._producers.first_unstable_offset()
        end = self._segments[-1].next_offset
        return end if first is None or first > end else first

    def active_producers(self) -> list[tuple[int, int, int, int, int]]:
        """See `ProducerStateManager.active` (DescribeProducers)."""
        return self._producers.active()

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper), for a read_committed fetch."""
        return self._producers.aborted_between(start, upper)

    def _append(
        self, records: Buffer, headers: list[BatchHeader], now_ms: int, defer_sync: bool = False
    ) -> AppendResult:
        # Every produce request comes through here: plain statements, no context manager.
        buf = bytearray(records)
        count = 0
        for header in headers:
            count += header.record_count
        try:
            self._maybe_roll(len(buf), count, now_ms)
            base = offset = self._segments[-1].next_offset  # log_end_offset, no call
            batches: list[tuple[int, BatchHeader]] = []
            pos = 0
            for header in headers:
                _BASE_OFFSET.pack_into(buf, pos + BASE_OFFSET_POS, offset)
                batches.append((pos, header))
                pos += header.batch_length + LOG_OVERHEAD
                offset += header.record_count
            active = self._segments[-1]
            active.append(buf, batches)
        except OSError as e:
            raise self._write_failed(e) from e
        if self._failing:
            self._write_resumed()
        # Only once the bytes are written: a failed write must not look like a success.
        offset = base
        for header in headers:
            if header.producer_id >= 0:  # idempotent (update skips the rest as well)
                self._producers.update(header, offset)
            offset += header.record_count
        if active.roll_base_ms is None:
            active.roll_base_ms = now_ms
        self._unflushed_messages += count
        if not defer_sync and self.sync_due:
            try:
                self.flush()
            except OSError as e:
                raise self._write_failed(e) from e
        # tuple.__new__: a NamedTuple's own __new__ is Python code, a frame per append.
        return tuple.__new__(AppendResult, (base, offset - 1, self._log_start, -1, False))

    def _write_failed(self, error: OSError) -> KafkaStorageError:
        """KAFKA_STORAGE_ERROR for a failed write, logged once per episode of failures.

        A failed segment write has already cut its partial bytes (`Segment.append`), so the
        log is as it was; the next write that succeeds ends the episode.
        """
        if not self._failing:
            self._failing = True
            _log.error(
                "log write failed; appends answer KAFKA_STORAGE_ERROR until one succeeds",
                log=self.name, errno=error.errno, error=error.strerror,
            )  # fmt: skip
        return KafkaStorageError(f"write to {self.name} failed: {error.strerror}")

    def _write_resumed(self) -> None:
        self._failing = False
        _log.info("log writes resumed", log=self.name)

    def _maybe_roll(self, size: int, record_count: int, now_ms: int) -> None:
        active = self._segments[-1]
        if active.size == 0:
            return
        config = self.config
        if (
            active.size + size > config.segment_bytes
            or (
                active.roll_base_ms is not None
                and now_ms - active.roll_base_ms >= config.segment_ms
            )
            or not active.fits(record_count)
        ):
            self.roll()

    def roll(self) -> None:
        """Seal the active segment and start a new one at the log end."""
        self._segments[-1].seal()
        segment = self._new_segment(self.log_end_offset)
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self._after_roll()

    # --- reading ----------------------------------------------------------------------

    def _locate(self, offset: int) -> tuple[Segment, int, BatchHeader] | None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}]"
            )
        if offset == self.log_end_offset:
            return None
        for i in range(bisect_right(self._bases, offset) - 1, len(self._segments)):
            segment = self._segments[i]
            found = segment.locate(offset)
            if found is not None:
                return segment, *found
        return None

    def read(self, offset: int, max_bytes: int, first_batch_max: int | None = None) -> bytes:
        """Whole batches from the one holding ``offset``, up to ``max_bytes``, within one
        segment like Kafka's `LogSegment.read`.

        The first batch comes whole even above ``max_bytes`` (KIP-74: a consumer always
        progresses), up to ``first_batch_max`` bytes; None: whatever its size (Kafka's
        minOneMessage). A first batch above ``first_batch_max`` makes the read empty.

        The end is found before reading (index floor below the limit, then a short
        header walk), so the data comes from one exact pread and is never copied. Damaged
        bytes are never returned: a read stops before damage it meets, and one of damaged
        offsets gets their stand-in, an empty batch over them (`storage.damage.stand_in`).
        A read that finds only empty batches goes on past them (`_read_past_empty`).
        """
        data = self._read_segment(offset, max_bytes, first_batch_max)
        # Nearly every read starts with a batch of records: one header field says so.
        if len(data) < BATCH_HEADER_SIZE or _RECORD_COUNT.unpack_from(data, RECORD_COUNT_POS)[0]:
            return data
        return self._read_past_empty(data, max_bytes, first_batch_max)

    def _read_segment(self, offset: int, max_bytes: int, first_batch_max: int | None) -> bytes:
        # A pass whose one batch turns out damaged has recorded it, and the next steps over
        # it: each pass starts further on, so this ends; the bound is a guard, never reached.
        for _ in range(MAX_DAMAGED_PASSES):
            try:
                located = self._locate(offset)
            except CorruptRecords as e:
                return _fitting(stand_in(e.first_offset, e.last_offset), first_batch_max)
            if located is None:  # the log end, or offsets no segment holds up to it
                if offset >= self.log_end_offset:
                    return b""
                return _fitting(self._missing(offset), first_batch_max)
            segment, position, header = located
            if first_batch_max is not None and header.size > first_batch_max:
                return b""
            hole = segment.damage.next_from(position)
            stop = hole.start if hole is not None else segment.size
            limit = min(position + max(max_bytes, header.size), stop)
            end = limit  # a segment holds only whole batches
            if limit < stop:
                end = max(segment.offset_index.floor_position(limit), position)
                for pos, h in segment.iter_headers(end):
                    if pos + h.size > limit:
                        break
                    end = pos + h.size
            data = segment.read(position, end - position)
            good = segment.verify(position, data)
            if good:
                return data if good == len(data) else data[:good]
        return b""

    def _read_past_empty(self, data: bytes, max_bytes: int, first_batch_max: int | None) -> bytes:
        """`data`, and when it holds only empty batches, what follows them.

        An empty batch (offsets the cleaner removed, or damage's stand-in) is all a segment
        compaction emptied holds; Kafka's cleaner leaves nothing there, and its read goes on to
        the next segment (`LocalLog.read`). So does this one, while only empty batches come,
        within what is left of the budgets: the empty batches are bytes of the answer too, and
        a batch that does not fit beside them is the next read's first. (A librdkafka consumer
        answered only empty batches doubles its fetch size, then reports "Message at offset
        ... might be too large to fetch" for each such answer.)
        """
        parts, used = [data], len(data)
        nxt = _after_empty(data)
        for _ in range(MAX_EMPTY_STRETCHES):
            if nxt is None or nxt >= self.log_end_offset:
                break
            room = max_bytes - used
            chunk = self._read_segment(
                nxt, room, room if first_batch_max is None else first_batch_max - used
            )
            if not chunk:
                break
            parts.append(chunk)
            used += len(chunk)
            nxt = _after_empty(chunk)
        return b"".join(parts)

    def _missing(self, offset: int) -> bytes:
        """The stand-in for offsets from `offset` that no segment holds and no later batch
        follows (a lost or cut segment file before an empty active one): readers step over
        them to the next segment's first offset, as over damage."""
        i = bisect_right(self._bases, offset)
        end = self._bases[i] if i < len(self._bases) else self.log_end_offset
        return stand_in(offset, end - 1)

    def read_with_spans(
        self,
        offset: int,
        max_bytes: int,
        max_records: int | None = None,
        first_batch_max: int | None = None,
    ) -> tuple[bytes, list[BatchSpan]]:
        data = self.read(offset, max_bytes, first_batch_max)
        spans: list[BatchSpan] = []
        records = 0
        # Once per batch of every fetch: the header's properties inline, and tuple.__new__
        # (a NamedTuple's own __new__ is Python code, a frame per batch).
        new = tuple.__new__
        for pos, h in iter_batch_headers(data):
            if spans and max_records is not None and records >= max_records:
                break
            base, last, attributes = (
                h.base_offset,
                h.base_offset + h.last_offset_delta,
                h.attributes,
            )
            txn_producer = h.producer_id if attributes & TRANSACTIONAL_MASK else -1
            spans.append(
                new(
                    BatchSpan,
                    (
                        base,
                        last,
                        pos,
                        h.batch_length + LOG_OVERHEAD,
                        bool(attributes & CONTROL_MASK),
                        h.record_count > 0,
                        txn_producer,
                    ),
                )
            )
            if h.record_count:  # an empty batch's offsets are archived, never handed out
                records += last - max(base, offset) + 1
        end = spans[-1].position_in_result + spans[-1].size if spans else 0
        return (data if end == len(data) else data[:end]), spans

    def batch_spans(
        self, offset: int, max_bytes: int, max_records: int | None = None
    ) -> list[BatchSpan]:
        return self.read_with_spans(offset, max_bytes, max_records)[1]

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The first record at or after `timestamp_ms` (Kafka's ListOffsets), with its timestamp.

        The time index finds the batch; that one batch's records are then read for the exact
        record. A compressed batch answers with its base offset and max timestamp. A batch
        that holds no record (damaged, so read as its stand-in, or emptied by the cleaner) is
        passed over and the search goes on after it, as Kafka's `FileRecords` search goes on
        to the next batch when one has no record at or after the timestamp.
        """
        offset = self.log_start_offset
        while True:
            header = self._batch_reaching(timestamp_ms, offset)
            if header is None:
                return None
            found = self._record_at_or_after(header, timestamp_ms)
            if isinstance(found, tuple):
                return found
            if found <= offset:  # never: each batch passed over ends after `offset`
                return None
            offset = found

    def _batch_reaching(self, timestamp_ms: int, offset: int) -> BatchHeader | None:
        """The first batch ending at or after `offset` whose maxTimestamp >= `timestamp_ms`."""
        first = max(0, bisect_right(self._bases, offset) - 1)
        for segment in self._segments[first:]:
            header = segment.find_timestamp(timestamp_ms, offset)
            if header is not None:
                return header
        return None

    def learn_data_max(self) -> Iterator[None]:
        """Complete every segment's data maximum (see `Segment.learn_data_max`), yielding
        between slices of a header walk; a segment deleted meanwhile is skipped."""
        for segment in list(self._segments):
            try:
                yield from segment.learn_data_max()
            except OSError:  # deleted by retention between two slices
                continue

    def offset_for_max_timestamp(self) -> tuple[int, int] | None:
        """The first data record with the partition's largest timestamp (ListOffsets
        MAX_TIMESTAMP), with that timestamp; None when the log holds no data record.

        Each segment tracks its largest data timestamp and the batch holding it (control
        batches, such as share state, do not count); only that one batch is read, as
        `offset_for_timestamp` reads its batch (a compressed one answers its base offset).

        :raises CorruptRecords: that batch turned out damaged (now logged and counted); its
            segment forgot its maximum: `learn_data_max` walks it again, stepping over the
            damage, and then this answers from the intact batches.
        """
        best: tuple[int, int, Segment] | None = None
        for segment in self._segments:
            found = segment.data_max()
            if found is not None and (best is None or found[0] > best[0]):
                best = (*found, segment)
        if best is None:
            return None
        timestamp, base_offset, segment = best
        try:
            located = segment.locate(base_offset)
        except CorruptRecords:
            located = None
        answer = None if located is None else self._record_at_or_after(located[1], timestamp)
        if isinstance(answer, tuple):
            return answer
        segment.forget_data_max()
        raise CorruptRecords(base_offset, base_offset, segment.describe())

    def _record_at_or_after(self, header: BatchHeader, timestamp_ms: int) -> tuple[int, int] | int:
        """The first record of `header`'s batch at or after `timestamp_ms`, with its timestamp;
        or, when the batch holds no record (damaged: read as its stand-in; emptied by the
        cleaner), the offset after it, to search on from."""
        start = self.log_start_offset
        data = self.read(max(header.base_offset, start), header.size)
        batch = next(iter_batch_headers(data), None)
        if batch is None or batch[1].record_count == 0:
            return header.last_offset + 1 if batch is None else batch[1].last_offset + 1
        read = batch[1]
        try:
            for offset, ts in record_timestamps(data[: read.size]):
                if ts >= timestamp_ms and offset >= start:
                    return offset, ts
        except InvalidRecordBatch:
            pass
        # Records below the log start are deleted, even where their batch is still stored.
        return max(read.base_offset, start), read.max_timestamp

    # --- offsets holding no data (lag) -------------------------------------------------

    def learn_non_data(self) -> Iterator[None]:
        """Complete every segment's non-data ranges (`Segment.learn_non_data`), yielding
        between slices of a header walk; a segment deleted meanwhile is skipped."""
        for segment in list(self._segments):
            try:
                yield from segment.learn_non_data()
            except OSError:  # deleted by retention between two slices
                continue

    def _segments_over(self, start: int, end: int) -> list[Segment]:
        first = max(bisect_right(self._bases, start) - 1, 0)
        last = bisect_right(self._bases, end - 1)
        return self._segments[first:last]

    def non_data_offsets(self, start: int, end: int) -> int:
        """Offsets of `[start, end)` (from the log start on) that hold no data record:
        control batches and empty batches, counted by range from each segment's ranges."""
        start = max(start, self._log_start)
        if end <= start:
            return 0
        return sum(s.non_data_count(start, end) for s in self._segments_over(start, end))

    def data_records(self, start: int, end: int) -> int:
        """Offsets of `[start, end)` that may hold a data record: what lag counts (offsets
        below the log start count, as Kafka counts a committed offset there)."""
        return max(end - start, 0) - self.non_data_offsets(start, end)

    def non_data_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """The non-data ranges within `[start, end)`, as (first, last) inclusive."""
        start = max(start, self._log_start)
        out: list[tuple[int, int]] = []
        for segment in self._segments_over(start, end):
            for first, last in segment.non_data.ranges(start, end):
                if out and out[-1][1] + 1 == first:  # a range that runs on into the next segment
                    out[-1] = (out[-1][0], last)
                else:
                    out.append((first, last))
        return out

    def first_data_offset(self, offset: int) -> int:
        """The first offset at or after `offset` (and the log start) that no non-data range
        holds; the log end when there is none."""
        offset = max(offset, self._log_start)
        for segment in self._segments[max(bisect_right(self._bases, offset) - 1, 0) :]:
            offset = segment.non_data.data_from(max(offset, segment.base_offset))
            if offset < segment.next_offset:
                return offset
        return self.log_end_offset

    def batch_timestamp(self, offset: int) -> int | None:
        """The header timestamp (`BatchHeader.timestamp`) of the batch holding `offset`; None
        when no intact batch holds it."""
        try:
            located = self._locate(offset)
        except (OffsetOutOfRange, CorruptRecords):
            return None
        return located[2].timestamp if located is not None else None

    # --- the log start (DeleteRecords) -------------------------------------------------

    def log_start_target(self, offset: int) -> int:
        """The log start a DeleteRecords to `offset` sets: -1 is the high watermark (the log
        end here); at or below the current start it stays where it is.

        :raises storage.errors.OffsetOutOfRange: `offset` is past the log end, or below -1.
        """
        end = self.log_end_offset
        if offset == -1:
            offset = end
        if offset < 0 or offset > end:
            raise OffsetOutOfRange(f"offset {offset} outside [0, {end}] (-1: the log end)")
        return max(offset, self.log_start_offset)

    def save_log_start(self, offset: int) -> None:
        """Make `offset` the durable log start (written atomically and synced). Touches only
        its own file, so it may run in a thread while the log is appended to.

        :raises storage.errors.KafkaStorageError: not written; the log start is as it was.
        """
        try:
            self._save_log_start(offset)
        except OSError as e:
            _log.error("log start not saved", log=self.name, offset=offset, error=e.strerror)
            raise KafkaStorageError(f"saving the log start of {self.name} failed: {e}") from e

    def advance_log_start(self, offset: int, min_retained_offset: int | None = None) -> int:
        """Move the log start up to `offset` in memory (once `save_log_start` has made it
        durable) and delete the segments wholly below it, as retention deletes them; those
        holding an offset at or after `min_retained_offset` (share state) stay. Returns how
        many segments were deleted."""
        self._log_start = max(self._log_start, min(offset, self.log_end_offset))
        return self._delete_oldest(lambda oldest: None, min_retained_offset)

    # --- maintenance ------------------------------------------------------------------

    @property
    def sync_due(self) -> bool:
        return self._unflushed_messages >= self.config.flush_messages

    def flush(self) -> None:
        for segment in self._segments:
            if segment.dirty:
                segment.flush()
        self._unflushed_messages = 0

    def start_flush(self) -> list[PendingSync]:
        """The fsyncs of every dirty segment, to run off the event loop (see PendingSync)."""
        pending = [p for s in self._segments if (p := s.start_flush()) is not None]
        self._unflushed_messages = 0
        return pending

    def apply_retention(self, now_ms: int, min_retained_offset: int | None = None) -> int:
        """Delete the oldest whole segments past retention.ms / retention.bytes.

        The active segment stays, and so does any segment holding an offset at or
        after ``min_retained_offset`` (share-state control records live there).
        """
        config = self.config
        total = self.size_bytes

        def expired(oldest: Segment) -> str | None:
            """Which limit `oldest` breaks (as Kafka's log line says), if any."""
            nonlocal total
            if not config.delete:  # compact only: the cleaner, not retention, removes records
                return None
            by_time = (
                config.retention_ms >= 0 and now_ms - oldest.max_timestamp > config.retention_ms
            )
            by_size = config.retention_bytes >= 0 and total - oldest.size >= config.retention_bytes
            total -= oldest.size
            return "retention.ms" if by_time else "retention.bytes" if by_size else None

        deleted = self._delete_oldest(expired, min_retained_offset)
        self._producers.expire(now_ms, config.producer_id_expiration_ms)
        self._producers.forget_below(self._log_start)
        return deleted

    def _delete_oldest(
        self, expired: Callable[[Segment], str | None], min_retained_offset: int | None
    ) -> int:
        """Delete the oldest whole segments while each is below the log start or `expired`;
        never the active one, nor one holding an offset at or after `min_retained_offset`.
        The log start follows the first segment kept. Each deletion is one log line (topic,
        partition, segment, its offsets and why), as Kafka's "Deleting segment ... due to"."""
        deleted = 0
        while len(self._segments) > 1:
            oldest, following = self._segments[0], self._segments[1]
            if min_retained_offset is not None and following.base_offset > min_retained_offset:
                break
            by_retention = expired(oldest)  # always asked: it keeps a running total
            below_start = following.base_offset <= self._log_start
            if not (below_start or by_retention):
                break
            _log.info(
                "segment deleted", topic=self.topic, partition=self.partition,
                segment=oldest.describe(), base_offset=oldest.base_offset,
                last_offset=oldest.last_offset, bytes=oldest.size,
                largest_timestamp=oldest.max_timestamp,
                reason="log start" if below_start else by_retention,
            )  # fmt: skip
            oldest.delete()
            del self._segments[0], self._bases[0]
            deleted += 1
        self._log_start = max(self._log_start, self._segments[0].base_offset)
        return deleted

    def forget_aborted(self, ended: Iterable[tuple[int, int]]) -> None:
        """The cleaner removes these ABORT markers (producer id, offset): their aborted
        transactions leave the aborted index, durably (the producer snapshot) before the
        segment without them is swapped in, so no restart brings them back."""
        if self._producers.forget_aborted(ended):
            self._after_producers_changed()

    def _after_producers_changed(self) -> None:
        """Hook: the disk log writes its producer snapshot here."""
        return None

    def replace_segment(self, old: Segment, new: Segment) -> bool:
        """Put the cleaned copy `new` of the sealed segment `old` in its place; False (and
        nothing changes) when `old` has left the log meanwhile (retention, deletion)."""
        for i, segment in enumerate(self._segments[:-1]):
            if segment is old:
                self._segments[i] = new
                return True
        return False
