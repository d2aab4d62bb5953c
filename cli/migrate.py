"""`shoal migrate`: move a broker's topics, records, group positions, configs, ACLs and users
to another Kafka-protocol cluster (Apache Kafka 4.2+, or another Shoal), over the protocol only.

Steps, in order: topics (same partition counts, their own configs) and records (in order, per
partition, with the durable offset map: `cli/migration/records.py`); consumer groups'
committed offsets and share groups' SPSO, translated through the map, with the records a
share group will get again counted (`cli/migration/groups.py`); ACLs and SCRAM users
(`cli/migration/security.py`); then a report. `--resume` goes on with a stopped run without
producing any record twice; `--dry-run` says what would be done, with counts and sizes
(`cli/migration/dry_run.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path
from typing import Any

from cli.common import KAFKA_ERROR
from cli.common import OK
from cli.common import UsageError
from cli.common import bootstrap_servers
from cli.common import parse_properties
from cli.common import print_json
from cli.common import print_table
from cli.common import run
from cli.migration import records
from cli.migration.dry_run import report_topics
from cli.migration.dry_run import source_sizes
from cli.migration.groups import migrate_groups
from cli.migration.offset_map import OffsetMap
from cli.migration.progress import Progress
from cli.migration.report import COPIED
from cli.migration.report import REFUSED
from cli.migration.report import Report
from cli.migration.security import migrate_acls
from cli.migration.security import migrate_users
from cli.migration.state import StateDir
from cli.migration.topics import TopicPlan
from cli.migration.topics import create_topic
from cli.migration.topics import plan_topics
from client.admin import Admin
from client.security import Security


def add_parser(sub: Any) -> None:
    p = sub.add_parser("migrate", help="move topics, records and positions to a Kafka cluster")
    p.add_argument("--from", dest="source", required=True, type=bootstrap_servers)
    p.add_argument("--to", dest="target", required=True, type=bootstrap_servers)
    p.add_argument("--command-config", type=Path, metavar="FILE", help="source client props")
    p.add_argument("--to-command-config", type=Path, metavar="FILE", help="target client props")
    p.add_argument("--topics", type=re.compile, metavar="REGEX", help="topics to move (all)")
    p.add_argument("--groups", type=re.compile, metavar="REGEX", help="groups to move (all)")
    p.add_argument("--state-dir", type=Path, default=Path("shoal-migrate-state"))
    p.add_argument("--resume", action="store_true", help="go on with a stopped migration")
    p.add_argument("--dry-run", action="store_true", help="say what would be done")
    p.add_argument("--force", action="store_true", help="move groups with live members too")
    p.add_argument("--user-passwords", type=Path, metavar="FILE", help="name=password lines")
    p.add_argument("--compression", default="lz4", choices=("none", "gzip", "lz4", "zstd"))
    p.add_argument("--max-records", type=int, help=argparse.SUPPRESS)  # tests: stop midway
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    args.command_timeout = None  # a copy takes as long as it takes
    args.bootstrap_server = f"{args.source} or {args.target}"
    return run(_migrate, args)


def _props(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        return parse_properties(path.read_text())
    except OSError as e:
        raise UsageError(f"{path}: {e}") from None


def _security(props: dict[str, str]) -> Security | None:
    try:
        return Security.from_properties(props) if props else None
    except ValueError as e:
        raise UsageError(str(e)) from None


async def _migrate(args: argparse.Namespace) -> int:
    src_props, dst_props = _props(args.command_config), _props(args.to_command_config)
    passwords = _props(args.user_passwords)
    state = StateDir(args.state_dir, args.source, args.target)
    if not args.dry_run:
        state.open(resume=args.resume)
    report = Report()
    async with (
        Admin(args.source, client_id="shoal-migrate", security=_security(src_props)) as src,
        Admin(args.target, client_id="shoal-migrate", security=_security(dst_props)) as dst,
    ):
        plans = await plan_topics(src, args.topics)
        if args.dry_run:
            return await _dry_run(args, src, plans, passwords, report)
        src_conf = records.consumer_config(src_props, args.source)
        dst_consumer = records.consumer_config(dst_props, args.target)
        parts = []
        for plan in plans:
            if await create_topic(dst, plan, plan.name in state.topics, report):
                state.add_topic(plan.name)
                parts += await _partitions(plan, state, src_conf, dst_consumer)
        progress = Progress(sum(p.end - p.start for p in parts if p.end > p.start))
        outcome = await asyncio.to_thread(
            records.copy_records,
            src_conf,
            records.producer_config(dst_props, args.target, args.compression),
            parts,
            progress.update,
            args.max_records,
        )
        progress.update(outcome.records, outcome.bytes, final=True)
        _report_copies(parts, report)
        if outcome.stopped_early:
            report.add("migration", "-", "stopped", "after --max-records: run again with --resume")
        else:
            maps = {p.key: p.map_file.map for p in parts}
            await migrate_groups(src, dst, args.groups, maps, report, force=args.force)
            await migrate_acls(src, dst, report)
            await migrate_users(src, dst, passwords, report)
    _print(args, report)
    return KAFKA_ERROR if report.failed else OK


async def _partitions(
    plan: TopicPlan, state: StateDir, src: dict[str, Any], dst: dict[str, Any]
) -> list[records.PartitionCopy]:
    """Each partition's copy, after finding what a stopped run left on the target."""
    out = []
    for p, (log_start, end) in sorted(plan.spans.items()):
        mf = state.map_file(plan.name, p)
        await asyncio.to_thread(records.reconcile, src, dst, plan.name, p, mf, log_start)
        nxt = mf.map.next_source
        start = log_start if nxt is None else max(nxt, log_start)
        out.append(records.PartitionCopy(plan.name, p, start, end, mf))
    return out


def _report_copies(parts: list[records.PartitionCopy], report: Report) -> None:
    by_topic: dict[str, list[records.PartitionCopy]] = {}
    for p in parts:
        by_topic.setdefault(p.topic, []).append(p)
    for topic, ps in by_topic.items():
        total = sum(len(p.map_file.map) for p in ps)
        now = sum(p.copied for p in ps)
        report.add("topic", topic, COPIED, f"{total} records ({now} in this run)")


async def _dry_run(
    args: argparse.Namespace,
    src: Admin,
    plans: list[TopicPlan],
    passwords: dict[str, str],
    report: Report,
) -> int:
    report_topics(plans, await source_sizes(src, plans), report)
    maps: dict[tuple[str, int], OffsetMap] = {}
    for plan in plans:
        for p, (start, end) in plan.spans.items():
            m = maps[(plan.name, p)] = OffsetMap()  # offsets as on the source until copied
            m.add_run(start, start, end - start)
    await migrate_groups(src, None, args.groups, maps, report, force=args.force)
    await migrate_acls(src, None, report)
    await migrate_users(src, None, passwords, report)
    _print(args, report)
    return OK


def _print(args: argparse.Namespace, report: Report) -> None:
    if args.json:
        print_json(report.to_json())
        return
    print_table(("KIND", "NAME", "OUTCOME", "DETAIL"), report.rows())
    if any(line.outcome == REFUSED for line in report.lines):
        print("some steps were refused by the target: see above")
