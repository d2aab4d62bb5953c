"""`python -m bench`: start a broker, run the phases, print the table and the ratios."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AclBinding
from confluent_kafka.admin import AclOperation
from confluent_kafka.admin import AclPermissionType
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ResourcePatternType
from confluent_kafka.admin import ResourceType

from bench import compaction_phase  # noqa: F401 - registers the "compaction" phase
from bench import decode_phase  # noqa: F401 - registers the "decode" phase
from bench import durable_phase  # noqa: F401 - registers the "durable" phase
from bench import group_phase  # noqa: F401 - registers the "group" phase
from bench import key_order_phase  # noqa: F401 - registers the "key-order" phase
from bench import plot
from bench import processes_phase  # noqa: F401 - registers the "processes" phase
from bench import pyspy
from bench import report
from bench import security
from bench import small_phase  # noqa: F401 - registers the "small" and "latency" phases
from bench import small_workers
from bench import spark_phase  # noqa: F401 - registers the "spark" phase
from bench import txn_phase  # noqa: F401 - registers the "txn" phase
from bench import workers
from bench.broker import BrokerProcess
from bench.broker import free_port
from bench.phases import PHASES
from bench.phases import Bench
from bench.phases import Row
from bench.phases import median_rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--records", type=int, default=1_000_000, help="produce/fetch records")
    p.add_argument("--share-records", type=int, default=200_000, help="share phase records")
    p.add_argument("--small-records", type=int, default=50_000, help="small-request phase records")
    p.add_argument(
        "--latency-rate", type=int, default=2_000, help="latency phase records/s (fixed rate)"
    )
    p.add_argument(
        "--latency-seconds", type=float, default=10.0, help="latency phase measured seconds"
    )
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--value-size", type=int, default=100, help="bytes per record value")
    p.add_argument(
        "--only",
        default=",".join(PHASES),
        help=f"comma-separated phases to run, from: {', '.join(PHASES)}",
    )
    p.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="run the broker under cProfile; write DIR/<phase>.prof and .txt (slows it down)",
    )
    p.add_argument(
        "--profiler",
        choices=("cprofile", "py-spy"),
        default="cprofile",
        help="with --profile: cProfile inside the broker (slow), or py-spy sampling it from"
        " outside (DIR/<phase>.pyspy.txt, collapsed stacks, and <phase>.top.md)",
    )
    p.add_argument(
        "--profile-clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cProfile's timer: wall time (default) or the broker's CPU time",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="run the phases this many times and report the median run (1 with --profile)",
    )
    p.add_argument(
        "--authorizer",
        action="store_true",
        help="run with the ACL authorizer on and allow-all ACLs (User:* ALL on every resource)",
    )
    p.add_argument(
        "--security",
        choices=("plaintext", "sasl_ssl"),
        default="plaintext",
        help="the listener the clients use: PLAINTEXT, or SASL_SSL with SCRAM-SHA-512",
    )
    p.add_argument("--keep", action="store_true", help="keep the broker's data directory")
    return p


# The broker's settings with --authorizer: the authorizer on; until the allow-all ACLs exist,
# resources without ACLs are open, so the benchmark's own admin client may create them.
AUTHORIZER_ENV = {
    "SHOAL_AUTHORIZER_CLASS_NAME": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "SHOAL_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true",
}


def _allow_all(admin: AdminClient) -> None:
    """User:* may do ALL on every topic, group and the cluster: every check finds an ACL."""
    patterns = (
        (ResourceType.TOPIC, "*"),
        (ResourceType.GROUP, "*"),
        (ResourceType.BROKER, "kafka-cluster"),
    )
    bindings = [
        AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:*", "*",
                   AclOperation.ALL, AclPermissionType.ALLOW)
        for rtype, name in patterns
    ]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        future.result(30)


def _command(argv: list[str]) -> str:
    return "make bench" if not argv else "python -m bench " + " ".join(argv)


def _run(broker: BrokerProcess, args: argparse.Namespace, names: list[str]) -> list[Row]:
    """Every chosen phase, `--repeat` times over; the median run.

    The AdminClient goes when this returns, before the broker stops: no disconnect noise.
    """
    bench = Bench(
        broker=broker,
        admin=AdminClient({"bootstrap.servers": broker.bootstrap, **security.client_settings()}),
        records=args.records,
        share_records=args.share_records,
        partitions=args.partitions,
        value_size=args.value_size,
        small_records=args.small_records,
        latency_rate=args.latency_rate,
        latency_seconds=args.latency_seconds,
    )
    if args.authorizer:
        _allow_all(bench.admin)
    repeat = 1 if args.profile else max(1, args.repeat)
    runs: list[list[Row]] = []
    for i in range(repeat):
        run: list[Row] = []
        for name in [n for n in PHASES if n in names]:
            print(f"run {i + 1}/{repeat}, {name}: {PHASES[name].description}", flush=True)
            run.extend(PHASES[name].run(bench))
        runs.append(run)
    return median_rows(runs)


def _print_report(rows: list[Row], args: argparse.Namespace, began: float) -> None:
    print()
    print(report.table(rows))
    print()
    for line in report.ratios(rows):
        print(f"  {line}")
    print()
    print(f"producer settings (librdkafka): {workers.PRODUCER_SETTINGS}")
    print(f"consumer settings: {workers.CONSUMER_SETTINGS}")
    print(f"share consumer settings: {workers.SHARE_SETTINGS}, poll(0.02), one process each")
    if any(r.key.endswith(("small-produce", "latency")) for r in rows):
        print(f"small/latency producer settings: {small_workers.SMALL_PRODUCER_SETTINGS}")
        print(
            f"small/latency share consumers: {small_workers.EXPLICIT_SHARE_SETTINGS}, poll(0.1),"
            " acknowledge() each record (sent with the next poll); latency = poll return - send"
            " time; Redis rows: CPU of redis-server"
        )
    print(
        "group consumers: the consumer settings + auto.offset.reset=earliest, consume(10,000,"
        " 0.05), an async commit per batch, one process each"
    )
    print(
        f"MB/s counts value bytes only ({args.value_size} B/record). Broker CPU = user+sys of the"
        " broker process from /proc/<pid>/stat over the measured interval."
    )
    print(
        f"confluent-kafka {confluent_kafka.__version__}, librdkafka "
        f"{confluent_kafka.libversion()[0]}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; whole run {time.monotonic() - began:.0f}s"
    )


def _write_profiles(rows: list[Row], profile_dir: Path, profiler: str) -> None:
    for row in rows:
        sampled = profile_dir / f"{row.key}.pyspy.txt"
        if sampled.exists():
            top = profile_dir / f"{row.key}.top.md"
            top.write_text(pyspy.summary(sampled))
            print(f"py-spy profile of {row.key}: {sampled} (top functions in {top.name})")
        prof = profile_dir / f"{row.key}.prof"
        if prof.exists():
            text = report.profile_summary(prof)
            (profile_dir / f"{row.key}.txt").write_text(text)
            print(f"profile of {row.key}: {prof} (summary in {row.key}.txt)")
    slower = "under cProfile the broker runs slower" if profiler == "cprofile" else "py-spy costs"
    print(f"note: {slower}; quote the figures of a plain run")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in PHASES]
    if unknown:
        print(f"unknown phase(s): {unknown}; known: {list(PHASES)}", file=sys.stderr)
        return 2
    if args.profile:
        args.profile = args.profile.resolve()
        args.profile.mkdir(parents=True, exist_ok=True)
        os.environ["SHOAL_BENCH_PROFILE_CLOCK"] = args.profile_clock

    tmp = Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    env = dict(AUTHORIZER_ENV) if args.authorizer else {}
    if args.security == "sasl_ssl":
        env.update(security.sasl_ssl(tmp / "tls", tmp / "data"))
    broker = BrokerProcess(
        tmp / "data",
        log_level="warning",
        profile_dir=args.profile,
        profiler=args.profiler,
        env=env,
        metrics_port=free_port(),  # ShareFetches per record in the latency rows
    )
    began = time.monotonic()
    try:
        broker.start()
        print(f"broker pid {broker.pid} on {broker.bootstrap}, data in {broker.data_dir}")
        rows = _run(broker, args, names)
    finally:
        code = broker.stop()
        if code not in (0, None):
            print(f"broker exited with {code}; last log lines:\n{broker.log()}", file=sys.stderr)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    _print_report(rows, args, began)
    png = plot.write(rows)
    print(f"plot: {png}" if png else "plot: skipped (pip install -e '.[bench]' for matplotlib)")
    if args.profile:
        _write_profiles(rows, args.profile, args.profiler)
    print(f"reproduce: {_command(argv)}")
    return 0
