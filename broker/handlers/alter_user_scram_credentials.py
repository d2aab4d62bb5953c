"""AlterUserScramCredentials (51): add, replace or delete users' SCRAM credentials.

The client salts the password itself (it sends salt, iterations and SaltedPassword); the
broker keeps only the stored key and server key derived from them. Each user's changes are
checked first and applied all or none, as Kafka does; the credential file is then rewritten
atomically in a thread. If it cannot be written, memory goes back to what the file holds.

With `--processes N` node 0 alone writes the file: another process forwards the request to it
once the client is authorized here (`broker.controller_forward`), answers with its answer and
takes the file at once, so the user can log in here as soon as the client has the answer.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from collections.abc import Sequence

import structlog
from kio.schema.alter_user_scram_credentials import v0
from kio.schema.errors import ErrorCode

from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.controller_forward import NotForwarded
from broker.controller_forward import forward
from broker.controller_forward import forwards
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.security_follow import follow_credentials
from broker.slicing import sliced_map
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.scram_credentials import BY_KAFKA_TYPE
from storage.scram_credentials import InvalidCredential
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore
from storage.scram_credentials import check_upsert

log = structlog.get_logger("shoal.credentials")

Change = v0.request.ScramCredentialDeletion | v0.request.ScramCredentialUpsertion
Refusal = tuple[ErrorCode, str]


def _refusal(store: ScramCredentialStore, change: Change, repeated: bool) -> Refusal | None:
    mechanism = BY_KAFKA_TYPE.get(int(change.mechanism))
    if mechanism is None:
        return ErrorCode.unsupported_sasl_mechanism, f"unknown SCRAM mechanism {change.mechanism}"
    if repeated:
        return ErrorCode.duplicate_resource, "a user's mechanism is changed more than once"
    if isinstance(change, v0.request.ScramCredentialDeletion):
        if store.get(change.name, mechanism.name) is None:
            return ErrorCode.resource_not_found, "no such credential to delete"
        return None
    try:
        check_upsert(change.name, mechanism.name, int(change.iterations))
    except InvalidCredential as e:
        return ErrorCode.unacceptable_credential, str(e)
    if not change.salt or not change.salted_password:
        return ErrorCode.unacceptable_credential, "empty salt or salted password"
    return None


def _apply(store: ScramCredentialStore, change: Change) -> None:
    mechanism = BY_KAFKA_TYPE[int(change.mechanism)]
    if isinstance(change, v0.request.ScramCredentialDeletion):
        store.delete(change.name, mechanism.name)
        return
    credential = ScramCredential.from_salted_password(
        mechanism, change.salt, change.salted_password, int(change.iterations)
    )
    store.upsert(change.name, mechanism.name, credential)


def _check_all(store: ScramCredentialStore, changes: Sequence[Change]) -> dict[str, Refusal]:
    """The first refusal of each user that has one."""
    counts = Counter((c.name, int(c.mechanism)) for c in changes)
    refused: dict[str, Refusal] = {}
    for change in changes:
        if change.name not in refused:
            why = _refusal(store, change, counts[(change.name, int(change.mechanism))] > 1)
            if why is not None:
                refused[change.name] = why
    return refused


async def handle(
    ctx: RequestContext, request: v0.AlterUserScramCredentialsRequest
) -> v0.AlterUserScramCredentialsResponse:
    store = ctx.services.credentials
    changes: list[Change] = [*request.deletions, *request.upsertions]
    if not authorize_cluster(ctx, AclOperation.ALTER):
        denied = (ErrorCode.cluster_authorization_failed, "ALTER on the cluster is denied")
        return await _response(_Everyone(denied), changes)
    if forwards(ctx.services):
        try:
            answer: v0.AlterUserScramCredentialsResponse = await forward(ctx.services, request)
        except NotForwarded as e:
            return await _response(_Everyone((e.error_code, str(e))), changes)
        await follow_credentials(ctx.services)
        return answer
    refused = await ctx.services.changes.to_the_end(_change(ctx, store, changes))
    return await _response(refused, changes)


async def _change(
    ctx: RequestContext, store: ScramCredentialStore, changes: Sequence[Change]
) -> dict[str, Refusal]:
    """Planned and written in threads (a request may change a million users), then swapped
    in: memory is never ahead of the file, nor left behind it by a cancelled request
    (`broker.to_the_end`)."""
    async with ctx.services.credentials_lock:
        refused, users, data, accepted = await asyncio.to_thread(_plan, store, changes)
        if accepted:
            try:
                await asyncio.to_thread(store.write, data)
            except OSError as e:
                log.error("credentials not written", error=str(e))
                refused.update({n: (ErrorCode.kafka_storage_error, str(e)) for n in accepted})
            else:
                store.restore(users)
                log.info("credentials changed", users=sorted(accepted)[:LOGGED_USERS],
                         count=len(accepted), principal=ctx.principal)  # fmt: skip
    return refused


LOGGED_USERS = 100  # a log line names this many users at most


class _Everyone(dict[str, Refusal]):
    """The same refusal for every user (a request may name a million)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__()
        self._refusal = refusal

    def __contains__(self, name: object) -> bool:
        return True

    def __getitem__(self, name: str) -> Refusal:
        return self._refusal


def _plan(
    store: ScramCredentialStore, changes: Sequence[Change]
) -> tuple[dict[str, Refusal], dict[str, dict[str, ScramCredential]], bytes, set[str]]:
    """The refusals, and the credentials and file content after the accepted changes."""
    refused = _check_all(store, changes)
    scratch = store.copy()
    for change in changes:
        if change.name not in refused:
            _apply(scratch, change)
    accepted = {c.name for c in changes} - set(refused)
    return refused, scratch.export(), scratch.snapshot(), accepted


async def _response(
    refused: Mapping[str, Refusal], changes: Sequence[Change]
) -> v0.AlterUserScramCredentialsResponse:
    names = await asyncio.to_thread(lambda: list(dict.fromkeys(c.name for c in changes)))
    results = await sliced_map(
        lambda name: v0.response.AlterUserScramCredentialsResult(
            user=name,
            error_code=refused[name][0] if name in refused else ErrorCode.none,
            error_message=refused[name][1] if name in refused else None,
        ),
        names,
    )
    return v0.AlterUserScramCredentialsResponse(throttle_time=NO_THROTTLE, results=tuple(results))


HANDLER = handler(
    handle,
    v0.AlterUserScramCredentialsRequest,
    acl=((AclOperation.ALTER, ResourceType.CLUSTER),),
)
