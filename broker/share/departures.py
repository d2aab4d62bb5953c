"""What happens when a share-group member goes: its acquired records come back.

librdkafka sends its closing ShareAcknowledge before or after its leave heartbeat. So a member
that leaves with its share session still open keeps its records for a short grace period, or
until it closes the session (epoch -1), whichever is first; a member that times out loses them
at once.
"""

from __future__ import annotations

from broker.context import BrokerServices
from broker.share.share_session_cache import ShareSessionKey
from coordinator.share_group import Departure

LEAVE_GRACE_MS = 5_000


def member_departed(services: BrokerServices, departure: Departure, now_ms: int) -> None:
    key = ShareSessionKey(departure.group_id, departure.member_id)
    session = services.share_sessions.get(key)
    if departure.reason == "left" and session is not None:
        session.release_deadline_ms = now_ms + LEAVE_GRACE_MS
        return
    services.share_sessions.close(key)
    services.share_partitions.release_member(departure.group_id, departure.member_id, now_ms)


def session_closed(services: BrokerServices, group_id: str, member_id: str, now_ms: int) -> None:
    """A share session ended (epoch -1): records the member still holds are released (KIP-932)."""
    services.share_sessions.close(ShareSessionKey(group_id, member_id))
    services.share_partitions.release_member(group_id, member_id, now_ms)


def expire_members(services: BrokerServices) -> None:
    """The coordinator's session timeout and the leave grace period, run as a broker duty."""
    now = services.now_ms()
    for departure in services.coordinator.expire(now):
        member_departed(services, departure, now)
    for session in services.share_sessions.sessions():
        if session.release_deadline_ms is not None and session.release_deadline_ms <= now:
            session_closed(services, session.key.group_id, session.key.member_id, now)
