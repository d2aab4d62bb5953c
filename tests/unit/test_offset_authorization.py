"""OffsetCommit and OffsetDelete check Kafka's ACLs: READ on the group and on each topic to
commit, DELETE on the group and READ on each topic to delete (see test_authorization_handlers)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit import v9 as offset_commit
from kio.schema.offset_delete import v0 as offset_delete
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.server import Server
from protocol.acl import AclOperation as Op
from protocol.acl import ResourceType as RT
from protocol.consumer_offsets import OffsetValue
from tests.unit.test_authorization_handlers import ALICE
from tests.unit.test_authorization_handlers import BOB
from tests.unit.test_authorization_handlers import GROUP
from tests.unit.test_authorization_handlers import TOPIC
from tests.unit.test_authorization_handlers import acl
from tests.unit.test_authorization_handlers import call
from tests.unit.test_authorization_handlers import grant
from tests.unit.test_authorization_handlers import server

__all__ = ["server"]  # the fixture, shared


def _commit(group: str) -> offset_commit.OffsetCommitRequest:
    r = offset_commit.request
    return offset_commit.OffsetCommitRequest(
        group_id=GroupId(group), generation_id_or_member_epoch=i32(-1), member_id="",
        group_instance_id=None,
        topics=tuple(
            r.OffsetCommitRequestTopic(name=TopicName(t), partitions=(
                r.OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(3),
                                               committed_metadata=None),
            ))
            for t in (TOPIC, "payments")
        ),
    )  # fmt: skip


def _codes(resp: offset_commit.OffsetCommitResponse) -> list[ErrorCode]:
    return [t.partitions[0].error_code for t in resp.topics]


async def test_offset_commit_needs_read_on_the_group_and_each_topic(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.GROUP, GROUP, Op.READ), acl(RT.TOPIC, TOPIC, Op.READ))
    assert _codes(await call(s, ALICE, _commit(GROUP))) == [
        ErrorCode.none, ErrorCode.topic_authorization_failed
    ]  # fmt: skip
    assert _codes(await call(s, BOB, _commit(GROUP))) == [ErrorCode.group_authorization_failed] * 2
    assert {tp: v.offset for tp, v in s.offsets.group_offsets(GROUP).items()} == {(TOPIC, 0): 3}


async def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(
    server: Server,
) -> None:
    s = server.services
    s.offsets.commit(GROUP, {(TOPIC, 0): OffsetValue(1), ("payments", 0): OffsetValue(2)})
    await grant(s, acl(RT.GROUP, GROUP, Op.DELETE), acl(RT.TOPIC, TOPIC, Op.READ))
    r = offset_delete.request
    request = offset_delete.OffsetDeleteRequest(
        group_id=GroupId(GROUP),
        topics=tuple(
            r.OffsetDeleteRequestTopic(
                name=TopicName(t),
                partitions=(r.OffsetDeleteRequestPartition(partition_index=i32(0)),),
            )
            for t in (TOPIC, "payments")
        ),
    )  # fmt: skip
    refused = await call(s, BOB, request)
    assert (refused.error_code, refused.topics) == (ErrorCode.group_authorization_failed, ())
    resp = await call(s, ALICE, request)
    assert [t.partitions[0].error_code for t in resp.topics] == [
        ErrorCode.none, ErrorCode.topic_authorization_failed
    ]  # fmt: skip
    assert sorted(s.offsets.group_offsets(GROUP)) == [("payments", 0)]
