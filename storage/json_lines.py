"""A JSON document with one entry per line, read a batch of lines per `json.loads`.

`acls.json` and `scram-credentials.json` are followed by every process of `--processes N`
(`broker/security_follow.py`): one `json.loads` of a whole file of a million entries held the
interpreter lock, and with it the event loop, for seconds. Written as a header line, an entry
per line (comma-ended but the last) and an end line, the file is still one JSON document (the
format before it still loads) and reads `BATCH` lines at a time.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any
from typing import BinaryIO

BATCH = 500  # lines per json.loads: about 1 ms of holding the interpreter lock


def encode(header: bytes, entries: Iterable[bytes], end: bytes) -> bytes:
    """The file: `header`, each entry on its own line, `end`."""
    return b"%s\n%s\n%s\n" % (header, b",\n".join(entries), end)


def batches(f: BinaryIO, brackets: bytes, end: bytes, what: str) -> Iterator[Any]:
    """The entries after the header line (already read), each batch of lines parsed inside
    `brackets` (b"[]" for a list's items, b"{}" for an object's members).

    :raises ValueError: content after `end`, or the file ends before it (cut short).
    """
    while batch := list(itertools.islice(f, BATCH)):
        lines = [line.strip().removesuffix(b",") for line in batch]
        ended = end in lines
        if ended:
            at = lines.index(end)
            if any(lines[at + 1 :]) or f.read().strip():
                raise ValueError(f"content after the end of the {what}")
            lines = lines[:at]
        yield json.loads(brackets[:1] + b",".join(x for x in lines if x) + brackets[1:])
        if ended:
            return
    raise ValueError(f"the file ends before its {what} do")
