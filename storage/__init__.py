"""Per-partition segment logs, their indexes, recovery and retention."""

from storage.config import LogConfig
from storage.errors import InvalidConfig
from storage.errors import InvalidPartitions
from storage.errors import InvalidProducerEpoch
from storage.errors import InvalidTopic
from storage.errors import OffsetOutOfRange
from storage.errors import OutOfOrderSequence
from storage.errors import StorageError
from storage.errors import TopicAlreadyExists
from storage.errors import UnknownTopicOrPartition
from storage.log import AppendResult
from storage.log import BatchSpan
from storage.log import PartitionLog
from storage.log_manager import LogManager
from storage.memory_log import MemoryLog
from storage.segment_log import SegmentLog
from storage.topics import TopicInfo

__all__ = [
    "AppendResult",
    "BatchSpan",
    "InvalidConfig",
    "InvalidPartitions",
    "InvalidProducerEpoch",
    "InvalidTopic",
    "LogConfig",
    "LogManager",
    "MemoryLog",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "PartitionLog",
    "SegmentLog",
    "StorageError",
    "TopicAlreadyExists",
    "TopicInfo",
    "UnknownTopicOrPartition",
]
