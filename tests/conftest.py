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
from tests.brokers import configured_broker
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


def _config(request: pytest.FixtureRequest) -> dict[str, object] | None:
    """The test module's `BROKER_CONFIG` (broker properties), if it has one."""
    return getattr(request.module, "BROKER_CONFIG", None)


@pytest.fixture
def broker_process(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    """`shoal serve` in a child process for one test, with the module's `BROKER_CONFIG`
    (none: the defaults); killed at the end if it still runs."""
    with configured_broker(tmp_path / "data", _config(request)) as proc:
        yield proc


@pytest.fixture(scope="module")
def module_broker_process(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """The same, shared by the module's tests (each builds on what the others left): the
    one broker process fixture, with `broker_process`. A module that must prepare its broker
    does it in a fixture of its own that takes this one, under another name."""
    name = request.module.__name__.rpartition(".")[2]
    with configured_broker(tmp_path_factory.mktemp(name) / "data", _config(request)) as proc:
        yield proc
