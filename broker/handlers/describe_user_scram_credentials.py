"""DescribeUserScramCredentials (50): which SCRAM mechanisms (and iterations) users have.

Never a salt or key. No user list means every user; a named user without credentials gets
RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE, as Kafka answers.
"""

from __future__ import annotations

import asyncio

from kio.schema.describe_user_scram_credentials import v0
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8
from kio.static.primitive import i32

from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.controller_forward import forwards
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.security_follow import follow_credentials
from broker.slicing import sliced_map
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.scram_credentials import MECHANISMS
from storage.scram_credentials import ScramCredentialStore

r = v0.response


def _result(
    store: ScramCredentialStore, user: str, repeated: bool
) -> r.DescribeUserScramCredentialsResult:
    by_mechanism = store.mechanisms(user)
    if repeated:
        code, message = ErrorCode.duplicate_resource, f"user {user!r} is named more than once"
    elif not by_mechanism:
        code, message = ErrorCode.resource_not_found, "no credentials for this user"
    else:
        code, message = ErrorCode.none, None
    infos = tuple(
        r.CredentialInfo(mechanism=i8(MECHANISMS[m].kafka_type), iterations=i32(c.iterations))
        for m, c in sorted(by_mechanism.items())
        if code is ErrorCode.none
    )
    return r.DescribeUserScramCredentialsResult(
        user=user, error_code=code, error_message=message, credential_infos=infos
    )


async def handle(
    ctx: RequestContext, request: v0.DescribeUserScramCredentialsRequest
) -> v0.DescribeUserScramCredentialsResponse:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return v0.DescribeUserScramCredentialsResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=None,
            results=(),
        )
    if forwards(ctx.services):  # --processes N: what node 0 last wrote
        await follow_credentials(ctx.services)
    store = ctx.services.credentials
    users = request.users
    # A request may name a million users: counted in a thread, answered in slices.
    names, counts = await asyncio.to_thread(
        lambda: _named(store.users() if not users else [u.name for u in users])
    )
    results = await sliced_map(lambda name: _result(store, name, counts[name] > 1), names)
    return v0.DescribeUserScramCredentialsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )


def _named(names: list[str]) -> tuple[list[str], dict[str, int]]:
    """Each name once, in order, and how often it was named. A loop of Python, not
    `Counter(names)`: a C loop over a million names would keep the GIL from the event loop."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return list(counts), counts


HANDLER = handler(
    handle,
    v0.DescribeUserScramCredentialsRequest,
    acl=((AclOperation.DESCRIBE, ResourceType.CLUSTER),),
)
