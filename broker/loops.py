"""Event loop choice: uvloop unless SHOAL_LOOP=asyncio. uvloop is imported nowhere else."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable


def loop_factory(name: str | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    name = name or os.environ.get("SHOAL_LOOP", "uvloop")
    if name == "asyncio":
        return asyncio.new_event_loop
    if name != "uvloop":
        raise ValueError(f"unknown loop {name!r}: uvloop or asyncio")
    import uvloop

    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
