"""Record keys of the batches a ShareFetch read, for key-ordered share groups only.

The one place the share path decodes records, and only when `share.key.ordering.enable` is
set on the group: every other group's fetch stays header-only. Keys are reduced to a 32-bit
CRC at once. Two keys with one hash are ordered as one key: slower, never out of order.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import structlog

from broker.share.acquire.policy import KeyHashes
from protocol.record_batch import InvalidRecordBatch
from protocol.records import record_keys
from storage.log import BatchSpan

log = structlog.get_logger("shoal.share")


def key_hashes(data: bytes, spans: Sequence[BatchSpan]) -> KeyHashes:
    """offset -> CRC32 of the key (None: a null key) for every record of the data batches."""
    out: dict[int, int | None] = {}
    view = memoryview(data)
    for span in spans:
        if span.is_control or not span.has_records:
            continue
        batch = view[span.position_in_result : span.position_in_result + span.size]
        try:
            keys = record_keys(batch)
        except InvalidRecordBatch as e:
            # Its offsets stay out of the mapping and are handed out unordered; the batch
            # passed its CRC when it was stored, so this is damage, said once per fetch.
            log.warning(
                "records not readable for key ordering",
                base_offset=span.base_offset,
                error=str(e),
            )
            continue
        for offset, key in keys:
            out[offset] = None if key is None else zlib.crc32(key)
    return out
