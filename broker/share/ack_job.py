"""One partition's acknowledgement, done in steps so that no step holds the event loop long.

A client may acknowledge every record it holds one range each: librdkafka's ShareConsumer,
after polling 5,000 records and acknowledging them alternately ACCEPT/REJECT, sends 5,000
ranges. Planning and applying cost several microseconds a range, so such a request done in
one go would hold the loop for ~70 ms, and one over a window of tiny records far longer. A
job does it in steps of at most `STEP_RUNS` runs (a run: offsets acknowledged alike):

1. parse: cut the batches into runs (INVALID_REQUEST for a malformed request);
2. plan: check every run (INVALID_RECORD_STATE for a record the member does not hold) and
   compute the durable change; nothing changes yet;
3. write: the whole request's change as one SHARE_DELTA (or checkpoint);
4. apply: the plan, a slice of runs per step;
5. settle: SPSO moves over what is done, and the manager does its bookkeeping.

All or nothing, as Kafka's `SharePartition.acknowledge` (core/src/main/java/kafka/server/
share/SharePartition.java): it starts every batch's transition under the partition's lock,
rolls all of them back if one fails (`rollbackOrProcessStateUpdates`), and persists the
request's batches in one WriteShareGroupState; memory changes only after the write
succeeds. Here the write comes after every run is checked, and memory changes only after it.
The manager keeps every other change of the share-partition's records and every other write
of its share state out from the first step to the last (`SharePartitionManager.
begin_acknowledge`), so a plan made over several steps stays true and memory is never behind
what was written for longer than the job runs. A fetch may still acquire from the
share-partition meanwhile: it takes only AVAILABLE and new records, which no plan covers.

Nearly every acknowledgement needs no job: librdkafka sends at most max.poll.records = 500
merged ranges, and a loaded share-partition's request of at most `STEP_RUNS` entries is done
in one go by `SharePartitionManager.acknowledge`. A job of that size (on a share-partition not
loaded) is done in its first step.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from enum import Enum
from itertools import islice

from kio.schema.errors import ErrorCode

from broker.share.ack_runs import AckBatch
from broker.share.ack_runs import MalformedAcks
from broker.share.ack_runs import Run
from broker.share.ack_runs import ack_runs
from broker.share.plans import Plan
from broker.share.plans import PlanDraft
from broker.share.record_state import AcknowledgeType
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey

# ~5 ms of parsing, planning or applying on the machines measured (see the module docstring).
STEP_RUNS = 500

GAP = AcknowledgeType.GAP
RENEW = AcknowledgeType.RENEW


class Phase(Enum):
    PARSE = "parse"
    PLAN = "plan"
    WRITE = "write"
    APPLY = "apply"
    DONE = "done"


Writer = Callable[[SharePartition, Plan, int], "int | ErrorCode | None"]
"""Makes a plan's change durable: the offset written (None: nothing to write), or the error
that drops the plan (the manager's `_write`)."""


class AckJob:
    """One member's acknowledgement of one share-partition (`sp` None: the share-partition is
    not loaded, so the member holds nothing there), stepped by `step()` until `outcome`."""

    __slots__ = (
        "_big", "_draft", "_on_done", "_on_pending", "_planned", "_renew_allowed", "_runs",
        "_unparsed", "_write", "counts", "key", "member_id", "message", "now_ms", "outcome",
        "pending", "phase", "plan", "sp", "spso_before", "steps", "written",
    )  # fmt: skip

    def __init__(
        self,
        key: SharePartitionKey,
        sp: SharePartition | None,
        member_id: str,
        batches: Iterable[AckBatch],
        *,
        renew_allowed: bool = True,
        now_ms: int,
        write: Writer,
        on_pending: Callable[[AckJob], None] = lambda job: None,
        on_done: Callable[[AckJob], None],
    ) -> None:
        self.key = key
        self.sp = sp
        self.member_id = member_id
        self.spso_before: int | None = None  # the manager's: SPSO when fetchers were held back
        self.now_ms = now_ms
        self._write = write
        self._on_pending = on_pending  # the first step did not finish it: others must wait
        self._on_done = on_done
        self.pending = False
        self._unparsed = ack_runs(batches)
        self._renew_allowed = renew_allowed
        self._runs: list[Run] = []
        self._planned = 0  # runs planned, then runs applied
        self._draft: PlanDraft | None = None
        self.plan: Plan | None = None
        self.written: int | None = None  # offset of the share-state record written
        self.counts: dict[AcknowledgeType, int] = {}  # records per type, for the metrics
        self.phase = Phase.PARSE
        self.outcome: ErrorCode | None = None
        self.message: str | None = None  # why, for the response's error message
        self.steps = 0
        self._big = False  # more than one step's work: one slice per step

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    def step(self) -> bool:
        """Do the next slice of the work; True once the acknowledgement is done (`outcome`)."""
        self.steps += 1
        if self.steps == 1:
            if self._parse() and not self._big:
                # Small (nearly every acknowledgement): every phase now, straight through.
                if self.phase is Phase.PLAN:
                    self._plan()
                if self.phase is Phase.WRITE:
                    self._write_plan()
                if self.phase is Phase.APPLY:
                    self._apply()
            if self.phase is not Phase.DONE:
                self.pending = True
                self._on_pending(self)
            return self.phase is Phase.DONE
        while self.phase is not Phase.DONE:
            finished = self._advance()
            if self._big or not finished:  # a big job does one slice (or one write) a step
                break
        return self.phase is Phase.DONE

    def abandon(self, outcome: ErrorCode) -> None:
        """The share-partition is gone (its topic or group deleted): stop where it is."""
        if not self.done:
            self._finish(outcome)

    def run_to_end(self) -> ErrorCode:
        """Every remaining step at once (tools, tests, and the rare operation that cannot wait)."""
        while not self.step():
            pass
        assert self.outcome is not None
        return self.outcome

    # ------------------------------------------------------------------------------ phases

    def _advance(self) -> bool:
        """One slice of the current phase; whether the phase ended."""
        if self.phase is Phase.PARSE:
            return self._parse()
        if self.phase is Phase.PLAN:
            return self._plan()
        if self.phase is Phase.WRITE:
            return self._write_plan()
        return self._apply()

    def _parse(self) -> bool:
        try:
            chunk = list(islice(self._unparsed, STEP_RUNS))
        except MalformedAcks:
            return self._finish(ErrorCode.invalid_request)
        counts = self.counts
        for first, last, ack in chunk:
            counts[ack] = counts.get(ack, 0) + last - first + 1
        if RENEW in counts and not self._renew_allowed:
            self.message = "RENEW needs version 2"  # KIP-1222
            return self._finish(ErrorCode.invalid_request)
        self._runs += chunk
        if len(chunk) == STEP_RUNS:
            self._big = True
            return False
        if self.sp is None:  # nothing held here: GAPs alone change nothing
            gaps_only = counts.keys() <= {GAP}
            return self._finish(ErrorCode.none if gaps_only else ErrorCode.invalid_record_state)
        self._draft = self.sp.draft(self.member_id, self.now_ms)
        self.phase = Phase.PLAN
        return True

    def _plan(self) -> bool:
        assert self.sp is not None and self._draft is not None
        start = self._planned
        chunk = self._runs[start : start + STEP_RUNS]
        refused = self.sp.plan_more(self._draft, chunk)
        if refused is not None:
            return self._finish(refused)
        self._planned += len(chunk)
        if self._planned < len(self._runs):
            return False
        self.plan = self._draft.plan()
        self._draft, self._planned = None, 0
        self.phase = Phase.WRITE
        return True

    def _write_plan(self) -> bool:
        assert self.sp is not None and self.plan is not None
        written = self._write(self.sp, self.plan, self.now_ms)
        if isinstance(written, ErrorCode):
            return self._finish(written)
        self.written = written
        self.phase = Phase.APPLY
        return True

    def _apply(self) -> bool:
        assert self.sp is not None and self.plan is not None
        start = self._planned
        stop = min(start + STEP_RUNS, len(self.plan.runs))
        self.sp.apply_runs(self.plan, start, stop, now_ms=self.now_ms)
        self._planned = stop
        if stop < len(self.plan.runs):
            return False
        self.sp.settle(self.plan)
        if self.written is not None:
            self.sp.pass_own_record(self.written)
        return self._finish(ErrorCode.none)

    def _finish(self, outcome: ErrorCode) -> bool:
        self.outcome = outcome
        self.phase = Phase.DONE
        self._runs = []
        self._on_done(self)
        return True
