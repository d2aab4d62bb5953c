"""`shoal share-state dump`: a share-partition's durable state, read OFFLINE from a data dir.

Prints the group's current SHARE_CHECKPOINT and the SHARE_DELTA records chained to it (with
the offset of each) as JSON, in the field names of seed 000 / KIP-932. It reads the data dir
through storage's read-only API (`storage.inspect`), with no broker, and never changes a file
of it: run it on a stopped broker's data dir (or a copy). A running broker's data dir is
refused unless `--force-read-only`; a log that was not shut down cleanly is recovered, in a
private copy, as the broker would on start (and a warning is printed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import structlog

from cli.common import KAFKA_ERROR
from cli.common import OK
from cli.common import USAGE
from cli.common import fail
from cli.common import print_json
from protocol.share_state import ShareCheckpoint
from protocol.share_state import ShareStateRecord
from storage.errors import UnknownTopicOrPartition
from storage.inspect import DataDirectory
from storage.inspect import DataDirectoryInUse
from storage.inspect import NotADataDirectory


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
    topic, partition, group = args.topic, args.partition, args.group
    # Recovery's log lines are diagnostics: stdout is the JSON a script reads.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))
    try:
        data = DataDirectory(args.data_dir, force_read_only=args.force_read_only)
        if not data.shut_down_cleanly(topic, partition):
            print(
                f"shoal: warning: {data.partition_dir(topic, partition)} was not shut down "
                "cleanly (is a broker running?)",
                file=sys.stderr,
            )
        chain = data.share_state_chain(topic, partition, group)
    except (NotADataDirectory, DataDirectoryInUse) as e:
        return fail(str(e), USAGE)
    except UnknownTopicOrPartition as e:
        return fail(f"UNKNOWN_TOPIC_OR_PARTITION: {e}", KAFKA_ERROR)
    if not chain.records:
        return fail(
            f"GROUP_ID_NOT_FOUND: no share state for group {group!r} on {topic}-{partition}",
            KAFKA_ERROR,
        )
    print_json(
        {
            "Topic": topic,
            "Partition": partition,
            "GroupId": group,
            "SnapshotOffset": chain.snapshot_offset,
            "Records": [record_json(o, r) for o, r in chain.records],
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
    dump.add_argument(
        "--force-read-only",
        action="store_true",
        help="read a running broker's data dir as it is now (may miss its newest writes)",
    )
    dump.set_defaults(func=_dump)
