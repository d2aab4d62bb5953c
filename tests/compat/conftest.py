"""The compat tests' broker: one `shoal serve` process per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokers import BrokerProcess
from tests.compat.support import start_broker


@pytest.fixture(scope="module")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """`shoal serve` for the test module, with the module's `BROKER_CONFIG` (broker properties;
    none: the defaults); killed at the end if it still runs. A module that needs a broker per
    test, or one set up further, declares its own `broker`."""
    name = request.module.__name__.rpartition(".")[2]
    config = getattr(request.module, "BROKER_CONFIG", None)
    proc = start_broker(tmp_path_factory.mktemp(name) / "data", config)
    try:
        yield proc
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            proc.kill()
