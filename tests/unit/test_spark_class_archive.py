"""When the Spark tests write their class-data archive (tests/spark/jvm.py): not in a venv's
first run, in its second, by one session only, and never over an archive that exists."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark import jvm


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    pytest.importorskip("pyspark")
    if jvm._fingerprint() is None:
        pytest.skip("no java: the Spark tests run without an archive")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    yield tmp_path / "shoal" / "spark-cds"


def test_the_first_run_of_a_venv_writes_no_archive_the_second_does(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run-1")
    assert jvm.ArchiveWriter.start() is None
    assert [p.suffix for p in cache.iterdir()] == [".ran"]
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run-2")
    writer = jvm.ArchiveWriter.start()
    assert writer is not None
    try:
        assert f"-XX:ArchiveClassesAtExit={writer.part}" in writer.env()["SPARK_SUBMIT_OPTS"]
        # The other xdist worker (or a concurrent run) finds the lock held and goes on.
        assert jvm.ArchiveWriter.start() is None
    finally:
        writer.lock.close()


def test_no_writer_once_the_archive_exists(cache: Path) -> None:
    assert jvm.ArchiveWriter.start() is None  # notes the first run
    archive = cache / f"spark-{jvm._fingerprint()}.jsa"
    archive.write_bytes(b"an archive")
    assert jvm.ArchiveWriter.start() is None
    assert jvm.class_archive() == archive


def test_the_workers_of_one_run_count_as_one_run(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both xdist workers of a venv's first run start a session: the second to ask must not
    take the first one's note for an earlier run's."""
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run-1")
    assert jvm.ArchiveWriter.start() is None
    assert jvm.ArchiveWriter.start() is None  # the other worker of run-1
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run-2")
    writer = jvm.ArchiveWriter.start()
    assert writer is not None
    writer.lock.close()
