"""SaslHandshake (17): the client picks a SASL mechanism for its connection.

v1 is followed by SaslAuthenticate requests (librdkafka, Kafka's clients since 1.0); v0 by
bare size-prefixed tokens, which the connection hands to the session itself. librdkafka
builds as old as Debian's kcat insist on v0 being advertised before they authenticate.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake import v0
from kio.schema.sasl_handshake import v1

from broker.context import RequestContext
from broker.registry import handler
from broker.sasl.session import IllegalSaslState


async def handle(
    ctx: RequestContext, request: v0.SaslHandshakeRequest | v1.SaslHandshakeRequest
) -> v1.SaslHandshakeResponse:
    sasl = ctx.sasl
    if sasl is None:  # not a SASL listener
        return v1.SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    try:
        raw = isinstance(request, v0.SaslHandshakeRequest)
        picked = sasl.handshake(request.mechanism, raw_tokens=raw)
    except IllegalSaslState:
        return v1.SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    code = ErrorCode.none if picked else ErrorCode.unsupported_sasl_mechanism
    return v1.SaslHandshakeResponse(error_code=code, mechanisms=sasl.enabled)


HANDLER = handler(handle, v0.SaslHandshakeRequest, v1.SaslHandshakeRequest, acl=())
