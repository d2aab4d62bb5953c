"""ListTransactions (66): the transactional ids the principal may DESCRIBE, filtered by state,
producer id and (v1) how long their transaction has been open, as Kafka's
`TransactionStateManager.listTransactionStates`; states it does not know are listed back in
`unknown_state_filters`. v2's TransactionalIdPattern (a client's regular expression run over
every id) is not served yet.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.list_transactions import v0
from kio.schema.list_transactions import v1
from kio.schema.types import ProducerId
from kio.schema.types import TransactionalId

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from coordinator.txn_metadata import TxnState
from protocol.acl import AclOperation
from protocol.acl import ResourceType

KNOWN_STATES = {s.value for s in TxnState} | {"PrepareEpochFence", "Dead"}


async def handle(
    ctx: RequestContext, request: v0.ListTransactionsRequest | v1.ListTransactionsRequest
) -> v1.ListTransactionsResponse:
    states = set(request.state_filters)
    duration = int(getattr(request, "duration_filter", -1))
    found = ctx.services.transactions.list(
        states, set(map(int, request.producer_id_filters)), duration,
        ctx.services.now_ms(),
    )  # fmt: skip
    # In the order asked, once each: Kafka keeps them in a HashSet (no order). Not sorted: a
    # request may send a million, and sorting them is one C call holding the GIL (~100 ms for
    # 50,000 on a loaded machine), in a thread or not.
    unknown = tuple(s for s in dict.fromkeys(request.state_filters) if s not in KNOWN_STATES)
    r = v1.response
    return v1.ListTransactionsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=tuple(
            r.TransactionState(
                transactional_id=TransactionalId(m.transactional_id),
                producer_id=ProducerId(m.producer_id),
                transaction_state=m.state,
            )
            for m in found
            if not not_coordinator(ctx, m.transactional_id)  # as ListGroups: this node's own
            and authorize(
                ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id
            )
        ),
    )


HANDLER = handler(
    handle,
    v0.ListTransactionsRequest,
    v1.ListTransactionsRequest,
    acl=((AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID),),
)
