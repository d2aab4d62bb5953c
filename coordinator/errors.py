"""The root of every exception coordinator/ raises.

Each exception keeps the builtin base it had (ValueError), so whatever caught it before still
does.
"""

from __future__ import annotations


class CoordinatorException(Exception):
    """A group request or group config the coordinators refuse."""
