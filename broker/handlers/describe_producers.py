"""DescribeProducers (61): the producers each partition knows (id, epoch, last sequence and
timestamp, open transaction's first offset), from its producer state, as Kafka's
`ReplicaManager.activeProducerState`: READ on the topic (else TOPIC_AUTHORIZATION_FAILED),
UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist. Coordinator epochs are not
kept: -1.
"""

from __future__ import annotations

import functools

from kio.schema.describe_producers.v0 import request as req
from kio.schema.describe_producers.v0 import response as resp
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.slicing import sliced_map
from protocol.acl import AclOperation
from protocol.acl import ResourceType


def _partition(
    ctx: RequestContext, topic: str, index: int, readable: bool
) -> resp.PartitionResponse:
    plog = ctx.services.logs.log(topic, index)
    code = ErrorCode.none
    if not readable:
        code = ErrorCode.topic_authorization_failed
    elif plog is None:
        code = ErrorCode.unknown_topic_or_partition
    producers = () if plog is None or code is not ErrorCode.none else tuple(
        resp.ProducerState(
            producer_id=ProducerId(pid), producer_epoch=i32(epoch), last_sequence=i32(seq),
            last_timestamp=i64(ts), coordinator_epoch=i32(-1), current_txn_start_offset=i64(txn),
        )
        for pid, epoch, seq, ts, txn in plog.active_producers()
    )  # fmt: skip
    return resp.PartitionResponse(
        partition_index=i32(index), error_code=code, error_message=None, active_producers=producers
    )


async def handle(
    ctx: RequestContext, request: req.DescribeProducersRequest
) -> resp.DescribeProducersResponse:
    topics = []
    for topic in request.topics:
        readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
        # A request may name a million partitions: answered a slice at a time.
        partitions = await sliced_map(
            functools.partial(_partition, ctx, topic.name, readable=readable),
            topic.partition_indexes,
        )
        topics.append(resp.TopicResponse(name=TopicName(topic.name), partitions=tuple(partitions)))
    return resp.DescribeProducersResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLER = handler(
    handle, req.DescribeProducersRequest, acl=((AclOperation.READ, ResourceType.TOPIC),)
)
