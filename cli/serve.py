"""`shoal serve`: run the broker in the foreground.

The only module of `cli` that imports the broker, and only its entry point (`broker.main`):
the import contract in pyproject.toml names this one exception.
"""

from __future__ import annotations

from typing import Any

from broker.main import add_arguments
from broker.main import serve


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the broker in the foreground")
    add_arguments(p)
    p.set_defaults(func=serve)
