"""``kueue-es demo --keep`` restarts a process that dies, as ``kueue-es up`` does, and stops cleanly on SIGTERM.

The kept demo is a running system users and fault runs poke at: before, a ``kill -9`` of its
dispatcher left it dead, and Jobs applied afterwards were admitted but never started.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

pytestmark = pytest.mark.slow

T = TypeVar("T")

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: after-restart
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  suspend: true
  template:
    spec:
      containers:
      - name: main
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        resources:
          requests:
            cpu: "1"
      restartPolicy: Never
"""


def _child_pid(parent: int, matches: Callable[[list[bytes]], bool]) -> int | None:
    """The pid of a process ``parent`` started whose argv ``matches``, or None."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and matches(argv):
            return int(entry.name)
    return None


def _service_pid(parent: int, service: str) -> int | None:
    """The pid of ``python -m kueue_es.cli service SERVICE ...`` started by ``parent``, or None."""
    return _child_pid(parent, lambda argv: b"service" in argv and service.encode() in argv)


def _server_pid(parent: int) -> int | None:
    """The pid of the nats-server ``parent`` started, or None."""
    return _child_pid(parent, lambda argv: bool(argv) and argv[0].endswith(b"nats-server"))


def _wait(
    predicate: Callable[[], T | None], what: str, out: Path, process: subprocess.Popen[bytes], timeout: float = 120.0
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        assert process.poll() is None, f"the demo exited ({process.returncode}):\n{out.read_text()}"
        assert time.monotonic() < deadline, f"{what}, not within {timeout:g}s:\n{out.read_text()}"
        time.sleep(0.3)


@pytest.mark.timeout(400)
def test_a_killed_dispatcher_and_nats_server_are_restarted_and_the_next_jobs_start(tmp_path: Path) -> None:
    out, run_dir = tmp_path / "demo.out", tmp_path / "run"
    with out.open("wb") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "kueue_es.cli", "demo", "--keep", "--jobs", "0", "--duration", "600"]
            + ["--dir", str(run_dir)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "250", "PYTHONUNBUFFERED": "1"},
        )
    try:
        _wait(lambda: "Still running" in out.read_text(), "the demo is not kept", out, demo, timeout=180)
        old = _wait(lambda: _service_pid(demo.pid, "dispatcher"), "no dispatcher process", out, demo)
        os.kill(old, signal.SIGKILL)
        restarted = _wait(
            lambda: re.search(r"dispatcher restarted \(pid (\d+)", out.read_text()), "no restart", out, demo
        )
        new = int(restarted.group(1))
        assert new != old and _service_pid(demo.pid, "dispatcher") == new
        kubeconfig = f"--kubeconfig={run_dir / 'kubeconfig'}"

        def create_and_see_it_start(name: str, after: str) -> None:
            manifest = JOB.replace("after-restart", name)
            subprocess.run(
                ["kubectl", kubeconfig, "create", "-f", "-"], input=manifest.encode(), check=True, timeout=60
            )

            def started() -> bool:
                got = subprocess.run(
                    ["kubectl", kubeconfig, "get", "job", name, "-o", "json"], capture_output=True, timeout=60
                )
                return got.returncode == 0 and json.loads(got.stdout)["spec"].get("suspend") is False

            _wait(started, f"the Job applied after {after} never started", out, demo)

        create_and_see_it_start("after-restart", "the dispatcher's restart")
        # nats-server too (a fault run found the kept demo dead after it): restarted on its store and port
        server = _wait(lambda: _server_pid(demo.pid), "no nats-server process", out, demo)
        os.kill(server, signal.SIGKILL)
        _wait(lambda: "nats-server restarted" in out.read_text(), "nats-server not restarted", out, demo)
        create_and_see_it_start("after-nats-restart", "nats-server's restart")
    finally:
        stopping = datetime.datetime.now(datetime.UTC).isoformat()
        demo.send_signal(signal.SIGTERM)
        try:
            demo.wait(timeout=60)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait()
    assert "dispatcher killed by SIGKILL; restarting it" in out.read_text()  # the user is told
    assert "nats-server killed by SIGKILL; restarting it" in out.read_text()
    # the stop: the demo's own connection closed before its nats-server stopped (left open, it tried to reconnect
    # to the stopped server, and once kept the process alive through SIGTERM), well inside the stop deadline
    assert demo.returncode == 130, out.read_text()
    assert "still stopping" not in out.read_text()
    # and it says what it leaves: the two Jobs it admitted, and where its log stays to be replayed
    assert "stopped: 2 workloads admitted, 0 evicted by preemption" in out.read_text(), out.read_text()
    assert f"kueue-es replay --store {run_dir / 'nats'}" in out.read_text()
    # (while the killed nats-server was down the demo's connection did retry, and said so: not after the stop)
    errors = [
        entry["timestamp"]
        for entry in map(json.loads, (run_dir / "logs" / "demo.log").read_text().splitlines())
        if entry.get("event") == "nats connection error"
    ]
    assert errors and all(at < stopping for at in errors), errors
