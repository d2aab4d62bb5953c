"""One module per API key; this list is the broker's routing table."""

from __future__ import annotations

from broker.handlers import alter_share_group_offsets
from broker.handlers import api_versions
from broker.handlers import create_partitions
from broker.handlers import create_topics
from broker.handlers import delete_groups
from broker.handlers import delete_share_group_offsets
from broker.handlers import delete_topics
from broker.handlers import describe_cluster
from broker.handlers import describe_configs
from broker.handlers import describe_share_group_offsets
from broker.handlers import fetch
from broker.handlers import find_coordinator
from broker.handlers import incremental_alter_configs
from broker.handlers import init_producer_id
from broker.handlers import list_groups
from broker.handlers import list_offsets
from broker.handlers import metadata
from broker.handlers import produce
from broker.handlers import share_acknowledge
from broker.handlers import share_fetch
from broker.handlers import share_group_describe
from broker.handlers import share_group_heartbeat
from broker.registry import Registry

MODULES = (
    produce,
    fetch,
    list_offsets,
    metadata,
    find_coordinator,
    init_producer_id,
    api_versions,
    create_topics,
    delete_topics,
    create_partitions,
    describe_cluster,
    describe_configs,
    incremental_alter_configs,
    share_group_heartbeat,
    share_fetch,
    share_acknowledge,
    share_group_describe,
    list_groups,
    delete_groups,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
)


def build_registry() -> Registry:
    return Registry(m.HANDLER for m in MODULES)
