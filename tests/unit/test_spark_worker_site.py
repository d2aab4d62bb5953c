"""tests/spark/site/sitecustomize.py: a Spark test's Python worker imports PySpark from
site-packages (cached bytecode), not from the pyspark.zip that Spark puts first on its path
(compiled afresh in every process). Each check starts an interpreter with the path a worker
gets: the bundled zips first, then the session's PYTHONPATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.jvm import WORKER_SITE

pyspark = pytest.importorskip("pyspark")
LIB = Path(pyspark.__file__).parent / "python" / "lib"
ZIPS = sorted(str(z) for z in LIB.glob("*.zip"))


def _pyspark_file(*path: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(
        [sys.executable, "-c", "import pyspark.worker, pyspark; print(pyspark.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


@pytest.mark.skipif(not ZIPS, reason="this PySpark ships no pyspark.zip: nothing to move")
def test_a_worker_imports_pyspark_from_the_zip_spark_puts_first() -> None:
    assert ".zip" in _pyspark_file(*ZIPS)


@pytest.mark.skipif(not ZIPS, reason="this PySpark ships no pyspark.zip: nothing to move")
def test_with_the_tests_site_a_worker_imports_pyspark_from_site_packages() -> None:
    found = _pyspark_file(*ZIPS, str(WORKER_SITE))
    assert found == pyspark.__file__
