"""Every API key Shoal speaks, taken from kio's request classes.

The one place the broker and `client/` take keys from: a key typed in by hand can drift from
the schema it names; one read from the schema cannot.
"""

from __future__ import annotations

from typing import Final

from kio.schema.alter_configs.v0 import AlterConfigsRequest
from kio.schema.alter_share_group_offsets.v0 import AlterShareGroupOffsetsRequest
from kio.schema.alter_user_scram_credentials.v0 import AlterUserScramCredentialsRequest
from kio.schema.api_versions.v0 import ApiVersionsRequest
from kio.schema.consumer_group_describe.v0 import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v0 import ConsumerGroupHeartbeatRequest
from kio.schema.create_acls.v1 import CreateAclsRequest
from kio.schema.create_partitions.v0 import CreatePartitionsRequest
from kio.schema.create_topics.v2 import CreateTopicsRequest
from kio.schema.delete_acls.v1 import DeleteAclsRequest
from kio.schema.delete_groups.v0 import DeleteGroupsRequest
from kio.schema.delete_records.v0 import DeleteRecordsRequest
from kio.schema.delete_share_group_offsets.v0 import DeleteShareGroupOffsetsRequest
from kio.schema.delete_topics.v1 import DeleteTopicsRequest
from kio.schema.describe_acls.v1 import DescribeAclsRequest
from kio.schema.describe_cluster.v0 import DescribeClusterRequest
from kio.schema.describe_configs.v1 import DescribeConfigsRequest
from kio.schema.describe_groups.v0 import DescribeGroupsRequest
from kio.schema.describe_share_group_offsets.v0 import DescribeShareGroupOffsetsRequest
from kio.schema.describe_user_scram_credentials.v0 import DescribeUserScramCredentialsRequest
from kio.schema.fetch.v4 import FetchRequest
from kio.schema.find_coordinator.v0 import FindCoordinatorRequest
from kio.schema.heartbeat.v0 import HeartbeatRequest
from kio.schema.incremental_alter_configs.v0 import IncrementalAlterConfigsRequest
from kio.schema.init_producer_id.v0 import InitProducerIdRequest
from kio.schema.join_group.v0 import JoinGroupRequest
from kio.schema.leave_group.v0 import LeaveGroupRequest
from kio.schema.list_groups.v0 import ListGroupsRequest
from kio.schema.list_offsets.v1 import ListOffsetsRequest
from kio.schema.metadata.v0 import MetadataRequest
from kio.schema.offset_commit.v2 import OffsetCommitRequest
from kio.schema.offset_delete.v0 import OffsetDeleteRequest
from kio.schema.offset_fetch.v1 import OffsetFetchRequest
from kio.schema.produce.v3 import ProduceRequest
from kio.schema.sasl_authenticate.v0 import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest
from kio.schema.share_acknowledge.v1 import ShareAcknowledgeRequest
from kio.schema.share_fetch.v1 import ShareFetchRequest
from kio.schema.share_group_describe.v1 import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1 import ShareGroupHeartbeatRequest
from kio.schema.sync_group.v0 import SyncGroupRequest

PRODUCE: Final = int(ProduceRequest.__api_key__)
FETCH: Final = int(FetchRequest.__api_key__)
LIST_OFFSETS: Final = int(ListOffsetsRequest.__api_key__)
METADATA: Final = int(MetadataRequest.__api_key__)
OFFSET_COMMIT: Final = int(OffsetCommitRequest.__api_key__)
OFFSET_FETCH: Final = int(OffsetFetchRequest.__api_key__)
FIND_COORDINATOR: Final = int(FindCoordinatorRequest.__api_key__)
JOIN_GROUP: Final = int(JoinGroupRequest.__api_key__)
HEARTBEAT: Final = int(HeartbeatRequest.__api_key__)
LEAVE_GROUP: Final = int(LeaveGroupRequest.__api_key__)
SYNC_GROUP: Final = int(SyncGroupRequest.__api_key__)
DESCRIBE_GROUPS: Final = int(DescribeGroupsRequest.__api_key__)
LIST_GROUPS: Final = int(ListGroupsRequest.__api_key__)
SASL_HANDSHAKE: Final = int(SaslHandshakeRequest.__api_key__)
API_VERSIONS: Final = int(ApiVersionsRequest.__api_key__)
CREATE_TOPICS: Final = int(CreateTopicsRequest.__api_key__)
DELETE_TOPICS: Final = int(DeleteTopicsRequest.__api_key__)
DELETE_RECORDS: Final = int(DeleteRecordsRequest.__api_key__)
INIT_PRODUCER_ID: Final = int(InitProducerIdRequest.__api_key__)
DESCRIBE_CONFIGS: Final = int(DescribeConfigsRequest.__api_key__)
CREATE_PARTITIONS: Final = int(CreatePartitionsRequest.__api_key__)
DESCRIBE_ACLS: Final = int(DescribeAclsRequest.__api_key__)
CREATE_ACLS: Final = int(CreateAclsRequest.__api_key__)
DELETE_ACLS: Final = int(DeleteAclsRequest.__api_key__)
DELETE_GROUPS: Final = int(DeleteGroupsRequest.__api_key__)
OFFSET_DELETE: Final = int(OffsetDeleteRequest.__api_key__)
ALTER_CONFIGS: Final = int(AlterConfigsRequest.__api_key__)
SASL_AUTHENTICATE: Final = int(SaslAuthenticateRequest.__api_key__)
INCREMENTAL_ALTER_CONFIGS: Final = int(IncrementalAlterConfigsRequest.__api_key__)
DESCRIBE_CLUSTER: Final = int(DescribeClusterRequest.__api_key__)
DESCRIBE_USER_SCRAM_CREDENTIALS: Final = int(DescribeUserScramCredentialsRequest.__api_key__)
ALTER_USER_SCRAM_CREDENTIALS: Final = int(AlterUserScramCredentialsRequest.__api_key__)
CONSUMER_GROUP_HEARTBEAT: Final = int(ConsumerGroupHeartbeatRequest.__api_key__)
CONSUMER_GROUP_DESCRIBE: Final = int(ConsumerGroupDescribeRequest.__api_key__)
SHARE_GROUP_HEARTBEAT: Final = int(ShareGroupHeartbeatRequest.__api_key__)
SHARE_GROUP_DESCRIBE: Final = int(ShareGroupDescribeRequest.__api_key__)
SHARE_FETCH: Final = int(ShareFetchRequest.__api_key__)
SHARE_ACKNOWLEDGE: Final = int(ShareAcknowledgeRequest.__api_key__)
DESCRIBE_SHARE_GROUP_OFFSETS: Final = int(DescribeShareGroupOffsetsRequest.__api_key__)
ALTER_SHARE_GROUP_OFFSETS: Final = int(AlterShareGroupOffsetsRequest.__api_key__)
DELETE_SHARE_GROUP_OFFSETS: Final = int(DeleteShareGroupOffsetsRequest.__api_key__)
