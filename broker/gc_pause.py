"""Automatic garbage collection paused for one large request at a time, for a bounded time.

A full collection walks every live container object, on whichever thread allocates at the
time, and it runs each time the objects that survived collections grow by a quarter. A request
naming a million partitions makes millions of objects (decoded, handled, answered): the
collections their making triggers held the GIL, and with it the event loop, for 50-300 ms each.
Those objects are freed by reference counting once the request is answered, so nothing the
collector would have found is lost by waiting.

The pause is bounded: one request holds it at a time (another large request in flight meanwhile
runs under it but never extends it), for at most `MAX_PAUSE_S`, and its holder gives it back in
a `finally`. A client sending large requests back to back therefore cannot keep collection off:
it runs again between them, and at the latest every `MAX_PAUSE_S`; what it finds then (cyclic
garbage made during the pause) is at most one bounded pause's worth.
"""

from __future__ import annotations

import gc

# Longer than a million-partition request takes to decode, handle and encode on an idle
# machine (~2-5 s), short enough that the cyclic garbage made meanwhile stays small.
MAX_PAUSE_S = 10.0

_held = False


def hold() -> bool:
    """Pause automatic collection, unless a request holds the pause already or collection is
    off anyway. True: this call paused it, and its caller must `release()` (in a `finally`)."""
    global _held
    if _held or not gc.isenabled():
        return False
    gc.disable()
    _held = True
    return True


def release() -> None:
    """The holder is done: collection resumes."""
    global _held
    if not _held:
        raise RuntimeError("gc_pause.release() without a hold()")
    _held = False
    gc.enable()


def held() -> bool:
    """Whether a request holds the pause (for tests)."""
    return _held
