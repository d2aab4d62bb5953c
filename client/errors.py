"""Typed client errors: every failure the broker reports carries its kio `ErrorCode`."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class KafkaError(Exception):
    """The broker (or the client, on its behalf) reported `error_code`."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        self.error_code = error_code
        self.message = message or error_code.name
        super().__init__(f"{error_code.name} ({int(error_code)}): {self.message}")

    @property
    def retriable(self) -> bool:
        return bool(self.error_code.retriable)


class UnsupportedVersionError(KafkaError):
    """The broker does not offer a version of an API that this client can speak."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.unsupported_version, message)


class TopicError(KafkaError):
    """A topic or partition is unknown, already exists, or is otherwise unusable."""


class CoordinatorError(KafkaError):
    """The group coordinator cannot be found or refuses the request."""


class MembershipError(KafkaError):
    """The group does not know this member or epoch (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH)."""


class ShareSessionError(KafkaError):
    """The share session is gone (SHARE_SESSION_NOT_FOUND) or out of step (INVALID_..._EPOCH)."""


class InvalidRecordStateError(KafkaError):
    """An acknowledgement was refused: this member does not hold the record in a fitting state."""


class ClientStateError(RuntimeError):
    """The client was used in a way its current state does not allow (closed, wrong mode)."""


_BY_CODE: dict[ErrorCode, type[KafkaError]] = {
    ErrorCode.unknown_topic_or_partition: TopicError,
    ErrorCode.unknown_topic_id: TopicError,
    ErrorCode.topic_already_exists: TopicError,
    ErrorCode.invalid_topic_exception: TopicError,
    ErrorCode.coordinator_not_available: CoordinatorError,
    ErrorCode.not_coordinator: CoordinatorError,
    ErrorCode.coordinator_load_in_progress: CoordinatorError,
    ErrorCode.unknown_member_id: MembershipError,
    ErrorCode.fenced_member_epoch: MembershipError,
    ErrorCode.share_session_not_found: ShareSessionError,
    ErrorCode.invalid_share_session_epoch: ShareSessionError,
    ErrorCode.invalid_record_state: InvalidRecordStateError,
}


def error_for(code: int, message: str | None = None) -> KafkaError:
    """The most specific `KafkaError` for a wire error code (an int16 or an `ErrorCode`)."""
    error_code = ErrorCode(code)
    if error_code is ErrorCode.unsupported_version:
        return UnsupportedVersionError(message or "unsupported version")
    return _BY_CODE.get(error_code, KafkaError)(error_code, message)


def raise_for(code: int, message: str | None = None) -> None:
    """Raise the matching `KafkaError` unless `code` is NONE."""
    if code != ErrorCode.none:
        raise error_for(code, message)
