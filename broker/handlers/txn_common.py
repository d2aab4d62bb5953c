"""What the transactional APIs share: the PRODUCER_FENCED answer of older versions."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


def for_version(code: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED came with `fenced_since` of the API (its Request.json says so); older
    clients are answered INVALID_PRODUCER_EPOCH instead, as Kafka's KafkaApis does."""
    if code is ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return code
