"""ACL checks of ConsumerGroupHeartbeat (READ group, DESCRIBE subscribed topics) and
ConsumerGroupDescribe (DESCRIBE group), through the registered handlers with the authorizer on."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.consumer_group_describe import v1 as describe
from kio.schema.consumer_group_heartbeat import v1 as heartbeat
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.server import Server
from protocol.acl import AclOperation as Op
from protocol.acl import ResourceType as RT
from tests.unit.test_authorization_handlers import ALICE
from tests.unit.test_authorization_handlers import TOPIC
from tests.unit.test_authorization_handlers import acl
from tests.unit.test_authorization_handlers import call
from tests.unit.test_authorization_handlers import grant
from tests.unit.test_authorization_handlers import server  # noqa: F401  # the fixture

GROUP = "auditors"


def _join(member: str = "alice-1") -> Any:
    return heartbeat.ConsumerGroupHeartbeatRequest(
        group_id=GroupId(GROUP),
        member_id=member,
        member_epoch=i32(0),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        subscribed_topic_names=(TopicName(TOPIC),),
        topic_partitions=(),
    )


def _describe() -> Any:
    return describe.ConsumerGroupDescribeRequest(
        group_ids=(GroupId(GROUP),), include_authorized_operations=True
    )


async def test_heartbeat_needs_read_on_the_group_and_describe_on_its_topics(
    server: Server,  # noqa: F811
) -> None:
    s = server.services
    assert (await call(s, ALICE, _join())).error_code == ErrorCode.group_authorization_failed
    await grant(s, acl(RT.GROUP, GROUP, Op.READ))
    assert (await call(s, ALICE, _join())).error_code == ErrorCode.topic_authorization_failed
    assert not s.consumer_groups.has_group(GROUP)
    await grant(s, acl(RT.TOPIC, TOPIC, Op.DESCRIBE))
    joined = await call(s, ALICE, _join())
    assert joined.error_code == ErrorCode.none and joined.member_epoch == 1


async def test_describe_needs_describe_on_the_group(server: Server) -> None:  # noqa: F811
    s = server.services
    (refused,) = (await call(s, ALICE, _describe())).groups
    assert refused.error_code == ErrorCode.group_authorization_failed
    await grant(s, acl(RT.GROUP, GROUP, Op.READ), acl(RT.TOPIC, TOPIC, Op.DESCRIBE))
    await call(s, ALICE, _join())
    (described,) = (await call(s, ALICE, _describe())).groups  # READ implies DESCRIBE
    assert described.error_code == ErrorCode.none and len(described.members) == 1
    assert described.authorized_operations > 0
