"""Automatic garbage collection paused while a large request is in flight.

A full collection walks every live container object, on whichever thread allocates at the
time, and it runs each time the objects that survived collections grow by a quarter. A request
naming a million partitions makes millions of objects (decoded, handled, answered): the
collections their making triggers held the GIL, and with it the event loop, for 100-300 ms
each, and tripled the time to decode the request. Those objects are freed by reference
counting once the request is answered, so nothing the collector would have found is lost by
waiting: it runs again when the last large request in flight is done.
"""

from __future__ import annotations

import gc

_held = 0
_resume = False  # whether collection was on when the first hold began


def hold() -> None:
    """A large request starts: pause automatic collection until its `release`."""
    global _held, _resume
    if _held == 0:
        _resume = gc.isenabled()
        gc.disable()
    _held += 1


def release() -> None:
    """A large request is done; the last one resumes collection (if it was on before)."""
    global _held
    if _held == 0:
        raise RuntimeError("gc_pause.release() without a hold()")
    _held -= 1
    if _held == 0 and _resume:
        gc.enable()


def held() -> int:
    """Large requests in flight (for tests)."""
    return _held
