"""The settings of every JVM the Spark tests start, and the class-data archive that cuts their
start-up.

A Spark driver spends most of its first seconds loading and verifying some 15,000 classes
from Spark's jars, and every driver here (each xdist worker's session, the kill test's
drivers, the README's script) does it again. Java's class-data sharing (AppCDS) maps them
from an archive instead: `-XX:ArchiveClassesAtExit` writes one when a training driver exits
(`python -m tests.spark.class_archive`), `-XX:SharedArchiveFile` reads it. It is made once
per JDK and Spark (its name holds their fingerprint) in the user's cache directory. Making
or using it may fail (no space, another JDK, a changed jar): the JVM then loads the classes
from the jars, as without it, so a missing or stale archive only costs time.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Each test JVM lives for seconds to a minute, where C2's compiling costs more CPU than it wins
# back (about 40% less CPU for a start-up and a few small queries), and one GC thread suits two
# cores. `java` reads JDK_JAVA_OPTIONS, so Spark's launcher JVM gets them too.
JIT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# JVM warnings (a stale archive, say) go to stderr: the tests read the drivers' stdout.
LOG_OPTIONS = "-Xlog:disable -Xlog:all=warning:stderr"
ROOT = Path(__file__).resolve().parents[2]


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
    """The archive for this JDK and Spark, made now if there is none (under a lock: xdist's
    workers wait for the one that makes it). None if it cannot be made; a failed attempt
    leaves `<archive>.failed`, so later runs do not pay for another (delete it to retry)."""
    key = _fingerprint()
    if key is None:
        return None
    cache = _cache_dir()
    archive = cache / f"spark-{key}.jsa"
    failed = archive.with_suffix(".failed")
    if archive.exists():
        return archive
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not archive.exists() and not failed.exists() and not _make(archive):
                failed.touch()
    except OSError:
        return None
    return archive if archive.exists() else None


def _make(archive: Path) -> bool:
    """One training driver exits and writes the archive; only a complete one gets its name
    (the JVM exits with 1 if it cannot write it all; a truncated archive would crash every
    JVM that maps it). A failed training's JVM may still write its part: the lock holder
    clears them."""
    for old in archive.parent.glob("*.part"):
        old.unlink(missing_ok=True)
    fd, part = tempfile.mkstemp(dir=archive.parent, prefix=archive.name, suffix=".part")
    os.close(fd)
    os.unlink(part)  # the JVM creates it
    env = {
        **os.environ,
        **jvm_env(),
        "SPARK_SUBMIT_OPTS": f"{LOG_OPTIONS} -XX:ArchiveClassesAtExit={part}",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.spark.class_archive"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=300,
        )
        if done.returncode == 0 and Path(part).exists():
            os.replace(part, archive)
            return True
    except subprocess.TimeoutExpired:
        pass
    finally:
        Path(part).unlink(missing_ok=True)
    return False


def jvm_env(archive: Path | None = None) -> dict[str, str]:
    """The environment of a Spark driver: JIT_OPTIONS for every JVM, and the class archive for
    the driver's JVM only (Spark's launch scripts pass SPARK_SUBMIT_OPTS to it alone; the
    launcher JVM has another class path)."""
    env = {"JDK_JAVA_OPTIONS": JIT_OPTIONS}
    if archive is not None:
        env["SPARK_SUBMIT_OPTS"] = f"{LOG_OPTIONS} -XX:SharedArchiveFile={archive}"
    return env
