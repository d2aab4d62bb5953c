"""`tuple.__new__(SomeNamedTuple, (...))` builds a NamedTuple without its `__new__` (Python code,
a frame per call): the one-record Produce path does it at six sites, once per request each,
where a keyword construction costs ~0.55 µs more apiece (`timeit`, 2 shared cores: 232-270 ns
against 804-867 ns for PartitionResult), ~8% of such a request's broker CPU all told. mypy
cannot check those calls, so this test does: every site in the broker's code builds a type
pinned here, from a tuple literal as long as its fields, and each type's fields are the ones
pinned (a field added, removed or moved fails here before it misplaces a value). The read
path builds one per batch of every fetch the same way (`SegmentedLog.read_with_spans`).
"""

from __future__ import annotations

import ast
import struct
from pathlib import Path
from typing import Any

from broker.context import RequestContext
from protocol.messages import EncodedResponse
from protocol.messages import Request
from protocol.messages import RequestHeader
from protocol.produce_response import PartitionResult
from protocol.record_batch import _HEADER
from protocol.record_batch import BatchHeader
from storage.base_log import AppendResult
from storage.log import BatchSpan

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "protocol", "storage", "coordinator", "client", "cli", "spark")

PINNED: dict[str, tuple[Any, tuple[str, ...]]] = {
    "PartitionResult": (
        PartitionResult,
        ("partition", "error_code", "base_offset", "log_start_offset", "error_message",
         "record_errors"),
    ),
    "EncodedResponse": (
        EncodedResponse, ("api_key", "version", "body", "error_code", "error_codes")
    ),
    "RequestContext": (
        RequestContext,
        ("services", "header", "peer", "principal", "acl_cache", "listener", "sasl"),
    ),
    "AppendResult": (
        AppendResult,
        ("base_offset", "last_offset", "log_start_offset", "log_append_time_ms", "duplicate"),
    ),
    "Request": (Request, ("header", "body")),
    "RequestHeader": (RequestHeader, ("api_key", "api_version", "correlation_id", "client_id")),
    "BatchHeader": (
        BatchHeader,
        ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
         "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
         "producer_epoch", "base_sequence", "record_count"),
    ),
    "BatchSpan": (
        BatchSpan,
        ("base_offset", "last_offset", "position_in_result", "size", "is_control",
         "has_records", "producer_id"),
    ),
}  # fmt: skip


def _sites() -> list[tuple[str, int, str, ast.expr]]:
    """(file, line, type name, fields argument) of every `tuple.__new__(T, fields)` call, and
    of calls through a local name bound to `tuple.__new__`."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for func in ast.walk(tree):
                if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
                    continue
                aliases = {
                    t.id
                    for node in ast.walk(func)
                    if isinstance(node, ast.Assign) and ast.unparse(node.value) == "tuple.__new__"
                    for t in node.targets
                    if isinstance(t, ast.Name)
                }
                for node in ast.walk(func):
                    if not isinstance(node, ast.Call) or len(node.args) != 2:
                        continue
                    callee = ast.unparse(node.func)
                    if callee == "tuple.__new__" or callee in aliases:
                        kind = node.args[0]
                        assert isinstance(kind, ast.Name), f"{path}:{node.lineno}"
                        found.append((str(path.relative_to(ROOT)), node.lineno, kind.id,
                                      node.args[1]))  # fmt: skip
    return sorted(set((f, n, k, ast.unparse(a)) for f, n, k, a in found), key=str)  # type: ignore[arg-type]


def test_every_site_builds_a_pinned_type_from_as_many_values_as_it_has_fields() -> None:
    sites = _sites()
    assert len(sites) >= 7  # the six sites, one of them building two types
    for file, line, kind, values in sites:
        assert kind in PINNED, f"{file}:{line}: tuple.__new__ of {kind}: pin its fields here"
        fields = PINNED[kind][1]
        literal = ast.parse(values, mode="eval").body
        if isinstance(literal, ast.Tuple):
            assert len(literal.elts) == len(fields), f"{file}:{line}: {kind} takes {fields}"
        else:  # BatchHeader, from the header's struct: one value per field
            assert kind == "BatchHeader", f"{file}:{line}: {values}"
            assert len(struct.unpack(_HEADER.format, bytes(_HEADER.size))) == len(fields)


def test_the_pinned_types_have_the_pinned_fields() -> None:
    for name, (kind, fields) in PINNED.items():
        assert kind._fields == fields, name
