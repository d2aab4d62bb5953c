"""`client/kio_apis.py` is what `tests/kio_apis_gen.py` writes, and each table answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from client import kio_apis
from tests.kio_apis_gen import SPECS
from tests.kio_apis_gen import formatted


def test_the_module_is_as_generated() -> None:
    path = Path(kio_apis.__file__)
    assert path.read_text() == formatted(), (
        "client/kio_apis.py is stale: run `.venv/bin/python -m tests.kio_apis_gen > "
        "client/kio_apis.py`"
    )


def test_each_version_spoken_has_its_response_class() -> None:
    apis = [v for v in vars(kio_apis).values() if isinstance(v, kio_apis.Api)]
    assert {(a.name, a.lowest, a.highest) for a in apis} == set(SPECS)
    for api in apis:
        for version in range(api.lowest, api.highest + 1):
            response = api.response(version)
            assert response.__name__ == api.response_name
            assert response.__version__ == version
            assert api.requests(version).__name__.endswith(f".v{version}.request")
        with pytest.raises(ValueError, match="spoken are"):
            api.requests(api.highest + 1)
