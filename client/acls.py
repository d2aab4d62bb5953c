"""ACL administration over the wire: CreateAcls, DescribeAcls and DeleteAcls (v1-3).

The values are `protocol.acl`'s (Kafka's codes), so what the CLI prints and parses is what
the broker stores. Used through `Admin.create_acls`, `describe_acls` and `delete_acls`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.static.primitive import i8

from client.cluster import Cluster
from client.errors import raise_for
from client.kio_apis import CREATE_ACLS
from client.kio_apis import DELETE_ACLS
from client.kio_apis import DESCRIBE_ACLS
from protocol import api_keys
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType
from protocol.messages import build


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": i8(f.resource_type),
        "resource_name_filter": f.name,
        "pattern_type_filter": i8(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": i8(f.operation),
        "permission_type": i8(f.permission),
    }


def _binding(rtype: int, name: str, pattern: int, acl: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType(rtype), name, PatternType(pattern)),
        AccessControlEntry(
            acl.principal,
            acl.host,
            AclOperation(acl.operation),
            AclPermissionType(acl.permission_type),
        ),
    )


async def create_acls(cluster: Cluster, bindings: Iterable[AclBinding]) -> None:
    """:raises KafkaError: the first binding refused (SECURITY_DISABLED, INVALID_REQUEST...)."""
    version = cluster.version(api_keys.CREATE_ACLS, 1, 3)
    m = CREATE_ACLS.requests(version)
    creations = tuple(
        build(
            m.AclCreation,
            resource_type=i8(b.pattern.resource_type),
            resource_name=b.pattern.name,
            resource_pattern_type=i8(b.pattern.pattern_type),
            principal=b.entry.principal,
            host=b.entry.host,
            operation=i8(b.entry.operation),
            permission_type=i8(b.entry.permission),
        )
        for b in bindings
    )
    resp = await cluster.call(
        build(m.CreateAclsRequest, creations=creations), CREATE_ACLS.response(version)
    )
    for r in resp.results:
        raise_for(r.error_code, r.error_message or "CreateAcls")


async def describe_acls(cluster: Cluster, f: AclBindingFilter) -> list[AclBinding]:
    version = cluster.version(api_keys.DESCRIBE_ACLS, 1, 3)
    m = DESCRIBE_ACLS.requests(version)
    resp = await cluster.call(
        build(m.DescribeAclsRequest, **_filter_fields(f)), DESCRIBE_ACLS.response(version)
    )
    raise_for(resp.error_code, resp.error_message or "DescribeAcls")
    return [
        _binding(r.resource_type, r.resource_name, r.pattern_type, a)
        for r in resp.resources
        for a in r.acls
    ]


async def delete_acls(cluster: Cluster, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
    """Every binding removed, over all the filters."""
    version = cluster.version(api_keys.DELETE_ACLS, 1, 3)
    m = DELETE_ACLS.requests(version)
    wire = tuple(build(m.DeleteAclsFilter, **_filter_fields(f)) for f in filters)
    resp = await cluster.call(
        build(m.DeleteAclsRequest, filters=wire), DELETE_ACLS.response(version)
    )
    removed = []
    for r in resp.filter_results:
        raise_for(r.error_code, r.error_message or "DeleteAcls")
        removed += [
            _binding(a.resource_type, a.resource_name, a.pattern_type, a) for a in r.matching_acls
        ]
    return removed
