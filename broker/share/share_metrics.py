"""What the share-partition manager counts, as calls, so broker/share needs no metrics library.

`broker.metrics.BrokerMetrics` implements it with Prometheus counters; `NO_METRICS` counts
nothing (tools and tests that do not look).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from broker.share.record_state import AcknowledgeType


class ShareMetrics(Protocol):
    def on_records_acquired(self, records: int) -> None:
        """Records handed out by a ShareFetch (deliveries)."""
        ...

    def on_acknowledgement(self, ok: bool, records: Mapping[AcknowledgeType, int]) -> None:
        """One partition's acknowledgement; `records` per type, counted only when `ok`."""
        ...

    def on_lock_timeouts(self, records: int) -> None:
        """Records whose acquisition lock expired before they were acknowledged."""
        ...

    def on_delivery_limit_archived(self, group: str, topic: str, records: int) -> None:
        """Records of `group` on `topic` given up on because a release found them at the
        delivery-count limit (archived, or ARCHIVING until their dead-letter copy)."""
        ...

    def on_share_state_write_failure(self) -> None:
        """A change not made because its share-state record could not be written."""
        ...

    def on_dead_letters(self, records: int, *, copied: bool) -> None:
        """Records archived after their copy to the dead-letter topic (`copied`), or without
        one because the group's dead-letter topic cannot be used (KIP-1191)."""
        ...

    def on_partition_loaded(self, seconds: float) -> None:
        """A share-partition's state was loaded (recovered or initialised) in `seconds`."""
        ...

    def on_member_released(self, records: int) -> None:
        """Records a departed member (or closed session) held, made available again."""
        ...


class _NoMetrics:
    def on_records_acquired(self, records: int) -> None:
        pass

    def on_acknowledgement(self, ok: bool, records: Mapping[AcknowledgeType, int]) -> None:
        pass

    def on_lock_timeouts(self, records: int) -> None:
        pass

    def on_delivery_limit_archived(self, group: str, topic: str, records: int) -> None:
        pass

    def on_share_state_write_failure(self) -> None:
        pass

    def on_dead_letters(self, records: int, *, copied: bool) -> None:
        pass

    def on_partition_loaded(self, seconds: float) -> None:
        pass

    def on_member_released(self, records: int) -> None:
        pass


NO_METRICS: ShareMetrics = _NoMetrics()
