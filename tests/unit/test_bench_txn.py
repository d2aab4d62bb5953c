"""The `txn` bench phase's ratios: transactional against idempotent produce, and idempotent
against plain, from rows of the same run (the phase itself runs in `python -m bench`)."""

from __future__ import annotations

from bench import report
from bench.phases import PHASES
from bench.phases import Row


def _row(key: str, seconds: float, cpu: float) -> Row:
    return Row(key=key, label=key, records=1_000_000, seconds=seconds, broker_cpu_s=cpu,
               value_bytes=100)  # fmt: skip


def test_the_txn_phase_is_registered_and_its_ratios_printed() -> None:
    import bench.cli  # noqa: F401 - registers every phase

    assert "txn" in PHASES
    rows = [_row("produce", 4.0, 0.4), _row("produce-idempotent", 5.0, 0.4),
            _row("produce-txn", 10.0, 0.6)]  # fmt: skip
    lines = report.ratios(rows)
    assert "transactional / idempotent produce records/s = 0.50" in lines
    assert "transactional / idempotent produce broker CPU per record = 1.50" in lines
    assert "idempotent / plain produce records/s = 0.80" in lines
