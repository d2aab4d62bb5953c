"""share.acquire.mode=record_limit (KIP-1206), or ShareFetch v2's ShareAcquireMode 1: at most
MaxRecords records; the last range may end inside a stored batch.

The cut is found per range (`ShareWindow.acquire`'s `limit`), never per record. A new batch
joins the window as far as the budget reaches, within `max_record_locks` (the first new batch
of a fetch whenever the window has room for one record).
"""

from __future__ import annotations

from broker.share.acquire.policy import Fetch
from broker.share.window import AcquiredRecords
from broker.share.window import ShareWindow


class RecordLimit:
    def acquire(self, window: ShareWindow, fetch: Fetch) -> list[AcquiredRecords]:
        out: list[AcquiredRecords] = []
        taken = 0
        added_new = False
        for lo, last in window.walk(fetch.spans, fetch.cursor, fetch.committed):
            budget = fetch.max_records - taken
            if last >= window.end:
                # At most this far, however the budget is spent.
                reach = min(last, max(lo, window.end) + budget - 1)
                if not window.may_extend(reach, added_new, fetch.max_record_locks):
                    break
                added_new = True
            taken += window.acquire(
                lo, last, fetch.member_id, fetch.deadline, out, budget, fetch.now_ms
            )
            if taken >= fetch.max_records:
                break
        return out


RECORD_LIMIT = RecordLimit()
