"""The one way a SASL exchange fails."""

from __future__ import annotations

from broker.errors import BrokerException


class AuthenticationFailed(BrokerException):
    """Bad credentials or a malformed token. The message goes to the client and the log, so
    it names no secret, and does not say whether the user exists."""
