from __future__ import annotations

import os
from collections.abc import AsyncIterator
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.loops import loop_factory
from broker.server import Server
from tests import hypothesis_profiles
from tests.brokers import BrokerProcess
from tests.brokers import make_server

hypothesis_profiles.load()  # before any test module builds its @settings


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, object]:
    """Run async tests on the loop the broker uses (SHOAL_LOOP picks uvloop or asyncio)."""
    name = os.environ.get("SHOAL_LOOP", "uvloop")
    return {name: loop_factory(name)}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    """A broker in the test's event loop on an ephemeral port."""
    srv = make_server(tmp_path / "data")
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    """`shoal serve` in a child process; started, killed at the end if still running."""
    with BrokerProcess(tmp_path / "data") as proc:
        yield proc
