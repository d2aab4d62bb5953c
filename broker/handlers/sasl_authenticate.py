"""SaslAuthenticate (36): one token of the connection's SASL exchange.

A failed exchange is answered SASL_AUTHENTICATION_FAILED after
`connection.failed.authentication.delay.ms` (an await: other clients go on being served),
logged once with the peer's address and no secret, and the connection is then closed.
Re-authentication (`connections.max.reauth.ms`, KIP-368) is not offered: the session
lifetime is 0, so clients never re-authenticate.
"""

from __future__ import annotations

import asyncio

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate import v0
from kio.schema.sasl_authenticate import v1
from kio.schema.sasl_authenticate import v2

from broker.context import RequestContext
from broker.registry import handler
from broker.sasl.errors import AuthenticationFailed
from broker.sasl.session import IllegalSaslState

log = structlog.get_logger("shoal.sasl")

Request = v0.SaslAuthenticateRequest | v1.SaslAuthenticateRequest | v2.SaslAuthenticateRequest


def _answer(code: ErrorCode, message: str | None, token: bytes) -> v2.SaslAuthenticateResponse:
    return v2.SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=token)


async def handle(ctx: RequestContext, request: Request) -> v2.SaslAuthenticateResponse:
    sasl = ctx.sasl
    if sasl is None:
        return _answer(ErrorCode.illegal_sasl_state, "not a SASL listener", b"")
    try:
        token = await sasl.authenticate(request.auth_bytes)
    except IllegalSaslState as e:
        return _answer(ErrorCode.illegal_sasl_state, str(e), b"")
    except AuthenticationFailed as e:
        log.warning("authentication failed", peer=ctx.peer, mechanism=sasl.mechanism, reason=str(e))
        await asyncio.sleep(ctx.services.config.connection_failed_authentication_delay_ms / 1000)
        return _answer(ErrorCode.sasl_authentication_failed, str(e), b"")
    if sasl.authenticated:
        log.info("authenticated", peer=ctx.peer, principal=sasl.principal, mechanism=sasl.mechanism)
    return _answer(ErrorCode.none, None, token)


HANDLER = handler(
    handle,
    v0.SaslAuthenticateRequest,
    v1.SaslAuthenticateRequest,
    v2.SaslAuthenticateRequest,
    acl=(),
)
