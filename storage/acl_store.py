"""The ACL file in the data dir: every binding, rewritten atomically on each change.

ACL changes are rare and the set is small, so the whole set is one JSON document, written
through `atomic_write` (readers see the old file or the new one, never half), readable by the
broker's user only (0600: it says who may do what). A file that does not parse stops the
broker: starting with no ACLs could open what they closed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from typing import Final

from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType
from storage.errors import StorageException
from storage.fsutil import PRIVATE
from storage.fsutil import FileStamp
from storage.fsutil import atomic_write
from storage.fsutil import file_stamp
from storage.fsutil import read_stamped

ACL_FILE: Final = "acls.json"
_FORMAT_VERSION: Final = 1


class AclFileDamaged(StorageException):
    """The ACL file exists but cannot be read as bindings."""


def _decode(d: dict[str, Any]) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType[d["resource_type"]], str(d["name"]), PatternType[d["pattern_type"]]
        ),
        AccessControlEntry(
            str(d["principal"]),
            str(d["host"]),
            AclOperation[d["operation"]],
            AclPermissionType[d["permission"]],
        ),
    )


class AclStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / ACL_FILE

    def load(self) -> list[AclBinding]:
        """:raises AclFileDamaged: the file is there but is not a valid ACL file."""
        return self.load_stamped()[1]

    def stamp(self) -> FileStamp | None:
        """Which version of the file is there now (a stat): `--processes N` follows it."""
        return file_stamp(self.path)

    def load_stamped(self) -> tuple[FileStamp | None, list[AclBinding]]:
        """The bindings and the stamp of the file they were read from (blocking: a million
        bindings take seconds to parse; call it off the event loop but at start).

        :raises AclFileDamaged: the file is there but is not a valid ACL file."""
        found = read_stamped(self.path)
        if found is None:
            return None, []
        stamp, raw = found
        try:
            doc = json.loads(raw)
            return stamp, [_decode(d) for d in doc["acls"]]
        except (ValueError, KeyError, TypeError) as e:
            raise AclFileDamaged(f"{self.path}: {e!r}") from e

    def save(self, bindings: Iterable[AclBinding]) -> None:
        """Blocking (fsync): call it off the event loop.

        :raises OSError: the file was not replaced; the old one stands.
        """
        doc = {"version": _FORMAT_VERSION, "acls": [b.fields() for b in sorted(bindings)]}
        atomic_write(self.path, json.dumps(doc, indent=1).encode(), PRIVATE)
