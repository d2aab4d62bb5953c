"""The kio classes the client speaks, typed: each API's requests and response.

Written by `tests/kio_apis_gen.py` (run `.venv/bin/python -m tests.kio_apis_gen >
client/kio_apis.py`); do not edit by hand. For each API, `<API>.requests(version)` is kio's
request module of that version, typed by a Protocol whose members are the union of the
versions spoken (mypy holds each version's module to it), and `<API>.response(version)` the
response class, typed as the union of the versions' responses:

    m = METADATA.requests(version)
    resp = await cluster.call(build(m.MetadataRequest, ...), METADATA.response(version))

A module is imported when a version of it is first asked for (importing all of them would
add a second to every start of the CLI and of Spark's workers).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING
from typing import Final
from typing import Generic
from typing import Protocol
from typing import TypeAlias
from typing import TypeVar
from typing import cast

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kio.schema.alter_share_group_offsets import v0 as alter_share_group_offsets_v0
    from kio.schema.api_versions import v3 as api_versions_v3
    from kio.schema.consumer_group_describe import v0 as consumer_group_describe_v0
    from kio.schema.consumer_group_describe import v1 as consumer_group_describe_v1
    from kio.schema.consumer_group_heartbeat import v0 as consumer_group_heartbeat_v0
    from kio.schema.consumer_group_heartbeat import v1 as consumer_group_heartbeat_v1
    from kio.schema.create_acls import v1 as create_acls_v1
    from kio.schema.create_acls import v2 as create_acls_v2
    from kio.schema.create_acls import v3 as create_acls_v3
    from kio.schema.create_partitions import v0 as create_partitions_v0
    from kio.schema.create_partitions import v1 as create_partitions_v1
    from kio.schema.create_partitions import v2 as create_partitions_v2
    from kio.schema.create_partitions import v3 as create_partitions_v3
    from kio.schema.create_topics import v2 as create_topics_v2
    from kio.schema.create_topics import v3 as create_topics_v3
    from kio.schema.create_topics import v4 as create_topics_v4
    from kio.schema.create_topics import v5 as create_topics_v5
    from kio.schema.create_topics import v6 as create_topics_v6
    from kio.schema.create_topics import v7 as create_topics_v7
    from kio.schema.delete_acls import v1 as delete_acls_v1
    from kio.schema.delete_acls import v2 as delete_acls_v2
    from kio.schema.delete_acls import v3 as delete_acls_v3
    from kio.schema.delete_groups import v0 as delete_groups_v0
    from kio.schema.delete_groups import v1 as delete_groups_v1
    from kio.schema.delete_groups import v2 as delete_groups_v2
    from kio.schema.delete_records import v0 as delete_records_v0
    from kio.schema.delete_records import v1 as delete_records_v1
    from kio.schema.delete_records import v2 as delete_records_v2
    from kio.schema.delete_share_group_offsets import v0 as delete_share_group_offsets_v0
    from kio.schema.delete_topics import v1 as delete_topics_v1
    from kio.schema.delete_topics import v2 as delete_topics_v2
    from kio.schema.delete_topics import v3 as delete_topics_v3
    from kio.schema.delete_topics import v4 as delete_topics_v4
    from kio.schema.delete_topics import v5 as delete_topics_v5
    from kio.schema.delete_topics import v6 as delete_topics_v6
    from kio.schema.describe_acls import v1 as describe_acls_v1
    from kio.schema.describe_acls import v2 as describe_acls_v2
    from kio.schema.describe_acls import v3 as describe_acls_v3
    from kio.schema.describe_configs import v1 as describe_configs_v1
    from kio.schema.describe_configs import v2 as describe_configs_v2
    from kio.schema.describe_configs import v3 as describe_configs_v3
    from kio.schema.describe_configs import v4 as describe_configs_v4
    from kio.schema.describe_groups import v0 as describe_groups_v0
    from kio.schema.describe_groups import v1 as describe_groups_v1
    from kio.schema.describe_groups import v2 as describe_groups_v2
    from kio.schema.describe_groups import v3 as describe_groups_v3
    from kio.schema.describe_groups import v4 as describe_groups_v4
    from kio.schema.describe_groups import v5 as describe_groups_v5
    from kio.schema.describe_groups import v6 as describe_groups_v6
    from kio.schema.describe_log_dirs import v1 as describe_log_dirs_v1
    from kio.schema.describe_log_dirs import v2 as describe_log_dirs_v2
    from kio.schema.describe_log_dirs import v3 as describe_log_dirs_v3
    from kio.schema.describe_log_dirs import v4 as describe_log_dirs_v4
    from kio.schema.describe_log_dirs import v5 as describe_log_dirs_v5
    from kio.schema.describe_share_group_offsets import v0 as describe_share_group_offsets_v0
    from kio.schema.describe_share_group_offsets import v1 as describe_share_group_offsets_v1
    from kio.schema.fetch import v4 as fetch_v4
    from kio.schema.fetch import v5 as fetch_v5
    from kio.schema.fetch import v6 as fetch_v6
    from kio.schema.fetch import v7 as fetch_v7
    from kio.schema.fetch import v8 as fetch_v8
    from kio.schema.fetch import v9 as fetch_v9
    from kio.schema.fetch import v10 as fetch_v10
    from kio.schema.fetch import v11 as fetch_v11
    from kio.schema.fetch import v12 as fetch_v12
    from kio.schema.find_coordinator import v1 as find_coordinator_v1
    from kio.schema.find_coordinator import v2 as find_coordinator_v2
    from kio.schema.find_coordinator import v3 as find_coordinator_v3
    from kio.schema.find_coordinator import v4 as find_coordinator_v4
    from kio.schema.find_coordinator import v5 as find_coordinator_v5
    from kio.schema.find_coordinator import v6 as find_coordinator_v6
    from kio.schema.incremental_alter_configs import v0 as incremental_alter_configs_v0
    from kio.schema.incremental_alter_configs import v1 as incremental_alter_configs_v1
    from kio.schema.list_groups import v0 as list_groups_v0
    from kio.schema.list_groups import v1 as list_groups_v1
    from kio.schema.list_groups import v2 as list_groups_v2
    from kio.schema.list_groups import v3 as list_groups_v3
    from kio.schema.list_groups import v4 as list_groups_v4
    from kio.schema.list_groups import v5 as list_groups_v5
    from kio.schema.list_offsets import v1 as list_offsets_v1
    from kio.schema.list_offsets import v2 as list_offsets_v2
    from kio.schema.list_offsets import v3 as list_offsets_v3
    from kio.schema.list_offsets import v4 as list_offsets_v4
    from kio.schema.list_offsets import v5 as list_offsets_v5
    from kio.schema.list_offsets import v6 as list_offsets_v6
    from kio.schema.list_offsets import v7 as list_offsets_v7
    from kio.schema.list_offsets import v8 as list_offsets_v8
    from kio.schema.list_offsets import v9 as list_offsets_v9
    from kio.schema.metadata import v9 as metadata_v9
    from kio.schema.metadata import v10 as metadata_v10
    from kio.schema.metadata import v11 as metadata_v11
    from kio.schema.metadata import v12 as metadata_v12
    from kio.schema.offset_commit import v2 as offset_commit_v2
    from kio.schema.offset_commit import v3 as offset_commit_v3
    from kio.schema.offset_commit import v4 as offset_commit_v4
    from kio.schema.offset_commit import v5 as offset_commit_v5
    from kio.schema.offset_commit import v6 as offset_commit_v6
    from kio.schema.offset_commit import v7 as offset_commit_v7
    from kio.schema.offset_commit import v8 as offset_commit_v8
    from kio.schema.offset_delete import v0 as offset_delete_v0
    from kio.schema.offset_fetch import v1 as offset_fetch_v1
    from kio.schema.offset_fetch import v2 as offset_fetch_v2
    from kio.schema.offset_fetch import v3 as offset_fetch_v3
    from kio.schema.offset_fetch import v4 as offset_fetch_v4
    from kio.schema.offset_fetch import v5 as offset_fetch_v5
    from kio.schema.offset_fetch import v6 as offset_fetch_v6
    from kio.schema.offset_fetch import v7 as offset_fetch_v7
    from kio.schema.offset_fetch import v8 as offset_fetch_v8
    from kio.schema.produce import v9 as produce_v9
    from kio.schema.produce import v10 as produce_v10
    from kio.schema.produce import v11 as produce_v11
    from kio.schema.produce import v12 as produce_v12
    from kio.schema.share_acknowledge import v1 as share_acknowledge_v1
    from kio.schema.share_acknowledge import v2 as share_acknowledge_v2
    from kio.schema.share_fetch import v1 as share_fetch_v1
    from kio.schema.share_fetch import v2 as share_fetch_v2
    from kio.schema.share_group_describe import v1 as share_group_describe_v1
    from kio.schema.share_group_heartbeat import v1 as share_group_heartbeat_v1

Q = TypeVar("Q")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Api(Generic[Q, R]):
    """One API: kio's modules of the versions the client speaks, typed by Q (the request
    module's Protocol) and R (the union of the responses)."""

    name: str  # the kio module, e.g. "metadata"
    lowest: int
    highest: int
    response_name: str  # the response class, e.g. "MetadataResponse"

    def requests(self, version: int) -> Q:
        return cast(Q, self._module(version, "request"))

    def response(self, version: int) -> type[R]:
        return cast("type[R]", getattr(self._module(version, "response"), self.response_name))

    def _module(self, version: int, direction: str) -> ModuleType:
        if not self.lowest <= version <= self.highest:
            raise ValueError(f"{self.name} v{version}: spoken are v{self.lowest}-{self.highest}")
        return importlib.import_module(f"kio.schema.{self.name}.v{version}.{direction}")


class ApiVersionsRequests(Protocol):
    """kio.schema.api_versions.v3-3.request"""

    @property
    def ApiVersionsRequest(self) -> type[api_versions_v3.request.ApiVersionsRequest]: ...


if TYPE_CHECKING:
    ApiVersionsResponse: TypeAlias = api_versions_v3.response.ApiVersionsResponse
    _api_versions: Mapping[int, ApiVersionsRequests] = {3: api_versions_v3.request}

API_VERSIONS: Final[Api[ApiVersionsRequests, ApiVersionsResponse]] = Api(
    "api_versions", 3, 3, "ApiVersionsResponse"
)


class MetadataRequests(Protocol):
    """kio.schema.metadata.v9-12.request"""

    @property
    def MetadataRequest(
        self,
    ) -> type[
        metadata_v9.request.MetadataRequest
        | metadata_v10.request.MetadataRequest
        | metadata_v11.request.MetadataRequest
        | metadata_v12.request.MetadataRequest
    ]: ...

    @property
    def MetadataRequestTopic(
        self,
    ) -> type[
        metadata_v9.request.MetadataRequestTopic
        | metadata_v10.request.MetadataRequestTopic
        | metadata_v11.request.MetadataRequestTopic
        | metadata_v12.request.MetadataRequestTopic
    ]: ...


if TYPE_CHECKING:
    MetadataResponse: TypeAlias = (
        metadata_v9.response.MetadataResponse
        | metadata_v10.response.MetadataResponse
        | metadata_v11.response.MetadataResponse
        | metadata_v12.response.MetadataResponse
    )
    _metadata: Mapping[int, MetadataRequests] = {
        9: metadata_v9.request,
        10: metadata_v10.request,
        11: metadata_v11.request,
        12: metadata_v12.request,
    }

METADATA: Final[Api[MetadataRequests, MetadataResponse]] = Api(
    "metadata", 9, 12, "MetadataResponse"
)


class FindCoordinatorRequests(Protocol):
    """kio.schema.find_coordinator.v1-6.request"""

    @property
    def FindCoordinatorRequest(
        self,
    ) -> type[
        find_coordinator_v1.request.FindCoordinatorRequest
        | find_coordinator_v2.request.FindCoordinatorRequest
        | find_coordinator_v3.request.FindCoordinatorRequest
        | find_coordinator_v4.request.FindCoordinatorRequest
        | find_coordinator_v5.request.FindCoordinatorRequest
        | find_coordinator_v6.request.FindCoordinatorRequest
    ]: ...


if TYPE_CHECKING:
    FindCoordinatorResponse: TypeAlias = (
        find_coordinator_v1.response.FindCoordinatorResponse
        | find_coordinator_v2.response.FindCoordinatorResponse
        | find_coordinator_v3.response.FindCoordinatorResponse
        | find_coordinator_v4.response.FindCoordinatorResponse
        | find_coordinator_v5.response.FindCoordinatorResponse
        | find_coordinator_v6.response.FindCoordinatorResponse
    )
    _find_coordinator: Mapping[int, FindCoordinatorRequests] = {
        1: find_coordinator_v1.request,
        2: find_coordinator_v2.request,
        3: find_coordinator_v3.request,
        4: find_coordinator_v4.request,
        5: find_coordinator_v5.request,
        6: find_coordinator_v6.request,
    }

FIND_COORDINATOR: Final[Api[FindCoordinatorRequests, FindCoordinatorResponse]] = Api(
    "find_coordinator", 1, 6, "FindCoordinatorResponse"
)


class CreateTopicsRequests(Protocol):
    """kio.schema.create_topics.v2-7.request"""

    @property
    def CreatableReplicaAssignment(
        self,
    ) -> type[
        create_topics_v2.request.CreatableReplicaAssignment
        | create_topics_v3.request.CreatableReplicaAssignment
        | create_topics_v4.request.CreatableReplicaAssignment
        | create_topics_v5.request.CreatableReplicaAssignment
        | create_topics_v6.request.CreatableReplicaAssignment
        | create_topics_v7.request.CreatableReplicaAssignment
    ]: ...

    @property
    def CreatableTopic(
        self,
    ) -> type[
        create_topics_v2.request.CreatableTopic
        | create_topics_v3.request.CreatableTopic
        | create_topics_v4.request.CreatableTopic
        | create_topics_v5.request.CreatableTopic
        | create_topics_v6.request.CreatableTopic
        | create_topics_v7.request.CreatableTopic
    ]: ...

    @property
    def CreatableTopicConfig(
        self,
    ) -> type[
        create_topics_v2.request.CreatableTopicConfig
        | create_topics_v3.request.CreatableTopicConfig
        | create_topics_v4.request.CreatableTopicConfig
        | create_topics_v5.request.CreatableTopicConfig
        | create_topics_v6.request.CreatableTopicConfig
        | create_topics_v7.request.CreatableTopicConfig
    ]: ...

    @property
    def CreateTopicsRequest(
        self,
    ) -> type[
        create_topics_v2.request.CreateTopicsRequest
        | create_topics_v3.request.CreateTopicsRequest
        | create_topics_v4.request.CreateTopicsRequest
        | create_topics_v5.request.CreateTopicsRequest
        | create_topics_v6.request.CreateTopicsRequest
        | create_topics_v7.request.CreateTopicsRequest
    ]: ...


if TYPE_CHECKING:
    CreateTopicsResponse: TypeAlias = (
        create_topics_v2.response.CreateTopicsResponse
        | create_topics_v3.response.CreateTopicsResponse
        | create_topics_v4.response.CreateTopicsResponse
        | create_topics_v5.response.CreateTopicsResponse
        | create_topics_v6.response.CreateTopicsResponse
        | create_topics_v7.response.CreateTopicsResponse
    )
    _create_topics: Mapping[int, CreateTopicsRequests] = {
        2: create_topics_v2.request,
        3: create_topics_v3.request,
        4: create_topics_v4.request,
        5: create_topics_v5.request,
        6: create_topics_v6.request,
        7: create_topics_v7.request,
    }

CREATE_TOPICS: Final[Api[CreateTopicsRequests, CreateTopicsResponse]] = Api(
    "create_topics", 2, 7, "CreateTopicsResponse"
)


class DeleteTopicsRequests(Protocol):
    """kio.schema.delete_topics.v1-6.request"""

    @property
    def DeleteTopicsRequest(
        self,
    ) -> type[
        delete_topics_v1.request.DeleteTopicsRequest
        | delete_topics_v2.request.DeleteTopicsRequest
        | delete_topics_v3.request.DeleteTopicsRequest
        | delete_topics_v4.request.DeleteTopicsRequest
        | delete_topics_v5.request.DeleteTopicsRequest
        | delete_topics_v6.request.DeleteTopicsRequest
    ]: ...


if TYPE_CHECKING:
    DeleteTopicsResponse: TypeAlias = (
        delete_topics_v1.response.DeleteTopicsResponse
        | delete_topics_v2.response.DeleteTopicsResponse
        | delete_topics_v3.response.DeleteTopicsResponse
        | delete_topics_v4.response.DeleteTopicsResponse
        | delete_topics_v5.response.DeleteTopicsResponse
        | delete_topics_v6.response.DeleteTopicsResponse
    )
    _delete_topics: Mapping[int, DeleteTopicsRequests] = {
        1: delete_topics_v1.request,
        2: delete_topics_v2.request,
        3: delete_topics_v3.request,
        4: delete_topics_v4.request,
        5: delete_topics_v5.request,
        6: delete_topics_v6.request,
    }

DELETE_TOPICS: Final[Api[DeleteTopicsRequests, DeleteTopicsResponse]] = Api(
    "delete_topics", 1, 6, "DeleteTopicsResponse"
)


class DeleteTopicsV6Requests(Protocol):
    """kio.schema.delete_topics.v6-6.request"""

    @property
    def DeleteTopicState(self) -> type[delete_topics_v6.request.DeleteTopicState]: ...

    @property
    def DeleteTopicsRequest(self) -> type[delete_topics_v6.request.DeleteTopicsRequest]: ...


if TYPE_CHECKING:
    DeleteTopicsV6Response: TypeAlias = delete_topics_v6.response.DeleteTopicsResponse
    _delete_topics_v6: Mapping[int, DeleteTopicsV6Requests] = {6: delete_topics_v6.request}

DELETE_TOPICS_V6: Final[Api[DeleteTopicsV6Requests, DeleteTopicsV6Response]] = Api(
    "delete_topics", 6, 6, "DeleteTopicsResponse"
)


class CreatePartitionsRequests(Protocol):
    """kio.schema.create_partitions.v0-3.request"""

    @property
    def CreatePartitionsAssignment(
        self,
    ) -> type[
        create_partitions_v0.request.CreatePartitionsAssignment
        | create_partitions_v1.request.CreatePartitionsAssignment
        | create_partitions_v2.request.CreatePartitionsAssignment
        | create_partitions_v3.request.CreatePartitionsAssignment
    ]: ...

    @property
    def CreatePartitionsRequest(
        self,
    ) -> type[
        create_partitions_v0.request.CreatePartitionsRequest
        | create_partitions_v1.request.CreatePartitionsRequest
        | create_partitions_v2.request.CreatePartitionsRequest
        | create_partitions_v3.request.CreatePartitionsRequest
    ]: ...

    @property
    def CreatePartitionsTopic(
        self,
    ) -> type[
        create_partitions_v0.request.CreatePartitionsTopic
        | create_partitions_v1.request.CreatePartitionsTopic
        | create_partitions_v2.request.CreatePartitionsTopic
        | create_partitions_v3.request.CreatePartitionsTopic
    ]: ...


if TYPE_CHECKING:
    CreatePartitionsResponse: TypeAlias = (
        create_partitions_v0.response.CreatePartitionsResponse
        | create_partitions_v1.response.CreatePartitionsResponse
        | create_partitions_v2.response.CreatePartitionsResponse
        | create_partitions_v3.response.CreatePartitionsResponse
    )
    _create_partitions: Mapping[int, CreatePartitionsRequests] = {
        0: create_partitions_v0.request,
        1: create_partitions_v1.request,
        2: create_partitions_v2.request,
        3: create_partitions_v3.request,
    }

CREATE_PARTITIONS: Final[Api[CreatePartitionsRequests, CreatePartitionsResponse]] = Api(
    "create_partitions", 0, 3, "CreatePartitionsResponse"
)


class DescribeConfigsRequests(Protocol):
    """kio.schema.describe_configs.v1-4.request"""

    @property
    def DescribeConfigsRequest(
        self,
    ) -> type[
        describe_configs_v1.request.DescribeConfigsRequest
        | describe_configs_v2.request.DescribeConfigsRequest
        | describe_configs_v3.request.DescribeConfigsRequest
        | describe_configs_v4.request.DescribeConfigsRequest
    ]: ...

    @property
    def DescribeConfigsResource(
        self,
    ) -> type[
        describe_configs_v1.request.DescribeConfigsResource
        | describe_configs_v2.request.DescribeConfigsResource
        | describe_configs_v3.request.DescribeConfigsResource
        | describe_configs_v4.request.DescribeConfigsResource
    ]: ...


if TYPE_CHECKING:
    DescribeConfigsResponse: TypeAlias = (
        describe_configs_v1.response.DescribeConfigsResponse
        | describe_configs_v2.response.DescribeConfigsResponse
        | describe_configs_v3.response.DescribeConfigsResponse
        | describe_configs_v4.response.DescribeConfigsResponse
    )
    _describe_configs: Mapping[int, DescribeConfigsRequests] = {
        1: describe_configs_v1.request,
        2: describe_configs_v2.request,
        3: describe_configs_v3.request,
        4: describe_configs_v4.request,
    }

DESCRIBE_CONFIGS: Final[Api[DescribeConfigsRequests, DescribeConfigsResponse]] = Api(
    "describe_configs", 1, 4, "DescribeConfigsResponse"
)


class IncrementalAlterConfigsRequests(Protocol):
    """kio.schema.incremental_alter_configs.v0-1.request"""

    @property
    def AlterConfigsResource(
        self,
    ) -> type[
        incremental_alter_configs_v0.request.AlterConfigsResource
        | incremental_alter_configs_v1.request.AlterConfigsResource
    ]: ...

    @property
    def AlterableConfig(
        self,
    ) -> type[
        incremental_alter_configs_v0.request.AlterableConfig
        | incremental_alter_configs_v1.request.AlterableConfig
    ]: ...

    @property
    def IncrementalAlterConfigsRequest(
        self,
    ) -> type[
        incremental_alter_configs_v0.request.IncrementalAlterConfigsRequest
        | incremental_alter_configs_v1.request.IncrementalAlterConfigsRequest
    ]: ...


if TYPE_CHECKING:
    IncrementalAlterConfigsResponse: TypeAlias = (
        incremental_alter_configs_v0.response.IncrementalAlterConfigsResponse
        | incremental_alter_configs_v1.response.IncrementalAlterConfigsResponse
    )
    _incremental_alter_configs: Mapping[int, IncrementalAlterConfigsRequests] = {
        0: incremental_alter_configs_v0.request,
        1: incremental_alter_configs_v1.request,
    }

INCREMENTAL_ALTER_CONFIGS: Final[
    Api[IncrementalAlterConfigsRequests, IncrementalAlterConfigsResponse]
] = Api("incremental_alter_configs", 0, 1, "IncrementalAlterConfigsResponse")


class CreateAclsRequests(Protocol):
    """kio.schema.create_acls.v1-3.request"""

    @property
    def AclCreation(
        self,
    ) -> type[
        create_acls_v1.request.AclCreation
        | create_acls_v2.request.AclCreation
        | create_acls_v3.request.AclCreation
    ]: ...

    @property
    def CreateAclsRequest(
        self,
    ) -> type[
        create_acls_v1.request.CreateAclsRequest
        | create_acls_v2.request.CreateAclsRequest
        | create_acls_v3.request.CreateAclsRequest
    ]: ...


if TYPE_CHECKING:
    CreateAclsResponse: TypeAlias = (
        create_acls_v1.response.CreateAclsResponse
        | create_acls_v2.response.CreateAclsResponse
        | create_acls_v3.response.CreateAclsResponse
    )
    _create_acls: Mapping[int, CreateAclsRequests] = {
        1: create_acls_v1.request,
        2: create_acls_v2.request,
        3: create_acls_v3.request,
    }

CREATE_ACLS: Final[Api[CreateAclsRequests, CreateAclsResponse]] = Api(
    "create_acls", 1, 3, "CreateAclsResponse"
)


class DescribeAclsRequests(Protocol):
    """kio.schema.describe_acls.v1-3.request"""

    @property
    def DescribeAclsRequest(
        self,
    ) -> type[
        describe_acls_v1.request.DescribeAclsRequest
        | describe_acls_v2.request.DescribeAclsRequest
        | describe_acls_v3.request.DescribeAclsRequest
    ]: ...


if TYPE_CHECKING:
    DescribeAclsResponse: TypeAlias = (
        describe_acls_v1.response.DescribeAclsResponse
        | describe_acls_v2.response.DescribeAclsResponse
        | describe_acls_v3.response.DescribeAclsResponse
    )
    _describe_acls: Mapping[int, DescribeAclsRequests] = {
        1: describe_acls_v1.request,
        2: describe_acls_v2.request,
        3: describe_acls_v3.request,
    }

DESCRIBE_ACLS: Final[Api[DescribeAclsRequests, DescribeAclsResponse]] = Api(
    "describe_acls", 1, 3, "DescribeAclsResponse"
)


class DeleteAclsRequests(Protocol):
    """kio.schema.delete_acls.v1-3.request"""

    @property
    def DeleteAclsFilter(
        self,
    ) -> type[
        delete_acls_v1.request.DeleteAclsFilter
        | delete_acls_v2.request.DeleteAclsFilter
        | delete_acls_v3.request.DeleteAclsFilter
    ]: ...

    @property
    def DeleteAclsRequest(
        self,
    ) -> type[
        delete_acls_v1.request.DeleteAclsRequest
        | delete_acls_v2.request.DeleteAclsRequest
        | delete_acls_v3.request.DeleteAclsRequest
    ]: ...


if TYPE_CHECKING:
    DeleteAclsResponse: TypeAlias = (
        delete_acls_v1.response.DeleteAclsResponse
        | delete_acls_v2.response.DeleteAclsResponse
        | delete_acls_v3.response.DeleteAclsResponse
    )
    _delete_acls: Mapping[int, DeleteAclsRequests] = {
        1: delete_acls_v1.request,
        2: delete_acls_v2.request,
        3: delete_acls_v3.request,
    }

DELETE_ACLS: Final[Api[DeleteAclsRequests, DeleteAclsResponse]] = Api(
    "delete_acls", 1, 3, "DeleteAclsResponse"
)


class ProduceRequests(Protocol):
    """kio.schema.produce.v9-12.request"""

    @property
    def PartitionProduceData(
        self,
    ) -> type[
        produce_v9.request.PartitionProduceData
        | produce_v10.request.PartitionProduceData
        | produce_v11.request.PartitionProduceData
        | produce_v12.request.PartitionProduceData
    ]: ...

    @property
    def ProduceRequest(
        self,
    ) -> type[
        produce_v9.request.ProduceRequest
        | produce_v10.request.ProduceRequest
        | produce_v11.request.ProduceRequest
        | produce_v12.request.ProduceRequest
    ]: ...

    @property
    def TopicProduceData(
        self,
    ) -> type[
        produce_v9.request.TopicProduceData
        | produce_v10.request.TopicProduceData
        | produce_v11.request.TopicProduceData
        | produce_v12.request.TopicProduceData
    ]: ...


if TYPE_CHECKING:
    ProduceResponse: TypeAlias = (
        produce_v9.response.ProduceResponse
        | produce_v10.response.ProduceResponse
        | produce_v11.response.ProduceResponse
        | produce_v12.response.ProduceResponse
    )
    _produce: Mapping[int, ProduceRequests] = {
        9: produce_v9.request,
        10: produce_v10.request,
        11: produce_v11.request,
        12: produce_v12.request,
    }

PRODUCE: Final[Api[ProduceRequests, ProduceResponse]] = Api("produce", 9, 12, "ProduceResponse")


class FetchRequests(Protocol):
    """kio.schema.fetch.v4-12.request"""

    @property
    def FetchPartition(
        self,
    ) -> type[
        fetch_v4.request.FetchPartition
        | fetch_v5.request.FetchPartition
        | fetch_v6.request.FetchPartition
        | fetch_v7.request.FetchPartition
        | fetch_v8.request.FetchPartition
        | fetch_v9.request.FetchPartition
        | fetch_v10.request.FetchPartition
        | fetch_v11.request.FetchPartition
        | fetch_v12.request.FetchPartition
    ]: ...

    @property
    def FetchRequest(
        self,
    ) -> type[
        fetch_v4.request.FetchRequest
        | fetch_v5.request.FetchRequest
        | fetch_v6.request.FetchRequest
        | fetch_v7.request.FetchRequest
        | fetch_v8.request.FetchRequest
        | fetch_v9.request.FetchRequest
        | fetch_v10.request.FetchRequest
        | fetch_v11.request.FetchRequest
        | fetch_v12.request.FetchRequest
    ]: ...

    @property
    def FetchTopic(
        self,
    ) -> type[
        fetch_v4.request.FetchTopic
        | fetch_v5.request.FetchTopic
        | fetch_v6.request.FetchTopic
        | fetch_v7.request.FetchTopic
        | fetch_v8.request.FetchTopic
        | fetch_v9.request.FetchTopic
        | fetch_v10.request.FetchTopic
        | fetch_v11.request.FetchTopic
        | fetch_v12.request.FetchTopic
    ]: ...


if TYPE_CHECKING:
    FetchResponse: TypeAlias = (
        fetch_v4.response.FetchResponse
        | fetch_v5.response.FetchResponse
        | fetch_v6.response.FetchResponse
        | fetch_v7.response.FetchResponse
        | fetch_v8.response.FetchResponse
        | fetch_v9.response.FetchResponse
        | fetch_v10.response.FetchResponse
        | fetch_v11.response.FetchResponse
        | fetch_v12.response.FetchResponse
    )
    _fetch: Mapping[int, FetchRequests] = {
        4: fetch_v4.request,
        5: fetch_v5.request,
        6: fetch_v6.request,
        7: fetch_v7.request,
        8: fetch_v8.request,
        9: fetch_v9.request,
        10: fetch_v10.request,
        11: fetch_v11.request,
        12: fetch_v12.request,
    }

FETCH: Final[Api[FetchRequests, FetchResponse]] = Api("fetch", 4, 12, "FetchResponse")


class ListOffsetsRequests(Protocol):
    """kio.schema.list_offsets.v1-9.request"""

    @property
    def ListOffsetsPartition(
        self,
    ) -> type[
        list_offsets_v1.request.ListOffsetsPartition
        | list_offsets_v2.request.ListOffsetsPartition
        | list_offsets_v3.request.ListOffsetsPartition
        | list_offsets_v4.request.ListOffsetsPartition
        | list_offsets_v5.request.ListOffsetsPartition
        | list_offsets_v6.request.ListOffsetsPartition
        | list_offsets_v7.request.ListOffsetsPartition
        | list_offsets_v8.request.ListOffsetsPartition
        | list_offsets_v9.request.ListOffsetsPartition
    ]: ...

    @property
    def ListOffsetsRequest(
        self,
    ) -> type[
        list_offsets_v1.request.ListOffsetsRequest
        | list_offsets_v2.request.ListOffsetsRequest
        | list_offsets_v3.request.ListOffsetsRequest
        | list_offsets_v4.request.ListOffsetsRequest
        | list_offsets_v5.request.ListOffsetsRequest
        | list_offsets_v6.request.ListOffsetsRequest
        | list_offsets_v7.request.ListOffsetsRequest
        | list_offsets_v8.request.ListOffsetsRequest
        | list_offsets_v9.request.ListOffsetsRequest
    ]: ...

    @property
    def ListOffsetsTopic(
        self,
    ) -> type[
        list_offsets_v1.request.ListOffsetsTopic
        | list_offsets_v2.request.ListOffsetsTopic
        | list_offsets_v3.request.ListOffsetsTopic
        | list_offsets_v4.request.ListOffsetsTopic
        | list_offsets_v5.request.ListOffsetsTopic
        | list_offsets_v6.request.ListOffsetsTopic
        | list_offsets_v7.request.ListOffsetsTopic
        | list_offsets_v8.request.ListOffsetsTopic
        | list_offsets_v9.request.ListOffsetsTopic
    ]: ...


if TYPE_CHECKING:
    ListOffsetsResponse: TypeAlias = (
        list_offsets_v1.response.ListOffsetsResponse
        | list_offsets_v2.response.ListOffsetsResponse
        | list_offsets_v3.response.ListOffsetsResponse
        | list_offsets_v4.response.ListOffsetsResponse
        | list_offsets_v5.response.ListOffsetsResponse
        | list_offsets_v6.response.ListOffsetsResponse
        | list_offsets_v7.response.ListOffsetsResponse
        | list_offsets_v8.response.ListOffsetsResponse
        | list_offsets_v9.response.ListOffsetsResponse
    )
    _list_offsets: Mapping[int, ListOffsetsRequests] = {
        1: list_offsets_v1.request,
        2: list_offsets_v2.request,
        3: list_offsets_v3.request,
        4: list_offsets_v4.request,
        5: list_offsets_v5.request,
        6: list_offsets_v6.request,
        7: list_offsets_v7.request,
        8: list_offsets_v8.request,
        9: list_offsets_v9.request,
    }

LIST_OFFSETS: Final[Api[ListOffsetsRequests, ListOffsetsResponse]] = Api(
    "list_offsets", 1, 9, "ListOffsetsResponse"
)


class DeleteRecordsRequests(Protocol):
    """kio.schema.delete_records.v0-2.request"""

    @property
    def DeleteRecordsPartition(
        self,
    ) -> type[
        delete_records_v0.request.DeleteRecordsPartition
        | delete_records_v1.request.DeleteRecordsPartition
        | delete_records_v2.request.DeleteRecordsPartition
    ]: ...

    @property
    def DeleteRecordsRequest(
        self,
    ) -> type[
        delete_records_v0.request.DeleteRecordsRequest
        | delete_records_v1.request.DeleteRecordsRequest
        | delete_records_v2.request.DeleteRecordsRequest
    ]: ...

    @property
    def DeleteRecordsTopic(
        self,
    ) -> type[
        delete_records_v0.request.DeleteRecordsTopic
        | delete_records_v1.request.DeleteRecordsTopic
        | delete_records_v2.request.DeleteRecordsTopic
    ]: ...


if TYPE_CHECKING:
    DeleteRecordsResponse: TypeAlias = (
        delete_records_v0.response.DeleteRecordsResponse
        | delete_records_v1.response.DeleteRecordsResponse
        | delete_records_v2.response.DeleteRecordsResponse
    )
    _delete_records: Mapping[int, DeleteRecordsRequests] = {
        0: delete_records_v0.request,
        1: delete_records_v1.request,
        2: delete_records_v2.request,
    }

DELETE_RECORDS: Final[Api[DeleteRecordsRequests, DeleteRecordsResponse]] = Api(
    "delete_records", 0, 2, "DeleteRecordsResponse"
)


class ListGroupsRequests(Protocol):
    """kio.schema.list_groups.v0-5.request"""

    @property
    def ListGroupsRequest(
        self,
    ) -> type[
        list_groups_v0.request.ListGroupsRequest
        | list_groups_v1.request.ListGroupsRequest
        | list_groups_v2.request.ListGroupsRequest
        | list_groups_v3.request.ListGroupsRequest
        | list_groups_v4.request.ListGroupsRequest
        | list_groups_v5.request.ListGroupsRequest
    ]: ...


if TYPE_CHECKING:
    ListGroupsResponse: TypeAlias = (
        list_groups_v0.response.ListGroupsResponse
        | list_groups_v1.response.ListGroupsResponse
        | list_groups_v2.response.ListGroupsResponse
        | list_groups_v3.response.ListGroupsResponse
        | list_groups_v4.response.ListGroupsResponse
        | list_groups_v5.response.ListGroupsResponse
    )
    _list_groups: Mapping[int, ListGroupsRequests] = {
        0: list_groups_v0.request,
        1: list_groups_v1.request,
        2: list_groups_v2.request,
        3: list_groups_v3.request,
        4: list_groups_v4.request,
        5: list_groups_v5.request,
    }

LIST_GROUPS: Final[Api[ListGroupsRequests, ListGroupsResponse]] = Api(
    "list_groups", 0, 5, "ListGroupsResponse"
)


class DescribeGroupsRequests(Protocol):
    """kio.schema.describe_groups.v0-6.request"""

    @property
    def DescribeGroupsRequest(
        self,
    ) -> type[
        describe_groups_v0.request.DescribeGroupsRequest
        | describe_groups_v1.request.DescribeGroupsRequest
        | describe_groups_v2.request.DescribeGroupsRequest
        | describe_groups_v3.request.DescribeGroupsRequest
        | describe_groups_v4.request.DescribeGroupsRequest
        | describe_groups_v5.request.DescribeGroupsRequest
        | describe_groups_v6.request.DescribeGroupsRequest
    ]: ...


if TYPE_CHECKING:
    DescribeGroupsResponse: TypeAlias = (
        describe_groups_v0.response.DescribeGroupsResponse
        | describe_groups_v1.response.DescribeGroupsResponse
        | describe_groups_v2.response.DescribeGroupsResponse
        | describe_groups_v3.response.DescribeGroupsResponse
        | describe_groups_v4.response.DescribeGroupsResponse
        | describe_groups_v5.response.DescribeGroupsResponse
        | describe_groups_v6.response.DescribeGroupsResponse
    )
    _describe_groups: Mapping[int, DescribeGroupsRequests] = {
        0: describe_groups_v0.request,
        1: describe_groups_v1.request,
        2: describe_groups_v2.request,
        3: describe_groups_v3.request,
        4: describe_groups_v4.request,
        5: describe_groups_v5.request,
        6: describe_groups_v6.request,
    }

DESCRIBE_GROUPS: Final[Api[DescribeGroupsRequests, DescribeGroupsResponse]] = Api(
    "describe_groups", 0, 6, "DescribeGroupsResponse"
)


class DeleteGroupsRequests(Protocol):
    """kio.schema.delete_groups.v0-2.request"""

    @property
    def DeleteGroupsRequest(
        self,
    ) -> type[
        delete_groups_v0.request.DeleteGroupsRequest
        | delete_groups_v1.request.DeleteGroupsRequest
        | delete_groups_v2.request.DeleteGroupsRequest
    ]: ...


if TYPE_CHECKING:
    DeleteGroupsResponse: TypeAlias = (
        delete_groups_v0.response.DeleteGroupsResponse
        | delete_groups_v1.response.DeleteGroupsResponse
        | delete_groups_v2.response.DeleteGroupsResponse
    )
    _delete_groups: Mapping[int, DeleteGroupsRequests] = {
        0: delete_groups_v0.request,
        1: delete_groups_v1.request,
        2: delete_groups_v2.request,
    }

DELETE_GROUPS: Final[Api[DeleteGroupsRequests, DeleteGroupsResponse]] = Api(
    "delete_groups", 0, 2, "DeleteGroupsResponse"
)


class ConsumerGroupDescribeRequests(Protocol):
    """kio.schema.consumer_group_describe.v0-1.request"""

    @property
    def ConsumerGroupDescribeRequest(
        self,
    ) -> type[
        consumer_group_describe_v0.request.ConsumerGroupDescribeRequest
        | consumer_group_describe_v1.request.ConsumerGroupDescribeRequest
    ]: ...


if TYPE_CHECKING:
    ConsumerGroupDescribeResponse: TypeAlias = (
        consumer_group_describe_v0.response.ConsumerGroupDescribeResponse
        | consumer_group_describe_v1.response.ConsumerGroupDescribeResponse
    )
    _consumer_group_describe: Mapping[int, ConsumerGroupDescribeRequests] = {
        0: consumer_group_describe_v0.request,
        1: consumer_group_describe_v1.request,
    }

CONSUMER_GROUP_DESCRIBE: Final[
    Api[ConsumerGroupDescribeRequests, ConsumerGroupDescribeResponse]
] = Api("consumer_group_describe", 0, 1, "ConsumerGroupDescribeResponse")


class ConsumerGroupHeartbeatRequests(Protocol):
    """kio.schema.consumer_group_heartbeat.v0-1.request"""

    @property
    def ConsumerGroupHeartbeatRequest(
        self,
    ) -> type[
        consumer_group_heartbeat_v0.request.ConsumerGroupHeartbeatRequest
        | consumer_group_heartbeat_v1.request.ConsumerGroupHeartbeatRequest
    ]: ...

    @property
    def TopicPartitions(
        self,
    ) -> type[
        consumer_group_heartbeat_v0.request.TopicPartitions
        | consumer_group_heartbeat_v1.request.TopicPartitions
    ]: ...


if TYPE_CHECKING:
    ConsumerGroupHeartbeatResponse: TypeAlias = (
        consumer_group_heartbeat_v0.response.ConsumerGroupHeartbeatResponse
        | consumer_group_heartbeat_v1.response.ConsumerGroupHeartbeatResponse
    )
    _consumer_group_heartbeat: Mapping[int, ConsumerGroupHeartbeatRequests] = {
        0: consumer_group_heartbeat_v0.request,
        1: consumer_group_heartbeat_v1.request,
    }

CONSUMER_GROUP_HEARTBEAT: Final[
    Api[ConsumerGroupHeartbeatRequests, ConsumerGroupHeartbeatResponse]
] = Api("consumer_group_heartbeat", 0, 1, "ConsumerGroupHeartbeatResponse")


class OffsetFetchRequests(Protocol):
    """kio.schema.offset_fetch.v1-8.request"""

    @property
    def OffsetFetchRequest(
        self,
    ) -> type[
        offset_fetch_v1.request.OffsetFetchRequest
        | offset_fetch_v2.request.OffsetFetchRequest
        | offset_fetch_v3.request.OffsetFetchRequest
        | offset_fetch_v4.request.OffsetFetchRequest
        | offset_fetch_v5.request.OffsetFetchRequest
        | offset_fetch_v6.request.OffsetFetchRequest
        | offset_fetch_v7.request.OffsetFetchRequest
        | offset_fetch_v8.request.OffsetFetchRequest
    ]: ...


if TYPE_CHECKING:
    OffsetFetchResponse: TypeAlias = (
        offset_fetch_v1.response.OffsetFetchResponse
        | offset_fetch_v2.response.OffsetFetchResponse
        | offset_fetch_v3.response.OffsetFetchResponse
        | offset_fetch_v4.response.OffsetFetchResponse
        | offset_fetch_v5.response.OffsetFetchResponse
        | offset_fetch_v6.response.OffsetFetchResponse
        | offset_fetch_v7.response.OffsetFetchResponse
        | offset_fetch_v8.response.OffsetFetchResponse
    )
    _offset_fetch: Mapping[int, OffsetFetchRequests] = {
        1: offset_fetch_v1.request,
        2: offset_fetch_v2.request,
        3: offset_fetch_v3.request,
        4: offset_fetch_v4.request,
        5: offset_fetch_v5.request,
        6: offset_fetch_v6.request,
        7: offset_fetch_v7.request,
        8: offset_fetch_v8.request,
    }

OFFSET_FETCH: Final[Api[OffsetFetchRequests, OffsetFetchResponse]] = Api(
    "offset_fetch", 1, 8, "OffsetFetchResponse"
)


class OffsetFetchV1To7Requests(Protocol):
    """kio.schema.offset_fetch.v1-7.request"""

    @property
    def OffsetFetchRequest(
        self,
    ) -> type[
        offset_fetch_v1.request.OffsetFetchRequest
        | offset_fetch_v2.request.OffsetFetchRequest
        | offset_fetch_v3.request.OffsetFetchRequest
        | offset_fetch_v4.request.OffsetFetchRequest
        | offset_fetch_v5.request.OffsetFetchRequest
        | offset_fetch_v6.request.OffsetFetchRequest
        | offset_fetch_v7.request.OffsetFetchRequest
    ]: ...

    @property
    def OffsetFetchRequestTopic(
        self,
    ) -> type[
        offset_fetch_v1.request.OffsetFetchRequestTopic
        | offset_fetch_v2.request.OffsetFetchRequestTopic
        | offset_fetch_v3.request.OffsetFetchRequestTopic
        | offset_fetch_v4.request.OffsetFetchRequestTopic
        | offset_fetch_v5.request.OffsetFetchRequestTopic
        | offset_fetch_v6.request.OffsetFetchRequestTopic
        | offset_fetch_v7.request.OffsetFetchRequestTopic
    ]: ...


if TYPE_CHECKING:
    OffsetFetchV1To7Response: TypeAlias = (
        offset_fetch_v1.response.OffsetFetchResponse
        | offset_fetch_v2.response.OffsetFetchResponse
        | offset_fetch_v3.response.OffsetFetchResponse
        | offset_fetch_v4.response.OffsetFetchResponse
        | offset_fetch_v5.response.OffsetFetchResponse
        | offset_fetch_v6.response.OffsetFetchResponse
        | offset_fetch_v7.response.OffsetFetchResponse
    )
    _offset_fetch_v1_to_7: Mapping[int, OffsetFetchV1To7Requests] = {
        1: offset_fetch_v1.request,
        2: offset_fetch_v2.request,
        3: offset_fetch_v3.request,
        4: offset_fetch_v4.request,
        5: offset_fetch_v5.request,
        6: offset_fetch_v6.request,
        7: offset_fetch_v7.request,
    }

OFFSET_FETCH_V1_TO_7: Final[Api[OffsetFetchV1To7Requests, OffsetFetchV1To7Response]] = Api(
    "offset_fetch", 1, 7, "OffsetFetchResponse"
)


class OffsetFetchV8Requests(Protocol):
    """kio.schema.offset_fetch.v8-8.request"""

    @property
    def OffsetFetchRequest(self) -> type[offset_fetch_v8.request.OffsetFetchRequest]: ...

    @property
    def OffsetFetchRequestGroup(self) -> type[offset_fetch_v8.request.OffsetFetchRequestGroup]: ...

    @property
    def OffsetFetchRequestTopics(
        self,
    ) -> type[offset_fetch_v8.request.OffsetFetchRequestTopics]: ...


if TYPE_CHECKING:
    OffsetFetchV8Response: TypeAlias = offset_fetch_v8.response.OffsetFetchResponse
    _offset_fetch_v8: Mapping[int, OffsetFetchV8Requests] = {8: offset_fetch_v8.request}

OFFSET_FETCH_V8: Final[Api[OffsetFetchV8Requests, OffsetFetchV8Response]] = Api(
    "offset_fetch", 8, 8, "OffsetFetchResponse"
)


class OffsetCommitRequests(Protocol):
    """kio.schema.offset_commit.v2-8.request"""

    @property
    def OffsetCommitRequest(
        self,
    ) -> type[
        offset_commit_v2.request.OffsetCommitRequest
        | offset_commit_v3.request.OffsetCommitRequest
        | offset_commit_v4.request.OffsetCommitRequest
        | offset_commit_v5.request.OffsetCommitRequest
        | offset_commit_v6.request.OffsetCommitRequest
        | offset_commit_v7.request.OffsetCommitRequest
        | offset_commit_v8.request.OffsetCommitRequest
    ]: ...

    @property
    def OffsetCommitRequestPartition(
        self,
    ) -> type[
        offset_commit_v2.request.OffsetCommitRequestPartition
        | offset_commit_v3.request.OffsetCommitRequestPartition
        | offset_commit_v4.request.OffsetCommitRequestPartition
        | offset_commit_v5.request.OffsetCommitRequestPartition
        | offset_commit_v6.request.OffsetCommitRequestPartition
        | offset_commit_v7.request.OffsetCommitRequestPartition
        | offset_commit_v8.request.OffsetCommitRequestPartition
    ]: ...

    @property
    def OffsetCommitRequestTopic(
        self,
    ) -> type[
        offset_commit_v2.request.OffsetCommitRequestTopic
        | offset_commit_v3.request.OffsetCommitRequestTopic
        | offset_commit_v4.request.OffsetCommitRequestTopic
        | offset_commit_v5.request.OffsetCommitRequestTopic
        | offset_commit_v6.request.OffsetCommitRequestTopic
        | offset_commit_v7.request.OffsetCommitRequestTopic
        | offset_commit_v8.request.OffsetCommitRequestTopic
    ]: ...


if TYPE_CHECKING:
    OffsetCommitResponse: TypeAlias = (
        offset_commit_v2.response.OffsetCommitResponse
        | offset_commit_v3.response.OffsetCommitResponse
        | offset_commit_v4.response.OffsetCommitResponse
        | offset_commit_v5.response.OffsetCommitResponse
        | offset_commit_v6.response.OffsetCommitResponse
        | offset_commit_v7.response.OffsetCommitResponse
        | offset_commit_v8.response.OffsetCommitResponse
    )
    _offset_commit: Mapping[int, OffsetCommitRequests] = {
        2: offset_commit_v2.request,
        3: offset_commit_v3.request,
        4: offset_commit_v4.request,
        5: offset_commit_v5.request,
        6: offset_commit_v6.request,
        7: offset_commit_v7.request,
        8: offset_commit_v8.request,
    }

OFFSET_COMMIT: Final[Api[OffsetCommitRequests, OffsetCommitResponse]] = Api(
    "offset_commit", 2, 8, "OffsetCommitResponse"
)


class OffsetDeleteRequests(Protocol):
    """kio.schema.offset_delete.v0-0.request"""

    @property
    def OffsetDeleteRequest(self) -> type[offset_delete_v0.request.OffsetDeleteRequest]: ...

    @property
    def OffsetDeleteRequestPartition(
        self,
    ) -> type[offset_delete_v0.request.OffsetDeleteRequestPartition]: ...

    @property
    def OffsetDeleteRequestTopic(
        self,
    ) -> type[offset_delete_v0.request.OffsetDeleteRequestTopic]: ...


if TYPE_CHECKING:
    OffsetDeleteResponse: TypeAlias = offset_delete_v0.response.OffsetDeleteResponse
    _offset_delete: Mapping[int, OffsetDeleteRequests] = {0: offset_delete_v0.request}

OFFSET_DELETE: Final[Api[OffsetDeleteRequests, OffsetDeleteResponse]] = Api(
    "offset_delete", 0, 0, "OffsetDeleteResponse"
)


class ShareGroupHeartbeatRequests(Protocol):
    """kio.schema.share_group_heartbeat.v1-1.request"""

    @property
    def ShareGroupHeartbeatRequest(
        self,
    ) -> type[share_group_heartbeat_v1.request.ShareGroupHeartbeatRequest]: ...


if TYPE_CHECKING:
    ShareGroupHeartbeatResponse: TypeAlias = (
        share_group_heartbeat_v1.response.ShareGroupHeartbeatResponse
    )
    _share_group_heartbeat: Mapping[int, ShareGroupHeartbeatRequests] = {
        1: share_group_heartbeat_v1.request
    }

SHARE_GROUP_HEARTBEAT: Final[Api[ShareGroupHeartbeatRequests, ShareGroupHeartbeatResponse]] = Api(
    "share_group_heartbeat", 1, 1, "ShareGroupHeartbeatResponse"
)


class ShareGroupDescribeRequests(Protocol):
    """kio.schema.share_group_describe.v1-1.request"""

    @property
    def ShareGroupDescribeRequest(
        self,
    ) -> type[share_group_describe_v1.request.ShareGroupDescribeRequest]: ...


if TYPE_CHECKING:
    ShareGroupDescribeResponse: TypeAlias = (
        share_group_describe_v1.response.ShareGroupDescribeResponse
    )
    _share_group_describe: Mapping[int, ShareGroupDescribeRequests] = {
        1: share_group_describe_v1.request
    }

SHARE_GROUP_DESCRIBE: Final[Api[ShareGroupDescribeRequests, ShareGroupDescribeResponse]] = Api(
    "share_group_describe", 1, 1, "ShareGroupDescribeResponse"
)


class ShareFetchRequests(Protocol):
    """kio.schema.share_fetch.v1-2.request"""

    @property
    def AcknowledgementBatch(
        self,
    ) -> type[
        share_fetch_v1.request.AcknowledgementBatch | share_fetch_v2.request.AcknowledgementBatch
    ]: ...

    @property
    def FetchPartition(
        self,
    ) -> type[share_fetch_v1.request.FetchPartition | share_fetch_v2.request.FetchPartition]: ...

    @property
    def FetchTopic(
        self,
    ) -> type[share_fetch_v1.request.FetchTopic | share_fetch_v2.request.FetchTopic]: ...

    @property
    def ForgottenTopic(
        self,
    ) -> type[share_fetch_v1.request.ForgottenTopic | share_fetch_v2.request.ForgottenTopic]: ...

    @property
    def ShareFetchRequest(
        self,
    ) -> type[
        share_fetch_v1.request.ShareFetchRequest | share_fetch_v2.request.ShareFetchRequest
    ]: ...


if TYPE_CHECKING:
    ShareFetchResponse: TypeAlias = (
        share_fetch_v1.response.ShareFetchResponse | share_fetch_v2.response.ShareFetchResponse
    )
    _share_fetch: Mapping[int, ShareFetchRequests] = {
        1: share_fetch_v1.request,
        2: share_fetch_v2.request,
    }

SHARE_FETCH: Final[Api[ShareFetchRequests, ShareFetchResponse]] = Api(
    "share_fetch", 1, 2, "ShareFetchResponse"
)


class ShareAcknowledgeRequests(Protocol):
    """kio.schema.share_acknowledge.v1-2.request"""

    @property
    def AcknowledgePartition(
        self,
    ) -> type[
        share_acknowledge_v1.request.AcknowledgePartition
        | share_acknowledge_v2.request.AcknowledgePartition
    ]: ...

    @property
    def AcknowledgeTopic(
        self,
    ) -> type[
        share_acknowledge_v1.request.AcknowledgeTopic
        | share_acknowledge_v2.request.AcknowledgeTopic
    ]: ...

    @property
    def AcknowledgementBatch(
        self,
    ) -> type[
        share_acknowledge_v1.request.AcknowledgementBatch
        | share_acknowledge_v2.request.AcknowledgementBatch
    ]: ...

    @property
    def ShareAcknowledgeRequest(
        self,
    ) -> type[
        share_acknowledge_v1.request.ShareAcknowledgeRequest
        | share_acknowledge_v2.request.ShareAcknowledgeRequest
    ]: ...


if TYPE_CHECKING:
    ShareAcknowledgeResponse: TypeAlias = (
        share_acknowledge_v1.response.ShareAcknowledgeResponse
        | share_acknowledge_v2.response.ShareAcknowledgeResponse
    )
    _share_acknowledge: Mapping[int, ShareAcknowledgeRequests] = {
        1: share_acknowledge_v1.request,
        2: share_acknowledge_v2.request,
    }

SHARE_ACKNOWLEDGE: Final[Api[ShareAcknowledgeRequests, ShareAcknowledgeResponse]] = Api(
    "share_acknowledge", 1, 2, "ShareAcknowledgeResponse"
)


class DescribeShareGroupOffsetsRequests(Protocol):
    """kio.schema.describe_share_group_offsets.v0-1.request"""

    @property
    def DescribeShareGroupOffsetsRequest(
        self,
    ) -> type[
        describe_share_group_offsets_v0.request.DescribeShareGroupOffsetsRequest
        | describe_share_group_offsets_v1.request.DescribeShareGroupOffsetsRequest
    ]: ...

    @property
    def DescribeShareGroupOffsetsRequestGroup(
        self,
    ) -> type[
        describe_share_group_offsets_v0.request.DescribeShareGroupOffsetsRequestGroup
        | describe_share_group_offsets_v1.request.DescribeShareGroupOffsetsRequestGroup
    ]: ...

    @property
    def DescribeShareGroupOffsetsRequestTopic(
        self,
    ) -> type[
        describe_share_group_offsets_v0.request.DescribeShareGroupOffsetsRequestTopic
        | describe_share_group_offsets_v1.request.DescribeShareGroupOffsetsRequestTopic
    ]: ...


if TYPE_CHECKING:
    DescribeShareGroupOffsetsResponse: TypeAlias = (
        describe_share_group_offsets_v0.response.DescribeShareGroupOffsetsResponse
        | describe_share_group_offsets_v1.response.DescribeShareGroupOffsetsResponse
    )
    _describe_share_group_offsets: Mapping[int, DescribeShareGroupOffsetsRequests] = {
        0: describe_share_group_offsets_v0.request,
        1: describe_share_group_offsets_v1.request,
    }

DESCRIBE_SHARE_GROUP_OFFSETS: Final[
    Api[DescribeShareGroupOffsetsRequests, DescribeShareGroupOffsetsResponse]
] = Api("describe_share_group_offsets", 0, 1, "DescribeShareGroupOffsetsResponse")


class AlterShareGroupOffsetsRequests(Protocol):
    """kio.schema.alter_share_group_offsets.v0-0.request"""

    @property
    def AlterShareGroupOffsetsRequest(
        self,
    ) -> type[alter_share_group_offsets_v0.request.AlterShareGroupOffsetsRequest]: ...

    @property
    def AlterShareGroupOffsetsRequestPartition(
        self,
    ) -> type[alter_share_group_offsets_v0.request.AlterShareGroupOffsetsRequestPartition]: ...

    @property
    def AlterShareGroupOffsetsRequestTopic(
        self,
    ) -> type[alter_share_group_offsets_v0.request.AlterShareGroupOffsetsRequestTopic]: ...


if TYPE_CHECKING:
    AlterShareGroupOffsetsResponse: TypeAlias = (
        alter_share_group_offsets_v0.response.AlterShareGroupOffsetsResponse
    )
    _alter_share_group_offsets: Mapping[int, AlterShareGroupOffsetsRequests] = {
        0: alter_share_group_offsets_v0.request
    }

ALTER_SHARE_GROUP_OFFSETS: Final[
    Api[AlterShareGroupOffsetsRequests, AlterShareGroupOffsetsResponse]
] = Api("alter_share_group_offsets", 0, 0, "AlterShareGroupOffsetsResponse")


class DeleteShareGroupOffsetsRequests(Protocol):
    """kio.schema.delete_share_group_offsets.v0-0.request"""

    @property
    def DeleteShareGroupOffsetsRequest(
        self,
    ) -> type[delete_share_group_offsets_v0.request.DeleteShareGroupOffsetsRequest]: ...

    @property
    def DeleteShareGroupOffsetsRequestTopic(
        self,
    ) -> type[delete_share_group_offsets_v0.request.DeleteShareGroupOffsetsRequestTopic]: ...


if TYPE_CHECKING:
    DeleteShareGroupOffsetsResponse: TypeAlias = (
        delete_share_group_offsets_v0.response.DeleteShareGroupOffsetsResponse
    )
    _delete_share_group_offsets: Mapping[int, DeleteShareGroupOffsetsRequests] = {
        0: delete_share_group_offsets_v0.request
    }

DELETE_SHARE_GROUP_OFFSETS: Final[
    Api[DeleteShareGroupOffsetsRequests, DeleteShareGroupOffsetsResponse]
] = Api("delete_share_group_offsets", 0, 0, "DeleteShareGroupOffsetsResponse")


class DescribeLogDirsRequests(Protocol):
    """kio.schema.describe_log_dirs.v1-5.request"""

    @property
    def DescribableLogDirTopic(
        self,
    ) -> type[
        describe_log_dirs_v1.request.DescribableLogDirTopic
        | describe_log_dirs_v2.request.DescribableLogDirTopic
        | describe_log_dirs_v3.request.DescribableLogDirTopic
        | describe_log_dirs_v4.request.DescribableLogDirTopic
        | describe_log_dirs_v5.request.DescribableLogDirTopic
    ]: ...

    @property
    def DescribeLogDirsRequest(
        self,
    ) -> type[
        describe_log_dirs_v1.request.DescribeLogDirsRequest
        | describe_log_dirs_v2.request.DescribeLogDirsRequest
        | describe_log_dirs_v3.request.DescribeLogDirsRequest
        | describe_log_dirs_v4.request.DescribeLogDirsRequest
        | describe_log_dirs_v5.request.DescribeLogDirsRequest
    ]: ...


if TYPE_CHECKING:
    DescribeLogDirsResponse: TypeAlias = (
        describe_log_dirs_v1.response.DescribeLogDirsResponse
        | describe_log_dirs_v2.response.DescribeLogDirsResponse
        | describe_log_dirs_v3.response.DescribeLogDirsResponse
        | describe_log_dirs_v4.response.DescribeLogDirsResponse
        | describe_log_dirs_v5.response.DescribeLogDirsResponse
    )
    _describe_log_dirs: Mapping[int, DescribeLogDirsRequests] = {
        1: describe_log_dirs_v1.request,
        2: describe_log_dirs_v2.request,
        3: describe_log_dirs_v3.request,
        4: describe_log_dirs_v4.request,
        5: describe_log_dirs_v5.request,
    }

DESCRIBE_LOG_DIRS: Final[Api[DescribeLogDirsRequests, DescribeLogDirsResponse]] = Api(
    "describe_log_dirs", 1, 5, "DescribeLogDirsResponse"
)
