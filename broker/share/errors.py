"""The root of every exception the share core (broker/share/) raises.

Each exception keeps the builtin base it had (ValueError), so whatever caught it before still
does.
"""

from __future__ import annotations


class ShareException(Exception):
    """A share-partition or share-session operation refused, or a broken invariant."""
