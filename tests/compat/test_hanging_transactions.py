"""A hanging transaction (open in a partition while its coordinator knows nothing of it, here
after `__transaction_state` was lost with a kill -9) is found by `shoal transactions
find-hanging` and ended by `shoal transactions abort`, after which the partition's last stable
offset moves on and read_committed consumers read past it, never seeing its records.

Kafka's tool: `tools/.../TransactionsCommand.java` (FindHangingTransactionsCommand:
DescribeProducers, ListTransactions by producer id, DescribeTransactions;
AbortTransactionCommand: the producer whose CurrentTransactionStartOffset is --start-offset,
then `Admin.abortTransaction`, which sends WriteTxnMarkers to the partition leader,
CLUSTER_ACTION).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import create_topic
from tests.compat.test_transactions import CONFIG
from tests.compat.test_transactions import PARTITIONS
from tests.compat.test_transactions import TOPIC
from tests.compat.test_transactions import _expected
from tests.compat.test_transactions import _read_exactly
from tests.compat.test_transactions import _send
from tests.compat.test_transactions import _transaction
from tests.compat.test_transactions import _watermarks

pytestmark = pytest.mark.compat


def shoal(*args: str, bootstrap: str) -> tuple[int, str, str]:
    cmd = [sys.executable, "-m", "cli", "transactions", *args, "--bootstrap-server", bootstrap]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


BROKER_CONFIG = CONFIG
BROKER_PER_TEST = True  # each test starts from an empty broker


@pytest.fixture(autouse=True)
def _topic(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)


def test_a_hanging_transaction_is_found_and_aborted_and_the_lso_advances(
    broker: BrokerProcess,
) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "lost-id",
                         "message.timeout.ms": 5000, **QUIET})  # fmt: skip
    producer.init_transactions(30)
    kept = [f"kept{i}" for i in range(4)]
    _transaction(producer, kept, commit=True)  # offsets 0-1 and a COMMIT at 2, per partition
    producer.begin_transaction()
    hanging = [f"hanging{i}" for i in range(4)]
    _send(producer, hanging)  # offsets 3-4 of each partition, never ended
    broker.kill()
    shutil.rmtree(broker.data_dir / "__transaction_state-0")  # the coordinator forgets it
    broker.start()
    del producer

    # Nothing will ever end it: read_committed stops at its first offset.
    assert _watermarks(broker.bootstrap, "read_committed") == [3, 3]
    assert _watermarks(broker.bootstrap, "read_uncommitted") == [5, 5]
    code, out, err = shoal("list", "--json", bootstrap=broker.bootstrap)
    assert (code, json.loads(out)) == (0, []), err

    code, out, err = shoal(
        "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0", "--json",
        bootstrap=broker.bootstrap,
    )  # fmt: skip
    assert code == 0, err
    found = json.loads(out)
    assert sorted((h["partition"], h["txn_start_offset"]) for h in found) == [(0, 3), (1, 3)]
    code, table, err = shoal("find-hanging", "--topic", TOPIC, "--max-transaction-timeout",
                             "0", bootstrap=broker.bootstrap)  # fmt: skip
    assert table.split()[:8] == ["Topic", "Partition", "ProducerId", "ProducerEpoch",
                                 "CoordinatorEpoch", "StartOffset", "LastTimestamp",
                                 "Duration(min)"]  # fmt: skip

    # Partition 0 by its start offset, partition 1 by producer id, epoch and coordinator epoch.
    code, _, err = shoal("abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "3",
                         bootstrap=broker.bootstrap)  # fmt: skip
    assert code == 0, err
    h1 = next(h for h in found if h["partition"] == 1)
    code, _, err = shoal(
        "abort", "--topic", TOPIC, "--partition", "1", "--producer-id", str(h1["producer_id"]),
        "--producer-epoch", str(h1["producer_epoch"]), "--coordinator-epoch", "-1",
        bootstrap=broker.bootstrap,
    )  # fmt: skip
    assert code == 0, err

    deadline = time.monotonic() + 10
    while _watermarks(broker.bootstrap, "read_committed") != [6, 6]:  # past the ABORT markers
        assert time.monotonic() < deadline, "the LSO did not advance"
        time.sleep(0.1)
    code, out, err = shoal("find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0",
                           "--json", bootstrap=broker.bootstrap)  # fmt: skip
    assert (code, json.loads(out)) == (0, []), err
    assert _read_exactly(broker.bootstrap, "read_committed", _expected(kept)) == _expected(kept)

    # And the aborted records stay invisible to read_committed after a restart.
    broker.kill()
    broker.start()
    assert _watermarks(broker.bootstrap, "read_committed") == [6, 6]
    assert _read_exactly(broker.bootstrap, "read_committed", _expected(kept)) == _expected(kept)


def test_abort_of_an_offset_where_no_transaction_starts_fails(broker: BrokerProcess) -> None:
    code, _, err = shoal("abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "7",
                         bootstrap=broker.bootstrap)  # fmt: skip
    assert code == 1
    assert "Could not find any open transactions starting at offset 7" in err
