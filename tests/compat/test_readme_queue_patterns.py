"""README's "Poison records to a DLQ" snippet, run as written against a broker (only the
bootstrap address changes), so the README cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compat.support import start_broker

pytestmark = pytest.mark.compat
ROOT = Path(__file__).parents[2]


def snippet(heading: str) -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split(f"\n### {heading}\n", 1)[1].split("\n## ", 1)[0].split("\n### ")[0]
    (block,) = re.findall(r"^```python\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    return block


def test_the_dead_letter_snippet_runs_as_written(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        code = snippet("Poison records to a DLQ").replace("127.0.0.1:9092", broker.bootstrap)
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    finally:
        broker.stop()
    assert done.returncode == 0, done.stderr
    assert "paid 10.0" in done.stdout and "paid 7.5" in done.stdout
    (letter,) = [line for line in done.stdout.splitlines() if line.startswith("dead letter")]
    assert "b'not a number'" in letter
    assert "'__dlq.errors.message': b'Offset rejected by client.'" in letter
    assert "'__dlq.errors.offset': b'1'" in letter
