"""The Spark source's options: Spark's Kafka names, and a named error for anything else."""

from __future__ import annotations

import pytest

from client.security import Security
from spark.options import BatchOptions
from spark.options import OptionError
from spark.options import StreamOptions
from spark.options import Subscription
from spark.options import WriteOptions
from spark.options import check_at_load

BASE = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "orders"}
STREAM = {**BASE, "group": "g"}


def lower(options: dict[str, str]) -> dict[str, str]:
    """As Spark hands them to a Python data source (CaseInsensitiveDict lower-cases keys)."""
    return {k.lower(): v for k, v in options.items()}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({**STREAM, "maxOffsetPerTrigger": "10"}, "did you mean maxOffsetsPerTrigger"),
        ({**STREAM, "startingOffsets": "earliest"}, "share.auto.offset.reset"),
        ({**STREAM, "endingOffsets": "latest"}, "Trigger.AvailableNow"),
        ({**STREAM, "kafka.auto.offset.reset": "earliest"}, "share.auto.offset.reset"),
        ({**STREAM, "kafka.colour": "blue"}, "not a setting of Shoal's client"),
        ({**STREAM, "kafka.transactional.id": "t"}, "the writer does not write in transactions"),
        ({**STREAM, "kafka.isolation.level": "dirty"}, "read_uncommitted or read_committed"),
        ({**STREAM, "endingTimestamp": "5"}, "has no end"),
        ({**STREAM, "assign": '{"orders": [0]}'}, "exactly one of"),
        ({**STREAM, "subscribe": "", "assign": '{"orders": [0]}'}, "coordinator assigns"),
        ({**STREAM, "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "above"),
        ({**STREAM, "maxTriggerDelay": "1m"}, "only with minOffsetsPerTrigger"),
        ({**STREAM, "minOffsetsPerTrigger": "9", "maxTriggerDelay": "soon"}, "a duration"),
        ({**STREAM, "includeHeaders": "yes"}, "true or false"),
        ({**STREAM, "kafka.security.protocol": "SASL_SSL"}, "kafka.sasl.username"),
        ({**STREAM, "kafka.security.protocol": "KERBEROS"}, "kafka.security.protocol"),
    ],
)
def test_a_stream_option_it_cannot_honour_is_an_error_naming_it(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(OptionError, match=message) as e:
        StreamOptions.parse(lower(options))
    bad = set(options) - set(STREAM) or {"subscribe"}
    assert any(name.lower() in str(e.value).lower() for name in bad), str(e.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({**BASE, "group": "g", "startingOffsets": "earliest"}, "cannot be used together"),
        ({**BASE, "startingOffsets": "{oops"}, "startingOffsets must be JSON"),
        ({**BASE, "startingOffsets": '{"orders": {"x": 1}}'}, "startingOffsets must be"),
        ({**BASE, "startingOffsetsByTimestamp": "earliest"}, "startingOffsetsByTimestamp"),
        ({**BASE, "failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
        ({**BASE, "subscribe": "", "subscribePattern": "(orders"}, "subscribePattern is no regex"),
        ({**BASE, "subscribe": "", "assign": '{"orders": 0}'}, "assign must look like"),
        ({**BASE, "subscribePattern": "o.*"}, "exactly one of"),
        ({"subscribe": "orders"}, "kafka.bootstrap.servers"),
        ({**BASE, "colour": "blue"}, "colour is not supported"),
        ({**BASE, "path": "/x"}, "takes no path"),
        ({**BASE, "endingTimestamp": "soon"}, "endingTimestamp must be an integer"),
        ({**BASE, "minPartitions": "5", "numPartitions": "2"}, "cannot be used together"),
        ({**BASE, "maxOffsetsPerTrigger": "5"}, "maxOffsetsPerTrigger is for streams only"),
    ],
)
def test_load_checks_what_it_can_before_knowing_the_mode(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(OptionError, match=message):
        check_at_load(lower(options))


def test_spark_kafka_names_parse() -> None:
    s = StreamOptions.parse(
        lower(
            {
                **STREAM,
                "maxOffsetsPerTrigger": "500",
                "minOffsetsPerTrigger": "100",
                "maxTriggerDelay": "30s",
                "includeHeaders": "false",
                "failOnDataLoss": "false",
                "kafkaConsumer.pollTimeoutMs": "250",
                "kafka.client.id": "etl",
            }
        )
    )
    assert (s.max_records_per_trigger, s.min_records_per_trigger) == (500, 100)
    assert s.max_trigger_delay_ms == 30_000
    assert (s.include_headers, s.fail_on_data_loss, s.poll_timeout_ms) == (False, False, 250)
    assert (s.client_id, s.security) == ("etl", None)
    assert StreamOptions.parse(lower(STREAM)).max_trigger_delay_ms == 15 * 60_000  # Spark's
    assert StreamOptions.parse(lower(STREAM)).isolation_level == 0  # read_uncommitted, Kafka's
    committed = lower({**STREAM, "kafka.isolation.level": "READ_COMMITTED"})
    assert StreamOptions.parse(committed).isolation_level == 1  # the group's is set at start
    check_at_load(lower({**STREAM, "minOffsetsPerTrigger": "100"}))

    pattern = StreamOptions.parse(lower({**STREAM, "subscribe": "", "subscribePattern": "o.*"}))
    assert (pattern.pattern, pattern.topics) == ("o.*", ())

    b = BatchOptions.parse(
        lower(
            {
                **BASE,
                "subscribe": "",
                "assign": '{"orders": [2, 0, 2], "refunds": [1]}',
                "startingOffsetsByTimestamp": '{"orders": {"0": 5, "2": 6}, "refunds": {"1": 7}}',
                "kafka.fetch.max.bytes": "65536",
            }
        )
    )
    assert b.subscription.assign == {"orders": (0, 2), "refunds": (1,)}
    assert b.starting_by_timestamp == {"orders": {"0": 5, "2": 6}, "refunds": {"1": 7}}
    assert b.max_partition_bytes == 65536
    assert b.include_headers and b.fail_on_data_loss  # defaults
    with pytest.raises(OptionError, match=r"kafka.group.id is not supported .* touches no group"):
        BatchOptions.parse(lower({**BASE, "kafka.group.id": "g"}))


def test_subscribe_pattern_matches_the_whole_name_as_java_does() -> None:
    sub = Subscription(pattern="ord.rs")
    assert sub.matches("orders") and not sub.matches("orders-eu") and not sub.matches("xorders")


def test_security_settings_reach_the_client() -> None:
    options = {
        **STREAM,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": 'ScramLoginModule required username="alice" password="pw";',
        "kafka.ssl.ca.location": "/ca.pem",
    }
    expected = Security("SASL_SSL", "SCRAM-SHA-256", "alice", "pw", ca_file="/ca.pem")
    assert StreamOptions.parse(lower(options)).security == expected
    batch = {k: v for k, v in options.items() if k != "group"}
    assert BatchOptions.parse(lower(batch)).security == expected
    write = {**batch, "topic": "t"}
    del write["subscribe"]
    assert WriteOptions.parse(lower(write)).security == expected


def test_write_options() -> None:
    w = WriteOptions.parse(lower({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1"}))
    assert (w.acks, w.topic) == (1, None)
    with pytest.raises(OptionError, match=r"kafka\.acks"):
        WriteOptions.parse(lower({"kafka.bootstrap.servers": "h:1", "kafka.acks": "some"}))
    with pytest.raises(OptionError, match="option subscribe is not supported"):
        WriteOptions.parse(lower({"kafka.bootstrap.servers": "h:1", "subscribe": "t"}))
    WriteOptions.parse(lower({"kafka.bootstrap.servers": "h:1", "checkpointLocation": "/c"}))
