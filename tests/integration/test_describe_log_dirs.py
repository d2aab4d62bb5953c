"""DescribeLogDirs (35) with real clients: kafka-python's `KafkaAdminClient.describe_log_dirs`,
Shoal's own client (`client.log_dirs`, what `shoal migrate --dry-run` asks), and every version
on the wire. confluent-kafka 2.16 has no describeLogDirs.

Kafka's answers, as this broker must give them:
- `ReplicaManager.describeLogDirs` (core/src/main/scala/kafka/server/ReplicaManager.scala): one
  result per log dir, named by its absolute path; `partition_size` is the log's size (its
  segments' bytes, `UnifiedLog.size`); only partitions asked for and present are listed, and a
  topic none of whose partitions is left is dropped (`filterNot(_.partitions().isEmpty)`); v4's
  total and usable bytes are the volume's (`FileStore.getTotalSpace`/`getUsableSpace`, KIP-827).
- `KafkaApis.handleDescribeLogDirsRequest`: null topics ask for every log
  (`DescribeLogDirsRequest.isAllTopicPartitions`), named ones form a set (each once); without
  DESCRIBE on CLUSTER there is no result, and from v3 (KIP-784) CLUSTER_AUTHORIZATION_FAILED.
- DescribeLogDirsRequest.json of Kafka 4.2: versions 1-5 (v0 removed by KIP-896); v5 adds
  IsCordoned (KIP-1066).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kio.schema.errors import ErrorCode

from broker.handlers import HANDLERS
from broker.registry import Registry
from client import Admin
from client.connection import Connection
from client.errors import KafkaError
from client.log_dirs import describe_log_dirs
from client.log_dirs import partition_sizes
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType
from protocol.messages import build
from protocol.messages import request_type
from tests.brokers import BrokerProcess
from tests.brokers import closed_wide_topic
from tests.brokers import count_opened_per_turn
from tests.brokers import make_server
from tests.compat.support import QUIET
from tests.compat.support import create_topic
from tests.compat.support import start_broker
from tests.integration.test_cli import shoal_all

pytestmark = pytest.mark.integration
TOPIC, PARTITIONS, RECORDS = "sized", 3, 600
ROOT = Path(__file__).parents[2]


def on_disk(data: Path, topic: str, partition: int) -> int:
    """The bytes of a partition's segment files, as the file system counts them."""
    return sum(f.stat().st_size for f in (data / f"{topic}-{partition}").glob("*.log"))


@pytest.fixture(scope="module")
def segmented(module_broker_process: BrokerProcess) -> BrokerProcess:
    """The module's broker with a topic of three partitions of several segments each, with
    more records on some."""
    proc = module_broker_process
    create_topic(proc.bootstrap, TOPIC, PARTITIONS)
    asyncio.run(_small_segments(proc.bootstrap))
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 5, **QUIET})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"v%d" % i * 20, partition=i % PARTITIONS * (i % 2))
        if i % 50 == 0:
            producer.flush(10)  # many small batches: several segments
    assert producer.flush(30) == 0
    return proc


async def _small_segments(bootstrap: str) -> None:
    from client import ConfigResourceType

    async with Admin(bootstrap) as admin:
        await admin.incremental_alter_configs(
            ConfigResourceType.TOPIC, TOPIC, {"segment.bytes": "4096"}
        )


def test_kafka_python_describes_every_partition_with_its_bytes_on_disk(
    segmented: BrokerProcess,
) -> None:
    data = segmented.data_dir
    assert len(list((data / f"{TOPIC}-0").glob("*.log"))) > 2  # several segments
    admin = KafkaAdminClient(bootstrap_servers=segmented.bootstrap)
    try:
        (answer,) = admin.describe_log_dirs()
        named = admin.describe_log_dirs({TOPIC: [2, 9], "no-such-topic": [0]})
    finally:
        admin.close()
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == os.path.abspath(data)
    (topic,) = [t for t in log_dir["topics"] if t["name"] == TOPIC]
    described = {p["partition_index"]: p for p in topic["partitions"]}
    assert {p: d["partition_size"] for p, d in described.items()} == {
        p: on_disk(data, TOPIC, p) for p in range(PARTITIONS)
    }
    assert described[0]["partition_size"] > described[1]["partition_size"] > 0
    assert {(d["offset_lag"], d["is_future_key"]) for d in described.values()} == {(0, False)}
    volume = os.statvfs(data)
    assert log_dir["total_bytes"] == volume.f_blocks * volume.f_frsize
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    # Named: what exists of it, nothing of an unknown topic or partition.
    (only,) = named[0]["log_dirs"][0]["topics"]
    assert only["name"] == TOPIC
    assert [p["partition_index"] for p in only["partitions"]] == [2]


async def _raw(bootstrap: str, version: int, topics: Any) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    conn = await Connection.open(host, int(port))
    try:
        m = request_type(35, version)
        module = __import__(m.__module__, fromlist=["DescribableLogDirTopic"])
        named = None if topics is None else tuple(
            build(module.DescribableLogDirTopic, topic=t, partitions=tuple(ps)) for t, ps in topics
        )  # fmt: skip
        return await conn.request(build(m, topics=named))
    finally:
        await conn.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_every_version_answers_as_its_schema_says(segmented: BrokerProcess, version: int) -> None:
    every = asyncio.run(_raw(segmented.bootstrap, version, None))
    (result,) = every.results
    assert result.error_code == ErrorCode.none
    assert TOPIC in {t.name for t in result.topics}
    assert hasattr(every, "error_code") == (version >= 3)
    if version >= 3:
        assert every.error_code == ErrorCode.none
    assert hasattr(result, "total_bytes") == (version >= 4)
    if version >= 4:
        assert 0 < result.usable_bytes <= result.total_bytes
    if version >= 5:
        assert result.is_cordoned is False
    # An empty list asks for no partition: the log dir alone.
    (none,) = asyncio.run(_raw(segmented.bootstrap, version, [])).results
    assert (none.log_dir, none.topics) == (result.log_dir, ())
    # A topic named twice and a partition named twice: each described once.
    twice = asyncio.run(_raw(segmented.bootstrap, version, [(TOPIC, [1, 1, -1]), (TOPIC, [0, 1])]))
    (topic,) = twice.results[0].topics
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1]


def test_shoal_client_sizes_match_the_files(segmented: BrokerProcess) -> None:
    async def sizes() -> dict[tuple[str, int], int]:
        async with Admin(segmented.bootstrap) as admin:
            return partition_sizes(await describe_log_dirs(admin.cluster, {TOPIC: range(5)}))

    assert asyncio.run(sizes()) == {
        (TOPIC, p): on_disk(segmented.data_dir, TOPIC, p) for p in range(PARTITIONS)
    }


def test_shoal_log_dirs_describe_prints_what_kafka_log_dirs_prints(
    segmented: BrokerProcess,
) -> None:
    """tools/src/main/java/org/apache/kafka/tools/LogDirsCommand.java: two lines, then the
    JSON of every broker's log dirs, partitions named `topic-P`, filtered by --topic-list; a
    broker not in the cluster is an error."""
    kafka_style, as_json, missing = shoal_all(
        ("log-dirs", "--describe"),
        ("log-dirs", "describe", "--topic-list", f"{TOPIC},other", "--json"),
        ("log-dirs", "describe", "--broker-list", "1,7"),
        bootstrap=segmented.bootstrap,
    )
    code, out, err = kafka_style
    assert code == 0, err
    querying, received, line = out.splitlines()
    assert querying == "Querying brokers for log directories information"
    assert received == "Received log directory information from brokers 1"
    document = json.loads(line)
    assert document["version"] == 1
    ((log_dir,),) = [b["logDirs"] for b in document["brokers"] if b["broker"] == 1]
    assert (log_dir["logDir"], log_dir["error"]) == (os.path.abspath(segmented.data_dir), None)
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    for p in range(PARTITIONS):
        assert sizes[f"{TOPIC}-{p}"] == on_disk(segmented.data_dir, TOPIC, p)
    code, out, err = as_json
    assert code == 0, err
    (b,) = json.loads(out)["brokers"]
    assert {p["partition"] for p in b["logDirs"][0]["partitions"]} == {
        f"{TOPIC}-{p}" for p in range(PARTITIONS)
    }
    code, out, err = missing
    assert code == 1 and "The given brokers do not exist from --broker-list: 7" in err


def _deny_describe_on_the_cluster(bootstrap: str) -> None:
    deny = AclBinding(
        ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
        AccessControlEntry("User:ANONYMOUS", "*", AclOperation.DESCRIBE, AclPermissionType.DENY),
    )

    async def go() -> None:
        async with Admin(bootstrap) as admin:
            await admin.create_acls([deny])

    asyncio.run(go())


def test_refused_without_describe_on_the_cluster(tmp_path: Path) -> None:
    """Every client is allowed what no ACL covers; a DENY of DESCRIBE on the cluster refuses
    DescribeLogDirs whatever the topic ACLs say."""
    config = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    proc = start_broker(tmp_path / "data", config)
    try:
        create_topic(proc.bootstrap, TOPIC, 1)
        _deny_describe_on_the_cluster(proc.bootstrap)
        admin = KafkaAdminClient(bootstrap_servers=proc.bootstrap)
        try:
            assert admin.describe_log_dirs()[0]["log_dirs"] == []
        finally:
            admin.close()
        for version in (1, 2, 3, 4, 5):
            answer = asyncio.run(_raw(proc.bootstrap, version, None))
            assert answer.results == ()
            if version >= 3:
                assert answer.error_code == ErrorCode.cluster_authorization_failed

        async def ours() -> None:
            async with Admin(proc.bootstrap) as admin:
                with pytest.raises(KafkaError) as refused:
                    await describe_log_dirs(admin.cluster)
                assert refused.value.error_code == ErrorCode.cluster_authorization_failed

        asyncio.run(ours())
        # `shoal migrate --dry-run` from it: the counts, and the sizes said to be unknown.
        dry = shoal_dry_run(proc.bootstrap)
        assert "1 partition, up to 0 records, size unknown" in dry
        assert "sizes unknown: the source refused DescribeLogDirs" in dry
        assert "cluster_authorization_failed" in dry
    finally:
        proc.stop()


def shoal_dry_run(source: str) -> str:
    """`shoal migrate --dry-run` from `source` (to itself: a dry run writes nothing)."""
    done = subprocess.run(
        [sys.executable, "-m", "cli", "migrate", "--from", source, "--to", source, "--dry-run"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


async def test_a_dry_run_from_a_broker_without_describe_log_dirs_gives_counts(
    tmp_path: Path,
) -> None:
    """An older Shoal serves no DescribeLogDirs: a broker built without its handler."""
    server = make_server(tmp_path / "data")
    server.services.registry = Registry(h for h in HANDLERS if h.api_key != 35)
    await server.start()
    try:
        bootstrap = f"127.0.0.1:{server.port}"
        async with Admin(bootstrap) as admin:
            await admin.create_topic(TOPIC, 2)
        dry = await asyncio.to_thread(shoal_dry_run, bootstrap)
    finally:
        await server.stop()
    assert "2 partitions, up to 0 records, size unknown" in dry
    assert "sizes unknown: the source does not serve DescribeLogDirs" in dry


WIDE, TS = 1000, 1_700_000_000_000


async def test_logs_not_open_yet_are_opened_a_slice_at_a_time(tmp_path: Path) -> None:
    """The broker listens before its logs are open; DescribeLogDirs of every partition then
    opens each not yet open when its turn comes, a slice at a time, and sizes it right."""
    data = tmp_path / "data"
    closed_wide_topic(data, "wide", WIDE, TS)
    server = make_server(data)
    await server.start()
    turns: list[int] = []  # logs opened in each turn of the loop
    counting = asyncio.create_task(count_opened_per_turn(server, turns))
    try:
        assert server.services.logs.loading
        async with Admin(f"127.0.0.1:{server.port}") as admin:
            described = await describe_log_dirs(admin.cluster)
        await counting
        sizes = partition_sizes(described)
        assert {p: sizes[("wide", p)] for p in range(WIDE)} == {
            p: on_disk(data, "wide", p) for p in range(WIDE)
        }
        assert max(turns) < WIDE // 4, sorted(turns)[-5:]
    finally:
        counting.cancel()
        await server.stop()
