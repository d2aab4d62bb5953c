from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.server import Server
from tests.brokers import make_server
from tests.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    """The `broker` fixture's clock: `clock.advance(ms)` expires locks and sessions at once."""
    return ManualClock()


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    """Settings a module adds to its `broker` (override this fixture in the module)."""
    return {}


@pytest.fixture
async def broker(
    tmp_path: Path, clock: ManualClock, broker_overrides: dict[str, object]
) -> AsyncIterator[Server]:
    """An in-process broker whose share groups heartbeat every 200 ms (joins and reassignments
    are quick), on a clock the test can move forward. No metrics endpoint unless a module's
    `broker_overrides` asks for one: stopping it costs half a second (its poll interval).
    Modules that need a broker process take `broker_process` or `module_broker_process`
    (tests/conftest.py), never a `broker` of their own."""
    srv = make_server(
        tmp_path / "data",
        clock,
        **{
            "group.share.min.heartbeat.interval.ms": 100,
            "group.share.heartbeat.interval.ms": 200,
            **broker_overrides,
        },
    )
    clock.on_advance(srv.run_timers)
    await srv.start()
    yield srv
    await srv.stop()
