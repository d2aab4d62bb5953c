"""The records of the data batches a ShareFetch read, for the two fetches that decode them
(`key_hashes.py` for key-ordered groups, `deliver_at.py` for scheduled delivery): the walk
over the read's spans, written once.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import TypeVar

import structlog

from protocol.record_batch import InvalidRecordBatch
from storage.log import BatchSpan

log = structlog.get_logger("shoal.share")

T = TypeVar("T")


def span_records(
    data: bytes,
    spans: Sequence[BatchSpan],
    decode: Callable[[memoryview], list[tuple[int, T]]],
    unreadable: str,
    **where: object,
) -> Iterator[tuple[int, T]]:
    """(offset, item) as `decode` reads them from each data batch of `spans` in `data`;
    control and empty batches hold none. A batch that does not decode is left out with the
    log line `unreadable` (and `where`, the share-partition): it passed its CRC when it was
    stored, so this is damage, said once per batch and fetch."""
    view = memoryview(data)
    for span in spans:
        if span.is_control or not span.has_records:
            continue
        batch = view[span.position_in_result : span.position_in_result + span.size]
        try:
            items = decode(batch)
        except InvalidRecordBatch as e:
            log.warning(unreadable, **where, base_offset=span.base_offset, error=str(e))
            continue
        yield from items
