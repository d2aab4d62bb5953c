"""What a process imports when it needs only part of the client or of the Spark source.

Spark starts many short Python workers (to look the source up, to create it, to plan a read,
to run tasks) and each imports Shoal afresh: what it does not need, it must not load. Each
check runs in a new interpreter, as those workers do.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

import client

HEAVY = ("client.admin", "client.share_consumer", "client.producer", "spark.share_session")


def _loaded_after(code: str, stdin: bytes = b"") -> set[str]:
    """The modules among HEAVY (and protocol.messages) loaded after running `code`."""
    probe = (
        f"{code}\nimport sys\n"
        f"print(' '.join(m for m in {(*HEAVY, 'protocol.messages')!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], input=stdin, capture_output=True, check=True, timeout=60
    )
    return set(done.stdout.decode().split())


def test_importing_client_loads_none_of_its_modules() -> None:
    assert _loaded_after("import client") == set()


def test_each_name_of_client_is_the_one_its_module_defines() -> None:
    import importlib

    for name in client.__all__:
        home = client._HOMES[name]
        assert getattr(client, name) is getattr(importlib.import_module(home), name), name
    assert sorted(client._HOMES) == sorted(client.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = client.Nope  # type: ignore[attr-defined]


def test_sparks_lookup_of_the_source_loads_no_client() -> None:
    """What Spark's lookup and create workers do: import pyspark_shoal, check the options."""
    pytest.importorskip("pyspark")
    code = (
        "import pyspark_shoal\n"
        "s = pyspark_shoal.DefaultSource({'kafka.bootstrap.servers': 'h:1', 'subscribe': 't',"
        " 'group': 'g'})\n"
        "s.schema()"
    )
    assert _loaded_after(code) == set()


@pytest.mark.parametrize("kind", ["stream", "batch"])
def test_a_task_that_unpickles_a_reader_loads_no_admin_or_consumer(kind: str) -> None:
    """A task gets the reader pickled and only decodes (stream) or fetches (batch)."""
    pytest.importorskip("pyspark")
    from spark.source import ShoalDataSource

    options = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    source = ShoalDataSource(options | {"group": "g"} if kind == "stream" else options)
    reader = source.streamReader(source.schema()) if kind == "stream" else source.reader(None)
    loaded = _loaded_after(
        "import pickle, sys\npickle.loads(sys.stdin.buffer.read())", stdin=pickle.dumps(reader)
    )
    expected = set() if kind == "stream" else {"protocol.messages"}  # a Fetch needs the codecs
    assert loaded == expected
