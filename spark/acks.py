"""Per-record verdicts for a micro-batch: `shoal_ack(df, ok_column)` inside `foreachBatch`.

A streaming source cannot see the sink's columns, and only the consumer that acquired a record
may acknowledge it (that consumer lives in the stream reader's process on the driver, see
`spark.stream`). So the verdict travels the other way: `shoal_ack` collects the (few) rows whose
`ok_column` is false and leaves them, as one JSON file written atomically, in a directory on the
driver (`ackDir`, by default one per group under the temp directory). Spark writes the batch to
its commit log only after `foreachBatch` returns, and the reader acknowledges a batch only after
that, so the file is always there in time: the listed records are then REJECTed (archived: a
poison record stops coming back) or RELEASEd (delivered again, until the delivery-count limit
archives it) instead of ACCEPTed.

A reader applies the entries that match records it holds (topic, partition, offset and delivery
count, so a stale file from an earlier delivery cannot touch a later one) and deletes a file
whose entries all matched; another query of the same group on this driver skips the file.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client.share_acks import AcknowledgeType
from spark.options import default_ack_dir

log = logging.getLogger(__name__)

RecordKey = tuple[str, int, int, int]  # topic, partition, offset, delivery count
_VERDICTS = {"reject": AcknowledgeType.REJECT, "release": AcknowledgeType.RELEASE}
_STALE_S = 24 * 3600


def shoal_ack(
    df: Any,
    ok_column: str,
    *,
    group: str | None = None,
    ack_dir: str | None = None,
    failed: str = "reject",
) -> int:
    """Mark the rows of a micro-batch whose `ok_column` is false (or null) to be rejected
    (`failed="reject"`) or released (`failed="release"`) instead of accepted.

    Call it inside `foreachBatch` with the batch DataFrame (it needs the source's `topic`,
    `partition`, `offset` and `deliveryCount` columns). Pass the reader's `group` or, if the
    reader was given `ackDir`, the same `ack_dir`. Returns how many records were marked.
    """
    if failed not in _VERDICTS:
        raise ValueError(f"failed must be one of {sorted(_VERDICTS)}")
    if ack_dir is None:
        if group is None:
            raise ValueError("shoal_ack needs the reader's group or its ackDir")
        ack_dir = default_ack_dir(group)
    from pyspark.sql import functions as F

    bad = df.where(~F.coalesce(F.col(ok_column).cast("boolean"), F.lit(False))).select(
        "topic", "partition", "offset", "deliveryCount"
    )
    entries = [
        [r["topic"], int(r["partition"]), int(r["offset"]), int(r["deliveryCount"] or 0), failed]
        for r in bad.collect()
    ]
    if entries:
        write_verdicts(ack_dir, entries)
    return len(entries)


def write_verdicts(ack_dir: str, entries: list[list[Any]]) -> Path:
    """One file of [topic, partition, offset, deliveryCount, "reject"|"release"] entries."""
    directory = Path(ack_dir)
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns()}-{uuid.uuid4().hex}"
    tmp = directory / f".{name}.tmp"
    tmp.write_text(json.dumps({"entries": entries}))
    final = directory / f"{name}.json"
    os.replace(tmp, final)  # readers never see a half-written file
    return final


def take_verdicts(
    ack_dir: str, held: Callable[[RecordKey], bool]
) -> dict[RecordKey, AcknowledgeType]:
    """The verdicts in `ack_dir` for records that `held` says we hold; files fully applied are
    deleted. (Asked per verdict entry, which are few, never per held record.)"""
    directory = Path(ack_dir)
    if not directory.is_dir():
        return {}
    out: dict[RecordKey, AcknowledgeType] = {}
    now = time.time()
    for path in sorted(directory.glob("*.json")):
        try:
            entries = json.loads(path.read_text())["entries"]
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            continue  # another reader of the group took it
        except (ValueError, KeyError, OSError) as e:
            log.warning("ignoring unreadable verdict file %s: %s", path, e)
            continue
        matched = 0
        for topic, partition, offset, count, verdict in entries:
            key = (str(topic), int(partition), int(offset), int(count))
            if verdict in _VERDICTS and held(key):
                out[key] = _VERDICTS[verdict]
                matched += 1
        if matched == len(entries) or now - mtime > _STALE_S:
            path.unlink(missing_ok=True)
    return out
