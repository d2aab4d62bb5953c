"""Topics: which to move, their configs, and creating them on the target.

Only the configs set on the topic itself (DescribeConfigs source DYNAMIC_TOPIC_CONFIG) are
copied: defaults are the target's own. CreateTopics is tried with all of them; when the target
refuses one (a Shoal-only name, or a value out of its bounds), the topic is created without
them and each is set alone with IncrementalAlterConfigs, so one refusal costs only itself.
Internal topics (`__*`) are never copied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field

from kio.schema.errors import ErrorCode

from cli.migration.report import CREATED
from cli.migration.report import REFUSED
from cli.migration.report import SKIPPED
from cli.migration.report import Report
from client.admin import Admin
from client.admin import ConfigResourceType
from client.admin import ConfigSource
from client.errors import KafkaError


@dataclass
class TopicPlan:
    name: str
    partitions: int
    configs: dict[str, str]
    # partition -> (log start, high watermark) on the source
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def offset_span(self) -> int:
        return sum(end - start for start, end in self.spans.values())


async def plan_topics(src: Admin, pattern: re.Pattern[str] | None) -> list[TopicPlan]:
    plans = []
    for name, info in sorted((await src.list_topics()).items()):
        if name.startswith("__") or (pattern is not None and not pattern.fullmatch(name)):
            continue
        entries = await src.describe_config_entries(ConfigResourceType.TOPIC, name)
        configs = {
            e.name: e.value
            for e in entries
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG and e.value is not None
        }
        plan = TopicPlan(name, info.partition_count, configs)
        for p in sorted(info.partitions):
            start = await src.list_offsets(name, p, "earliest")
            end = await src.list_offsets(name, p, "latest")
            plan.spans[p] = (start, end)
        plans.append(plan)
    return plans


async def create_topic(dst: Admin, plan: TopicPlan, ours: bool, report: Report) -> bool:
    """Make the topic ready on the target; False when it must be skipped.

    `ours`: an earlier run of this migration made it (its offset maps are in the state dir).
    """
    existing = (await dst.list_topics()).get(plan.name)
    if existing is not None:
        if existing.partition_count != plan.partitions:
            report.add(
                "topic",
                plan.name,
                SKIPPED,
                f"exists on the target with {existing.partition_count} partitions, "
                f"not {plan.partitions}",
            )
            return False
        if not ours and await _has_records(dst, plan):
            report.add("topic", plan.name, SKIPPED, "exists on the target and holds records")
            return False
        return True
    try:
        await dst.create_topic(plan.name, plan.partitions, plan.configs)
        if plan.configs:
            report.add("config", plan.name, CREATED, _names(plan.configs))
        return True
    except KafkaError as e:
        if e.error_code != ErrorCode.invalid_config or not plan.configs:
            report.add("topic", plan.name, REFUSED, f"CreateTopics: {e}")
            return False
    await dst.create_topic(plan.name, plan.partitions)
    await copy_configs(dst, ConfigResourceType.TOPIC, plan.name, plan.configs, report)
    return True


async def copy_configs(
    dst: Admin, kind: ConfigResourceType, name: str, configs: dict[str, str], report: Report
) -> None:
    """Set the configs on the target all at once, else one by one, reporting the refused."""
    if not configs:
        return
    try:
        await dst.incremental_alter_configs(kind, name, dict(configs))
        report.add("config", name, CREATED, _names(configs))
        return
    except KafkaError:
        pass
    accepted = []
    for key, value in configs.items():
        try:
            await dst.incremental_alter_configs(kind, name, {key: value})
            accepted.append(key)
        except KafkaError as e:
            report.add("config", f"{name} {key}", SKIPPED, f"the target refused it: {e}")
    if accepted:
        report.add("config", name, CREATED, ", ".join(accepted))


async def _has_records(dst: Admin, plan: TopicPlan) -> bool:
    for p in range(plan.partitions):
        if await dst.list_offsets(plan.name, p, "latest") > 0:
            return True
    return False


def _names(configs: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(configs.items()))
