"""The direct path of ShareFetch: one partition of a share session, its acknowledgements
piggybacked, records taken now or after one wait (issue 33).

A share consumer at a steady rate sends one such request per record or two, and the general
path (`share_fetch`) builds, for it, what a request of a million partitions needs: the
per-topic maps of acknowledgements and answers, slicers, per-topic failure counts. This takes
the same steps in the same order for the one shape, with none of those:

- one topic of one partition listed, nothing forgotten, epoch past 0 (the session exists),
  not a renew request, a known ShareAcquireMode, the logs done loading;
- the checks that refuse a request whole (ids, group READ and the session's principal, topic
  READ, the session's epoch) pass: any refusal is left to the general path, which refuses it
  as ever (nothing has changed before the session's epoch moves, the last of them);
- once the epoch has moved, a partition the session cannot hold or a session of other
  partitions too goes on with the general path's own steps (`share_fetch_answer`).

It answers byte for byte what the general path answers, and counts the same metrics
(`tests/integration/test_share_fetch_direct.py` runs both on the same requests).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.share_fetch.v2.request import ShareFetchRequest as ShareFetchRequestV2

from broker.context import RequestContext
from broker.handlers.share_common import acknowledge_one
from broker.handlers.share_common import authorized_member
from broker.handlers.share_common import member_of
from broker.handlers.share_common import topic_id
from broker.handlers.share_common import unreadable_topics
from broker.handlers.share_fetch_answer import answer
from broker.handlers.share_fetch_answer import count_fetch
from broker.handlers.share_fetch_answer import partition_answer
from broker.handlers.share_fetch_poll import ShareFetchRequest
from broker.handlers.share_fetch_poll import acquire_waiting
from broker.share.acknowledgements import AckOutcome
from broker.share.share_session_cache import ShareSessionError
from broker.share.share_session_cache import TopicIdPartition
from protocol.api_keys import SHARE_FETCH
from protocol.messages import EncodedResponse
from protocol.share_fetch_response import encode_share_fetch_response

# False: every ShareFetch takes the general path (the tests comparing the two set it).
ENABLED = True


def _shaped(request: ShareFetchRequest) -> bool:
    topics = request.topics
    if len(topics) != 1 or len(topics[0].partitions) != 1 or request.forgotten_topics_data:
        return False
    if request.share_session_epoch < 1:  # opens (0) or closes (-1) the session
        return False
    if isinstance(request, ShareFetchRequestV2):
        return not request.is_renew_ack and request.share_acquire_mode in (0, 1)
    return True


async def direct(ctx: RequestContext, request: ShareFetchRequest) -> EncodedResponse | None:
    """The answer by the direct path, or None: the general path answers (nothing done)."""
    s = ctx.services
    if not ENABLED or s.logs.loading or not _shaped(request):
        return None
    ids = member_of(request.group_id, request.member_id)
    if not isinstance(ids, tuple) or authorized_member(ctx, *ids):
        return None
    topic = request.topics[0]
    if unreadable_topics(ctx, request.topics):
        return None
    group_id, member_id = ids
    p = topic.partitions[0]
    key: TopicIdPartition = (topic_id(topic), p.partition_index)
    service = s.share_fetch
    try:  # the last check: it moves the epoch, or refuses with nothing changed
        update = service.update_session(
            group_id, member_id, request.share_session_epoch, (key,), (), ctx.principal
        )
    except ShareSessionError:
        return None
    session = update.session
    assert session is not None  # an epoch past 0 never closes the session
    ack: AckOutcome | None = None
    if p.acknowledgement_batches:
        ack = await acknowledge_one(
            service, s.ack_slices, group_id, member_id, key, (p.acknowledgement_batches,),
            renew_allowed=isinstance(request, ShareFetchRequestV2), now_ms=s.now_ms(),
        )  # fmt: skip
    acks = {key: ack} if ack is not None else {}
    info = s.logs.topic_by_id(key[0])
    if ack is not None and info is not None:
        # Counted before any wait (as the general path): a fetch whose client goes while it
        # waits has applied them.
        s.metrics.on_share_acknowledgement({info.name: ack.error_code != ErrorCode.none})
    if update.unknown or len(session.partitions) != 1:  # the general path's steps from here
        max_wait_s = 0.0 if update.unknown else request.max_wait.total_seconds()
        answered = update.unknown | await acquire_waiting(ctx, request, session, max_wait_s)
        await count_fetch(ctx, session.partitions, answered)
        return await answer(ctx, group_id, acks, answered)
    max_wait_s = request.max_wait.total_seconds()
    fetched = (await acquire_waiting(ctx, request, session, max_wait_s)).get(key)
    # What count_fetch and answer count, for the one partition (named as before the wait).
    fetch_code = fetched.error_code if fetched is not None else ErrorCode.none
    metrics = s.metrics
    metrics.on_share_fetch({info.name: fetch_code != ErrorCode.none} if info else {})
    if fetched is not None and fetched.records and info is not None:
        metrics.on_bytes_out(info.name, len(fetched.records))
    topics = []
    codes: tuple[int, ...] = ()
    if fetched is not None or ack is not None:
        one = partition_answer(ctx, key, fetched, acks)
        topics.append((key[0], [one]))
        codes = tuple(c for c in (one.error_code, one.acknowledge_error_code) if c)
    lock_ms = service.lock_duration_ms(group_id)
    body = encode_share_fetch_response(ctx.version, topics, lock_timeout_ms=lock_ms)
    return EncodedResponse(SHARE_FETCH, ctx.version, body, error_codes=codes)
