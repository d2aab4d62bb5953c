"""The acknowledgement types of ShareFetch and ShareAcknowledge: the one definition.

`AcknowledgementBatch.AcknowledgeTypes` in both requests' schemas: 0 gap (an offset with no
record), 1 accept, 2 release, 3 reject (KIP-932), 4 renew (KIP-1222, v2). They are wire
values, and the broker's share core and metrics read them as they are sent.
"""

from __future__ import annotations

from enum import IntEnum


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4

    @property
    def metric_name(self) -> str:
        """Kafka's `ackType` label of RecordAcknowledgementsPerSec ("Accept", ...)."""
        return self.name.title()
