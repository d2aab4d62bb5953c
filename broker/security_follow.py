"""`--processes N`: the other processes follow node 0's ACL and SCRAM credential files.

Node 0 alone writes `acls.json` and `scram-credentials.json` (changes made elsewhere are
forwarded to it: `broker.controller_forward`). The others read each again when its stamp
(inode, modification time, size) moves: every second, and at once after a change they
forwarded, so its client sees the change on the process it asked. Reading and parsing run in
threads (a million bindings), the result is swapped in whole: a process is never ahead of node
0's file, and never sees half of one (`atomic_write`).
"""

from __future__ import annotations

import structlog

from broker import gc_freeze
from broker.context import BrokerServices

log = structlog.get_logger("shoal.credentials")


async def follow_credentials(s: BrokerServices) -> bool:
    """Take the credentials file as node 0 left it, if it changed (a stat when it did not);
    True if it did. A file that does not parse keeps the users in force, with one log line
    per version of it."""
    store = s.credentials
    if store.file_stamp() == store.stamp:
        return False
    async with s.credentials_lock:
        try:
            stamp, users = await gc_freeze.loaded_in_bulk(store.read_file, lambda r: len(r[1]))
        except (ValueError, KeyError, TypeError) as e:
            store.stamp = store.file_stamp()
            log.error("credentials file not followed; the users in force stay", error=str(e))
            return False
        except OSError as e:
            log.error("credentials file not read; the users in force stay", error=str(e))
            return False
        if stamp == store.stamp:
            return False
        store.restore(users)
        store.stamp = stamp
    log.info("credentials followed", users=len(users))
    return True


async def follow_security(s: BrokerServices) -> None:
    """A duty of the processes other than node 0 (`Server.start`)."""
    if s.acls is not None:
        await s.acls.follow()
    await follow_credentials(s)
