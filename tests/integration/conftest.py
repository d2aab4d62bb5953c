from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.server import Server
from tests.brokers import make_server


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Server]:
    """An in-process broker whose share groups heartbeat every 200 ms (joins and reassignments
    are quick), with metrics on an ephemeral port. Modules that need a broker process define
    their own `broker`."""
    srv = make_server(
        tmp_path / "data",
        **{
            "metrics.port": 0,
            "group.share.min.heartbeat.interval.ms": 100,
            "group.share.heartbeat.interval.ms": 200,
        },
    )
    await srv.start()
    yield srv
    await srv.stop()
