"""TxnShareStaged (Shoal's own API key 30001, between the processes of `--processes N`): a
transaction's coordinator asks, before it decides a commit, whether this process still holds
the share acknowledgements the transaction staged here (`broker/txn_share_remote.py`). As the
brokers' own requests (WriteTxnMarkers, AddPartitionsToTxn v4+): CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from protocol.shoal_apis import TxnShareStagedRequest as Request
from protocol.shoal_apis import TxnShareStagedResponse as Response


async def handle(ctx: RequestContext, request: Request) -> Response:
    acks = ctx.services.txn_share_acks
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        code = ErrorCode.cluster_authorization_failed
    elif acks is not None and acks.joined(int(request.producer_id), int(request.producer_epoch)):
        code = ErrorCode.none
    else:
        code = ErrorCode.invalid_txn_state
    return Response(throttle_time=NO_THROTTLE, error_code=code)


HANDLER = handler(handle, Request, acl=((AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),))
