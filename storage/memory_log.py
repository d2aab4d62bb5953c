"""In-memory PartitionLog with the same behaviour as SegmentLog, for unit tests."""

from __future__ import annotations

from storage.base_log import SegmentedLog
from storage.config import LogConfig
from storage.producer_state import ProducerStateManager
from storage.segment import MemorySegment
from storage.segment import Segment


class MemoryLog(SegmentedLog):
    def __init__(self, config: LogConfig | None = None) -> None:
        config = config or LogConfig()
        segment = MemorySegment(0, config.index_interval_bytes)
        super().__init__(config, [segment], ProducerStateManager())

    def _new_segment(self, base_offset: int) -> Segment:
        return MemorySegment(base_offset, self.config.index_interval_bytes)

    def close(self) -> None:
        self.flush()

    def delete(self) -> None:
        self._segments[:] = [self._new_segment(self.log_end_offset)]
        self._bases[:] = [self.log_end_offset]
