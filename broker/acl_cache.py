"""One connection's cached authorization decisions (read by `broker.authorization`).

It sits below `broker.context`, whose `RequestContext` carries one, and below
`broker.authorization`, which fills it: neither needs the other's module to name it.
"""

from __future__ import annotations

from typing import Final

from protocol.acl import AclOperation
from protocol.acl import ResourceType

_CACHE_MAX: Final = 4096  # entries per connection; cleared, not evicted, past this

_Key = tuple[str, AclOperation, ResourceType, str]


class AclCache:
    """One connection's recent decisions, valid for one authorizer version."""

    __slots__ = ("_decisions", "_version")

    def __init__(self) -> None:
        self._version = -1
        self._decisions: dict[_Key, bool] = {}

    def get(self, version: int, key: _Key) -> bool | None:
        if version != self._version:
            self._decisions.clear()
            self._version = version
            return None
        return self._decisions.get(key)

    def put(self, key: _Key, allowed: bool) -> None:
        if len(self._decisions) >= _CACHE_MAX:
            self._decisions.clear()
        self._decisions[key] = allowed
