"""The root of every exception broker/ raises outside its share core (which has its own,
`broker.share.errors`, as it imports nothing else of the broker).

Each exception keeps the builtin base it had (ValueError, TypeError), so whatever caught it
before still does.
"""

from __future__ import annotations


class BrokerException(Exception):
    """A request, config or state the broker refuses."""
