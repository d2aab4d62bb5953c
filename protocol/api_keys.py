"""Every API key Shoal speaks, taken from kio's index of its schemas (`api_key_map`).

The one place the broker and `client/` take keys from: a key typed in by hand can drift from
the schema it names; one read from kio's index cannot (a misspelt name fails at import, and
tests/unit/test_api_keys.py checks each against its schema's request class).
"""

from __future__ import annotations

from typing import Final

from kio.schema.index import api_key_map

# kio's own table of key -> schema name, without importing the ~40 schema packages: a Spark
# task or a CLI command that only fetches should not pay for every API's classes (~0.15 s).
_KEY = {name: key for key, name in api_key_map.items()}

PRODUCE: Final = _KEY["produce"]
FETCH: Final = _KEY["fetch"]
LIST_OFFSETS: Final = _KEY["list_offsets"]
METADATA: Final = _KEY["metadata"]
OFFSET_COMMIT: Final = _KEY["offset_commit"]
OFFSET_FETCH: Final = _KEY["offset_fetch"]
FIND_COORDINATOR: Final = _KEY["find_coordinator"]
JOIN_GROUP: Final = _KEY["join_group"]
HEARTBEAT: Final = _KEY["heartbeat"]
LEAVE_GROUP: Final = _KEY["leave_group"]
SYNC_GROUP: Final = _KEY["sync_group"]
DESCRIBE_GROUPS: Final = _KEY["describe_groups"]
LIST_GROUPS: Final = _KEY["list_groups"]
SASL_HANDSHAKE: Final = _KEY["sasl_handshake"]
API_VERSIONS: Final = _KEY["api_versions"]
CREATE_TOPICS: Final = _KEY["create_topics"]
DELETE_TOPICS: Final = _KEY["delete_topics"]
DELETE_RECORDS: Final = _KEY["delete_records"]
INIT_PRODUCER_ID: Final = _KEY["init_producer_id"]
ADD_PARTITIONS_TO_TXN: Final = _KEY["add_partitions_to_txn"]
ADD_OFFSETS_TO_TXN: Final = _KEY["add_offsets_to_txn"]
END_TXN: Final = _KEY["end_txn"]
TXN_OFFSET_COMMIT: Final = _KEY["txn_offset_commit"]
DESCRIBE_PRODUCERS: Final = _KEY["describe_producers"]
DESCRIBE_TRANSACTIONS: Final = _KEY["describe_transactions"]
LIST_TRANSACTIONS: Final = _KEY["list_transactions"]
DESCRIBE_CONFIGS: Final = _KEY["describe_configs"]
DESCRIBE_LOG_DIRS: Final = _KEY["describe_log_dirs"]
CREATE_PARTITIONS: Final = _KEY["create_partitions"]
DESCRIBE_ACLS: Final = _KEY["describe_acls"]
CREATE_ACLS: Final = _KEY["create_acls"]
DELETE_ACLS: Final = _KEY["delete_acls"]
DELETE_GROUPS: Final = _KEY["delete_groups"]
OFFSET_DELETE: Final = _KEY["offset_delete"]
ALTER_CONFIGS: Final = _KEY["alter_configs"]
SASL_AUTHENTICATE: Final = _KEY["sasl_authenticate"]
INCREMENTAL_ALTER_CONFIGS: Final = _KEY["incremental_alter_configs"]
DESCRIBE_CLUSTER: Final = _KEY["describe_cluster"]
DESCRIBE_USER_SCRAM_CREDENTIALS: Final = _KEY["describe_user_scram_credentials"]
ALTER_USER_SCRAM_CREDENTIALS: Final = _KEY["alter_user_scram_credentials"]
CONSUMER_GROUP_HEARTBEAT: Final = _KEY["consumer_group_heartbeat"]
CONSUMER_GROUP_DESCRIBE: Final = _KEY["consumer_group_describe"]
SHARE_GROUP_HEARTBEAT: Final = _KEY["share_group_heartbeat"]
SHARE_GROUP_DESCRIBE: Final = _KEY["share_group_describe"]
SHARE_FETCH: Final = _KEY["share_fetch"]
SHARE_ACKNOWLEDGE: Final = _KEY["share_acknowledge"]
DESCRIBE_SHARE_GROUP_OFFSETS: Final = _KEY["describe_share_group_offsets"]
ALTER_SHARE_GROUP_OFFSETS: Final = _KEY["alter_share_group_offsets"]
DELETE_SHARE_GROUP_OFFSETS: Final = _KEY["delete_share_group_offsets"]
