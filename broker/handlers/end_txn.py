"""EndTxn (26): commit or abort a transaction (WRITE on the TransactionalId).

Answered once the decision (PrepareCommit/PrepareAbort) is written and then the markers and
committed offsets, being local appends, a slice at a time (`broker.transactions.finish`): a
client that reads after its commit sees it. If a write fails the decision stands and the
answer is NONE; the timer writes the rest, as Kafka's marker channel retries.
PRODUCER_FENCED from v2. v5's producer id and epoch are the transaction's own: without
transaction version 2 (KIP-890 part 2; Shoal finalizes no such feature) no epoch is bumped.
With `--processes N`, a commit first asks the other processes that staged share
acknowledgements in the transaction whether they still hold them (`broker/txn_share_remote.py`).
"""

from __future__ import annotations

from kio.schema.end_txn import v0
from kio.schema.end_txn import v1
from kio.schema.end_txn import v2
from kio.schema.end_txn import v3
from kio.schema.end_txn import v4
from kio.schema.end_txn import v5
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.handlers.txn_common import for_version
from broker.registry import handler
from broker.transactions import finish
from broker.txn_share_remote import held_everywhere
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = (
    v0.EndTxnRequest | v1.EndTxnRequest | v2.EndTxnRequest | v3.EndTxnRequest | v4.EndTxnRequest
    | v5.EndTxnRequest
)  # fmt: skip


async def handle(ctx: RequestContext, request: Request) -> v5.EndTxnResponse:
    pid, epoch = request.producer_id, request.producer_epoch
    if not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        code = ErrorCode.transactional_id_authorization_failed
    elif not_coordinator(ctx, request.transactional_id):
        code = ErrorCode.not_coordinator
    else:
        now = ctx.services.now_ms()
        code = ErrorCode.none
        links = ctx.services.node_links
        if request.committed and links is not None:  # `--processes N`: share acks elsewhere
            code = await held_everywhere(
                links, ctx.services.transactions, request.transactional_id, pid, epoch,
                ctx.services.config.ownership, now,
            )  # fmt: skip
        if code is ErrorCode.none:
            code = ctx.services.transactions.end_txn(
                request.transactional_id, pid, epoch, request.committed, now
            )
        if code is ErrorCode.none:
            # To its end even if the client goes (`broker.to_the_end`), as Kafka's markers are
            # sent whatever became of the EndTxn: else the transaction stayed prepared, its
            # partitions' LSO held, until the timer's next round.
            s = ctx.services
            await s.changes.to_the_end(
                finish(s.transactions, request.transactional_id, now, remote=s.txn_remote)
            )
    ok = code is ErrorCode.none
    return v5.EndTxnResponse(
        throttle_time=NO_THROTTLE,
        error_code=for_version(code, ctx.version, 2),
        producer_id=ProducerId(pid if ok else -1),
        producer_epoch=i16(epoch if ok else -1),
    )


HANDLER = handler(
    handle,
    v0.EndTxnRequest, v1.EndTxnRequest, v2.EndTxnRequest, v3.EndTxnRequest, v4.EndTxnRequest,
    v5.EndTxnRequest,
    acl=((AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),),
)  # fmt: skip
