"""Who sent a request, as Kafka names principals (`User:<name>`).

A connection starts as `User:ANONYMOUS` (PLAINTEXT, or before SASL completes); authentication
replaces it for the connection's later requests. Authorization reads it from the request's
context.
"""

from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"


def user(name: str) -> str:
    """The principal of an authenticated user name (SASL user, or a certificate's subject)."""
    return f"User:{name}"
