"""Old clients get what Kafka 4 gives them (issue 29, item 8).

A 2019 sarama (1.22) sends the versions of the broker it was configured for, without asking
ApiVersions: Metadata v0/v1, OffsetCommit v1 (v2 with a retention time), OffsetFetch v1,
DescribeConfigs v0, FindCoordinator v0, the group APIs v0, Produce v2 and so on. Kafka 4 serves
what KIP-896 kept (each message's `validVersions` in clients/src/main/resources/common/message,
4.0-4.2; `tests/unit/test_registry.py` holds the table) and, for a version it does not serve,
answers nothing: its network thread reads the header first (`Processor.parseRequestHeader`
throws UnsupportedVersionException) and `processChannelException` closes the connection. Only
ApiVersions is answered, in its v0 layout (KIP-511). Raw frames, one `shoal serve` process.
"""

from __future__ import annotations

import datetime
import importlib
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_groups import v0 as describe_groups_v0
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator import v0 as find_coordinator_v0
from kio.schema.heartbeat import v0 as heartbeat_v0
from kio.schema.list_groups import v0 as list_groups_v0
from kio.schema.metadata import v0 as metadata_v0
from kio.schema.metadata import v1 as metadata_v1
from kio.schema.offset_commit import v2 as offset_commit_v2
from kio.schema.offset_fetch import v1 as offset_fetch_v1

from protocol.api_keys import API_VERSIONS
from protocol.framing import frame
from protocol.messages import build
from tests.brokers import BrokerProcess
from tests.integration.test_malformed_input import a_batch
from tests.integration.test_malformed_input import api_versions
from tests.integration.test_malformed_input import call
from tests.integration.test_malformed_input import closed_within
from tests.integration.test_malformed_input import connect
from tests.integration.test_malformed_input import metadata_request
from tests.integration.test_malformed_input import produce_request
from tests.integration.test_malformed_input import read_frame

pytestmark = pytest.mark.integration

TOPIC = "sarama"
GROUP = "sarama-group"


@pytest.fixture(scope="module")
def old_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir: Path = tmp_path_factory.mktemp("old-clients") / "data"
    with BrokerProcess(data_dir) as proc:
        with connect(proc) as sock:  # auto-create the topic, with its one partition
            deadline = time.monotonic() + 10
            while not call(sock, metadata_request(TOPIC)).topics[0].partitions:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        yield proc


def test_metadata_v0_names_the_broker_and_the_topic(old_broker: BrokerProcess) -> None:
    """MetadataRequest.json: v0-13 in Kafka 4 (KIP-896 removed no Metadata version)."""
    with connect(old_broker) as sock:
        one = call(
            sock,
            metadata_v0.MetadataRequest(
                topics=(metadata_v0.request.MetadataRequestTopic(name=TOPIC),)
            ),  # type: ignore[arg-type]
        )
        (broker,) = one.brokers
        assert (broker.host, broker.port) == ("127.0.0.1", old_broker.port)
        (topic,) = one.topics
        assert (topic.error_code, topic.name, len(topic.partitions)) == (ErrorCode.none, TOPIC, 1)
        assert topic.partitions[0].leader_id == broker.node_id
        # In v0 an empty list means every topic (v1+ says that with a null list).
        every = call(sock, metadata_v0.MetadataRequest(topics=()))
        assert TOPIC in {t.name for t in every.topics}
        none = call(sock, metadata_v1.MetadataRequest(topics=()))
        assert none.topics == ()
        assert api_versions(sock).error_code == ErrorCode.none  # the connection goes on


def _commit_v2(offset: int) -> Any:
    return build(
        offset_commit_v2.OffsetCommitRequest,
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time=datetime.timedelta(milliseconds=-1),
        topics=(
            build(
                offset_commit_v2.request.OffsetCommitRequestTopic,
                name=TOPIC,
                partitions=(
                    build(
                        offset_commit_v2.request.OffsetCommitRequestPartition,
                        partition_index=0,
                        committed_offset=offset,
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )


def test_offset_commit_v2_and_offset_fetch_v1_keep_a_simple_consumers_offset(
    old_broker: BrokerProcess,
) -> None:
    """sarama 1.22 commits with v2 when Consumer.Offsets.Retention is set, and reads with
    OffsetFetch v1: both in Kafka 4's ranges (OffsetCommit 2-10, OffsetFetch 1-10)."""
    with connect(old_broker) as sock:
        committed = call(sock, _commit_v2(17))
        assert committed.topics[0].partitions[0].error_code == ErrorCode.none
        fetched = call(
            sock,
            build(
                offset_fetch_v1.OffsetFetchRequest,
                group_id=GROUP,
                topics=(
                    build(
                        offset_fetch_v1.request.OffsetFetchRequestTopic,
                        name=TOPIC,
                        partition_indexes=(0,),
                    ),
                ),
            ),
        )
        part = fetched.topics[0].partitions[0]
        assert (part.error_code, part.committed_offset) == (ErrorCode.none, 17)


GROUP_V0 = {
    "FindCoordinator-v0": build(find_coordinator_v0.FindCoordinatorRequest, key=GROUP),
    "DescribeGroups-v0": build(describe_groups_v0.DescribeGroupsRequest, groups=(GROUP,)),
    "ListGroups-v0": build(list_groups_v0.ListGroupsRequest),
    "Heartbeat-v0": build(
        heartbeat_v0.HeartbeatRequest, group_id=GROUP, generation_id=1, member_id="m"
    ),
}


@pytest.mark.parametrize("request_", GROUP_V0.values(), ids=GROUP_V0.keys())
def test_the_group_apis_at_v0_are_served(old_broker: BrokerProcess, request_: Any) -> None:
    """FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups and
    ListGroups keep v0 in Kafka 4 (KIP-896 removed none of them in the end)."""
    with connect(old_broker) as sock:
        call(sock, request_)  # answered in its own layout, correlation id checked
        assert api_versions(sock).error_code == ErrorCode.none


@pytest.mark.parametrize(
    ("key", "version"),
    [
        pytest.param(8, 1, id="OffsetCommit-v1"),
        pytest.param(8, 0, id="OffsetCommit-v0"),
        pytest.param(32, 0, id="DescribeConfigs-v0"),
        pytest.param(0, 2, id="Produce-v2"),
        pytest.param(0, 0, id="Produce-v0"),
        pytest.param(1, 3, id="Fetch-v3"),
        pytest.param(2, 0, id="ListOffsets-v0"),
        pytest.param(9, 0, id="OffsetFetch-v0"),
        pytest.param(19, 1, id="CreateTopics-v1"),
        pytest.param(20, 0, id="DeleteTopics-v0"),
        pytest.param(29, 0, id="DescribeAcls-v0"),
        pytest.param(30, 0, id="CreateAcls-v0"),
        pytest.param(31, 0, id="DeleteAcls-v0"),
        pytest.param(3, 14, id="Metadata-v14"),
        # Unstable in Kafka 4 (2PC, KIP-939): `isApiEnabled` is false, so InvalidRequestException
        # and the same close. Its layout has a top-level error code: no reason to answer.
        pytest.param(22, 6, id="InitProducerId-v6"),
    ],
)
def test_a_version_kafka_4_does_not_serve_closes_the_connection(
    old_broker: BrokerProcess, key: int, version: int
) -> None:
    """No answer in any layout, as Kafka 4's Processor/processChannelException: an
    OffsetCommit v1 from sarama 1.22 meets a closed connection there too. Produce v0 is
    listed in ApiVersions (KAFKA-18659) and still refused. The broker goes on serving."""
    with connect(old_broker) as sock:
        # A v0/v1 header (client id "sarama") and a body that is never read.
        sock.sendall(frame(struct.pack(">hhih", key, version, 99, 6) + b"sarama" + b"\x00" * 24))
        assert closed_within(sock), f"api key {key} v{version}: answered instead of closed"
    with connect(old_broker) as sock:
        assert call(sock, metadata_request(TOPIC)).topics[0].error_code == ErrorCode.none


def test_api_versions_lists_produce_from_v0_and_the_rest_as_served(
    old_broker: BrokerProcess,
) -> None:
    """A client that asks ApiVersions first (KIP-35) learns what is served; Produce is listed
    from v0 as Kafka 4 lists it (ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION)."""
    with connect(old_broker) as sock:
        # ApiVersions v0, as a 2017 client sends it: a v1 header and an empty body.
        sock.sendall(frame(struct.pack(">hhih", API_VERSIONS, 0, 5, 6) + b"sarama"))
        response = read_frame(sock)
        assert response is not None
        correlation, error, count = struct.unpack_from(">ihi", response)
        assert (correlation, error) == (5, 0)
        entries = (struct.unpack_from(">hhh", response, 10 + 6 * i) for i in range(count))
        keys = {k: (low, high) for k, low, high in entries}
        assert keys[0][0] == 0 and keys[3] == (0, 13) and keys[8][0] == 2 and keys[32][0] == 1


def test_kafka_python_pinned_to_a_0_9_broker_reads_metadata(old_broker: BrokerProcess) -> None:
    """kafka-python with api_version=(0, 9) sends no ApiVersions and asks Metadata v0 (its
    BROKER_API_VERSIONS table for 0.9): Kafka 4 answers that, and so does Shoal now."""
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{old_broker.port}",
        api_version=(0, 9),
        request_timeout_ms=5000,
        metadata_max_age_ms=5000,
    )
    try:
        assert TOPIC in consumer.topics()
        assert consumer.partitions_for_topic(TOPIC) == {0}
    finally:
        consumer.close()


def _list_offsets(sock: Any, version: int, timestamp: int, topic: str) -> tuple[int, int, int]:
    """(error code, timestamp, offset) of partition 0 for one ListOffsets request."""
    m = importlib.import_module(f"kio.schema.list_offsets.v{version}")
    partition = build(m.request.ListOffsetsPartition, partition_index=0, timestamp=timestamp)
    body = build(
        m.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=0,
        topics=(build(m.request.ListOffsetsTopic, name=topic, partitions=(partition,)),),
        timeout=datetime.timedelta(seconds=5),
    )
    (answer,) = call(sock, body).topics[0].partitions
    return int(answer.error_code), int(answer.timestamp), int(answer.offset)


def test_list_offsets_special_timestamps_as_kafka_4_answers_them(
    old_broker: BrokerProcess,
) -> None:
    """ReplicaManager's `timestampMinSupportedVersion`: -1/-2 from v1, -3 (max timestamp) from
    v7, -4 (earliest local) from v8, -5 (latest tiered) from v9, -6 from v11; asked earlier, or
    unknown, the partition gets UNSUPPORTED_VERSION. A log without remote storage answers -4
    with its start and -5 with -1 (UnifiedLog `fetchOffsetByTimestamp`)."""
    with connect(old_broker) as sock:
        call(sock, produce_request(a_batch(3), topic=TOPIC))
        end = _list_offsets(sock, 10, -1, TOPIC)[2]
        assert end >= 3
        unsupported = int(ErrorCode.unsupported_version)
        assert _list_offsets(sock, 8, -4, TOPIC) == (0, -1, 0)  # the log start, not its end
        assert _list_offsets(sock, 9, -5, TOPIC) == (0, -1, -1)
        assert _list_offsets(sock, 10, -5, TOPIC) == (0, -1, -1)
        assert _list_offsets(sock, 10, -2, TOPIC) == (0, -1, 0)
        assert _list_offsets(sock, 8, -5, TOPIC) == (unsupported, -1, -1)
        assert _list_offsets(sock, 6, -3, TOPIC) == (unsupported, -1, -1)
        assert _list_offsets(sock, 10, -6, TOPIC) == (unsupported, -1, -1)
        assert _list_offsets(sock, 10, -7, TOPIC) == (unsupported, -1, -1)


def test_the_newest_metadata_and_describe_cluster_are_served(old_broker: BrokerProcess) -> None:
    """Metadata v13 (a top-level error code, KIP-1102) and DescribeCluster v2 (fenced brokers,
    KIP-1073) are in Kafka 4's ranges: answered, with no error and an unfenced broker."""
    metadata_v13 = importlib.import_module("kio.schema.metadata.v13")
    describe_v2 = importlib.import_module("kio.schema.describe_cluster.v2")
    with connect(old_broker) as sock:
        md = call(
            sock,
            build(
                metadata_v13.MetadataRequest,
                topics=(build(metadata_v13.request.MetadataRequestTopic, name=TOPIC),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
        assert md.error_code == ErrorCode.none and md.topics[0].name == TOPIC
        cluster = call(
            sock,
            build(
                describe_v2.DescribeClusterRequest,
                include_cluster_authorized_operations=False,
                endpoint_type=1,
                include_fenced_brokers=True,
            ),
        )
        assert cluster.error_code == ErrorCode.none
        assert [b.is_fenced for b in cluster.brokers] == [False]
