"""The compat tests' broker: one `shoal serve` process per test module, or per test.

`broker` is the root conftest's broker process with the module's `BROKER_CONFIG`: shared by
the module's tests (`module_broker_process`), or one per test when the module sets
`BROKER_PER_TEST = True` (`broker_process`). A module that prepares its broker (topics,
records) does it in an autouse fixture that takes `broker` (a module-scoped one takes
`module_broker_process`); none redefines `broker`.
"""

from __future__ import annotations

import pytest

from tests.brokers import BrokerProcess


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> BrokerProcess:
    per_test = getattr(request.module, "BROKER_PER_TEST", False)
    proc = request.getfixturevalue("broker_process" if per_test else "module_broker_process")
    assert isinstance(proc, BrokerProcess)
    return proc
