"""One module per API key; this list is the broker's routing table."""

from __future__ import annotations

from broker.context import RequestContext
from broker.context import RequestHandler
from broker.handlers import add_offsets_to_txn
from broker.handlers import add_partitions_to_txn
from broker.handlers import alter_configs
from broker.handlers import alter_share_group_offsets
from broker.handlers import alter_user_scram_credentials
from broker.handlers import api_versions
from broker.handlers import consumer_group_describe
from broker.handlers import consumer_group_heartbeat
from broker.handlers import create_acls
from broker.handlers import create_partitions
from broker.handlers import create_topics
from broker.handlers import delete_acls
from broker.handlers import delete_groups
from broker.handlers import delete_records
from broker.handlers import delete_share_group_offsets
from broker.handlers import delete_share_group_state
from broker.handlers import delete_topics
from broker.handlers import describe_acls
from broker.handlers import describe_cluster
from broker.handlers import describe_configs
from broker.handlers import describe_groups
from broker.handlers import describe_log_dirs
from broker.handlers import describe_producers
from broker.handlers import describe_share_group_offsets
from broker.handlers import describe_transactions
from broker.handlers import describe_user_scram_credentials
from broker.handlers import end_txn
from broker.handlers import fetch
from broker.handlers import find_coordinator
from broker.handlers import heartbeat
from broker.handlers import incremental_alter_configs
from broker.handlers import init_producer_id
from broker.handlers import initialize_share_group_state
from broker.handlers import join_group
from broker.handlers import leave_group
from broker.handlers import list_groups
from broker.handlers import list_offsets
from broker.handlers import list_transactions
from broker.handlers import metadata
from broker.handlers import offset_commit
from broker.handlers import offset_delete
from broker.handlers import offset_fetch
from broker.handlers import produce
from broker.handlers import read_share_group_state_summary
from broker.handlers import sasl_authenticate
from broker.handlers import sasl_handshake
from broker.handlers import share_acknowledge
from broker.handlers import share_fetch
from broker.handlers import share_group_describe
from broker.handlers import share_group_heartbeat
from broker.handlers import sync_group
from broker.handlers import txn_offset_commit
from broker.handlers import txn_share_acknowledge
from broker.handlers import txn_share_staged
from broker.handlers import write_txn_markers
from broker.registry import Registry

HANDLERS: tuple[RequestHandler, ...] = (
    produce.HANDLER,
    fetch.HANDLER,
    list_offsets.HANDLER,
    metadata.HANDLER,
    offset_commit.HANDLER,
    offset_fetch.HANDLER,
    offset_delete.HANDLER,
    find_coordinator.HANDLER,
    join_group.HANDLER,
    heartbeat.HANDLER,
    leave_group.HANDLER,
    sync_group.HANDLER,
    describe_groups.HANDLER,
    init_producer_id.HANDLER,
    add_partitions_to_txn.HANDLER,
    add_offsets_to_txn.HANDLER,
    end_txn.HANDLER,
    txn_offset_commit.HANDLER,
    txn_share_acknowledge.HANDLER,  # Shoal's own (not in ApiVersions)
    txn_share_staged.HANDLER,  # Shoal's own, between processes (not in ApiVersions)
    describe_transactions.HANDLER,
    list_transactions.HANDLER,
    describe_producers.HANDLER,
    write_txn_markers.HANDLER,
    api_versions.HANDLER,
    create_topics.HANDLER,
    delete_topics.HANDLER,
    delete_records.HANDLER,
    create_partitions.HANDLER,
    describe_cluster.HANDLER,
    describe_configs.HANDLER,
    describe_log_dirs.HANDLER,
    incremental_alter_configs.HANDLER,
    alter_configs.HANDLER,
    share_group_heartbeat.HANDLER,
    share_fetch.HANDLER,
    share_acknowledge.HANDLER,
    share_group_describe.HANDLER,
    consumer_group_heartbeat.HANDLER,
    consumer_group_describe.HANDLER,
    list_groups.HANDLER,
    delete_groups.HANDLER,
    describe_share_group_offsets.HANDLER,
    alter_share_group_offsets.HANDLER,
    delete_share_group_offsets.HANDLER,
    initialize_share_group_state.HANDLER,
    delete_share_group_state.HANDLER,
    read_share_group_state_summary.HANDLER,
    describe_acls.HANDLER,
    create_acls.HANDLER,
    delete_acls.HANDLER,
    sasl_handshake.HANDLER,
    sasl_authenticate.HANDLER,
    describe_user_scram_credentials.HANDLER,
    alter_user_scram_credentials.HANDLER,
)


def build_registry() -> Registry[RequestContext]:
    return Registry(HANDLERS)
