"""The settings of every JVM the Spark tests start, and the class-data archive that cuts their
start-up.

A Spark driver spends most of its first seconds loading and verifying some 15,000 classes
from Spark's jars, and every driver here (each xdist worker's session, the kill test's
driver, the README's script) does it again. Java's class-data sharing (AppCDS) maps them
from an archive instead: `-XX:SharedArchiveFile` reads it, `-XX:ArchiveClassesAtExit`
writes it when a JVM exits. It lives in the user's cache directory, named by a fingerprint
of the JDK and Spark's jars (so each venv has its own). Writing or using it may fail (no
space, another JDK, a changed jar): the JVM then loads the classes from the jars, as without
it, so a missing or stale archive only costs time.

Writing one costs the run that writes it about 26 s (measured, `pytest tests/spark -n 2`,
three runs in a new cache dir: no archive 71.7 s, writing one 97.6 s, using it 58.8 s): the
writing JVM runs ~25% slower and spends ~15 s of CPU dumping at exit. A run in a new checkout
that is never run again (CI, a fresh clone) would pay that for nothing, so the first run of a
venv only notes that it ran (`spark-<key>.ran`); the second has its own session's JVM write
the archive at the end (`ArchiveWriter`: the other xdist worker and concurrent runs go on
without); later runs use it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import IO

# Each test JVM lives for seconds to a minute, where C2's compiling costs more CPU than it wins
# back (about 40% less CPU for a start-up and a few small queries), and one GC thread suits two
# cores. `java` reads JDK_JAVA_OPTIONS, so Spark's launcher JVM gets them too.
JIT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# JVM warnings (a stale archive, say) go to stderr: the tests read the drivers' stdout.
LOG_OPTIONS = "-Xlog:disable -Xlog:all=warning:stderr"
ROOT = Path(__file__).resolve().parents[2]
# On the Python workers' path: its sitecustomize.py spares each of them compiling PySpark.
WORKER_SITE = Path(__file__).resolve().parent / "site"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shoal" / "spark-cds"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found else None


def _fingerprint() -> str | None:
    """What the archive depends on: the JDK (its binary and module image) and Spark's jars."""
    import pyspark

    java = _java()
    jars = Path(pyspark.__file__).parent / "jars"
    if java is None or not jars.is_dir():
        return None
    digest = hashlib.sha256()
    files = [java, java.parents[1] / "lib" / "modules", *sorted(jars.glob("*.jar"))]
    for f in files:
        if f.exists():
            st = f.stat()
            digest.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def class_archive() -> Path | None:
    """The archive for this JDK and Spark, if one was written."""
    key = _fingerprint()
    archive = _cache_dir() / f"spark-{key}.jsa" if key else None
    return archive if archive is not None and archive.exists() else None


class ArchiveWriter:
    """Has a session's JVM write the archive when it exits, if there is none, an earlier run
    of this venv noted itself, and nobody else is writing one (a lock held for the session).
    Only a complete archive gets its name: the JVM exits with 1 if it cannot write it all, and
    a truncated archive would crash every JVM that maps it (tried: SIGBUS). After a failure
    the next run tries again."""

    def __init__(self, archive: Path, lock: IO[str]) -> None:
        self.archive = archive
        self.lock = lock
        self.part = archive.with_name(f"{archive.name}.{os.getpid()}.part")

    @classmethod
    def start(cls) -> ArchiveWriter | None:
        key = _fingerprint()
        if key is None:
            return None
        archive = _cache_dir() / f"spark-{key}.jsa"
        if archive.exists():
            return None
        ran = archive.with_suffix(".ran")
        # One run's xdist workers share its id: the note must be an earlier run's.
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid {os.getpid()}"
        try:
            archive.parent.mkdir(parents=True, exist_ok=True)
            if not ran.exists() or ran.read_text() == run:  # write next run (see the top)
                ran.write_text(run)
                return None
            lock = open(archive.parent / ".lock", "w")  # noqa: SIM115 (held until finish)
        except OSError:
            return None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another session writes it (the other xdist worker, say)
            lock.close()
            return None
        if archive.exists():
            lock.close()
            return None
        for old in archive.parent.glob("*.part"):  # from a run that was killed
            old.unlink(missing_ok=True)
        return cls(archive, lock)

    def env(self) -> dict[str, str]:
        return {
            "JDK_JAVA_OPTIONS": JIT_OPTIONS,
            "SPARK_SUBMIT_OPTS": f"{LOG_OPTIONS} -XX:ArchiveClassesAtExit={self.part}",
        }

    def finish(self, jvm: subprocess.Popen[bytes]) -> None:
        """After the session stopped: ends its JVM (Spark's gateway exits on EOF), which
        writes the archive, and names it."""
        try:
            if jvm.stdin is not None:
                jvm.stdin.close()
            code = jvm.wait(120)
            if code == 0 and self.part.exists():
                os.replace(self.part, self.archive)
                # Each venv (its jars' paths) has its own fingerprint: keep only the newest
                # archive, not ~170 MB per checkout ever made (a JVM mapping one keeps it),
                # and no notes of runs of other venvs.
                for other in self.archive.parent.glob("spark-*.*"):
                    if other.suffix in (".jsa", ".ran") and other != self.archive:
                        other.unlink(missing_ok=True)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            self.part.unlink(missing_ok=True)
            self.lock.close()


def jvm_env(archive: Path | None = None) -> dict[str, str]:
    """The environment of a Spark driver: JIT_OPTIONS for every JVM, and the class archive for
    the driver's JVM only (Spark's launch scripts pass SPARK_SUBMIT_OPTS to it alone; the
    launcher JVM has another class path)."""
    env = {"JDK_JAVA_OPTIONS": JIT_OPTIONS}
    if archive is not None:
        env["SPARK_SUBMIT_OPTS"] = f"{LOG_OPTIONS} -XX:SharedArchiveFile={archive}"
    return env
