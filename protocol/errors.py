"""The root of every exception protocol/ raises.

Each exception keeps the builtin base it had (ValueError, LookupError), so whatever caught it
before still does; `ProtocolException` lets a caller catch the layer's failures as one.
"""

from __future__ import annotations


class ProtocolException(Exception):
    """Bytes or values that are not what Kafka's protocol allows."""
