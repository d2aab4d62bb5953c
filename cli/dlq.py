"""`shoal dlq redrive`: send a share group's dead letters back to their source topics.

Over the Kafka protocol only, so it works against Apache Kafka 4.4's KIP-1191 dead-letter
topics as against Shoal's (same headers: `cli/dlq_letters.py`). confluent-kafka (librdkafka)
does the moving, as for `shoal migrate`: a consumer in a consumer group (KIP-848) reads the
dead-letter topic, an idempotent producer (acks=all) writes each letter's key, value and
non-`__dlq.` headers to its source topic with `shoal.redrive.count` one higher.

Progress is the group's committed offsets on the dead-letter topic, committed after each
batch only up to the first letter the source topic did not acknowledge: a second run redrives
nothing twice, and a run stopped midway (a crash, a failure) sends again at most the letters
after its last commit. Letters with nothing to send (no key and value: the group copied them
with `errors.deadletterqueue.copy.record.enable=false`; or no source topic) are counted,
listed, and committed past: a group's offset is one position per partition, so not committing
past them would re-send every letter after them on every run, and what they lack never
arrives later.

The partition is chosen from the key as Kafka's producers choose it (murmur2), not taken from
`__dlq.errors.partition`: the source topic may have gained partitions since, and a key's
newer records then go where the key hashes now; a redriven record belongs with them.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from typing import Any

from cli.common import KAFKA_ERROR
from cli.common import OK
from cli.common import UNREACHABLE
from cli.common import USAGE
from cli.common import NotFound
from cli.common import UsageError
from cli.common import add_common
from cli.common import fail
from cli.common import print_json
from cli.common import print_table
from cli.common import security
from cli.dlq_letters import NO_TOPIC
from cli.dlq_letters import Letter
from cli.dlq_letters import Tally
from cli.dlq_letters import read_letter
from client.security import Security

BATCH = 500  # letters per batch: one flush and one commit each
HELP = """\
Reads DLQ_TOPIC in the consumer group GROUP (default shoal-dlq-redrive-DLQ_TOPIC) and
produces each dead letter's key, value and headers (minus __dlq.*) to the topic named by its
__dlq.errors.topic header, partitioned by key as a producer would, with the header
shoal.redrive.count incremented (1 if absent). The producer is idempotent with acks=all.

Progress is committed after each batch, only up to the first letter the source topic did not
acknowledge: a second run redrives nothing twice; a run that crashes or fails midway sends
again at most the letters after its last commit (at-least-once). Letters copied without key
and value (errors.deadletterqueue.copy.record.enable=false) cannot be redriven: they are
counted, listed on stderr, and committed past. A source topic that does not exist stops the
run at it (nothing is created; --dry-run lists it and goes on). Exit 0 when every letter
read was handled, 1 on a failure, 3 when the brokers cannot be reached.

Needs confluent-kafka (pip install 'shoal[dlq]'; `make install` has it).
"""


# librdkafka's own log lines (a refused connection, each retry) would bury the one line the tool
# prints about what failed; what matters reaches it as an error or a delivery report anyway.
_LIBRDKAFKA_LOG = logging.getLogger("shoal.dlq.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
_LIBRDKAFKA_LOG.propagate = False


class Unreachable(Exception):
    """The brokers cannot be reached; exit code 3."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dlq", help="dead-letter topics: redrive records to their source")
    actions = p.add_subparsers(dest="action", required=True)
    r = actions.add_parser(
        "redrive",
        help="send dead letters back to their source topics",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(r)
    r.add_argument("--dlq-topic", required=True, help="the dead-letter topic to read")
    r.add_argument(
        "--group", help="the consumer group keeping progress (default shoal-dlq-redrive-DLQ_TOPIC)"
    )
    r.add_argument(
        "--max-records",
        type=_positive(int),
        metavar="N",
        help="stop after N dead letters (the rest wait for the next run)",
    )
    r.add_argument("--rate", type=_positive(float), metavar="R", help="at most R records/s")
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="count what would be redriven per source topic; write and commit "
        "nothing (the group is not joined)",
    )
    r.set_defaults(func=_run)


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    return parse


def _run(args: argparse.Namespace) -> int:
    try:
        ck = _client_libs()
        base = librdkafka_config(security(args), args.bootstrap_server)
        return _redrive(ck, base, args)
    except UsageError as e:
        return fail(str(e), USAGE, args)
    except NotFound as e:
        return fail(str(e), KAFKA_ERROR, args)
    except Unreachable as e:
        return fail(str(e), UNREACHABLE, args)
    except Failed as e:
        return fail(str(e), KAFKA_ERROR, args)


def _client_libs() -> Any:
    try:
        import confluent_kafka
    except ImportError:  # an optional dependency
        raise UsageError("shoal dlq needs confluent-kafka: pip install 'shoal[dlq]'") from None
    return confluent_kafka


def librdkafka_config(sec: Security | None, bootstrap: str) -> dict[str, Any]:
    """`--command-config` (Kafka's names, as every `shoal` tool reads them) in librdkafka's."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": "shoal-dlq-redrive",
        "logger": _LIBRDKAFKA_LOG,
    }
    if sec is None:
        return conf
    conf["security.protocol"] = sec.protocol
    if sec.sasl:
        conf.update(
            {
                "sasl.mechanism": sec.mechanism,
                "sasl.username": sec.username,
                "sasl.password": sec.password,
            }
        )
    for name, value in (
        ("ssl.ca.location", sec.ca_file),
        ("ssl.certificate.location", sec.cert_file),
        ("ssl.key.location", sec.key_file),
    ):
        if sec.tls and value:
            conf[name] = value
    return conf


class Failed(Exception):
    """The run stopped: progress is committed up to the failure; exit code 1."""


@dataclass
class _Batch:
    """One batch's letters: how far each dead-letter partition got, and where it failed."""

    end: dict[int, int] = field(default_factory=dict)  # partition -> offset after the last read
    failed_at: dict[int, int] = field(default_factory=dict)  # partition -> first failed offset
    errors: list[str] = field(default_factory=list)

    def fail(self, partition: int, offset: int, error: str) -> None:
        self.failed_at[partition] = min(self.failed_at.get(partition, offset), offset)
        self.errors.append(error)

    def commit_offsets(self) -> dict[int, int]:
        return {p: self.failed_at.get(p, end) for p, end in self.end.items()}


class Redrive:
    """The read-produce-commit loop over librdkafka's consumer and producer."""

    def __init__(self, ck: Any, base: dict[str, Any], args: argparse.Namespace) -> None:
        self.ck = ck
        self.args = args
        self.dlq: str = args.dlq_topic
        self.group: str = args.group or f"shoal-dlq-redrive-{self.dlq}"
        self.timeout_s: float = args.command_timeout
        self.tally = Tally()
        self.read = 0
        self.topics: set[str] = set()
        self.next_send = 0.0  # when the next record may go (--rate): evenly spaced, no burst
        self.refused: list[Any] = []  # authentication errors librdkafka reported
        self.consumer = ck.Consumer(
            {
                **base,
                "error_cb": self._on_error,
                "group.id": self.group,
                "group.protocol": "consumer",  # KIP-848: joins at once, no rebalance delay
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",  # a new group starts at the first dead letter
                "enable.partition.eof": True,  # how the run knows it has read everything
                "isolation.level": "read_committed",
            }
        )
        producer = {
            **base,
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",  # Java's default: keys land where Kafka's put them
            "linger.ms": 5,
            "message.timeout.ms": int(self.timeout_s * 1000),
        }
        self.producer = None if args.dry_run else ck.Producer(producer)

    def close(self) -> None:
        try:
            if self.producer is not None:
                self.producer.flush(self.timeout_s)
        finally:
            self.consumer.close()  # leaves the group; nothing is committed on the way out

    def start(self) -> None:
        """Check the topic and take its partitions: a dry run assigns them all at the group's
        committed offsets (reading them joins nothing), a run subscribes in the group."""
        partitions = self._metadata().get(self.dlq)
        if partitions is None:
            raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: topic {self.dlq!r} does not exist")
        if self.args.dry_run:
            tps = [self.ck.TopicPartition(self.dlq, p, self.ck.OFFSET_STORED) for p in partitions]
            self.consumer.assign(tps)
        else:
            self.consumer.subscribe([self.dlq])

    def _on_error(self, err: Any) -> None:
        if err.code() in (self.ck.KafkaError._AUTHENTICATION, self.ck.KafkaError._SSL):
            self.refused.append(err)

    def _metadata(self) -> dict[str, list[int]]:
        try:
            md = self.consumer.list_topics(timeout=self.timeout_s)
        except self.ck.KafkaException as e:
            err = e.args[0]
            self.consumer.poll(0)  # serves error_cb: a refused login looks like no broker
            if self.refused:
                name = "SASL_AUTHENTICATION_FAILED"
                if self.refused[0].code() == self.ck.KafkaError._SSL:
                    name = "SSL_HANDSHAKE_FAILED"
                raise Failed(f"{name}: {self.refused[0].str()}") from None
            unreachable = (
                self.ck.KafkaError._TRANSPORT,
                self.ck.KafkaError._TIMED_OUT,
                self.ck.KafkaError._ALL_BROKERS_DOWN,
                self.ck.KafkaError._RESOLVE,
            )
            if err.code() in unreachable:
                raise Unreachable(
                    f"cannot reach the broker at {self.args.bootstrap_server}: {err.str()}"
                ) from None
            raise Failed(f"{err.name()}: {err.str()}") from None
        self.topics = set(md.topics)
        return {name: sorted(t.partitions) for name, t in md.topics.items() if t.error is None}

    def run(self) -> None:
        at_end: set[int] = set()
        deadline = time.monotonic() + self.timeout_s
        while self.args.max_records is None or self.read < self.args.max_records:
            messages = self.consumer.consume(self._batch_size(), timeout=0.5)
            letters = []
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() == self.ck.KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                        continue
                    raise Failed(f"reading {self.dlq}: {err.name()}: {err.str()}")
                at_end.discard(m.partition())
                letters.append(m)
            if letters:
                self.read += len(letters)
                self._handle(letters)
            assigned = {tp.partition for tp in self.consumer.assignment()}
            if assigned and assigned <= at_end:
                return  # every partition read to its end
            if not assigned and time.monotonic() > deadline:
                raise Failed(
                    f"no partition of {self.dlq} was assigned to group {self.group} "
                    f"within {self.timeout_s:g} s (is another redrive running?)"
                )

    def _batch_size(self) -> int:
        n = BATCH
        if self.args.rate is not None:
            n = min(n, max(1, int(self.args.rate)))  # a batch takes about a second at most
        if self.args.max_records is not None:
            n = min(n, self.args.max_records - self.read)
        return n

    def _handle(self, messages: list[Any]) -> None:
        """Send a batch, wait for every acknowledgement, commit up to the first failure."""
        batch = _Batch()
        for m in messages:
            letter = read_letter(m.key(), m.value(), m.headers() or [])
            if letter.problem is None and not self._exists(letter.source_topic):
                if self.producer is None:  # a dry run says so, and goes on
                    letter = replace(letter, problem=f"{NO_TOPIC} (a run stops at it)")
                else:
                    batch.fail(
                        m.partition(),
                        m.offset(),
                        f"source topic {letter.source_topic!r} "
                        f"of {letter.source} does not exist (nothing was created)",
                    )
                    break  # letters after it would be sent, then sent again by the next run
            batch.end[m.partition()] = m.offset() + 1
            if letter.problem is not None:
                self.tally.skipped(letter)
            elif self.producer is None:
                self.tally.of(letter).redriven += 1
            else:
                self._send(letter, m.partition(), m.offset(), batch)
        if self.producer is not None:
            self.producer.flush()  # bounded by message.timeout.ms: every send ends somehow
            self._commit(batch.commit_offsets())
        if batch.errors:
            raise Failed(
                f"{batch.errors[0]}; progress committed up to it"
                + (f" ({len(batch.errors) - 1} more failures)" if len(batch.errors) > 1 else "")
            )

    def _exists(self, topic: str | None) -> bool:
        if topic not in self.topics:
            self._metadata()  # made since the run began?
        return topic in self.topics

    def _send(self, letter: Letter, partition: int, offset: int, batch: _Batch) -> None:
        assert self.producer is not None and letter.source_topic is not None
        self._pace()

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                self.tally.of(letter).redriven += 1
            else:
                batch.fail(
                    partition,
                    offset,
                    f"producing {letter.source} back to "
                    f"{letter.source_topic}: {err.name()}: {err.str()}",
                )

        while True:
            try:
                self.producer.produce(
                    letter.source_topic,
                    value=letter.value,
                    key=letter.key,
                    headers=list(letter.headers),
                    on_delivery=delivered,
                )
                return
            except BufferError:  # the local queue is full: let it drain
                self.producer.poll(0.1)

    def _pace(self) -> None:
        if self.args.rate is None:
            return
        assert self.producer is not None
        while (wait := self.next_send - time.monotonic()) > 0:
            self.producer.poll(min(wait, 0.1))  # serves acknowledgements while it waits
        self.next_send = max(self.next_send, time.monotonic()) + 1.0 / self.args.rate

    def _commit(self, offsets: dict[int, int]) -> None:
        if not offsets:
            return
        tps = [self.ck.TopicPartition(self.dlq, p, o) for p, o in sorted(offsets.items())]
        try:
            done = self.consumer.commit(offsets=tps, asynchronous=False)
        except self.ck.KafkaException as e:
            raise Failed(
                f"committing progress on {self.dlq}: {e.args[0].str()}; the letters "
                "since the last commit will be sent again by the next run"
            ) from None
        for tp in done or ():
            if tp.error is not None:
                raise Failed(f"committing {self.dlq}-{tp.partition}: {tp.error.str()}")


def _redrive(ck: Any, base: dict[str, Any], args: argparse.Namespace) -> int:
    redrive = Redrive(ck, base, args)
    failure: Failed | Unreachable | None = None
    try:
        redrive.start()
        try:
            redrive.run()
        except (Failed, Unreachable) as e:  # the report says what was done before it
            failure = e
    finally:
        redrive.close()
    _report(args, redrive, failure)
    if failure is None:
        return OK
    return fail(
        str(failure), UNREACHABLE if isinstance(failure, Unreachable) else KAFKA_ERROR, args
    )


def _report(args: argparse.Namespace, redrive: Redrive, failure: Exception | None) -> None:
    """A line per source topic (stdout), what was not redriven and why (stderr)."""
    tally = redrive.tally
    rows = sorted(tally.topics.items())
    if args.json:
        print_json(
            {
                "dlq_topic": redrive.dlq,
                "group": redrive.group,
                "dry_run": args.dry_run,
                "read": redrive.read,
                "topics": [
                    {
                        "topic": name,
                        "redriven": t.redriven,
                        "not_redriven": sum(t.not_redriven.values()),
                        "reasons": t.not_redriven,
                        "examples": t.examples,
                    }
                    for name, t in rows
                ],
                "error": None if failure is None else str(failure),
            }
        )
    else:
        done = "WOULD-REDRIVE" if args.dry_run else "REDRIVEN"
        print_table(
            ("SOURCE-TOPIC", done, "NOT-REDRIVEN"),
            [(name, t.redriven, sum(t.not_redriven.values())) for name, t in rows],
        )
        verb = "would redrive" if args.dry_run else "redrove"
        print(
            f"{redrive.dlq}: read {redrive.read} dead letter(s), {verb} {tally.redriven}, "
            f"{tally.not_redriven} not redriven."
        )
    for name, t in rows:
        for reason, n in t.not_redriven.items():
            print(
                f"shoal: {n} dead letter(s) of {name} not redriven: {reason}; "
                f"source e.g. {', '.join(t.examples)}",
                file=sys.stderr,
            )
