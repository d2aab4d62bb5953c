"""Record keys of the batches a ShareFetch read, for key-ordered share groups only.

The one place the share path decodes records, and only when `share.key.ordering.enable` is
set on the group: every other group's fetch stays header-only. Keys are reduced to a 32-bit
CRC at once. Two keys with one hash are ordered as one key: slower, never out of order.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from broker.share.acquire.policy import KeyHashes
from broker.share.span_records import span_records
from protocol.records import record_keys
from storage.log import BatchSpan


def key_hashes(data: bytes, spans: Sequence[BatchSpan]) -> KeyHashes:
    """offset -> CRC32 of the key (None: a null key) for every record of the data batches.
    A damaged batch's offsets stay out of the mapping and are handed out unordered."""
    keys = span_records(data, spans, record_keys, "records not readable for key ordering")
    return {offset: None if key is None else zlib.crc32(key) for offset, key in keys}
