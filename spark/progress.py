"""What a streaming query's progress (`StreamingQueryProgress.sources[0]`) says about the
share group, in the shapes Spark's Kafka source uses, so lag dashboards carry over.

- `startOffset` / `endOffset` (also written to the query's checkpoint): Kafka's
  `{"topic": {"partition": offset}}`, the offset after the highest record this query has read
  from each partition so far (a share group hands out lower, redelivered offsets later too, so
  it is a high-water mark, not a position), plus `"shoal:batch"`, the micro-batch's number
  that the reader keys its acquired records by. `shoal:batch` cannot be a topic: Kafka's topic
  names have no colon. Checkpoints of older versions carry `{"seq": n}` and still restart.
- `latestOffset` (`reportLatestOffset`, asked once per trigger): each subscribed partition's
  log end offset (the LSO under kafka.isolation.level=read_committed), Kafka's shape, plus
  `"shoal:metrics"`, the metrics Spark's Kafka source puts in `metrics`
  (`KafkaMicroBatchStream.metrics` in Spark's kafka-0-10-sql connector: offsets behind the
  latest, per partition, as min/max/avg strings) and the share group's lag
  (`shareGroupLag`: records not yet acknowledged or archived, from DescribeShareGroupOffsets,
  which counts data records only; asked at most every 5 s, see `spark.share_session`).
  PySpark 4 gives a Python source no hook for `metrics` nor for `description`
  (PythonMicroBatchStream implements neither ReportsSourceMetrics nor toString), so
  `latestOffset` is where they can be read: `shoal_metrics(progress)` does it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

BATCH = "shoal:batch"
METRICS = "shoal:metrics"
_LEGACY_BATCH = "seq"  # the offset of checkpoints written before per-partition offsets

TopicPartition = tuple[str, int]


def batch_of(offset: Mapping[str, Any]) -> int:
    """The micro-batch number an offset names (0: none yet)."""
    return int(offset.get(BATCH, offset.get(_LEGACY_BATCH, 0)))


def positions_of(offset: Mapping[str, Any]) -> dict[TopicPartition, int]:
    """The per-partition offsets of an offset dict (those of older checkpoints: none)."""
    out: dict[TopicPartition, int] = {}
    for topic, parts in offset.items():
        if isinstance(parts, Mapping) and topic != METRICS:
            out.update(((topic, int(p)), int(o)) for p, o in parts.items())
    return out


def kafka_shape(positions: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(positions.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def end_offset(
    start: Mapping[str, Any], batch: int, read: Iterable[tuple[str, int, int]]
) -> dict[str, Any]:
    """The offset of micro-batch `batch`, which read `(topic, partition, last offset)` ranges
    after `start`: each partition's high-water mark raised past what it read."""
    positions = positions_of(start)
    for topic, partition, last in read:
        tp = (topic, partition)
        positions[tp] = max(positions.get(tp, 0), last + 1)
    return {**kafka_shape(positions), BATCH: batch}


def source_metrics(
    latest: Mapping[TopicPartition, int],
    read_to: Mapping[TopicPartition, int],
    group_starts: Mapping[TopicPartition, int],
    group_lag: int | None,
) -> dict[str, str]:
    """Spark's Kafka source metrics over the subscribed partitions (`latest`: log end
    offsets), as strings as Spark's are. A partition this query has not read yet counts from
    `group_starts` (the group's start offset, SPSO, or where the group's reset will start it),
    and is not behind when that is unknown (a group at `latest` starts at the log end)."""
    behind = []
    for tp, end in latest.items():
        at = read_to.get(tp)
        if at is None:
            at = group_starts.get(tp, end)
        behind.append(max(0, end - at))
    out: dict[str, str] = {}
    if behind:
        out["avgOffsetsBehindLatest"] = str(sum(behind) / len(behind))
        out["maxOffsetsBehindLatest"] = str(max(behind))
        out["minOffsetsBehindLatest"] = str(min(behind))
    if group_lag is not None:
        out["shareGroupLag"] = str(group_lag)
    return out


def latest_report(
    latest: Mapping[TopicPartition, int], metrics: Mapping[str, str]
) -> dict[str, Any]:
    return {**kafka_shape(latest), METRICS: dict(metrics)}


def shoal_metrics(progress: Any) -> dict[str, str]:
    """The `shoal:metrics` of a query's progress (a `StreamingQueryProgress`, its `json`
    string, or the dict of `query.lastProgress`): {} when no shoal source reported any."""
    if hasattr(progress, "json") and not isinstance(progress, Mapping):
        progress = json.loads(progress.json)
    elif isinstance(progress, str):
        progress = json.loads(progress)
    for source in (progress or {}).get("sources", []):
        latest = source.get("latestOffset")
        if isinstance(latest, str):
            try:
                latest = json.loads(latest)
            except json.JSONDecodeError:
                continue
        if isinstance(latest, Mapping) and isinstance(latest.get(METRICS), Mapping):
            return {str(k): str(v) for k, v in latest[METRICS].items()}
    return {}
