"""Storage exceptions; each carries the Kafka error a handler should answer with."""

from __future__ import annotations

from typing import ClassVar

from kio.schema.errors import ErrorCode

from protocol.produce_response import RecordError


class StorageException(Exception):
    """The root of every exception storage/ raises. Those outside `StorageError` (damaged
    files, a held data dir, bad credentials) keep the builtin base they had (ValueError,
    OSError), so whatever caught them before still does."""


class StorageError(StorageException):
    """A failure answered with the Kafka error it carries."""

    error_code: ClassVar[ErrorCode] = ErrorCode.unknown_server_error


class OffsetOutOfRange(StorageError):
    error_code = ErrorCode.offset_out_of_range


class OutOfOrderSequence(StorageError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpoch(StorageError):
    error_code = ErrorCode.invalid_producer_epoch


class InvalidConfig(StorageError):
    error_code = ErrorCode.invalid_config


class InvalidTopic(StorageError):
    error_code = ErrorCode.invalid_topic_exception


class TopicAlreadyExists(StorageError):
    error_code = ErrorCode.topic_already_exists


class InvalidPartitions(StorageError):
    error_code = ErrorCode.invalid_partitions


class UnknownTopicOrPartition(StorageError):
    error_code = ErrorCode.unknown_topic_or_partition


class InvalidRecord(StorageError):
    """Records the topic refuses (a null key on a compacted topic): their batch fails whole,
    and `record_errors` names each of them by its index in that batch (KIP-467)."""

    error_code = ErrorCode.invalid_record

    def __init__(self, message: str, record_errors: tuple[RecordError, ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class KafkaStorageError(StorageError):
    """A disk write failed (ENOSPC, EIO): the log is as it was before the write."""

    error_code = ErrorCode.kafka_storage_error


class CorruptRecords(StorageError):
    """The offsets [first_offset, last_offset] lie in a damaged stretch of the log."""

    error_code = ErrorCode.corrupt_message

    def __init__(self, first_offset: int, last_offset: int, where: str) -> None:
        super().__init__(f"offsets {first_offset}-{last_offset} are damaged in {where}")
        self.first_offset = first_offset
        self.last_offset = last_offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1
