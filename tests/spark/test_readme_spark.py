"""README.md's Spark section and spark/README.md's marked examples, run as written, from
another directory, as a new user would.

The section's shell blocks run with bash, then its Python blocks as one `.venv/bin/python`
script, in an empty directory whose `.venv` is this interpreter's environment. Nothing points
Spark at the repository: no PYTHONPATH, no PYSPARK_PYTHON, and `python3` on PATH is not this
venv's, so `format("shoal")` must be found by Spark's own lookup (the install puts the
repository root on sys.path) and Spark's Python workers must run this interpreter (importing
`spark` sets PYSPARK_PYTHON). The one change to the text: the broker's address. The README
says 127.0.0.1:9092; the test's broker listens on a free port instead (9092 may be taken on
a shared machine), and every "127.0.0.1:9092" is rewritten to it. The one addition to a new
shell's environment: the JVM settings every Spark test's driver runs with, for speed (JIT flags
and the class archive, see jvm.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess

pytestmark = pytest.mark.spark
ROOT = Path(__file__).parents[2]
README_ADDRESS = "127.0.0.1:9092"


MARK = "<!-- readme-test: tests/spark/test_readme_spark.py -->\n"


def spark_blocks() -> tuple[list[str], list[str]]:
    """The shell and the Python blocks of README.md's "## Spark" section, in order."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Spark\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```(sh|python)\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    return [b for kind, b in blocks if kind == "sh"], [b for kind, b in blocks if kind == "python"]


def marked_blocks(path: Path) -> tuple[list[str], list[str]]:
    """The shell and the Python blocks of `path` marked as run by this test, in order."""
    pattern = re.escape(MARK) + r"```(sh|python)\n(.*?)^```$"
    blocks = re.findall(pattern, path.read_text(), re.MULTILINE | re.DOTALL)
    return [b for kind, b in blocks if kind == "sh"], [b for kind, b in blocks if kind == "python"]


def _env_of_a_new_shell(tmp_path: Path, driver_env: dict[str, str]) -> dict[str, str]:
    """The environment without anything that would find Shoal for Spark: no PYTHONPATH or
    PYSPARK_*, and no directory on PATH whose python3 is this venv's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
    }
    venv_bin = Path(sys.prefix).resolve()
    path = [
        d
        for d in env.get("PATH", "").split(os.pathsep)
        if d and not Path(d).resolve().is_relative_to(venv_bin)
    ]
    env["PATH"] = os.pathsep.join(path)
    env["HOME"] = str(tmp_path)  # Spark's ivy cache and the like stay out of the real home
    return env | driver_env  # JVM settings only: the README's code runs as written


def test_readme_spark_examples_run_as_written_from_another_directory(
    broker: BrokerProcess, tmp_path: Path, driver_env: dict[str, str]
) -> None:
    shell, python = spark_blocks()
    assert shell and len(python) >= 4, "the README's Spark section lost its examples"
    assert all(README_ADDRESS in b for b in (*shell, *python[1:])), "an example lost its address"
    # spark/README.md's examples run after the main README's, in the same driver (one JVM).
    more_shell, more_python = marked_blocks(ROOT / "spark" / "README.md")
    assert more_shell and len(more_python) >= 5, "spark/README.md lost its marked examples"
    unmarked = (ROOT / "spark" / "README.md").read_text().count("```python") - len(more_python)
    assert unmarked == 0, "spark/README.md has a Python example this test does not run"
    shell, python = shell + more_shell, python + more_python
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = _env_of_a_new_shell(tmp_path, driver_env)
    for block in shell:
        script = block.replace(README_ADDRESS, broker.bootstrap)
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    script = "\n".join(python).replace(README_ADDRESS, broker.bootstrap)
    # A shorter Spark log: the test reads the script's own output.
    done = subprocess.run(
        [str(tmp_path / ".venv" / "bin" / "python"), "-"],
        input=script,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = _summary(done.stdout + done.stderr)
    assert done.returncode == 0, out
    assert "3 orders accepted" in done.stdout, out  # the stream read the three orders
    shown = re.findall(r"^\|\s*(o\d)\|\s*0\|\s*(\d)\|$", done.stdout, re.MULTILINE)
    assert shown == [("o1", "0"), ("o2", "1"), ("o3", "2")], out  # the batch read
    # spark/README.md: its stream read its three events and ended (AvailableNow: no query
    # left running), the progress carried the group's lag, and its batch read showed them.
    assert "3 events through the pipeline" in done.stdout, out
    shown = re.findall(r"^\|\s*(e\d)\|\s*0\|\s*(\d)\|$", done.stdout, re.MULTILINE)
    assert shown == [("e1", "0"), ("e2", "1"), ("e3", "2")], out
    lag = re.search(r"^lag: (.*)$", done.stdout, re.MULTILINE)
    assert lag is not None, out
    assert "'maxOffsetsBehindLatest': '" in lag[1] and "'shareGroupLag': '" in lag[1], lag[1]


def _summary(output: str) -> str:
    """Spark's output is long: its error lines first (the cause is often thousands of lines
    up), then its end."""
    errors = [line for line in output.splitlines() if re.search(r"Error|Exception|NOT_FOUND", line)]
    return "\n".join(errors[:30]) + "\n...\n" + output[-3000:]


def test_sparks_lookup_sees_pyspark_shoal_from_any_directory(tmp_path: Path) -> None:
    """Spark finds Python data sources with `pkgutil.iter_modules()`, which sees sys.path only
    (not setuptools' editable-install import hook): the install must put pyspark_shoal there.
    A venv installed before pyproject.toml said so needs `make install` once more."""
    env = _env_of_a_new_shell(tmp_path, {})  # no JVM here
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pkgutil; print(sorted(m.name for m in pkgutil.iter_modules()"
            " if m.name.startswith('pyspark_')))",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "pyspark_shoal" in found.stdout, f"{found.stdout} (reinstall: make install)"
