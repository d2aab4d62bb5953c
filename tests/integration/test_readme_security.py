"""README's "Securing Shoal" walk-through, run as written, so the README cannot rot.

The shell block (certificates with openssl, `shoal users add`, a SASL_SSL broker with the
authorizer, a topic, alice's ACLs, alice producing and share-consuming with confluent-kafka) is
read from README.md and run with bash in an empty directory whose `.venv` is this interpreter's.
Only the port changes (9093 may be taken on a shared machine).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokers import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).parents[2]


def security_walkthrough() -> str:
    """The README's shell block that starts a secured broker, from its "Securing Shoal"."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Securing Shoal\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    (block,) = [b for b in blocks if "shoal serve" in b]
    return block


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_the_readme_security_walkthrough_runs_as_written(tmp_path: Path) -> None:
    script = security_walkthrough().replace("9093", str(free_port()))
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "walkthrough.log"  # a file, not a pipe: a broker left behind cannot hang us
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the broker it starts is in its group: killed below
        )
        try:
            proc.wait(timeout=240)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = log.read_text()
    assert proc.returncode == 0, out
    assert "alice consumed [b'hello from alice']" in out
    assert "User:alice" in out  # `shoal acls --list` shows her ACLs


def test_the_walkthroughs_keys_and_data_are_ignored_by_git() -> None:
    """The demo CA, the private keys and the broker's data the walk-through leaves in a clone
    are ignored by git: `git add .` must never pick up a private key."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    block = security_walkthrough()
    paths = sorted(set(re.findall(r"\bsecure/[\w.]+", block)) | {"data-secure/scram.json"})
    assert "secure/ca.key" in paths and "secure/server.key" in paths, paths
    done = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert sorted(done.stdout.split()) == paths, (done.stdout, done.stderr)
