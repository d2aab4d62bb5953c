"""Automatic garbage collection paused for one large request at a time, for a bounded time.

A full collection walks every live container object, on whichever thread allocates at the
time, and it runs each time the objects that survived collections grow by a quarter. A request
naming a million partitions makes millions of objects (decoded, handled, answered): the
collections their making triggers held the GIL, and with it the event loop, for 50-300 ms each.
Those objects are freed by reference counting once the request is answered, so nothing the
collector would have found is lost by waiting.

The pause is bounded: one request holds it at a time (another large request in flight meanwhile
runs under it but never extends it), until `MAX_PAUSE_CPU_S` of the process's CPU time is spent
or `MAX_PAUSE_S` have passed, and its holder gives it back in a `finally`. A client sending large
requests back to back cannot keep collection off either: re-enabling collection runs none by
itself (one runs at the next allocations past a threshold), so a pause taken again before any
collection ran first forces one, of every generation. It walks what is alive and not frozen
(the broker freezes what it opens: `broker.gc_freeze`), the last request's objects being freed
by then; what it finds (cyclic garbage made during the pause) is one bounded pause's worth.

The bound counts CPU time, not time on the clock: garbage is made by work done, and a loaded
machine (other processes on its cores) stretches a request's time tenfold, not its work. A bound
on the clock alone ran out before a request of a million partitions was answered, and collection
resumed with its millions of objects alive: three collections in a row (young, middle, full),
each walking all of them on the event loop, held it 1.2 s (CPU) between them.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

# More CPU than a million-partition request takes to decode, handle and encode (~2-5 s idle,
# 10.5 s measured on 2 cores at load 30), little enough that the cyclic garbage made meanwhile
# stays small.
MAX_PAUSE_CPU_S = 30.0
# A backstop on the clock, for a holder that waits rather than works (a long poll, say).
MAX_PAUSE_S = 120.0
# How often a holder still waiting for its answer reads the CPU clock.
CHECK_EVERY_S = 0.25
cpu_clock: Callable[[], float] = time.process_time  # the whole process's, every thread's

_held = False
_collections_at_release = -1  # collections run so far, when the last pause ended
_since_cpu = 0.0  # the CPU clock when the pause began
_since = 0.0  # time.monotonic() then


def hold() -> bool:
    """Pause automatic collection, unless a request holds the pause already or collection is
    off anyway. True: this call paused it, and its caller must `release()` (in a `finally`)."""
    global _held, _since_cpu, _since
    if _held or not gc.isenabled():
        return False
    if _collections() == _collections_at_release:  # none since the last pause: one now
        gc.collect()
    gc.disable()
    _held = True
    _since_cpu, _since = cpu_clock(), time.monotonic()
    return True


def release() -> None:
    """The holder is done: collection resumes."""
    global _held, _collections_at_release
    if not _held:
        raise RuntimeError("gc_pause.release() without a hold()")
    _held = False
    _collections_at_release = _collections()
    gc.enable()


def _collections() -> int:
    """Collections of any generation run so far (automatic or forced)."""
    return sum(s["collections"] for s in gc.get_stats())


async def held_until(answered: asyncio.Future[None]) -> None:
    """For the holder: until `answered` is done, or the pause has reached its bound
    (`MAX_PAUSE_CPU_S` of the process's CPU time, `MAX_PAUSE_S` on the clock, since it began),
    whichever comes first. `answered` is never cancelled here; the caller `release()`s."""
    while not answered.done():
        left = _since + MAX_PAUSE_S - time.monotonic()
        if left <= 0 or cpu_clock() - _since_cpu >= MAX_PAUSE_CPU_S:
            return
        await asyncio.wait((answered,), timeout=min(CHECK_EVERY_S, left))


def held() -> bool:
    """Whether a request holds the pause (for tests)."""
    return _held
