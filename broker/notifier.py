"""Wakes long polls (Fetch, ShareFetch) when something changes on a partition they wait for.

Two kinds of waiter share one table per key:

- plain (Fetch, and a ShareFetch whose records may not go to just anyone: key order): every
  notification of the key wakes them all, since each reads the log for itself;
- in line (`Turn`: a ShareFetch): records are handed out once, so a notification that says how
  many records came (`notify(key, count)`) wakes only that many, oldest turn first. A waiter
  woken for nothing (someone took the records first) waits again with the turn it had, so it
  is not passed over by those that came after it; one woken but cancelled passes its wake on.
  A notification without a count (records came back, a transaction ended) wakes them all.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Hashable
from collections.abc import Iterable


def _time_up(fut: asyncio.Future[Hashable | None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Turn:
    """A waiter's place in line, kept across the waits of one request (`Notifier.wait`);
    `woke`: the key whose notification ended its last wait (None: its time ran out)."""

    __slots__ = ("ticket", "woke")

    def __init__(self) -> None:
        self.ticket = -1  # none yet: given at the first wait
        self.woke: Hashable | None = None


# Per key, each waiter's future and its ticket (None: plain), in ticket order.
_Waiters = dict[asyncio.Future[Hashable | None], int | None]


class Notifier:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, _Waiters] = {}
        self._tickets = itertools.count()

    def notify(self, key: Hashable, count: int | None = None) -> None:
        """Wake every plain waiter of `key`, and `count` waiters in line, oldest turn first
        (None: all of them)."""
        if not self._waiters:  # every append notifies; most find nobody waiting
            return
        waiters = self._waiters.pop(key, None)
        if not waiters:
            return
        kept: _Waiters | None = None
        for fut, ticket in waiters.items():
            if fut.done():
                continue
            if ticket is None or count is None or count > 0:
                fut.set_result(key)
                if ticket is not None and count is not None:
                    count -= 1
            else:
                if kept is None:
                    kept = {}
                kept[fut] = ticket
        if kept:
            self._waiters[key] = kept

    def waiting(self, key: Hashable) -> bool:
        """Whether a long poll waits on `key` now."""
        return bool(self._waiters.get(key))

    async def wait(
        self, keys: Iterable[Hashable], timeout_s: float, turn: Turn | None = None
    ) -> bool:
        """Wait until any key is notified or the timeout passes; True if notified. With a
        `turn`, wait in line (see the module docstring); `turn.woke` says which key woke it.

        The waiter's own future carries both outcomes (a timer handle ends it with None), so a
        notification resumes the waiting request in the next loop pass: `asyncio.wait_for`
        would relay it through a second future, one more pass of a busy loop per record."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Hashable | None] = loop.create_future()
        keys = list(keys)
        self._park(fut, keys, turn)
        timer = loop.call_later(timeout_s, _time_up, fut)
        try:
            woke = await fut
        except asyncio.CancelledError:
            if turn is not None and fut.done() and not fut.cancelled():
                woken_by = fut.result()
                if woken_by is not None:  # its wake must not be lost with it
                    self.notify(woken_by, 1)
            raise
        finally:
            timer.cancel()
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.pop(fut, None)
                    if not waiters:
                        del self._waiters[key]
        if turn is not None:
            turn.woke = woke
        return woke is not None

    def _park(
        self, fut: asyncio.Future[Hashable | None], keys: list[Hashable], turn: Turn | None
    ) -> None:
        ticket: int | None = None
        fresh = True
        if turn is not None:
            fresh = turn.ticket < 0
            if fresh:
                turn.ticket = next(self._tickets)
            ticket = turn.ticket
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is None:
                self._waiters[key] = {fut: ticket}
            elif fresh or _last_in_line(waiters, ticket):
                waiters[fut] = ticket  # tickets only grow: the newest goes last
            else:  # waits again, ahead of those that came after it
                self._waiters[key] = _in_line(waiters, fut, ticket)


def _last_in_line(waiters: _Waiters, ticket: int | None) -> bool:
    return ticket is None or all(t is None or t < ticket for t in waiters.values())


def _in_line(
    waiters: _Waiters, fut: asyncio.Future[Hashable | None], ticket: int | None
) -> _Waiters:
    """`waiters` with `fut` added at its ticket's place (plain waiters keep theirs first)."""
    entries = [*waiters.items(), (fut, ticket)]
    entries.sort(key=lambda e: -1 if e[1] is None else e[1])
    return dict(entries)
