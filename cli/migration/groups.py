"""Group positions: consumer groups' committed offsets and share groups' start offsets (SPSO),
translated through the offset maps and set on the target; group configs copied first.

A group with live members is still moving its position: it is reported and skipped unless
`--force` (its position is then the one read now). On the target, OffsetCommit through
the admin path and AlterShareGroupOffsets both need the group empty there too (KIP-932:
AlterShareGroupOffsets answers NON_EMPTY_GROUP otherwise).

Share groups: Kafka keeps no per-record state below a reset SPSO, so records above the
source's SPSO that were already acknowledged (ACCEPT), rejected or archived there are
delivered again on the target (at least once, never lost). Their number per partition is
Shoal's `acknowledged + archived + archiving` (its DescribeShareGroupOffsets detail) or, from
another broker, the records copied from SPSO on minus the lag (KIP-1226: the lag counts the
records from SPSO not yet acknowledged or archived).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cli.migration.offset_map import OffsetMap
from cli.migration.report import SKIPPED
from cli.migration.report import TRANSLATED
from cli.migration.report import Report
from cli.migration.topics import copy_configs
from client.admin import Admin
from client.admin import ConfigResourceType
from client.admin import ConfigSource
from client.admin import SharePartitionOffsets
from client.errors import KafkaError

Maps = Mapping[tuple[str, int], OffsetMap]


async def migrate_groups(
    src: Admin,
    dst: Admin | None,
    pattern: re.Pattern[str] | None,
    maps: Maps,
    report: Report,
    *,
    force: bool,
) -> None:
    """Every group matching `pattern`; `dst` None: a dry run (report only)."""
    for g in await src.list_groups():
        if pattern is not None and not pattern.fullmatch(g.group_id):
            continue
        kind = g.group_type.lower()
        try:
            if kind == "share":
                await _share_group(src, dst, g.group_id, maps, report, force=force)
            elif kind in ("consumer", "classic") or g.protocol_type == "consumer":
                await _consumer_group(src, dst, g.group_id, maps, report, force=force)
            else:
                report.add("group", g.group_id, SKIPPED, f"group type {g.group_type!r}")
        except KafkaError as e:
            report.add(f"{kind}-group", g.group_id, SKIPPED, str(e))


async def _group_configs(src: Admin, dst: Admin | None, group: str, report: Report) -> None:
    try:
        entries = await src.describe_config_entries(ConfigResourceType.GROUP, group)
    except KafkaError:
        return  # a source without group configs (resource type 32)
    configs = {
        e.name: e.value
        for e in entries
        if e.source == ConfigSource.GROUP_CONFIG and e.value is not None
    }
    if dst is not None:
        await copy_configs(dst, ConfigResourceType.GROUP, group, configs, report)
    elif configs:
        report.add("config", group, "would set", ", ".join(sorted(configs)))


async def _consumer_group(
    src: Admin, dst: Admin | None, group: str, maps: Maps, report: Report, *, force: bool
) -> None:
    desc = await src.describe_consumer_group(group)
    if desc is not None and desc.members and not force:
        report.add(
            "consumer-group", group, SKIPPED, f"{len(desc.members)} live members (use --force)"
        )
        return
    committed = await src.list_consumer_group_offsets(group)
    offsets: dict[tuple[str, int], int] = {}
    for tp, c in sorted(committed.items()):
        m = maps.get(tp)
        if c.offset < 0:
            continue
        target = m.translate(c.offset) if m is not None else None
        if target is None:
            report.add("consumer-group", f"{group} {tp[0]}-{tp[1]}", SKIPPED, "topic not copied")
            continue
        offsets[tp] = target
    await _group_configs(src, dst, group, report)
    if dst is not None and offsets:
        errors = await dst.alter_consumer_group_offsets(group, offsets)
        for tp, err in errors.items():
            if err is not None:
                report.add("consumer-group", f"{group} {tp[0]}-{tp[1]}", SKIPPED, str(err))
                offsets.pop(tp, None)
    detail = ", ".join(
        f"{t}-{p} {committed[(t, p)].offset}->{o}" for (t, p), o in sorted(offsets.items())
    )
    report.add("consumer-group", group, TRANSLATED, detail)


async def _share_group(
    src: Admin, dst: Admin | None, group: str, maps: Maps, report: Report, *, force: bool
) -> None:
    desc = (await src.describe_share_groups([group]))[group]
    if desc.members and not force:
        report.add("share-group", group, SKIPPED, f"{len(desc.members)} live members (use --force)")
        return
    offsets: dict[tuple[str, int], int] = {}
    again: dict[tuple[str, int], int] = {}
    for tp, spo in sorted((await src.describe_share_group_offsets(group)).items()):
        m = maps.get(tp)
        if spo.start_offset < 0:
            continue  # never started: the target starts it from share.auto.offset.reset
        target = m.translate(spo.start_offset) if m is not None else None
        if m is None or target is None:
            report.add("share-group", f"{group} {tp[0]}-{tp[1]}", SKIPPED, "topic not copied")
            continue
        offsets[tp] = target
        again[tp] = redelivered(spo, m)
    await _group_configs(src, dst, group, report)
    if dst is not None and offsets:
        await dst.alter_share_group_offsets(group, offsets)
    report.redelivered[group] = again
    detail = ", ".join(
        f"{t}-{p} SPSO->{o} ({again[(t, p)]} delivered again)"
        for (t, p), o in sorted(offsets.items())
    )
    report.add("share-group", group, TRANSLATED, detail)


def redelivered(spo: SharePartitionOffsets, copied: OffsetMap) -> int:
    """Records above the SPSO already finished on the source, which the target delivers again."""
    if spo.acknowledged is not None and spo.archived is not None:
        return spo.acknowledged + spo.archived + (spo.archiving or 0)
    if spo.lag < 0:
        return 0
    return max(0, copied.copied_from(spo.start_offset) - spo.lag)
