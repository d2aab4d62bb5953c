"""Small pieces every handler uses: the response classes of a request's version, topic lookup,
acknowledgements applied in slices."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.context import RequestContext
from broker.share import acknowledgements
from broker.share.acknowledgements import AckOutcome
from broker.share.acknowledgements import TopicIdPartition
from broker.slicing import Slicer
from protocol.messages import response_type
from storage.topics import TopicInfo

# Shoal never throttles a client.
NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
# "Authorized operations not requested": Shoal has no ACLs to report (Kafka's INT32_MIN).
OPERATIONS_NOT_REQUESTED = i32(-(2**31))


class Response:
    """The response entity classes of one (api key, version), by their kio names.

    Left only for fetch, share_fetch and share_acknowledge until they build typed responses;
    delete it then.
    """

    def __init__(self, ctx: RequestContext) -> None:
        self.type: Any = response_type(ctx.header.api_key, ctx.header.api_version)

    def __getattr__(self, name: str) -> Any:
        return getattr(sys.modules[self.type.__module__], name)


def topic_or_create(
    ctx: RequestContext, name: str, allow_create: bool
) -> tuple[TopicInfo | None, ErrorCode]:
    """Find a topic, creating it when auto-creation is on and the client allows it."""
    logs = ctx.services.logs
    topic = logs.topic(name)
    if topic is not None:
        return topic, ErrorCode.none
    if not (allow_create and ctx.services.config["auto.create.topics.enable"]):
        return None, ErrorCode.unknown_topic_or_partition
    try:
        return logs.create_topic(name, ctx.services.config["num.partitions"], {}), ErrorCode.none
    except Exception as e:  # an invalid name, most often
        return None, getattr(e, "error_code", ErrorCode.invalid_topic_exception)


async def apply_acknowledgements(
    ctx: RequestContext, request: Any
) -> dict[TopicIdPartition, AckOutcome]:
    """Every partition's acknowledgement batches, each partition atomically, yielding to the
    loop between partitions so that a huge request never stalls other clients."""
    s = ctx.services
    slicer = Slicer()
    listed: dict[TopicIdPartition, list[Sequence[Any]]] = {}
    for key, batches in acknowledgements.partitions(request.topics):
        listed.setdefault(key, []).append(batches)
        await slicer.pause()
    out: dict[TopicIdPartition, AckOutcome] = {}
    for key, batch_lists in listed.items():
        out[key] = acknowledgements.apply(
            s.share_partitions, request.group_id, request.member_id, key, batch_lists,
            renew_allowed=ctx.version >= 2, now_ms=s.now_ms(),
        )  # fmt: skip
        await slicer.pause()
    return out


def too_many_partitions(ctx: RequestContext, added: int) -> str | None:
    """Why a request adding `added` partitions is refused before anything is created, if it is."""
    limit: int = ctx.services.config["max.partitions.per.request"]
    if added > limit:
        return f"the request adds {added} partitions, over max.partitions.per.request ({limit})"
    total, cap = ctx.services.logs.partition_count() + added, ctx.services.logs.max_partitions
    if cap is not None and total > cap:
        return f"{added} more partitions would make {total}, over max.broker.partitions ({cap})"
    return None
