"""Share sessions (KIP-932): per (group, member), the partitions a share consumer fetches from.

Epoch 0 opens a session (replacing an old one), -1 closes it, any other value must equal the
session's next epoch, which ShareFetch and ShareAcknowledge advance together.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass
from dataclasses import field
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from broker.share.errors import ShareException

OPEN_EPOCH = 0
CLOSE_EPOCH = -1

TopicIdPartition = tuple[uuid.UUID, int]


class ShareSessionError(ShareException):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class ShareSessionKey(NamedTuple):
    """A tuple: hashed and compared in C (a frozen dataclass's `__hash__` and `__eq__` are
    Python, run several times per ShareFetch)."""

    group_id: str
    member_id: str


@dataclass(slots=True)
class ShareSession:
    key: ShareSessionKey
    epoch: int = 1  # the epoch the next request must carry
    # Insertion-ordered, so fetches visit partitions in the order they were added.
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)
    # Set when the member left the group with the session still open: its closing
    # acknowledgements may still come, so its records are released at this time or on close.
    release_deadline_ms: int | None = None
    # Who opened it (`User:name`): only that principal may fetch or acknowledge in it.
    principal: str = ""


class ShareSessionCache:
    def __init__(self, max_sessions: int = 1000) -> None:
        self._max = max_sessions
        self._sessions: OrderedDict[ShareSessionKey, ShareSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: ShareSessionKey) -> ShareSession | None:
        return self._sessions.get(key)

    def open(self, key: ShareSessionKey) -> ShareSession:
        """:raises ShareSessionError: SHARE_SESSION_LIMIT_REACHED when the cache is full."""
        self._sessions.pop(key, None)
        if len(self._sessions) >= self._max:
            raise ShareSessionError(
                ErrorCode.share_session_limit_reached, f"{self._max} share sessions open"
            )
        session = self._sessions[key] = ShareSession(key)
        return session

    def advance(self, key: ShareSessionKey, epoch: int) -> ShareSession:
        """Check a request's epoch against its session and move the session on by one.

        :raises ShareSessionError: SHARE_SESSION_NOT_FOUND or INVALID_SHARE_SESSION_EPOCH.
        """
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(
                ErrorCode.share_session_not_found, f"no share session for {key.member_id}"
            )
        if epoch != session.epoch:
            raise ShareSessionError(
                ErrorCode.invalid_share_session_epoch, f"epoch {epoch}, expected {session.epoch}"
            )
        session.epoch += 1
        self._sessions.move_to_end(key)
        return session

    def close(self, key: ShareSessionKey) -> ShareSession | None:
        return self._sessions.pop(key, None)

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())
