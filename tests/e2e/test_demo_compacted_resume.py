"""``kueue-es demo`` resumes a ``--dir`` whose log ``kueue-es compact`` purged below a snapshot.

Found by a new user's trial: after a compaction of a kept demo's log, ``demo --keep`` on the same ``--dir``
stopped everything ("dashboard is in a crash loop": the dashboard, and the publisher, refused the purged log
while the services started from the snapshot), and the one-shot demo's closing replay reported the purged
messages as a gap where ``kueue-es replay --store`` matched every decision.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_demo_keep_restarts import _wait

pytestmark = pytest.mark.slow

ENV = {**os.environ, "COLUMNS": "250", "PYTHONUNBUFFERED": "1"}


def _kept_demo(run_dir: Path, out: Path, *, jobs: int) -> subprocess.Popen[bytes]:
    with out.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "kueue_es.cli", "demo", "--keep", "--jobs", str(jobs), "--duration", "1"]
            + ["--dir", str(run_dir)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=ENV,
        )


def _stop(demo: subprocess.Popen[bytes]) -> None:
    demo.send_signal(signal.SIGTERM)
    try:
        demo.wait(timeout=60)
    except subprocess.TimeoutExpired:
        demo.kill()
        demo.wait()


@pytest.mark.timeout(600)
def test_a_compacted_demo_dir_resumes_kept_and_replays_from_its_snapshot(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    out = tmp_path / "first.out"
    demo = _kept_demo(run_dir, out, jobs=2)
    try:
        _wait(lambda: "Still running" in out.read_text(), "the demo is not kept", out, demo, timeout=240)
        _wait(lambda: out.read_text().count("released") >= 2, "the Jobs did not finish", out, demo, timeout=120)
        url = re.search(r"NATS\s+(nats://\S+)", out.read_text())
        assert url, out.read_text()
        compacted = subprocess.run(
            [sys.executable, "-m", "kueue_es.cli", "compact", "--nats", url.group(1), "--nats-user", "compactor"]
            + ["--nats-password-file", str(run_dir / "creds" / "compactor.password"), "--once", "--retain-bytes", "1"],
            capture_output=True,
            text=True,
            timeout=120,
            env=ENV,
        )
        assert compacted.returncode == 0 and "purged" in compacted.stdout, compacted.stdout + compacted.stderr
    finally:
        _stop(demo)

    again = tmp_path / "again.out"
    demo = _kept_demo(run_dir, again, jobs=0)
    try:
        # the dashboard is waited for (its /readyz) before "Still running" is printed
        _wait(lambda: "Still running" in again.read_text(), "the resumed demo is not kept", again, demo, timeout=240)
    finally:
        _stop(demo)
    text = again.read_text()
    assert "crash loop" not in text and "exited with code" not in text, text
    assert '"started_from_snapshot"' in (run_dir / "logs" / "publisher.log").read_text()

    once = subprocess.run(
        [sys.executable, "-m", "kueue_es.cli", "demo", "--jobs", "0", "--duration", "1", "--dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert "covered by snapshot" in once.stdout and "every decision matched" in once.stdout, once.stdout
    assert once.returncode == 0, once.stdout + once.stderr
