"""Reading a broker's /metrics in tests.

A scrape's lag and log-size readings are computed on the broker's event loop
(`broker.loop_readings`): a test whose broker runs in its own loop must scrape from another
thread (`scrape`, awaited), or the scrape waits for a loop it is blocking.
"""

from __future__ import annotations

import asyncio
import urllib.request


def get_text(port: int, host: str = "127.0.0.1") -> str:
    """The /metrics page, from this thread (a broker process, or another thread's loop)."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def samples(text: str) -> dict[str, float]:
    """Every sample of a /metrics page: 'name{labels}' -> value."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


async def scrape_text(port: int, host: str = "127.0.0.1") -> str:
    return await asyncio.to_thread(get_text, port, host)


async def scrape(port: int) -> dict[str, float]:
    return samples(await scrape_text(port))
