"""README's "Queue patterns" snippets (pacing with record_limit, per-key ordering), run as
written against a broker process; only the port changes."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).parents[2]


def snippet(heading: str) -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Queue patterns\n", 1)[1].split("\n## ", 1)[0]
    part = section.split(f"\n### {heading}\n", 1)[1].split("\n### ", 1)[0]
    (block,) = re.findall(r"^```python\n(.*?)^```$", part, re.MULTILINE | re.DOTALL)
    return block


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("readme") / "data")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize("heading", ["Pacing with `record_limit`", "Per-key ordering"])
def test_queue_pattern_snippet_runs(broker: BrokerProcess, heading: str) -> None:
    code = snippet(heading).replace("127.0.0.1:9092", broker.bootstrap)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
