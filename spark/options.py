"""Data source options: Spark's Kafka source names where they mean the same, plus Shoal's own.

Spark hands options as a case-insensitive string map; everything is parsed once here so a wrong
value fails when the query is defined (`load()`), not in the middle of a batch. An option this
source does not know, or knows but cannot honour, is an `OptionError` naming it: a misspelt
`maxOffsetPerTrigger` silently ignored would read everything at once.

`kafka.*` options are settings of Shoal's client (`client/`), as Spark passes them to its Kafka
consumer: `kafka.bootstrap.servers`, `kafka.client.id`, the security settings of
`client.security` (`kafka.security.protocol`, `kafka.sasl.*`, `kafka.ssl.*`), plus
`kafka.group.id` (streams), `kafka.fetch.max.bytes` (batch reads) and `kafka.acks` (writes).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from client.read_committed import LEVELS
from client.read_committed import READ_UNCOMMITTED
from client.security import Security

log = logging.getLogger(__name__)

AT_LEAST_ONCE = "at-least-once"
AT_MOST_ONCE = "at-most-once"
_ACK_MODES = (AT_LEAST_ONCE, AT_MOST_ONCE)
# How a micro-batch's records reach the executors (spark.stream): the driver ships the stored
# batches it acquired, or each task fetches its ranges from the broker. The first is the default.
SHIP = "ship"
FETCH = "fetch"
DATA_PATHS = (SHIP, FETCH)


class OptionError(ValueError):
    """An option that is unknown, unsupported in this mode, or has a wrong value."""


# -- which names each mode takes (lower case: Spark's option map is case-insensitive) ---------

_SECURITY = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.certificate.location",
    "ssl.key.location",
)
_CLIENT = ("bootstrap.servers", "client.id", *_SECURITY)
_SUBSCRIPTION = ("subscribe", "subscribepattern", "assign")
_READ = (*_SUBSCRIPTION, "bootstrap.servers", "includeheaders", "failondataloss")

# Settings of Kafka's clients a job ported from format("kafka") may carry that Shoal's client
# applies (per mode, below), and those that tune a client Shoal's is not (buffers, retries,
# fetch sessions, metadata refresh, metrics): accepted, changing nothing, and said at load.
_KAFKA_READ = ("isolation.level",)  # both levels; a stream's read_committed is its group's
_KAFKA_WRITE = ("acks", "linger.ms", "request.timeout.ms", "compression.type")
_KAFKA_NO_EFFECT = frozenset(
    {
        "allow.auto.create.topics",
        "auto.commit.interval.ms",
        "batch.size",
        "buffer.memory",
        "check.crcs",
        "client.dns.lookup",
        "client.rack",
        "connections.max.idle.ms",
        "default.api.timeout.ms",
        "delivery.timeout.ms",
        "enable.idempotence",
        "exclude.internal.topics",
        "fetch.max.wait.ms",
        "fetch.min.bytes",
        "heartbeat.interval.ms",
        "max.block.ms",
        "max.in.flight.requests.per.connection",
        "max.poll.interval.ms",
        "max.poll.records",
        "max.request.size",
        "metadata.max.age.ms",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "receive.buffer.bytes",
        "reconnect.backoff.max.ms",
        "reconnect.backoff.ms",
        "request.timeout.ms",
        "retries",
        "retry.backoff.max.ms",
        "retry.backoff.ms",
        "send.buffer.bytes",
        "session.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
        "socket.connection.setup.timeout.ms",
    }
)

_STREAM = {
    *_READ,
    "group",
    "group.id",
    "maxrecordspertrigger",
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "maxtriggerdelay",
    "numpartitions",
    "acknowledgementmode",
    "ackdir",
    "polltimeoutms",
    "kafkaconsumer.polltimeoutms",
    "renewintervalms",
    "maxrecordsperbatch",
    "datapath",
    "minpartitions",
    *(f"kafka.{k}" for k in (*_CLIENT, *_KAFKA_READ, "group.id")),
}
_BATCH = {
    *_READ,
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "startingoffsetsbytimestamp",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
    "minpartitions",
    "fetch.max.bytes",
    "numpartitions",
    *(
        f"kafka.{k}"
        for k in (*_CLIENT, *_KAFKA_READ, "fetch.max.bytes", "max.partition.fetch.bytes")
    ),
}
_WRITE = {
    "bootstrap.servers",
    "checkpointlocation",  # writeStream's, which Spark passes on
    "topic",
    "acks",
    "batchrecords",
    *(f"kafka.{k}" for k in (*_CLIENT, *_KAFKA_WRITE)),
}

# Why an option Spark's Kafka source has does not apply here (checked before "unknown").
_NOT_HERE = {
    "startingoffsets": "a share group reads from the group's position, not from offsets: set "
    "the group's share.auto.offset.reset (earliest or latest) or reset its offsets with the "
    "admin API (shoal share-groups reset-offsets)",
    "endingoffsets": "a stream through a share group has no end (use Trigger.AvailableNow to "
    "drain what is there and stop)",
    "startingtimestamp": "a share group reads from the group's position: reset its offsets to a "
    "time with the admin API (shoal share-groups reset-offsets --to-datetime)",
    "startingoffsetsbytimestamp": "a share group reads from the group's position: reset its "
    "offsets to a time with the admin API (shoal share-groups reset-offsets --to-datetime)",
    "groupidprefix": "name the share group with the group option",
    "endingtimestamp": "a stream through a share group has no end (use Trigger.AvailableNow "
    "to drain what is there and stop)",
    "endingoffsetsbytimestamp": "a stream through a share group has no end (use "
    "Trigger.AvailableNow to drain what is there and stop)",
    "startingoffsetsbytimestampstrategy": "a partition with no record at or after the time "
    "reads nothing (Spark's 'latest' strategy); there is no other",
    "maxrecordsperpartition": "use numPartitions (Spark tasks per micro-batch)",
    "fetchoffset.numretries": "offsets are looked up once, by the client, which retries itself",
    "fetchoffset.retryintervalms": "offsets are looked up once, by the client, which retries "
    "itself",
    "kafka.transactional.id": "the writer does not write in transactions: writes are "
    "at-least-once, as Spark's Kafka sink's are",
    "kafka.partitioner.class": "rows go to their partition column, or Kafka's default "
    "partitioner (murmur2 of the key) when it is null",
    "kafka.auto.offset.reset": "set the share group's share.auto.offset.reset instead (streams), "
    "or startingOffsets (batch reads)",
    "kafka.enable.auto.commit": "the source acknowledges records itself",
    "kafka.key.deserializer": "keys are always binary: cast them in Spark",
    "kafka.value.deserializer": "values are always binary: cast them in Spark",
    "kafka.key.serializer": "keys are written as binary: cast them in Spark",
    "kafka.value.serializer": "values are written as binary: cast them in Spark",
    "kafka.interceptor.classes": "Shoal's client has no interceptors",
}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def check_names(options: Mapping[str, str], mode: str) -> None:
    """Refuse an option `mode` ("stream", "batch", "read": either of them, or "write") does not
    take, naming it."""
    allowed = {"stream": _STREAM, "batch": _BATCH, "read": _STREAM | _BATCH, "write": _WRITE}[mode]
    for name in options:
        key = name.lower()
        if key in allowed:
            continue
        if key.startswith("kafka.") and key[6:] in _KAFKA_NO_EFFECT:
            log.info("option %s has no effect on Shoal's client; accepted and ignored", name)
            continue
        if key == "path":  # load(path) / save(path): this source has no path
            raise OptionError("the shoal source takes no path: name topics with subscribe")
        why = _NOT_HERE.get(key)
        if why is None and mode == "batch" and key in ("group", "group.id", "kafka.group.id"):
            why = "a batch read is a plain Fetch: it touches no group"
        if why is None and key.startswith("kafka."):
            why = "it is not a setting of Shoal's client, which takes kafka." + ", kafka.".join(
                sorted(k[6:] for k in allowed if k.startswith("kafka."))
            )
        if why is None:
            names = sorted(_spelling(k) for k in allowed if not k.startswith("kafka."))
            close = difflib.get_close_matches(key, [n.lower() for n in names], 1, 0.8)
            hint = f"did you mean {_spelling(close[0])}? " if close else ""
            why = f"unknown option; {hint}this source takes {', '.join(names)}"
        what = "shoal source" if mode == "read" else f"shoal {mode} source"
        raise OptionError(f"option {name} is not supported by the {what}: {why}")


def include_headers_of(options: Mapping[str, str]) -> bool:
    """`includeHeaders`: whether rows have the `headers` column (default true, unlike Spark's
    Kafka source: Shoal's rows always had it)."""
    return _bool(options, "includeHeaders", True)


def check_at_load(options: Mapping[str, str]) -> None:
    """What `load()` can check before Spark says whether it is a batch or a stream read.

    An option neither mode takes fails here; so do the values of the options given, parsed as
    the mode they belong to (a `group` makes it a stream, a `startingOffsets` a batch read).
    """
    check_names(options, "read")
    keys = {k.lower() for k in options}
    stream_only = sorted(_spelling(k) for k in keys if k in _STREAM and k not in _BATCH)
    batch_only = sorted(_spelling(k) for k in keys if k in _BATCH and k not in _STREAM)
    if stream_only and batch_only:
        why = _NOT_HERE.get(batch_only[0].lower(), "it applies to batch reads only")
        raise OptionError(
            f"options {', '.join(stream_only)} (streams only) and {', '.join(batch_only)} "
            f"(batch reads only) cannot be used together. In a stream, option {batch_only[0]} "
            f"is not supported: {why}"
        )
    if stream_only and _get(options, "group", "kafka.group.id", "group.id") is None:
        raise OptionError(
            f"option {', '.join(stream_only)} is for streams only: a stream (spark.readStream) "
            "reads through a share group and needs option group (the share group); a batch "
            "read (spark.read) takes startingOffsets/endingOffsets instead"
        )
    if stream_only:
        StreamOptions.parse(options)
    elif batch_only:
        BatchOptions.parse(options)
    else:
        Subscription.parse(options)
        Client.parse(options)
        _tasks(options)
        _isolation(options)
        _bool(options, "includeHeaders", True)
        _bool(options, "failOnDataLoss", True)


_SPELLINGS = {
    "subscribepattern": "subscribePattern",
    "includeheaders": "includeHeaders",
    "failondataloss": "failOnDataLoss",
    "maxrecordspertrigger": "maxRecordsPerTrigger",
    "maxoffsetspertrigger": "maxOffsetsPerTrigger",
    "minoffsetspertrigger": "minOffsetsPerTrigger",
    "maxtriggerdelay": "maxTriggerDelay",
    "numpartitions": "numPartitions",
    "datapath": "dataPath",
    "acknowledgementmode": "acknowledgementMode",
    "ackdir": "ackDir",
    "polltimeoutms": "pollTimeoutMs",
    "kafkaconsumer.polltimeoutms": "kafkaConsumer.pollTimeoutMs",
    "renewintervalms": "renewIntervalMs",
    "maxrecordsperbatch": "maxRecordsPerBatch",
    "startingoffsets": "startingOffsets",
    "endingoffsets": "endingOffsets",
    "startingtimestamp": "startingTimestamp",
    "startingoffsetsbytimestamp": "startingOffsetsByTimestamp",
    "endingtimestamp": "endingTimestamp",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
    "minpartitions": "minPartitions",
    "batchrecords": "batchRecords",
}


def _spelling(key: str) -> str:
    return _SPELLINGS.get(key, key)


# -- values ---------------------------------------------------------------------------------


def _get(options: Mapping[str, str], *names: str) -> str | None:
    lowered = _lower(options)
    for n in names:
        v = lowered.get(n.lower())
        if v is not None and v != "":
            return v
    return None


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"


_DURATION = re.compile(r"\s*(\d+)\s*(us|ms|s|sec|m|min|h|d)?\s*", re.IGNORECASE)
_UNIT_MS = {"us": 0.001, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000}
_UNIT_MS |= {"h": 3_600_000, "d": 86_400_000}


def _duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    """A duration as Spark writes them ("15m", "30s", "500ms"; a bare number is ms)."""
    raw = _get(options, name)
    if raw is None:
        return default
    m = _DURATION.fullmatch(raw)
    if m is None:
        raise OptionError(f"option {name} must be a duration (15m, 30s, 500ms), got {raw!r}")
    return int(int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()])


def _json(raw: str, name: str, example: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise OptionError(f"option {name} must be JSON such as {example}, got {raw!r}") from None


def _tasks(options: Mapping[str, str]) -> tuple[int | None, int | None]:
    """`numPartitions` (Spark tasks, exactly) and `minPartitions` (Spark's Kafka source: at
    least that many tasks, Kafka partitions cut in pieces when there are fewer)."""
    tasks = _int(options, "numPartitions", None, 1)
    least = _int(options, "minPartitions", None, 1)
    if tasks is not None and least is not None:
        raise OptionError(
            "options numPartitions (Spark tasks, exactly) and minPartitions (at least that "
            "many) cannot be used together: give one"
        )
    return tasks, least


def _isolation(options: Mapping[str, str]) -> int:
    """`kafka.isolation.level`: read_uncommitted (0, the Kafka consumer's default, which
    Spark's Kafka source keeps) or read_committed (1)."""
    level = _get(options, "kafka.isolation.level")
    if level is None:
        return READ_UNCOMMITTED
    if level.strip().lower() not in LEVELS:
        raise OptionError(
            "option kafka.isolation.level must be read_uncommitted or read_committed, "
            f"got {level!r}"
        )
    return LEVELS[level.strip().lower()]


def _choice(options: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = (_get(options, name) or choices[0]).lower()
    if value not in choices:
        raise OptionError(f"option {name} must be one of {choices}, got {value!r}")
    return value


# -- what every mode shares: the client, and which partitions ------------------------------


def bootstrap_of(options: Mapping[str, str]) -> str:
    bootstrap = _get(options, "kafka.bootstrap.servers", "bootstrap.servers")
    if bootstrap is None:
        raise OptionError("option kafka.bootstrap.servers (or bootstrap.servers) is required")
    return bootstrap


def security_of(options: Mapping[str, str]) -> Security | None:
    """The `kafka.` security settings, None for PLAINTEXT without any of them."""
    lowered = _lower(options)
    props = {k: lowered[f"kafka.{k}"] for k in _SECURITY if f"kafka.{k}" in lowered}
    if not props:
        return None
    try:
        security = Security.from_properties(props)
    except ValueError as e:
        raise OptionError(f"option kafka.{e}") from None
    if security.sasl and not security.username:
        raise OptionError(
            f"option kafka.security.protocol={security.protocol} needs kafka.sasl.username and "
            "kafka.sasl.password (or kafka.sasl.jaas.config)"
        )
    return security


@dataclass(frozen=True)
class Client:
    """How the source's clients reach the broker."""

    bootstrap: str
    security: Security | None = None
    client_id: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Client:
        return cls(bootstrap_of(options), security_of(options), _get(options, "kafka.client.id"))


@dataclass(frozen=True)
class Subscription:
    """Exactly one of `subscribe` (topics), `subscribePattern` (a regex the whole topic name
    matches, as Java's) or `assign` (topic -> partitions)."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Subscription:
        given = [n for n in ("subscribe", "subscribePattern", "assign") if _get(options, n)]
        if len(given) != 1:
            raise OptionError(
                "exactly one of the options subscribe (comma-separated topics), subscribePattern "
                'or assign (JSON such as {"orders": [0, 1]}) is required'
                + (f", got {' and '.join(given)}" if given else "")
            )
        raw = _get(options, given[0]) or ""
        if given[0] == "subscribe":
            topics = tuple(t.strip() for t in raw.split(",") if t.strip())
            if not topics:
                raise OptionError("option subscribe names no topic")
            return cls(topics=topics)
        if given[0] == "subscribePattern":
            try:
                re.compile(raw)
            except re.error as e:
                raise OptionError(f"option subscribePattern is no regex ({e}): {raw!r}") from None
            return cls(pattern=raw)
        parsed = _json(raw, "assign", '{"orders": [0, 1]}')
        ok = isinstance(parsed, dict) and bool(parsed)
        ok = ok and all(
            isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps)
            for ps in parsed.values()
        )
        if not ok:
            raise OptionError(f'option assign must look like {{"orders": [0, 1]}}, got {raw!r}')
        return cls(assign={str(t): tuple(sorted(set(ps))) for t, ps in parsed.items()})

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        if self.assign is not None:
            return topic in self.assign
        return topic in self.topics

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        if self.assign is not None:
            return f"assign {json.dumps({t: list(ps) for t, ps in self.assign.items()})}"
        return f"subscribe {','.join(self.topics)}"


def topics_of(options: Mapping[str, str]) -> tuple[str, ...]:
    """The topics of `subscribe` (the one subscription a share group can have by names)."""
    return Subscription.parse(options).topics


def default_ack_dir(group: str) -> str:
    """Where `shoal_ack` leaves per-batch verdicts for the group's readers on this driver."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", group)
    return os.path.join(tempfile.gettempdir(), "shoal-acks", safe)


# -- the three modes --------------------------------------------------------------------------

_MAX_TRIGGER_DELAY_MS = 15 * 60_000  # Spark's Kafka source default


@dataclass(frozen=True)
class StreamOptions:
    """`spark.readStream.format("shoal")`."""

    bootstrap: str
    topics: tuple[str, ...]
    group: str
    max_records_per_trigger: int | None
    num_partitions: int | None
    ack_mode: str
    ack_dir: str
    poll_timeout_ms: int
    renew_interval_ms: int | None
    max_records_per_batch: int
    pattern: str | None = None
    min_records_per_trigger: int | None = None
    max_trigger_delay_ms: int = _MAX_TRIGGER_DELAY_MS
    include_headers: bool = True
    fail_on_data_loss: bool = True
    security: Security | None = None
    client_id: str = "shoal-spark"
    data_path: str = DATA_PATHS[0]  # ship (the driver's bytes) or fetch
    read_limit_option: str = "maxRecordsPerTrigger"  # the name the user gave the read limit
    min_partitions: int | None = None  # minPartitions: at least this many tasks
    # kafka.isolation.level: read_committed sets the group's share.isolation.level (see
    # spark.group_state.read_committed_group) and ends the latest offsets at the LSO.
    isolation_level: int = READ_UNCOMMITTED

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        check_names(options, "stream")
        group = _get(options, "group", "kafka.group.id", "group.id")
        if group is None:
            raise OptionError("option group (the share group) is required")
        ack_mode = (_get(options, "acknowledgementMode") or AT_LEAST_ONCE).lower()
        if ack_mode not in _ACK_MODES:
            raise OptionError(f"option acknowledgementMode must be one of {_ACK_MODES}")
        sub = Subscription.parse(options)
        if sub.assign is not None:
            raise OptionError(
                "option assign is not supported by the shoal stream source: a share group's "
                "coordinator assigns partitions to its members; use subscribe or subscribePattern"
            )
        most = _int(options, "maxRecordsPerTrigger", None, 1)
        limit_option = "maxRecordsPerTrigger"
        if most is None:
            most = _int(options, "maxOffsetsPerTrigger", None, 1)
            limit_option = "maxOffsetsPerTrigger"
        least = _int(options, "minOffsetsPerTrigger", None, 1)
        if most is not None and least is not None and least > most:
            raise OptionError(
                f"option minOffsetsPerTrigger ({least}) is above maxRecordsPerTrigger "
                f"(or maxOffsetsPerTrigger, {most})"
            )
        if _get(options, "maxTriggerDelay") is not None and least is None:
            raise OptionError("option maxTriggerDelay applies only with minOffsetsPerTrigger")
        client = Client.parse(options)
        isolation = _isolation(options)
        tasks, least_tasks = _tasks(options)
        poll = _int(options, "pollTimeoutMs", None, 0)
        if poll is None:
            poll = _int(options, "kafkaConsumer.pollTimeoutMs", 1000, 0)
        return cls(
            bootstrap=client.bootstrap,
            topics=sub.topics,
            group=group,
            max_records_per_trigger=most,
            num_partitions=tasks,
            ack_mode=ack_mode,
            ack_dir=_get(options, "ackDir") or default_ack_dir(group),
            poll_timeout_ms=poll or 0,
            renew_interval_ms=_int(options, "renewIntervalMs", None, 50),
            max_records_per_batch=_int(options, "maxRecordsPerBatch", 1_000_000, 1) or 1,
            pattern=sub.pattern,
            min_records_per_trigger=least,
            max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", _MAX_TRIGGER_DELAY_MS),
            include_headers=_bool(options, "includeHeaders", True),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            security=client.security,
            client_id=client.client_id or "shoal-spark",
            data_path=_choice(options, "dataPath", DATA_PATHS),
            read_limit_option=limit_option,
            min_partitions=least_tasks,
            isolation_level=isolation,
        )


OffsetBound = str | dict[str, dict[str, int]]


def _offset_bound(raw: str | None, name: str, default: str) -> OffsetBound:
    if raw is None:
        return default
    if raw.strip().lower() in ("earliest", "latest"):
        return raw.strip().lower()
    parsed = _json(raw, name, '{"orders": {"0": 23, "1": -2}}')
    ok = isinstance(parsed, dict) and all(
        isinstance(parts, dict)
        and all(str(p).isdigit() and isinstance(o, int) for p, o in parts.items())
        for parts in parsed.values()
    )
    if not ok:
        raise OptionError(
            f'option {name} must be earliest, latest or JSON such as {{"orders": {{"0": 23}}}} '
            f"(-2 earliest, -1 latest), got {raw!r}"
        )
    return {str(t): {str(int(p)): int(o) for p, o in parts.items()} for t, parts in parsed.items()}


def _by_timestamp(raw: str | None, name: str) -> dict[str, dict[str, int]] | None:
    if raw is None:
        return None
    parsed = _offset_bound(raw, name, "")
    if not isinstance(parsed, dict):
        raise OptionError(
            f'option {name} must be JSON such as {{"orders": {{"0": 1767225600000}}}}'
        )
    return parsed


@dataclass(frozen=True)
class BatchOptions:
    """`spark.read.format("shoal")`: a plain Fetch, no share-group state touched."""

    bootstrap: str
    topics: tuple[str, ...]
    starting: OffsetBound
    ending: OffsetBound
    starting_timestamp: int | None
    max_partition_bytes: int
    subscription: Subscription = field(default_factory=Subscription)
    starting_by_timestamp: dict[str, dict[str, int]] | None = None
    include_headers: bool = True
    fail_on_data_loss: bool = True
    security: Security | None = None
    client_id: str = "shoal-spark-reader"
    num_partitions: int | None = None  # Spark tasks; by default one per Kafka partition
    ending_timestamp: int | None = None
    ending_by_timestamp: dict[str, dict[str, int]] | None = None
    min_partitions: int | None = None  # minPartitions: at least this many tasks
    isolation_level: int = READ_UNCOMMITTED  # kafka.isolation.level

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> BatchOptions:
        check_names(options, "batch")
        sub = Subscription.parse(options)
        client = Client.parse(options)
        isolation = _isolation(options)
        tasks, least_tasks = _tasks(options)
        fetch_bytes = _int(options, "kafka.fetch.max.bytes", None, 1024)
        if fetch_bytes is None:
            fetch_bytes = _int(options, "kafka.max.partition.fetch.bytes", None, 1024)
        return cls(
            bootstrap=client.bootstrap,
            topics=sub.topics,
            starting=_offset_bound(_get(options, "startingOffsets"), "startingOffsets", "earliest"),
            ending=_offset_bound(_get(options, "endingOffsets"), "endingOffsets", "latest"),
            starting_timestamp=_int(options, "startingTimestamp", None, 0),
            max_partition_bytes=fetch_bytes
            or _int(options, "fetch.max.bytes", 8 << 20, 1024)
            or 8 << 20,
            subscription=sub,
            starting_by_timestamp=_by_timestamp(
                _get(options, "startingOffsetsByTimestamp"), "startingOffsetsByTimestamp"
            ),
            include_headers=_bool(options, "includeHeaders", True),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            security=client.security,
            client_id=client.client_id or "shoal-spark-reader",
            num_partitions=tasks,
            ending_timestamp=_int(options, "endingTimestamp", None, 0),
            ending_by_timestamp=_by_timestamp(
                _get(options, "endingOffsetsByTimestamp"), "endingOffsetsByTimestamp"
            ),
            min_partitions=least_tasks,
            isolation_level=isolation,
        )


@dataclass(frozen=True)
class WriteOptions:
    """`df.write.format("shoal")` / `writeStream`."""

    bootstrap: str
    topic: str | None
    acks: int
    batch_records: int
    security: Security | None = None
    client_id: str = "shoal-spark-writer"
    linger_ms: int = 0  # kafka.linger.ms
    request_timeout_ms: int = 30_000  # kafka.request.timeout.ms
    compression: str = "none"  # kafka.compression.type

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        check_names(options, "write")
        acks = (_get(options, "kafka.acks", "acks") or "all").strip().lower()
        if acks not in ("all", "-1", "0", "1"):
            raise OptionError(f"option kafka.acks must be all, -1, 0 or 1, got {acks!r}")
        client = Client.parse(options)
        return cls(
            bootstrap=client.bootstrap,
            topic=_get(options, "topic"),
            acks=-1 if acks == "all" else int(acks),
            batch_records=_int(options, "batchRecords", 5000, 1) or 5000,
            security=client.security,
            client_id=client.client_id or "shoal-spark-writer",
            linger_ms=_int(options, "kafka.linger.ms", 0, 0) or 0,
            request_timeout_ms=_int(options, "kafka.request.timeout.ms", 30_000, 1) or 30_000,
            compression=_compression(options),
        )


_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _compression(options: Mapping[str, str]) -> str:
    codec = (_get(options, "kafka.compression.type") or "none").strip().lower()
    if codec == "producer":  # a topic's setting, not a producer's; none is Kafka's default
        codec = "none"
    if codec not in _CODECS:
        raise OptionError(
            f"option kafka.compression.type must be one of {', '.join(_CODECS)}, got {codec!r}"
        )
    return codec
