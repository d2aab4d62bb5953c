"""DescribeLogDirs (35): how many bytes each partition's log takes in the data dir (v1-5, as
Kafka 4.2 serves; KIP-896 removed v0). It is how `kafka-log-dirs.sh --describe` and
AdminClient.describeLogDirs learn partition sizes, and what `shoal migrate --dry-run` asks.

Answered as Kafka's `KafkaApis.handleDescribeLogDirsRequest` and `ReplicaManager.describeLogDirs`
(core/src/main/scala/kafka/server/):
- DESCRIBE on CLUSTER, else no result and CLUSTER_AUTHORIZATION_FAILED at the top (v3+; before
  v3 the empty list alone says it, which Kafka's admin client reads as the same refusal).
- One result: the data dir (`log.dirs`' first, the one Shoal keeps), by its absolute path.
- Null topics: every log, the broker's own internal ones too (Kafka lists `__consumer_offsets`);
  named: those that exist, each once; an unknown topic or partition is left out, as is a topic
  none of whose partitions is here. A log that cannot be opened is left out (said in the log).
- `partition_size`: the bytes of the log's segments as the log keeps them (`size_bytes`: no
  stat); `offset_lag` 0 (this broker leads every partition: max(HW - LEO, 0)); `is_future_key`
  false (no AlterReplicaLogDirs). v4 `total_bytes`/`usable_bytes` are the volume's, from
  statvfs in a thread (as Java's FileStore total and usable space; -1 when it fails); v5
  `is_cordoned` false (nothing is cordoned here).

A broker may hold 50,000 partitions and a request may name a million: the answer is built in
slices (`broker.slicing`); a log not open yet (the broker just started) is opened when its turn
comes, so those too are opened a slice at a time.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from collections.abc import Iterator

from kio.schema.describe_log_dirs import v1
from kio.schema.describe_log_dirs import v2
from kio.schema.describe_log_dirs import v3
from kio.schema.describe_log_dirs import v4
from kio.schema.describe_log_dirs import v5
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage import LogManager
from storage.errors import KafkaStorageError
from storage.log import PartitionLog
from storage.topics import INTERNAL_LOGS

Request = (
    v1.DescribeLogDirsRequest
    | v2.DescribeLogDirsRequest
    | v3.DescribeLogDirsRequest
    | v4.DescribeLogDirsRequest
    | v5.DescribeLogDirsRequest
)
Response = v5.DescribeLogDirsResponse
Partition = v5.response.DescribeLogDirsPartition
UNKNOWN_BYTES = -1  # the schema's default: the volume's size is not known


def _internal_logs(logs: LogManager) -> dict[str, PartitionLog]:
    """The broker's own logs opened so far (`LogManager.internal_log`), by name."""
    tail = logs.partition_logs()[-len(INTERNAL_LOGS) :]  # the internal ones come last
    return {name: plog for (name, _), plog in tail if name in INTERNAL_LOGS}


def _every_log(
    logs: LogManager, internal: dict[str, PartitionLog]
) -> Iterator[tuple[str, Iterable[int]]]:
    for info in logs.topics():
        yield info.name, range(info.partitions)
    for name in internal:
        yield name, (0,)


def _log(
    logs: LogManager, internal: dict[str, PartitionLog], topic: str, partition: int
) -> PartitionLog | None:
    """The partition's log; None: there is none here, or it cannot be opened (said when it
    failed; not described, as Kafka's `allLogs` holds no log that failed to load)."""
    if partition < 0:
        return None
    try:
        plog = logs.log(topic, partition)
    except KafkaStorageError:
        return None
    if plog is None and partition == 0:
        return internal.get(topic)
    return plog


async def _topics(
    logs: LogManager,
    internal: dict[str, PartitionLog],
    asked: Iterable[tuple[str, Iterable[int]]],
    slicer: Slicer,
) -> tuple[v5.response.DescribeLogDirsTopic, ...]:
    """The partitions asked for that are here, each once, by topic in the order first named.
    Only those found are kept: a million unknown ones named cost no memory (and no freeing of
    it in one go)."""
    found: dict[str, dict[int, Partition]] = {}
    for topic, partitions in asked:
        for p in partitions:
            known = found.get(topic)
            if known is None or p not in known:
                plog = _log(logs, internal, topic, p)
                if plog is not None:
                    found.setdefault(topic, {})[p] = Partition(
                        partition_index=i32(p), partition_size=i64(plog.size_bytes),
                        offset_lag=i64(0), is_future_key=False,
                    )  # fmt: skip
            await slicer.pause()
    return tuple(
        v5.response.DescribeLogDirsTopic(name=TopicName(t), partitions=tuple(ps.values()))
        for t, ps in found.items()
    )


def _volume(path: str) -> tuple[int, int]:
    """The volume's total and usable bytes (Java's FileStore: blocks, and blocks available to
    an unprivileged user, times the fragment size); unknown when statvfs fails."""
    try:
        st = os.statvfs(path)
    except OSError:
        return UNKNOWN_BYTES, UNKNOWN_BYTES
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def log_dir(ctx: RequestContext) -> str:
    """The data dir's absolute path, as Kafka names a log dir (`File.getAbsolutePath`)."""
    logs = ctx.services.logs
    return os.path.abspath(
        logs.data_dir if logs.data_dir is not None else ctx.services.config.data_dir
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return Response(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed, results=()
        )
    logs = ctx.services.logs
    slicer = Slicer()  # 50,000 partitions, or a request naming a million
    internal = _internal_logs(logs)
    asked: Iterable[tuple[str, Iterable[int]]]
    if request.topics is None:
        asked = list(_every_log(logs, internal))
    else:
        asked = ((t.topic, t.partitions) for t in request.topics)
    topics = await _topics(logs, internal, asked, slicer)
    path = log_dir(ctx)
    total, usable = await asyncio.to_thread(_volume, path)  # a slow disk never holds the loop
    result = v5.response.DescribeLogDirsResult(
        error_code=ErrorCode.none, log_dir=path, topics=topics, total_bytes=i64(total),
        usable_bytes=i64(usable), is_cordoned=False,
    )  # fmt: skip
    return Response(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=(result,))


HANDLER = handler(
    handle,
    v1.DescribeLogDirsRequest,
    v2.DescribeLogDirsRequest,
    v3.DescribeLogDirsRequest,
    v4.DescribeLogDirsRequest,
    v5.DescribeLogDirsRequest,
    acl=((AclOperation.DESCRIBE, ResourceType.CLUSTER),),
)
