"""Writes `client/kio_apis.py`: the kio classes the client speaks, typed, by API and version.

Run `.venv/bin/python -m tests.kio_apis_gen > client/kio_apis.py` after changing SPECS (an API
or a version range the client speaks) or upgrading kio; `tests/unit/test_kio_apis.py` fails
while the file differs from what this writes.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

# (kio module name, lowest version, highest version), as the client's `cluster.version(...)`
# calls negotiate them. Where kio's request classes differ between versions, the whole range
# comes first (its name is the API's: the classes all versions share, and the response), then
# the parts with classes of their own (named with their versions).
SPECS: tuple[tuple[str, int, int], ...] = (
    ("api_versions", 3, 3),
    ("metadata", 9, 12),
    ("find_coordinator", 1, 6),
    ("create_topics", 2, 7),
    ("delete_topics", 1, 6),
    ("delete_topics", 6, 6),
    ("create_partitions", 0, 3),
    ("describe_configs", 1, 4),
    ("incremental_alter_configs", 0, 1),
    ("create_acls", 1, 3),
    ("describe_acls", 1, 3),
    ("delete_acls", 1, 3),
    ("produce", 9, 12),
    ("fetch", 4, 12),
    ("list_offsets", 1, 9),
    ("delete_records", 0, 2),
    ("list_groups", 0, 5),
    ("describe_groups", 0, 6),
    ("delete_groups", 0, 2),
    ("consumer_group_describe", 0, 1),
    ("consumer_group_heartbeat", 0, 1),
    ("offset_fetch", 1, 8),
    ("offset_fetch", 1, 7),
    ("offset_fetch", 8, 8),
    ("offset_commit", 2, 8),
    ("offset_delete", 0, 0),
    ("share_group_heartbeat", 1, 1),
    ("share_group_describe", 1, 1),
    ("share_fetch", 1, 2),
    ("share_acknowledge", 1, 2),
    ("describe_share_group_offsets", 0, 1),
    ("alter_share_group_offsets", 0, 0),
    ("delete_share_group_offsets", 0, 0),
    ("describe_log_dirs", 1, 5),
)

HEADER = '''"""The kio classes the client speaks, typed: each API's requests and response.

Written by `tests/kio_apis_gen.py` (run `.venv/bin/python -m tests.kio_apis_gen >
client/kio_apis.py`); do not edit by hand. For each API, `<API>.requests(version)` is kio's
request module of that version, typed by a Protocol whose members are the union of the
versions spoken (mypy holds each version's module to it), and `<API>.response(version)` the
response class, typed as the union of the versions' responses:

    m = METADATA.requests(version)
    resp = await cluster.call(build(m.MetadataRequest, ...), METADATA.response(version))

A module is imported when a version of it is first asked for (importing all of them would
add a second to every start of the CLI and of Spark's workers).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING
from typing import Final
from typing import Generic
from typing import Protocol
from typing import TypeAlias
from typing import TypeVar
from typing import cast

if TYPE_CHECKING:
    from collections.abc import Mapping

'''

FOOTER_API = '''
Q = TypeVar("Q")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Api(Generic[Q, R]):
    """One API: kio's modules of the versions the client speaks, typed by Q (the request
    module's Protocol) and R (the union of the responses)."""

    name: str  # the kio module, e.g. "metadata"
    lowest: int
    highest: int
    response_name: str  # the response class, e.g. "MetadataResponse"

    def requests(self, version: int) -> Q:
        return cast(Q, self._module(version, "request"))

    def response(self, version: int) -> type[R]:
        return cast("type[R]", getattr(self._module(version, "response"), self.response_name))

    def _module(self, version: int, direction: str) -> ModuleType:
        if not self.lowest <= version <= self.highest:
            raise ValueError(f"{self.name} v{version}: spoken are v{self.lowest}-{self.highest}")
        return importlib.import_module(f"kio.schema.{self.name}.v{version}.{direction}")
'''


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _request_classes(api: str, version: int) -> set[str]:
    module = importlib.import_module(f"kio.schema.{api}.v{version}.request")
    return {
        n
        for n, o in vars(module).items()
        if inspect.isclass(o) and dataclasses.is_dataclass(o) and o.__module__ == module.__name__
    }


def _response_class(api: str, version: int) -> str:
    module = importlib.import_module(f"kio.schema.{api}.v{version}.response")
    (name,) = (
        n
        for n, o in vars(module).items()
        if inspect.isclass(o)
        and o.__module__ == module.__name__
        and getattr(o, "__type__", None) is not None
        and o.__type__.name == "response"
    )
    return name


def generate() -> str:
    imports: set[tuple[str, int]] = set()
    body: list[str] = []
    for api, lo, hi in SPECS:
        versions = range(lo, hi + 1)
        split = next(spec for spec in SPECS if spec[0] == api) != (api, lo, hi)
        suffix = (f"V{lo}" if lo == hi else f"V{lo}To{hi}") if split else ""
        name = _camel(api) + suffix
        const = api.upper() + ("_" + suffix.replace("To", "_TO_").upper() if split else "")
        common = sorted(set.intersection(*(_request_classes(api, v) for v in versions)))
        (response,) = {_response_class(api, v) for v in versions}
        imports.update((api, v) for v in versions)
        body.append(f"\n\nclass {name}Requests(Protocol):")
        body.append(f'    """kio.schema.{api}.v{lo}-{hi}.request"""')
        for cls in common:
            members = [f"{api}_v{v}.request.{cls}" for v in versions]
            body.append("")
            body.append("    @property")
            body.append(f"    def {cls}(self) -> type[{' | '.join(members)}]: ...")
        modules = ", ".join(f"{v}: {api}_v{v}.request" for v in versions)
        union = " | ".join(f"{api}_v{v}.response.{response}" for v in versions)
        body.append("")
        body.append("")
        body.append("if TYPE_CHECKING:")
        body.append(f"    {name}Response: TypeAlias = {union}")
        body.append(f"    _{const.lower()}: Mapping[int, {name}Requests] = {{{modules}}}")
        body.append("")
        body.append(
            f"{const}: Final[Api[{name}Requests, {name}Response]] = "
            f'Api("{api}", {lo}, {hi}, "{response}")'
        )
    lines = [HEADER.rstrip("\n")]
    lines += [f"    from kio.schema.{api} import v{v} as {api}_v{v}" for api, v in sorted(imports)]
    lines.append(FOOTER_API.rstrip("\n"))
    lines += body
    return "\n".join(lines) + "\n"


def formatted() -> str:
    """`generate()` as the project's import sorter and formatter lay it out."""
    ruff = str(Path(sys.executable).with_name("ruff"))
    name = ("--stdin-filename", "client/kio_apis.py")
    text = generate()
    for step in (
        ["check", "--fix", "--select", "I", "--quiet", *name, "-"],
        ["format", *name, "-"],
    ):
        text = subprocess.run(
            [ruff, *step], input=text, capture_output=True, text=True, check=True
        ).stdout
    return text


if __name__ == "__main__":
    sys.stdout.write(formatted())
