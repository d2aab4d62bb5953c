"""ApiVersions (18): the versions of every API in the registry, except Shoal's own
(`protocol.shoal_apis`): no Kafka client sends them, so none is told of them."""

from __future__ import annotations

from kio.schema.api_versions import v0
from kio.schema.api_versions import v1
from kio.schema.api_versions import v2
from kio.schema.api_versions import v3
from kio.schema.api_versions import v4
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import Registry
from broker.registry import handler
from protocol.shoal_apis import is_shoal_api

Request = (
    v0.ApiVersionsRequest
    | v1.ApiVersionsRequest
    | v2.ApiVersionsRequest
    | v3.ApiVersionsRequest
    | v4.ApiVersionsRequest
)


async def handle(ctx: RequestContext, request: Request) -> v4.ApiVersionsResponse:
    keys = tuple(
        v4.response.ApiVersion(
            api_key=i16(h.api_key),
            min_version=i16(h.advertised_min_version),
            max_version=i16(h.max_version),
        )
        for h in ctx.services.registry
        if not is_shoal_api(h.api_key)
    )
    return v4.ApiVersionsResponse(
        error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE
    )


def unsupported_version_response(registry: Registry[RequestContext]) -> v0.ApiVersionsResponse:
    """A too-new ApiVersions request gets the v0 layout and what we support (KIP-511)."""
    keys = tuple(
        v0.response.ApiVersion(
            api_key=i16(h.api_key),
            min_version=i16(h.advertised_min_version),
            max_version=i16(h.max_version),
        )
        for h in registry
        if not is_shoal_api(h.api_key)
    )
    return v0.ApiVersionsResponse(error_code=ErrorCode.unsupported_version, api_keys=keys)


HANDLER = handler(
    handle,
    v0.ApiVersionsRequest,
    v1.ApiVersionsRequest,
    v2.ApiVersionsRequest,
    v3.ApiVersionsRequest,
    v4.ApiVersionsRequest,
    acl=(),  # every client may ask, before and after authenticating, as in Kafka
)
