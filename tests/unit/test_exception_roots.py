"""One exception root per layer: every exception class protocol/, storage/, coordinator/,
broker/share/ and broker/ define descends from its layer's root, and keeps the builtin base
it had (so an `except ValueError` that caught it still does)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from broker.errors import BrokerException
from broker.share.errors import ShareException
from coordinator.errors import CoordinatorException
from protocol.errors import ProtocolException
from storage.errors import StorageException

ROOTS: dict[str, type[Exception]] = {
    "protocol": ProtocolException,
    "storage": StorageException,
    "coordinator": CoordinatorException,
    "broker.share": ShareException,
    "broker": BrokerException,
}
# Exceptions yet to join their layer's root (none now: MalformedAcks joined it with issue 32).
PENDING: set[str] = set()


def _layer(module: str) -> str:
    return "broker.share" if module.startswith("broker.share") else module.partition(".")[0]


def _exceptions(package: str) -> list[type[BaseException]]:
    found = []
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, f"{package}."):
        if info.name.rpartition(".")[2] == "__main__":  # runs the broker when imported
            continue
        module = importlib.import_module(info.name)
        found += [
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj)
            and issubclass(obj, BaseException)
            and obj.__module__ == module.__name__
        ]
    return found


@pytest.mark.parametrize("package", ["protocol", "storage", "coordinator", "broker"])
def test_every_exception_descends_from_its_layers_root(package: str) -> None:
    exceptions = _exceptions(package)
    assert exceptions
    stray = [
        f"{e.__module__}.{e.__qualname__}"
        for e in exceptions
        if not issubclass(e, ROOTS[_layer(e.__module__)])
        and f"{e.__module__}.{e.__qualname__}" not in PENDING
    ]
    assert stray == []


def test_the_builtin_bases_are_kept() -> None:
    from protocol.messages import UnknownApi
    from protocol.record_batch import InvalidRecordBatch
    from storage.dir_lock import DataDirLocked
    from storage.index import IndexCorrupt

    assert issubclass(InvalidRecordBatch, ValueError) and issubclass(UnknownApi, LookupError)
    assert issubclass(IndexCorrupt, ValueError) and issubclass(DataDirLocked, OSError)
