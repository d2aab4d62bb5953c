"""Record states of a share-partition and their transition table (KIP-932, KIP-1191).

The numeric values are the ones written in durable share state, so they must never change.
The acknowledgement types that move records are wire values (`protocol.acknowledge_type`),
named here too for the share core's modules.
"""

from __future__ import annotations

from enum import IntEnum

from broker.share.errors import ShareException
from protocol.acknowledge_type import AcknowledgeType

__all__ = ["AcknowledgeType", "InvalidStateTransition", "RecordState"]


class InvalidStateTransition(ShareException, ValueError):
    """An internal bug: a move the transition table forbids. Never mapped to a client error."""


class RecordState(IntEnum):
    """The state of one in-flight record; the transition table lives here, as in Kafka."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # KIP-1191: on its way to the dead-letter topic, then ARCHIVED
    ARCHIVED = 4

    @property
    def is_terminal(self) -> bool:
        """ACKNOWLEDGED and ARCHIVED never change again; SPSO may move over them."""
        return self is RecordState.ACKNOWLEDGED or self is RecordState.ARCHIVED

    def validate_transition(self, new: RecordState) -> RecordState:
        """Return `new` if the move self -> new is allowed, else raise InvalidStateTransition.

        Every allowed move:
          AVAILABLE -> ACQUIRED      acquisition by a member (delivery count + 1)
          AVAILABLE -> ARCHIVED      the offset holds nothing deliverable: a control batch, a
                                     gap in the log, or a record removed by retention
          ACQUIRED  -> AVAILABLE     RELEASE, lock expiry, member departure (below the limit)
          ACQUIRED  -> ACKNOWLEDGED  ACCEPT
          ACQUIRED  -> ARCHIVED      REJECT, GAP, or RELEASE/expiry at the delivery-count limit
          ACQUIRED  -> ARCHIVING     REJECT or the limit, in a group with a dead-letter topic
          ARCHIVING -> ARCHIVED      copied to the dead-letter topic (or it cannot be used)
        ACKNOWLEDGED and ARCHIVED are terminal. ARCHIVING is not: SPSO stays below it until
        the copy is durable, so a crash in between copies again rather than loses the record.
        RENEW is not a transition (same state).
        """
        allowed = _TRANSITIONS[self]
        if new not in allowed:
            raise InvalidStateTransition(f"record state cannot move from {self.name} to {new.name}")
        return new


_TRANSITIONS: dict[RecordState, frozenset[RecordState]] = {
    RecordState.AVAILABLE: frozenset({RecordState.ACQUIRED, RecordState.ARCHIVED}),
    RecordState.ACQUIRED: frozenset(
        {
            RecordState.AVAILABLE,
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVING,
            RecordState.ARCHIVED,
        }
    ),
    RecordState.ACKNOWLEDGED: frozenset(),
    RecordState.ARCHIVING: frozenset({RecordState.ARCHIVED}),
    RecordState.ARCHIVED: frozenset(),
}
