"""ApiVersions (18): the versions of every API in the registry."""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from broker.registry import Registry
from protocol.messages import build


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    keys = tuple(
        build(r.ApiVersion, api_key=h.api_key, min_version=h.min_version, max_version=h.max_version)
        for h in ctx.services.registry
    )
    return build(r.type, error_code=ErrorCode.none, api_keys=keys, finalized_features_epoch=-1)


def unsupported_version_response(registry: Registry) -> ApiVersionsResponseV0:
    """A too-new ApiVersions request gets the v0 layout and what we support (KIP-511)."""
    keys = tuple(
        ApiVersionV0(api_key=h.api_key, min_version=h.min_version, max_version=h.max_version)
        for h in registry
    )
    return ApiVersionsResponseV0(error_code=ErrorCode.unsupported_version, api_keys=keys)


HANDLER = Handler(api_key=18, min_version=0, max_version=4, handle=handle, name="ApiVersions")
