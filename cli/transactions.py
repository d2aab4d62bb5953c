"""`shoal transactions`: Kafka's `kafka-transactions.sh` (`TransactionsCommand`), with its
subcommands, options and columns: `list`, `describe --transactional-id`, `describe-producers
--topic --partition`, `abort --topic --partition (--start-offset | --producer-id
--producer-epoch --coordinator-epoch)`, `find-hanging (--topic [--partition] | --broker-id)
[--max-transaction-timeout MINUTES]`.

A hanging transaction is open in a partition (DescribeProducers shows its start offset) for
longer than the longest transaction timeout, while its coordinator knows nothing of it: no
transactional id holds its producer id, or the id's transaction does not list the partition
(after power loss took `__transaction_state`, say). It holds the partition's last stable
offset, so read_committed consumers wait forever; `abort` writes its ABORT marker.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from cli.common import OK
from cli.common import NotFound
from cli.common import UsageError
from cli.common import add_common
from cli.common import print_json
from cli.common import print_table
from cli.common import run
from cli.common import security
from client.admin import Admin
from client.cluster import Cluster
from client.errors import KafkaError
from client.transactions import ProducerState
from client.transactions import TransactionDescription
from client.transactions import abort_transaction
from client.transactions import describe_producers
from client.transactions import describe_transactions
from client.transactions import list_transactions

PRODUCER_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                    "LastTimestamp", "CurrentTransactionStartOffset"]  # fmt: skip
HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                   "StartOffset", "LastTimestamp", "Duration(min)"]  # fmt: skip


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _list(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        listings = await list_transactions(admin.cluster)
    if args.json:
        print_json([vars_of(x) for x in listings])
    else:
        rows = [(x.transactional_id, x.coordinator_id, x.producer_id, x.state) for x in listings]
        print_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)
    return OK


async def _describe(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        found = await describe_transactions(admin.cluster, [args.transactional_id])
    d = found[args.transactional_id]
    if isinstance(d, KafkaError):
        raise d
    duration = None if d.start_time_ms is None else _now_ms() - d.start_time_ms
    if args.json:
        print_json({**vars_of(d), "duration_ms": duration})
        return OK
    print_table(
        ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
         "TopicPartitions"],
        [(d.coordinator_id, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
          d.timeout_ms, _none(d.start_time_ms), _none(duration),
          ",".join(f"{t}-{p}" for t, p in d.partitions))],
    )  # fmt: skip
    return OK


def _none(value: int | None) -> object:
    return "None" if value is None else value


def _producer_row(s: ProducerState) -> tuple[object, ...]:
    return (s.producer_id, s.producer_epoch, s.coordinator_epoch, s.last_sequence,
            s.last_timestamp, _none(s.txn_start_offset))  # fmt: skip


async def _describe_producers(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        states = await describe_producers(admin.cluster, args.topic, args.partition)
    if args.json:
        print_json([vars_of(s) for s in states])
    else:
        print_table(PRODUCER_HEADERS, [_producer_row(s) for s in states])
    return OK


async def _abort(args: argparse.Namespace) -> int:
    if args.start_offset is None and args.producer_id is None:
        raise UsageError(
            "The transaction to abort must be identified either with --start-offset (for "
            "brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
            "--coordinator-epoch (for older brokers)"
        )
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        if args.start_offset is None:
            if args.producer_epoch is None or args.coordinator_epoch is None:
                missing = (
                    "--producer-epoch" if args.producer_epoch is None else "--coordinator-epoch"
                )
                raise UsageError(f"Missing required argument {missing}")
            pid, epoch, coordinator_epoch = (
                args.producer_id,
                args.producer_epoch,
                args.coordinator_epoch,
            )
        else:
            states = await describe_producers(admin.cluster, args.topic, args.partition)
            found = next((s for s in states if s.txn_start_offset == args.start_offset), None)
            if found is None:
                raise NotFound(
                    f"Could not find any open transactions starting at offset "
                    f"{args.start_offset} on partition {args.topic}-{args.partition}",
                )
            pid, epoch, coordinator_epoch = (
                found.producer_id,
                found.producer_epoch,
                found.coordinator_epoch,
            )
        await abort_transaction(
            admin.cluster, args.topic, args.partition, pid, epoch, coordinator_epoch
        )
    print(f"Aborted the transaction of producer {pid} (epoch {epoch}) on "
          f"{args.topic}-{args.partition}.")  # fmt: skip
    return OK


async def _open_transactions(
    cluster: Cluster, partitions: list[tuple[str, int]], max_timeout_ms: int
) -> list[tuple[str, int, ProducerState]]:
    """Producers with a transaction open longer than `max_timeout_ms` (by their last write,
    as Kafka's tool measures it)."""
    now = _now_ms()
    out = []
    for topic, p in partitions:
        for s in await describe_producers(cluster, topic, p):
            if s.txn_start_offset is not None and now - s.last_timestamp > max_timeout_ms:
                out.append((topic, p, s))
    return out


async def find_hanging(
    cluster: Cluster, partitions: list[tuple[str, int]], max_timeout_ms: int
) -> list[tuple[str, int, ProducerState]]:
    """Kafka's `FindHangingTransactionsCommand`: the open transactions whose producer id no
    transactional id holds, or whose id's transaction does not list their partition."""
    candidates = await _open_transactions(cluster, partitions, max_timeout_ms)
    if not candidates:
        return []
    pids = {s.producer_id for _, _, s in candidates}
    ids = {x.producer_id: x.transactional_id for x in await list_transactions(cluster, pids)}
    described = await describe_transactions(cluster, set(ids.values()))
    hanging = []
    for topic, p, s in candidates:
        d = described.get(ids.get(s.producer_id, ""))
        if not isinstance(d, TransactionDescription) or (topic, p) not in d.partitions:
            hanging.append((topic, p, s))
    return hanging


async def _partitions(admin: Admin, args: argparse.Namespace) -> list[tuple[str, int]]:
    if args.topic is None and args.broker_id is None:
        raise UsageError("The `find-hanging` command requires either --topic or --broker-id "
                         "to limit the scope of the search")  # fmt: skip
    if args.partition is not None:
        if args.topic is None:
            raise UsageError("The --partition argument requires --topic to be provided")
        return [(args.topic, args.partition)]
    topics = [args.topic] if args.topic is not None else sorted(await admin.list_topics())
    out: list[tuple[str, int]] = []
    for name in topics:
        info = await admin.cluster.topic(name)
        out.extend(
            (name, p) for p, i in sorted(info.partitions.items())
            if args.broker_id is None or i.leader_id == args.broker_id
        )  # fmt: skip
    return out


async def _find_hanging(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        partitions = await _partitions(admin, args)
        hanging = await find_hanging(
            admin.cluster, partitions, args.max_transaction_timeout * 60_000
        )
    now = _now_ms()
    if args.json:
        print_json([{"topic": t, "partition": p, **vars_of(s)} for t, p, s in hanging])
        return OK
    rows = [
        (t, p, s.producer_id, s.producer_epoch, s.coordinator_epoch, s.txn_start_offset,
         s.last_timestamp, (now - s.last_timestamp) // 60_000)
        for t, p, s in hanging
    ]  # fmt: skip
    print_table(HANGING_HEADERS, rows)
    return OK


def vars_of(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__slots__}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "transactions", help="list, describe and abort transactions (kafka-transactions.sh)"
    )
    cmds = p.add_subparsers(dest="transactions_command", required=True)

    lst = cmds.add_parser("list", help="list transactions")
    add_common(lst)
    lst.set_defaults(func=lambda a: run(_list, a))

    describe = cmds.add_parser("describe", help="describe the state of a transactional id")
    describe.add_argument("--transactional-id", required=True)
    add_common(describe)
    describe.set_defaults(func=lambda a: run(_describe, a))

    producers = cmds.add_parser(
        "describe-producers", help="the active producers of a topic partition"
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    producers.add_argument("--broker-id", type=int, help="accepted; one broker holds them all")
    add_common(producers)
    producers.set_defaults(func=lambda a: run(_describe_producers, a))

    abort = cmds.add_parser("abort", help="abort a hanging transaction (CLUSTER_ACTION)")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="start offset of the transaction")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    add_common(abort, json_output=False)
    abort.set_defaults(func=lambda a: run(_abort, a))

    hanging = cmds.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int)
    hanging.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES")
    hanging.add_argument("--topic")
    hanging.add_argument("--partition", type=int)
    add_common(hanging)
    hanging.set_defaults(func=lambda a: run(_find_hanging, a))
