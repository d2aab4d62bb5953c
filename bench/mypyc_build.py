"""Issue 33's mypyc trial: compile the steady-rate path's modules in place, or remove them.

    python -m bench.mypyc_build build    # .so files next to the sources (the C in build/)
    python -m bench.mypyc_build clean    # back to pure Python
    python -m bench.mypyc_build restore  # the last build's .so files back, no compiling
    python -m bench.mypyc_build status   # which of the modules are compiled now
    python -m bench.mypyc_build trial --pairs 3 --only latency  # alternated, pure then compiled

A compiled module's `.so` sits beside its `.py`; Python's import system tries extension
modules before sources, so the broker (and the tests) run compiled while the files are there
and pure Python once `clean` removed them. What is compiled is a copy (`SRC`) with three
statements rewritten (`PATCHES`); no source file changes. Not part of `make install` or `make
test`: the trial did not meet the issue's bar, and the compiled build fails unit tests
(bench/PROFILE.md): never run a broker built so on data you keep.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "broker", "storage", "coordinator")
SRC = ROOT / "build" / "mypyc-src"  # the copy compiled, and where its `.so` files stay

# Where the `latency` phase spends its Python time (py-spy, bench/PROFILE.md): the connection
# and its handler driver, the ShareFetch and ShareAcknowledge handlers, the share core, the log's
# append and read path, and the codecs they call. Left out, as mypyc refuses them:
# broker/handlers/produce.py (`del` of a coroutine's typed locals, which frees a huge request's
# partitions in a thread) and storage/segment.py (a lazy segment's `__getattr__` and `__dict__`).
MODULES = [
    "broker/clock.py",
    "broker/connection.py",
    "broker/handler_drive.py",
    "broker/long_poll.py",
    "broker/notifier.py",
    "broker/request_order.py",
    "broker/slicing.py",
    "broker/handlers/share_common.py",
    "broker/handlers/share_fetch.py",
    "broker/handlers/share_acknowledge.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "broker/share").rglob("*.py")),
    "protocol/acknowledge_type.py",
    "protocol/framing.py",
    "protocol/messages.py",
    "protocol/produce_bounds.py",
    "protocol/produce_response.py",
    "protocol/record_batch.py",
    "protocol/share_fetch_response.py",
    "protocol/share_state.py",
    "protocol/wire.py",
    "storage/base_log.py",
    "storage/damage.py",
    "storage/file_handles.py",
    "storage/fsutil.py",
    "storage/log_manager.py",
    "storage/memory_log.py",
    "storage/segment_log.py",
    "storage/share_state_log.py",
]


def _modules() -> list[str]:
    names = os.environ.get("SHOAL_MYPYC_MODULES")
    return names.split() if names else MODULES


def _built(module: str) -> bool:
    """Whether a module's extension (its shim; the group's library is apart) is in the tree."""
    path = ROOT / module
    return path.with_name(path.stem + sysconfig.get_config_var("EXT_SUFFIX")).exists()


# mypyc refuses two statements of those modules and miscompiles a third. The trial compiles a
# copy of the sources with these behaviour-neutral edits (the `.py` files in the tree stay as
# they are): (file, old, new).
PATCHES = [
    # A coroutine's locals live in a native object: `del` of one is refused. `response` is
    # typed Any, so None drops the frame's reference to the answer just as `del` does.
    ("broker/connection.py", "        del response\n", "        response = None\n"),
    # An alias of a method in a class body is refused ("Unsupported statement").
    (
        "storage/log_manager.py",
        "    save = _save\n",
        "    def save(self, info: TopicInfo) -> None:\n        self._save(info)\n",
    ),
    # Not refused but miscompiled (mypy 2.4.1): a memoryview's slice bound is evaluated twice,
    # so `os.write` ran twice and every file written by `write_synced` held its bytes twice.
    (
        "storage/fsutil.py",
        "            view = view[os.write(fd, view) :]\n",
        "            written = os.write(fd, view)\n            view = view[written:]\n",
    ),
]


def _patched_copy() -> None:
    """The packages and the mypy settings, copied into `SRC`, with `PATCHES` applied."""
    shutil.rmtree(SRC, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so")
    for package in (*PACKAGES, "client", "spark", "cli", "bench"):
        shutil.copytree(ROOT / package, SRC / package, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", SRC / "pyproject.toml")
    for name, old, new in PATCHES:
        path = SRC / name
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{name}: the statement mypyc refuses changed; update PATCHES")
        path.write_text(text.replace(old, new))


def build() -> None:
    from mypyc.build import mypycify  # the mypy in .venv ships mypyc
    from setuptools import setup  # type: ignore[import-untyped]

    _patched_copy()
    os.chdir(SRC)
    setup(
        name="shoal-mypyc-trial",
        ext_modules=mypycify(_modules(), multi_file=True, group_name="shoal_trial"),
        script_args=["build_ext", "--inplace", "--parallel", str(os.cpu_count() or 1)],
    )
    restore()


def _extensions(top: Path) -> list[Path]:
    """The trial's extension files under `top`: the group's library and each module's shim."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    found = list(top.glob(f"shoal_trial__mypyc{suffix}"))
    for package in PACKAGES:
        found += (top / package).rglob(f"*{suffix}")
    return found


def clean() -> None:
    """Back to pure Python: the `.so` files leave the tree (build/ keeps its copies)."""
    for path in _extensions(ROOT):
        path.unlink()


def restore() -> None:
    """The last build's `.so` files back into the tree, without compiling again."""
    for path in _extensions(SRC):
        shutil.copy2(path, ROOT / path.relative_to(SRC))


def trial(pairs: int, bench_args: list[str]) -> None:
    """Alternate pure and compiled runs of `python -m bench` (the peer left out: only the
    broker's code differs between the two), with the load average before each; pure after."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no redis-server on it
    for pair in range(1, pairs + 1):
        for side in ("pure", "compiled"):
            clean() if side == "pure" else restore()
            load = Path("/proc/loadavg").read_text().split()[:3]
            print(f"== pair {pair} {side}, load {' '.join(load)}", flush=True)
            run = [sys.executable, "-m", "bench", "--repeat", "1", *bench_args]
            out = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True)
            for line in out.stdout.splitlines():
                if " | " in line and not line.startswith(("phase", "---")):
                    print(line, flush=True)
            if out.returncode:
                print(out.stdout[-2000:], out.stderr[-2000:], flush=True)
    clean()


def status() -> None:
    compiled = [m for m in _modules() if _built(m)]
    print(f"{len(compiled)} of {len(_modules())} modules compiled")
    for module in compiled:
        print(f"  {module}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("build", "clean", "restore", "status", "trial"))
    parser.add_argument("--pairs", type=int, default=3, help="trial: alternated pairs")
    args, bench_args = parser.parse_known_args()
    if args.action == "trial":
        trial(args.pairs, bench_args)
    else:
        {"build": build, "clean": clean, "restore": restore, "status": status}[args.action]()


if __name__ == "__main__":
    main()
