"""What the tests of the hand-written bounds checks (`protocol/produce_bounds.py`,
`protocol/share_fetch_bounds.py`) share: each holds its check to the generated walk of
`protocol/request_bounds.py` on valid and mutated frames."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from protocol.request_bounds import OutOfBounds

# Lengths a hostile client might write where a mutation lands: huge, negative, null, empty.
HOSTILE = [b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\x80\x00", b"\xff\xff", b"\x00"]


def outcome(walk: Callable[[Any], int], frame: bytes) -> int | str:
    """Where the walk ends, or its refusal's reason."""
    try:
        return walk(frame)
    except OutOfBounds as e:
        return f"refused: {e}"


def refusing(frame: Any) -> int:
    """A fallback walk for frames the hand check must take alone."""
    raise AssertionError("handed to the generated walk")


def mutated(frame: bytes, rng: random.Random) -> bytes:
    """`frame` flipped, truncated, stretched or given a hostile length, one to three times,
    past the key, version and correlation id."""
    out = bytearray(frame)
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(8, len(out))
        how = rng.randrange(4)
        if how == 0:
            out[pos] = rng.randrange(256)
        elif how == 1:
            del out[pos:]
        elif how == 2:
            out[pos:pos] = rng.randbytes(rng.randint(1, 4))
        else:
            out[pos : pos + 4] = rng.choice(HOSTILE)
        if len(out) <= 8:
            break
    return bytes(out)
