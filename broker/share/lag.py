"""A share-partition's lag and its oldest available record: the one place both are computed,
for the admin API (DescribeShareGroupOffsets, so `shoal share-groups describe`) and for the
metrics alike.

Lag is what the group still has to finish, in data records (KIP-1226's "log end - SPSO -
delivery-complete records", without the offsets that hold no record to deliver): the open
(available, acquired or waiting for a dead-letter copy) records of the window, plus the data
records from SPEO to the log end. Control batches (share state, transaction markers) and the
cleaner's empty batches are not data: the window archives them as it passes them, and past
SPEO they are subtracted by range (`PartitionLog.data_records`), never counted by reading.
So a group that has finished everything shows 0, however many share-state records it wrote
after its last data record (Kafka shows 1 after a transaction's marker).

A read_committed group (share.isolation.level) counts to the last stable offset instead of the
log end: the records of an open transaction are not yet the group's to deliver, so a group
that has finished everything below the LSO shows 0, as a read_committed consumer's lag is
relative to the LSO (KIP-98). Kafka 4.2's DescribeShareGroupOffsets counts to the high
watermark whatever the group's isolation (`NetworkPartitionMetadataClient` always lists the
latest offsets READ_UNCOMMITTED): Shoal's own choice, like the control records above. Records
of aborted transactions past SPEO still count until the window archives them (telling them
apart would take the aborted index per scrape).
"""

from __future__ import annotations

from typing import Protocol

from storage.log import PartitionLog


class LaggingPartition(Protocol):
    @property
    def speo(self) -> int: ...

    @property
    def read_committed(self) -> bool: ...

    def open_records(self) -> int: ...

    def next_fetch_offset(self) -> int | None: ...


def lag_end(sp: LaggingPartition, plog: PartitionLog) -> int:
    """Where the group's backlog ends: the LSO for a read_committed group, else the log end."""
    return plog.last_stable_offset if sp.read_committed else plog.log_end_offset


def share_lag(sp: LaggingPartition, plog: PartitionLog) -> int:
    """Data records of [SPSO, log end) (LSO: read_committed) that are not delivery-complete
    (acknowledged or archived)."""
    return sp.open_records() + plog.data_records(sp.speo, max(sp.speo, lag_end(sp, plog)))


def oldest_available_offset(sp: LaggingPartition, plog: PartitionLog) -> int | None:
    """The lowest offset whose record the group could be handed now or once its window has
    room: the first AVAILABLE record of the window, else the first data record from SPEO on
    (below the LSO for a read_committed group); None when there is none (everything is
    delivered, acquired or done)."""
    first = sp.next_fetch_offset()
    if first is not None and first < sp.speo:  # an AVAILABLE record inside the window
        return first
    first = plog.first_data_offset(sp.speo)
    return first if first < lag_end(sp, plog) else None
