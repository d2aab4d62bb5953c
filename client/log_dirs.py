"""Each broker's log dirs and the bytes each partition's log takes in them: DescribeLogDirs, as
Kafka's `Admin.describeLogDirs` and `kafka-log-dirs.sh --describe` ask it.

A refusal is read as Kafka's admin client reads it (`KafkaAdminClient.describeLogDirs`): no
log dir in the answer is an error, the top-level code (v3+) or, when that says none (before
v3 there is none), CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from client.cluster import Cluster
from client.errors import KafkaError
from client.errors import error_for
from client.kio_apis import DESCRIBE_LOG_DIRS
from protocol import api_keys
from protocol.messages import build

API_DESCRIBE_LOG_DIRS = api_keys.DESCRIBE_LOG_DIRS


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    size: int  # bytes of the log's segments
    offset_lag: int
    is_future: bool  # a log AlterReplicaLogDirs is moving here


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    error: KafkaError | None  # the dir is offline (KAFKA_STORAGE_ERROR), say
    replicas: dict[tuple[str, int], ReplicaInfo]
    total_bytes: int | None  # the volume's; None: not known (before v4, or the broker's -1)
    usable_bytes: int | None


async def describe_log_dirs(
    cluster: Cluster,
    partitions: Mapping[str, Iterable[int]] | None = None,
    brokers: Iterable[int] | None = None,
) -> dict[int, list[LogDirDescription]]:
    """Broker id -> its log dirs, each with the replicas of `partitions` it holds (None: all).

    :raises UnsupportedVersionError: the brokers do not serve DescribeLogDirs (an older Shoal).
    :raises KafkaError: a broker refused (CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on
        the cluster).
    """
    await cluster.bootstrap()
    version = cluster.version(API_DESCRIBE_LOG_DIRS, 1, 5)
    m = DESCRIBE_LOG_DIRS.requests(version)
    topics = None
    if partitions is not None:
        topics = tuple(
            build(m.DescribableLogDirTopic, topic=t, partitions=tuple(ps))
            for t, ps in partitions.items()
        )
    req = build(m.DescribeLogDirsRequest, topics=topics)
    out: dict[int, list[LogDirDescription]] = {}
    for node in cluster.node_ids if brokers is None else brokers:
        resp = await cluster.call(req, DESCRIBE_LOG_DIRS.response(version), node_id=node)
        if not resp.results:
            code = getattr(resp, "error_code", ErrorCode.none)
            refusal = ErrorCode.cluster_authorization_failed if code == ErrorCode.none else code
            raise error_for(refusal, f"DescribeLogDirs on broker {node}")
        out[node] = [_described(r) for r in resp.results]
    return out


def _described(r: Any) -> LogDirDescription:
    total, usable = getattr(r, "total_bytes", -1), getattr(r, "usable_bytes", -1)
    return LogDirDescription(
        path=r.log_dir,
        error=None if r.error_code == ErrorCode.none else error_for(r.error_code, r.log_dir),
        replicas={
            (t.name, int(p.partition_index)): ReplicaInfo(
                int(p.partition_size), int(p.offset_lag), bool(p.is_future_key)
            )
            for t in r.topics
            for p in t.partitions
        },
        total_bytes=None if total < 0 else int(total),
        usable_bytes=None if usable < 0 else int(usable),
    )


def partition_sizes(described: Mapping[int, list[LogDirDescription]]) -> dict[tuple[str, int], int]:
    """Each partition's bytes: the largest of its replicas' current logs (a future log, being
    moved between dirs, is a copy)."""
    out: dict[tuple[str, int], int] = {}
    for dirs in described.values():
        for d in dirs:
            for key, replica in d.replicas.items():
                if not replica.is_future:
                    out[key] = max(out.get(key, 0), replica.size)
    return out
