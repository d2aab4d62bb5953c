"""Stop and start times of a broker over a data dir of thousands of partitions (issue 28).

`python -m bench.data_dir_scale build DIR` makes a data dir once: TOPICS x PARTITIONS partitions
with a few small segments each, share-group state on some topics and committed offsets of a
consumer group. `python -m bench.data_dir_scale measure DIR` copies it fresh for each run and
times, with a real `shoal serve` process:

- first start (of the data dir as built): until the port listens, and until every partition
  answers (ListOffsets of all);
- stop: after a round of writes to every partition, SIGTERM until the process has exited;
- clean start: the start after that stop, timed the same way, and the lines it logged;
- kill -9 start: after another round of writes to every partition, kill -9, then the start
  after it, timed the same way, and the lines it logged.

`--code DIR` runs another checkout's broker (its packages first on PYTHONPATH), for a before /
after comparison on the same machine in the same window: `--code DIR` alternates with ours.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import NewTopic

from bench.broker import BrokerProcess

QUIET = {"log_level": 3}
TOPICS, PARTITIONS = 50, 100
SEGMENT_BYTES = 4096  # a few segments per partition from a few KiB of records
RECORDS_PER_PARTITION = 40
VALUE = b"v" * 200
SHARE_TOPICS = 5  # share groups consume the first topics
STOP_TIMEOUT_S = 300.0


def _topics(count: int) -> list[str]:
    return [f"t{i:03d}" for i in range(count)]


def _produce_round(bootstrap: str, topics: list[str], partitions: int, records: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10, **QUIET}
    )
    for i in range(records):
        for topic in topics:
            for p in range(partitions):
                while True:
                    try:
                        producer.produce(topic, VALUE, key=b"%d" % i, partition=p)
                        break
                    except BufferError:
                        producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(300) == 0


def build(data_dir: Path, topics: int, partitions: int) -> None:
    if data_dir.exists():
        raise SystemExit(f"{data_dir} exists")
    broker = BrokerProcess(data_dir, log_level="warning")
    broker.start()
    try:
        names = _topics(topics)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        configs = {"segment.bytes": str(SEGMENT_BYTES)}
        for f in admin.create_topics(
            [NewTopic(n, partitions, 1, config=configs) for n in names]
        ).values():
            f.result(120)
        _produce_round(broker.bootstrap, names, partitions, RECORDS_PER_PARTITION)
        _share_state(broker.bootstrap, admin, names[:SHARE_TOPICS], partitions)
        _commit_offsets(broker.bootstrap, names, partitions)
    finally:
        code = broker.stop(STOP_TIMEOUT_S)
    print(f"built {data_dir}: {topics * partitions} partitions, stop exit {code}")


def _share_state(bootstrap: str, admin: AdminClient, topics: list[str], partitions: int) -> None:
    """Two share groups read part of the share topics and acknowledge what they got."""
    for group in ("sg-a", "sg-b"):
        resource = ConfigResource(
            "group", group,
            incremental_configs=[ConfigEntry("share.auto.offset.reset", "earliest",
                                             incremental_operation=AlterConfigOpType.SET)],
        )  # fmt: skip
        admin.incremental_alter_configs([resource])[resource].result(30)
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
        consumer.subscribe(topics)
        got = 0
        deadline = time.monotonic() + 60
        while got < len(topics) * partitions * 10 and time.monotonic() < deadline:
            got += sum(1 for m in consumer.poll(0.5) if m.error() is None)
        consumer.close()


def _commit_offsets(bootstrap: str, topics: list[str], partitions: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cg", **QUIET})
    offsets = [TopicPartition(t, p, 7) for t in topics for p in range(partitions)]
    consumer.commit(offsets=offsets, asynchronous=False)
    consumer.close()


def _all_answer(bootstrap: str, topics: list[str], partitions: int, timeout: float) -> None:
    """Every partition's end offset, asked of the broker (ListOffsets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", **QUIET})
    try:
        tps = [TopicPartition(t, p, -1) for t in topics for p in range(partitions)]
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = consumer.offsets_for_times(
                    tps, timeout=max(1.0, deadline - time.monotonic())
                )
                if all(tp.error is None and tp.offset >= 0 for tp in found):
                    return
            except Exception:
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError("not every partition answered")
            time.sleep(0.2)
    finally:
        consumer.close()


class Run:
    """One broker over a fresh copy of the template, with another checkout's code or ours."""

    def __init__(self, template: Path, work: Path, code: Path | None, tag: str) -> None:
        self.data = work / f"data-{tag}"
        if self.data.exists():
            shutil.rmtree(self.data)
        subprocess.run(["cp", "-a", str(template), str(self.data)], check=True)
        os.sync()  # the copy's writes must not be paid for by the broker's first fsyncs
        env = {"PYTHONPATH": str(code)} if code is not None else {}
        self.broker = BrokerProcess(self.data, env=env, log_level="info")
        self.broker.log_path.unlink(missing_ok=True)

    def start(self) -> float:
        started = time.monotonic()
        self.broker.start(timeout=600)
        return time.monotonic() - started

    def log_lines(self) -> int:
        return len(self.broker.log_path.read_text(errors="replace").splitlines())


def _time_start(run: Run, topics: list[str], partitions: int) -> tuple[float, float, int]:
    started = time.monotonic()
    run.broker.start(timeout=600)
    listening = time.monotonic() - started
    _all_answer(run.broker.bootstrap, topics, partitions, 600)
    return listening, time.monotonic() - started, run.log_lines()


def _time_stop(run: Run) -> float:
    started = time.monotonic()
    code = run.broker.stop(STOP_TIMEOUT_S)
    took = time.monotonic() - started
    if code != 0:
        print(f"  stop exit code {code}", file=sys.stderr)
    return took


def measure_once(template: Path, work: Path, code: Path | None, label: str) -> dict[str, float]:
    """One variant over a fresh copy: its first start (of the template as built), a stop after
    a round of writes to every partition, a start after that clean stop, then kill -9 after
    another round of writes and the start after it."""
    topics = _topics(TOPICS_MEASURED[0])
    partitions = TOPICS_MEASURED[1]
    out: dict[str, float] = {}
    run = Run(template, work, code, label)
    out["first_listen"], out["first_ready"], _ = _time_start(run, topics, partitions)
    _produce_round(run.broker.bootstrap, topics, partitions, 2)  # every partition written
    out["stop"] = _time_stop(run)
    lines = run.log_lines()
    out["clean_listen"], out["clean_ready"], after = _time_start(run, topics, partitions)
    out["clean_lines"] = after - lines
    _produce_round(run.broker.bootstrap, topics, partitions, 2)  # past every recovery point
    run.broker.kill()
    lines = run.log_lines()
    out["kill9_listen"], out["kill9_ready"], after = _time_start(run, topics, partitions)
    out["kill9_lines"] = after - lines
    out["stop2"] = _time_stop(run)
    shutil.rmtree(run.data, ignore_errors=True)
    return out


TOPICS_MEASURED = [TOPICS, PARTITIONS]


def _uptime() -> str:
    return "/".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(template: Path, work: Path, code: Path | None, runs: int) -> None:
    work.mkdir(parents=True, exist_ok=True)
    # `python -m broker` puts its working directory first on sys.path: in a checkout it would
    # run that checkout's code whatever PYTHONPATH says.
    os.chdir(work)
    variants: list[tuple[str, Path | None]] = [("this", None)]
    if code is not None:
        variants = [("base", code), ("this", None)]
    for i in range(runs):
        for label, variant in variants:
            load = _uptime()
            result = measure_once(template, work, variant, label)
            shown = " ".join(f"{k}={v:.1f}" for k, v in result.items())
            print(f"run {i} {label}: {shown} load={load}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.data_dir_scale")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("data_dir", type=Path)
    b.add_argument("--topics", type=int, default=TOPICS)
    b.add_argument("--partitions", type=int, default=PARTITIONS)
    m = sub.add_parser("measure")
    m.add_argument("template", type=Path)
    m.add_argument("--work", type=Path, default=Path("/tmp/shoal-scale"))
    m.add_argument("--code", type=Path, help="another checkout, run alternately with this one")
    m.add_argument("--runs", type=int, default=1)
    m.add_argument("--topics", type=int, default=TOPICS)
    m.add_argument("--partitions", type=int, default=PARTITIONS)
    args = p.parse_args(argv)
    if args.cmd == "build":
        build(args.data_dir, args.topics, args.partitions)
    else:
        TOPICS_MEASURED[:] = [args.topics, args.partitions]
        code = args.code.resolve() if args.code is not None else None
        measure(args.template.resolve(), args.work.resolve(), code, args.runs)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
