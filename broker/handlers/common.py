"""Small pieces every handler uses: the response classes of a request's version, topic lookup."""

from __future__ import annotations

import datetime
from typing import Any
from typing import Final

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from broker.context import RequestContext
from protocol.messages import entity_of
from protocol.messages import response_type
from storage.topics import TopicInfo


class Response:
    """The response entity classes of one (api key, version), by their kio names."""

    def __init__(self, ctx: RequestContext) -> None:
        self.type: Any = response_type(ctx.header.api_key, ctx.header.api_version)

    def __getattr__(self, name: str) -> Any:
        return entity_of(self.type, name)


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


def too_many_partitions(ctx: RequestContext, added: int) -> str | None:
    """Why a request adding `added` partitions is refused before anything is created, if it is."""
    limit: int = ctx.services.config["max.partitions.per.request"]
    if added > limit:
        return f"the request adds {added} partitions, over max.partitions.per.request ({limit})"
    total, cap = ctx.services.logs.partition_count() + added, ctx.services.logs.max_partitions
    if cap is not None and total > cap:
        return f"{added} more partitions would make {total}, over max.broker.partitions ({cap})"
    return None


# Shoal never throttles; responses say so.
NO_THROTTLE: Final = i32Timedelta.parse(datetime.timedelta(0))
