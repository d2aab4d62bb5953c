"""Put PySpark's bundled pyspark.zip behind site-packages in the Spark tests' Python processes.

Spark starts every Python worker with `$SPARK_HOME/python/lib/pyspark.zip` (and py4j's) first
on PYTHONPATH. Python compiles a module imported from a zip afresh in every process, as a zip
has no bytecode cache: importing `pyspark.worker` takes ~0.6 s of CPU from the zip and ~0.15 s
from site-packages, and each forked worker and each streaming query's runner does it (measured
in this venv; the Spark test set runs ~70 of them). A pip-installed PySpark ships the zip inside
the same package, so the code is the same. The tests' session puts this directory on the
workers' PYTHONPATH (tests/spark/conftest.py); Python runs this file when such a process
starts. It moves only the zips that lie inside the pyspark package that site-packages holds,
and never fails a start. Users' Spark is left as Spark makes it: the README's test runs
without this.
"""

import contextlib
import os
import sys


def _behind_site_packages() -> None:
    libs = {
        os.path.join(p, "pyspark", "python", "lib") for p in sys.path if p.endswith("site-packages")
    }
    bundled = [p for p in sys.path if p.endswith(".zip") and os.path.dirname(p) in libs]
    if bundled:
        sys.path[:] = [p for p in sys.path if p not in bundled] + bundled


with contextlib.suppress(Exception):  # a slower start, never a failed one
    _behind_site_packages()
