"""Group configs written off the event loop, before the answer that changed them.

IncrementalAlterConfigs, AlterConfigs and DeleteGroups change group configs in memory
(`GroupConfigs.change`, `forget_group`), then await `durable`: the file is written (tmp, fsync,
rename, fsync of the directory: 10-100 ms of a disk's time, the loop's when done on it) in a
thread, and the answer goes out once it is on disk. One write at a time; a write takes every
change made up to its start, so requests that changed configs meanwhile share it (a request
altering 50,000 groups writes once, not 50,000 times).

A write runs to its end (`broker.to_the_end`) when the request that waits for it is cancelled
(its connection lost): the lock is held until the file is written and recorded as saved, so a
next write never runs beside it on the same tmp file, and a change a cancelled request made in
memory is on disk too, not only until a restart.
"""

from __future__ import annotations

import asyncio

from broker.to_the_end import Changes
from coordinator.group_configs import GroupConfigs


class GroupConfigSaves:
    def __init__(self, changes: Changes) -> None:
        self._changes = changes
        self._lock = asyncio.Lock()

    async def durable(self, configs: GroupConfigs) -> None:
        """Return once every change made to `configs` before this call is written.

        :raises OSError: the write failed (the change stays in memory, unanswered as done).
        """
        await self._changes.to_the_end(self._durable(configs, configs.version))

    async def _durable(self, configs: GroupConfigs, wanted: int) -> None:
        async with self._lock:
            pending = configs.unsaved()
            if pending is None or configs.saved_through(wanted):
                return
            version, data = pending
            await asyncio.to_thread(configs.write, data)
            configs.saved(version)
