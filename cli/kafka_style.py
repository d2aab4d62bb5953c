"""Kafka's tool command lines, accepted as written: a line pasted from kafka-share-groups.sh,
kafka-topics.sh, kafka-configs.sh or kafka-log-dirs.sh works with only the program name changed.

Those tools name the action with a flag anywhere on the line (`--describe`, `--create`...);
Shoal's tools take it as a subcommand. The flag is moved to the subcommand's place and the
rest is left to the subcommand's own parser, so both forms share one set of options.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

ACTIONS: Final = {
    "share-groups": ("list", "describe", "reset-offsets", "delete", "delete-offsets"),
    "topics": ("create", "alter", "delete", "describe", "list"),
    "configs": ("describe", "alter"),
    "log-dirs": ("describe",),
}


class KafkaStyleError(ValueError):
    """A Kafka-style line with no action flag, or several."""


def rewrite(argv: Sequence[str]) -> list[str]:
    """`[tool, ..., --action, ...]` -> `[tool, action, ...]`; any other line unchanged.

    :raises KafkaStyleError: the line is in Kafka's form but names no action, or several.
    """
    args = list(argv)
    if len(args) < 2 or args[0] not in ACTIONS or not args[1].startswith("--"):
        return args  # a subcommand (or -h) comes first: Shoal's own form
    if args[1] == "--help":
        return args
    flags = {f"--{action}": action for action in ACTIONS[args[0]]}
    found = [i for i, word in enumerate(args) if word in flags]
    if len(found) != 1:
        names = ", ".join(flags)
        raise KafkaStyleError(f"shoal {args[0]}: give exactly one of {names}")
    (i,) = found
    return [args[0], flags[args[i]], *args[1:i], *args[i + 1 :]]
