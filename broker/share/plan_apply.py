"""Applying a plan's runs to the window: the second phase of every change to a share-partition
(`plans.py` made the plan; the manager wrote its durable ranges first).

A plan may be applied over several steps (`SharePartition.apply_runs`), in order, ended by
`settle`. In between, nothing may change the records the plan covers (a fetch, which takes
only AVAILABLE and new records, may), and SPSO has moved over what the steps so far finished,
so such a fetch sees the window as it is.
"""

from __future__ import annotations

from broker.share.archiving import Archiving
from broker.share.in_flight import InFlightBatch
from broker.share.plans import Plan
from broker.share.plans import ack_target
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.window import ShareWindow

ARCHIVING = RecordState.ARCHIVING


def apply_runs(
    window: ShareWindow, archiving: Archiving, plan: Plan, start: int, stop: int, now_ms: int
) -> None:
    """Apply `plan.runs[start:stop]`; records given up on are noted for their dead letters."""
    member_id, limit, dead_letter = plan.member_id, plan.delivery_count_limit, plan.dead_letter
    ack = AcknowledgeType.ACCEPT  # the run's type, read by target_of (one closure a plan)

    def target_of(b: InFlightBatch) -> RecordState | None:
        target = ack_target(b, ack, member_id, limit, dead_letter)
        if target is ARCHIVING:
            archiving.note(b.first, b.last, ack is AcknowledgeType.REJECT)
        return target

    for first, last, ack in plan.runs[start:stop]:  # target_of reads this ack
        if ack is AcknowledgeType.RENEW:
            window.renew(first, last, now_ms + plan.lock_duration_ms)
        else:
            window.finish(first, last, target_of, plan.wait_of)
    window.advance_start()
