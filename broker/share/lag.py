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
"""

from __future__ import annotations

from typing import Protocol

from storage.log import PartitionLog


class LaggingPartition(Protocol):
    @property
    def speo(self) -> int: ...

    def open_records(self) -> int: ...

    def next_fetch_offset(self) -> int | None: ...


def share_lag(sp: LaggingPartition, plog: PartitionLog) -> int:
    """Data records of [SPSO, log end) that are not delivery-complete (acknowledged or
    archived)."""
    return sp.open_records() + plog.data_records(sp.speo, plog.log_end_offset)


def oldest_available_offset(sp: LaggingPartition, plog: PartitionLog) -> int | None:
    """The lowest offset whose record the group could be handed now or once its window has
    room: the first AVAILABLE record of the window, else the first data record from SPEO on;
    None when there is none (everything is delivered, acquired or done)."""
    first = sp.next_fetch_offset()
    if first is not None and first < sp.speo:  # an AVAILABLE record inside the window
        return first
    first = plog.first_data_offset(sp.speo)
    return first if first < plog.log_end_offset else None
