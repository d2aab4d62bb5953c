"""`shoal share-state dump`: a share-partition's durable state, read OFFLINE from a data dir.

Prints the group's current SHARE_CHECKPOINT and the SHARE_DELTA records chained to it (with
the offset of each) as JSON, in the field names of seed 000 / KIP-932. It opens the partition
log directly, with no broker: run it on a stopped broker's data dir (or a copy). A log that was
not shut down cleanly is recovered as the broker would on start (and a warning is printed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from broker.commands.common import KAFKA_ERROR
from broker.commands.common import OK
from broker.commands.common import USAGE
from broker.commands.common import fail
from broker.commands.common import print_json
from protocol.share_state import ShareCheckpoint
from protocol.share_state import ShareStateRecord
from storage.config import LogConfig
from storage.log_manager import TOPICS_DIR
from storage.segment_log import CLEAN_SHUTDOWN
from storage.segment_log import SegmentLog
from storage.share_state_store import ShareStateStore
from storage.topics import load_topics

STATE_DIR = "__share_state"  # where the broker keeps share snapshot files


def record_json(offset: int, record: ShareStateRecord) -> dict[str, Any]:
    doc: dict[str, Any] = {"Offset": offset}
    if isinstance(record, ShareCheckpoint):
        doc.update(
            Type="SHARE_CHECKPOINT",
            GroupId=record.group_id,
            CheckpointEpoch=record.checkpoint_epoch,
            StartOffset=record.start_offset,
            EndOffset=record.end_offset,
        )
    else:
        doc.update(
            Type="SHARE_DELTA",
            GroupId=record.group_id,
            CheckpointEpoch=record.checkpoint_epoch,
            BackOffset=record.back_offset,
        )
    doc["States"] = [
        {
            "BaseOffset": s.base_offset,
            "LastOffset": s.last_offset,
            "State": s.state,
            "DeliveryCount": s.delivery_count,
        }
        for s in record.states
    ]
    return doc


def _dump(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    if not (data_dir / TOPICS_DIR).is_dir():
        return fail(f"{data_dir} is not a Shoal data directory", USAGE)
    topics = {t.name: t for t in load_topics(data_dir / TOPICS_DIR)}
    topic = topics.get(args.topic)
    if topic is None or not 0 <= args.partition < topic.partitions:
        return fail(f"UNKNOWN_TOPIC_OR_PARTITION: no {args.topic}-{args.partition}", KAFKA_ERROR)
    log_dir = data_dir / f"{args.topic}-{args.partition}"
    clean = (log_dir / CLEAN_SHUTDOWN).exists()
    if not clean:
        print(
            f"shoal: warning: {log_dir} was not shut down cleanly (is a broker running?)",
            file=sys.stderr,
        )
    plog = SegmentLog.open(log_dir, LogConfig().with_overrides(topic.configs))
    try:
        store = ShareStateStore(plog, data_dir / STATE_DIR / f"{args.topic}-{args.partition}")
        chain = store.chain(args.group)
        snapshot = store.read_snapshot(args.group)
    finally:
        if clean:  # put the clean-shutdown marker back: the next start skips recovery again
            plog.close()
    if not chain:
        return fail(
            f"GROUP_ID_NOT_FOUND: no share state for group {args.group!r} "
            f"on {args.topic}-{args.partition}",
            KAFKA_ERROR,
        )
    print_json(
        {
            "Topic": args.topic,
            "Partition": args.partition,
            "GroupId": args.group,
            "SnapshotOffset": snapshot,
            "Records": [record_json(o, r) for o, r in chain],
        }
    )
    return OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("share-state", help="inspect durable share state offline")
    actions = p.add_subparsers(dest="action", required=True)
    dump = actions.add_parser(
        "dump", help="print a share-partition's checkpoint and deltas as JSON (no broker)"
    )
    dump.add_argument("topic")
    dump.add_argument("partition", type=int)
    dump.add_argument("--group", required=True)
    dump.add_argument("--data-dir", type=Path, default=Path("./data"), help="default ./data")
    dump.set_defaults(func=_dump)
