"""Transaction metrics read at scrape time: ids by state (every state's series from the start)
and LSO lag for the partitions with an open transaction only, capped."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from broker.txn_metrics import TransactionCollector
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import build_batch
from protocol.transaction_log import TransactionRecord
from storage.config import LogConfig
from storage.memory_log import MemoryLog


def _log(open_records: int, plain: int = 2) -> MemoryLog:
    log = MemoryLog(LogConfig())
    log.append(build_batch([(None, b"p")] * plain, timestamp_ms=1), now_ms=1)
    if open_records:
        batch = build_batch(
            [(None, b"t")] * open_records, timestamp_ms=1, producer_id=5, producer_epoch=0,
            base_sequence=0, attributes=TRANSACTIONAL_MASK,
        )  # fmt: skip
        log.append(batch, now_ms=1)
        log.append(build_batch([(None, b"p")], timestamp_ms=1), now_ms=1)  # after it: held too
    return log


def _families(collector: TransactionCollector) -> dict[str, GaugeMetricFamily]:
    return {f.name: f for f in collector.collect()}


def test_transactions_by_state_and_lso_lag_of_partitions_with_an_open_transaction() -> None:
    txns = [
        TransactionRecord("a", 1, 0, 60_000, "Ongoing"),
        TransactionRecord("b", 2, 0, 60_000, "Ongoing"),
        TransactionRecord("c", 3, 0, 60_000, "CompleteCommit"),
    ]
    logs = [(("t", 0), _log(3)), (("t", 1), _log(0)), (("u", 0), _log(1))]
    f = _families(TransactionCollector(lambda: txns, lambda: logs))
    states = {
        s.labels["state"]: s.value
        for s in f["kafka_server_transaction_coordinator_transactions"].samples
    }
    assert states == {"Empty": 0, "Ongoing": 2, "PrepareCommit": 0, "PrepareAbort": 0,
                      "CompleteCommit": 1, "CompleteAbort": 0}  # fmt: skip
    lags = {(s.labels["topic"], s.labels["partition"]): s.value
            for s in f["kafka_log_lso_lag"].samples}  # fmt: skip
    assert lags == {("t", "0"): 4, ("u", "0"): 2}  # open records and the record after them


def test_lso_lag_series_are_capped_at_the_most_lagging() -> None:
    logs = [(("t", p), _log(p + 1)) for p in range(5)]
    f = _families(TransactionCollector(lambda: [], lambda: logs, max_series=2))
    assert sorted(s.labels["partition"] for s in f["kafka_log_lso_lag"].samples) == ["3", "4"]
    assert f["shoal_log_lso_lag_series_omitted"].samples[0].value == 3
