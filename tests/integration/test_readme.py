"""Every code block in README.md is run by the suite, or says why not, so the README cannot rot.

Each fenced block has a marker comment on the line before it:
- `<!-- readme-test: tour -->`: run here, in order, against one broker, as a reader follows the
  README from the tour to the queue patterns (shell blocks with bash, Python blocks with this
  interpreter as `.venv/bin/python`), against a broker started as `make run` starts it: a
  block that fails only after the ones before it (a topic an earlier block auto-created) fails
  here. Only the port changes: 9092 may be taken on a shared
  machine (Python blocks get the address replaced; `shoal` gets `--bootstrap-server`).
- `<!-- readme-test: tests/...py -->`: that test file runs the block as written.
- `<!-- readme-test: not run: REASON -->`.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]
BLOCK = re.compile(
    r"^(?:<!-- readme-test: (?P<marker>.*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    marker: str | None
    body: str


def readme_blocks(text: str) -> list[Block]:
    return [
        Block(text[: m.start()].count("\n") + 1, m["lang"], m["marker"], m["body"])
        for m in BLOCK.finditer(text)
    ]


def test_every_block_is_run_or_says_why_not() -> None:
    blocks = readme_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 8
    for b in blocks:
        where = f"README.md line {b.line}"
        assert b.marker is not None, f"{where}: add a readme-test marker (see {__file__})"
        if b.marker == "tour":
            assert b.lang in ("sh", "python"), where
        elif b.marker.startswith("tests/"):
            covering = ROOT / b.marker
            assert covering.is_file() and "README" in covering.read_text(), where
        else:
            assert re.fullmatch(r"not run: .{10,}", b.marker), f"{where}: say why it is not run"


# Each test has a broker of its own (broker_process): `make run` keeps its data in ./data.


def _venv(tmp_path: Path, bootstrap: str) -> None:
    """`.venv/bin/python` is this interpreter; `.venv/bin/shoal` adds the broker's address."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    shoal = bin_dir / "shoal"
    shoal.write_text(
        "#!/bin/sh\n"
        f'case "$1" in share-state) exec {sys.executable} -m cli "$@" ;; esac\n'
        f'exec {sys.executable} -m cli "$@" --bootstrap-server {bootstrap}\n'
    )
    shoal.chmod(0o755)


def test_the_tour_runs_as_written(broker_process: BrokerProcess, tmp_path: Path) -> None:
    _venv(tmp_path, broker_process.bootstrap)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outputs = []
    for b in readme_blocks((ROOT / "README.md").read_text()):
        if b.marker != "tour":
            continue
        if b.lang == "sh":
            cmd = ["bash", "-e", "-c", b.body]
        else:
            cmd = [sys.executable, "-c", b.body.replace("127.0.0.1:9092", broker_process.bootstrap)]
        done = subprocess.run(
            cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"README.md line {b.line}:\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    (_created, produced, shared, grouped, operated, _paced, keyed, retried, scheduled, dead,
     redrive) = outputs  # fmt: skip
    assert len(produced.splitlines()) == 10  # every record, from the three partitions
    assert {line.split()[0] for line in produced.splitlines()} == {"0", "1", "2"}
    assert len(shared.splitlines()) == 10
    assert grouped.splitlines()  # the consumer group read (and committed) too
    assert '"Type": "SHARE_CHECKPOINT"' in operated
    assert len(keyed.splitlines()) == 50  # every transfer, one key at a time
    # The retry-backoff block: a record released twice came back after ~2 s, then ~4 s.
    gaps = [float(g) for g in retried.split("[")[1].split("]")[0].split(",")]
    assert 2.0 <= gaps[0] < 3.0 and 4.0 <= gaps[1] < 5.0, retried
    # The scheduled-delivery block: "right away" came at once, "call back" not before its time.
    waits = ast.literal_eval(scheduled.strip())  # the README block prints a dict
    assert int(waits["call back"].split()[0]) >= 0, scheduled
    assert int(waits["right away"].split()[0]) < 0, scheduled
    # The dead-letter block, after the key-ordering one, in the same broker: as a reader runs
    # the README (an earlier block auto-created a topic of its own, not `payments`).
    assert "paid 10.0" in dead and "paid 7.5" in dead, dead
    (letter,) = [line for line in dead.splitlines() if line.startswith("dead letter")]
    assert "b'not a number'" in letter
    assert "'__dlq.errors.message': b'Offset rejected by client.'" in letter
    assert "'__dlq.errors.offset': b'1'" in letter
    # The redrive block: one letter would go back, goes back once, and reaches the group again.
    dry, first, second = (line for line in redrive.splitlines() if line.startswith("dlq.payments"))
    assert "would redrive 1," in dry and "redrove 1," in first and "redrove 0," in second
    assert redrive.splitlines()[-1] == "not a number", redrive
