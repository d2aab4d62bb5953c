"""The routing table: API key -> handler, with the versions each handler serves.

ApiVersions answers from this table, so what is advertised is exactly what is registered.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from broker.context import RequestContext

HandlerFn = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    handle: HandlerFn
    # A handler whose response may be skipped (Produce with acks=0) returns None.
    name: str = ""

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class Registry:
    def __init__(self, handlers: Iterable[Handler] = ()) -> None:
        self._by_key: dict[int, Handler] = {}
        for h in handlers:
            self.register(h)

    def register(self, handler: Handler) -> None:
        if handler.api_key in self._by_key:
            raise ValueError(f"api key {handler.api_key} registered twice")
        if handler.min_version > handler.max_version:
            raise ValueError(f"api key {handler.api_key}: empty version range")
        self._by_key[handler.api_key] = handler

    def get(self, api_key: int) -> Handler | None:
        return self._by_key.get(api_key)

    def __iter__(self) -> Any:
        return iter(sorted(self._by_key.values(), key=lambda h: h.api_key))


def handler(handle: Any, *requests: type[Any], responses: Any = None) -> Handler:
    """Scaffold for the typed registry (replaced when it lands)."""
    versions = [int(r.__version__) for r in requests]
    name = requests[0].__module__.split(".")[2].title().replace("_", "")
    return Handler(int(requests[0].__api_key__), min(versions), max(versions), handle, name)
