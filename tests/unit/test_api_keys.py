"""protocol.api_keys: each key is its schema's, and reading them loads no schema."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

from protocol import api_keys

KEYS = {
    name: value
    for name, value in vars(api_keys).items()
    if name.isupper() and isinstance(value, int) and not name.startswith("_")
}


def _request_class(schema: str) -> type:
    """The request class of the lowest version kio has of `schema` (the key is the same in
    every version)."""
    package = importlib.import_module(f"kio.schema.{schema}")
    versions = sorted(
        int(m.name[1:]) for m in pkgutil.iter_modules(package.__path__) if m.name[0] == "v"
    )
    module = importlib.import_module(f"kio.schema.{schema}.v{versions[0]}")
    (cls,) = (
        v
        for k, v in vars(module).items()
        if k.endswith("Request") and isinstance(v, type) and hasattr(v, "__api_key__")
    )
    return cls


def test_there_are_keys_to_check() -> None:
    assert len(KEYS) >= 40


@pytest.mark.parametrize("name", sorted(KEYS))
def test_each_key_is_the_one_its_schemas_request_carries(name: str) -> None:
    # The constant's name is the schema's: FETCH is kio.schema.fetch's key, not another's.
    assert KEYS[name] == int(_request_class(name.lower()).__api_key__)


def test_reading_the_keys_imports_no_schema_package() -> None:
    """A process that only needs a key or two (a Spark task that fetches, a CLI command) does
    not load kio's ~40 schema packages for them."""
    code = (
        "import sys, protocol.api_keys; "
        "print(sorted(m for m in sys.modules if m.startswith('kio.schema.') "
        "and m.count('.') >= 3))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]", done.stdout
