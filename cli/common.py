"""What every `shoal` tool shares: bootstrap option, output (table or JSON), exit codes.

Exit codes a script can trust: 0 ok, 1 a Kafka error reported by the broker (or a name that
does not exist), 2 usage, 3 the broker cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from client.errors import KafkaError
from client.security import AuthenticationError
from client.security import Security

OK, KAFKA_ERROR, USAGE, UNREACHABLE = 0, 1, 2, 3
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

Command = Callable[[argparse.Namespace], Awaitable[int]]


class UsageError(Exception):
    """Options that do not make sense together; exit code 2."""


class NotFound(Exception):
    """A name given on the command line does not exist; exit code 1."""


def bootstrap_servers(text: str) -> str:
    """`HOST:PORT[,HOST:PORT]`, checked when parsed so a typo is a usage error, not a trace."""
    for server in text.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {server.strip()!r}")
    return text


def add_common(parser: argparse.ArgumentParser, *, json_output: bool = True) -> None:
    parser.add_argument(
        "--bootstrap-server",
        type=bootstrap_servers,
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"the broker to connect to (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="client properties for a secured listener (security.protocol, sasl.*, ssl.*)",
    )
    parser.add_argument(
        "--command-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="give up (as unreachable) after this long (default 30)",
    )
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def security(args: argparse.Namespace) -> Security | None:
    """TLS and SASL settings from `--command-config`, as Kafka's tools read them.

    :raises UsageError: the file cannot be read or names an unsupported setting.
    """
    path: Path | None = getattr(args, "command_config", None)
    if path is None:
        return None
    try:
        return Security.from_properties(parse_properties(path.read_text()))
    except (OSError, ValueError) as e:
        raise UsageError(f"--command-config {path}: {e}") from None


def parse_properties(text: str) -> dict[str, str]:
    """`name=value` lines; `#` and `!` start comments (Java's properties, simply)."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and line[0] not in "#!":
            name, _, value = line.partition("=")
            props[name.strip()] = value.strip()
    return props


def run(command: Command, args: argparse.Namespace) -> int:
    """Run an async command and turn its failures into one line on stderr and an exit code."""

    async def bounded() -> int:
        async with asyncio.timeout(args.command_timeout):
            return await command(args)

    try:
        return asyncio.run(bounded())
    except KafkaError as e:
        return fail(f"{e.error_code.name.upper()}: {e.message}", KAFKA_ERROR, args)
    except NotFound as e:
        return fail(str(e), KAFKA_ERROR, args)
    except UsageError as e:
        return fail(str(e), USAGE, args)
    except AuthenticationError as e:
        return fail(f"SASL_AUTHENTICATION_FAILED: {e}", KAFKA_ERROR, args)
    except (OSError, TimeoutError) as e:
        reason = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        message = f"cannot reach the broker at {args.bootstrap_server}: {reason}"
        return fail(message, UNREACHABLE, args)


def fail(message: str, code: int, args: argparse.Namespace | None = None) -> int:
    """One line on stderr; under `--json` a JSON object, so a script parses errors too."""
    if args is not None and getattr(args, "json", False):
        print(json.dumps({"error": message, "exit_code": code}), file=sys.stderr)
    else:
        print(f"shoal: {message}", file=sys.stderr)
    return code


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=False))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Left-aligned columns, as Kafka's tools print them."""
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def parse_key_values(text: str) -> dict[str, str]:
    """`k=v,k2=v2` (a value with commas goes in square brackets: `k=[a,b]`)."""
    out: dict[str, str] = {}
    for item in split_commas(text):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"expected name=value, got {item!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[name.strip()] = value
    return out


def split_commas(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    return [i.strip() for i in items if i.strip()]
