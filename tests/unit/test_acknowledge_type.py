"""The one AcknowledgeType (protocol/acknowledge_type.py): wire values from the ShareFetch and
ShareAcknowledge schemas (AcknowledgeTypes: 0 gap, 1 accept, 2 release, 3 reject, 4 renew,
KIP-932 and KIP-1222), Kafka's `ackType` metric labels, and the client's enum agreeing with it
(the client keeps its own, without GAP, until it imports this one)."""

from __future__ import annotations

from broker.metrics import ACK_TYPE_NAMES
from broker.share.record_state import AcknowledgeType as ShareCoreAcknowledgeType
from client.share_acks import AcknowledgeType as ClientAcknowledgeType
from protocol.acknowledge_type import AcknowledgeType


def test_wire_values() -> None:
    assert {t.name: t.value for t in AcknowledgeType} == {
        "GAP": 0, "ACCEPT": 1, "RELEASE": 2, "REJECT": 3, "RENEW": 4,
    }  # fmt: skip
    assert ShareCoreAcknowledgeType is AcknowledgeType


def test_metric_labels_are_kafkas() -> None:
    assert [ACK_TYPE_NAMES[t] for t in sorted(ACK_TYPE_NAMES)] == [
        "Accept", "Release", "Reject", "Renew",
    ]  # fmt: skip


def test_the_clients_types_are_the_same_values() -> None:
    for t in ClientAcknowledgeType:
        assert AcknowledgeType[t.name] == t
