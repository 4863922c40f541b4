"""``kueue-es demo --keep`` as a process for the end-to-end tests that drive it with the real kubectl.

One start-up for every such test (tests/e2e/test_integration_samples.py, tests/e2e/test_dra_samples.py):
the demo runs in its own session (nats-server, the services, the emulated API server, the simulated
kubelet and controllers), the test waits for the kubeconfig it writes and for the quick start's
LocalQueue, and stops the whole process group at the end (SIGTERM, then SIGKILL after 60 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.waiting import eventually as _eventually
from tests.kube.test_kubectl import Kubectl


class Demo:
    """``kueue-es demo --keep --jobs 1`` as a process, and kubectl for it. ``duration``: seconds each Job runs
    (``--duration``); ``config``: a manager Configuration file (``--config``); ``jobs``: the sample Jobs it
    submits (``--jobs``); ``feature_gates``: Kueue's ``--feature-gates`` (e.g. ``ElasticJobsViaWorkloadSlices=true``)."""

    def __init__(
        self,
        run_dir: Path,
        *,
        duration: float = 1,
        config: Path | None = None,
        jobs: int = 1,
        feature_gates: str | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.duration = duration
        self.config = config
        self.jobs = jobs
        self.feature_gates = feature_gates
        self.process: asyncio.subprocess.Process | None = None

    def argv(self) -> list[str]:
        """The command line the demo runs with."""
        args = [sys.executable, "-m", "kueue_es", "demo", "--keep", "--jobs", str(self.jobs)]
        args += ["--duration", f"{self.duration:g}", "--dir", str(self.run_dir)]
        if self.config is not None:
            args += ["--config", str(self.config)]
        if self.feature_gates is not None:
            args += ["--feature-gates", self.feature_gates]
        return args

    async def start(self) -> Kubectl:
        """Start the demo; return kubectl for its API server once the quick start's queues are there."""
        self.process = await asyncio.create_subprocess_exec(
            *self.argv(),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        kubeconfig = self.run_dir / "kubeconfig"
        async with asyncio.timeout(120):
            while not kubeconfig.exists():
                assert self.process.returncode is None, "the demo exited"
                await asyncio.sleep(0.2)
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        kubectl = Kubectl(server, self.run_dir)
        async with asyncio.timeout(120):  # the quick start's queues are there
            while (await kubectl.run("get", "localqueue", "user-queue"))[0] != 0:
                await asyncio.sleep(0.5)
        return kubectl

    async def stop(self) -> None:
        """Stop the demo's process group (everything it started)."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                async with asyncio.timeout(60):
                    await self.process.wait()
            except TimeoutError:
                os.killpg(self.process.pid, signal.SIGKILL)
                await self.process.wait()


async def workloads(kubectl: Kubectl) -> dict[str, dict[str, Any]]:
    """The Workloads of namespace default by name, as kubectl reads them."""
    listed = json.loads(await kubectl.ok("get", "workloads", "-n", "default", "-o", "json"))
    return {item["metadata"]["name"]: item for item in listed["items"]}


def admitted(workload: dict[str, Any]) -> bool:
    """The Workload's Admitted condition is True."""
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions)


async def eventually(
    read: Callable[[], Any],
    until: Callable[[Any], bool] = bool,
    *,
    what: str,
    timeout: float = 90,
    shown: Callable[[Any], Any] = lambda value: value,
) -> Any:
    """``read()`` until ``until`` holds for what it gives (90 s at most, every half second); a failure shows the
    last value read as ``shown`` gives it."""
    return await _eventually(read, until, what=what, timeout=timeout, interval=0.5, shown=shown)
