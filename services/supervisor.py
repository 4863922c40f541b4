"""Starting the five services as their own processes, and stopping them gracefully.

``kueue-es up`` and ``kueue-es demo`` run each service as
``python -m services.cli service NAME ...`` with its JSON log in a file, so a
crash of one is visible and the others carry on. Stopping sends SIGTERM (each
service exits cleanly) and kills what is still alive after a grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from events.bus.server import die_with_parent

log = structlog.get_logger(__name__)

SERVICES = ("watcher", "admitter", "preemptor", "tas-placer", "dispatcher")


@dataclass(kw_only=True)
class ServiceProcess:
    """One running service: its name, process and log file."""

    name: str
    process: asyncio.subprocess.Process
    log_path: Path


@dataclass(kw_only=True)
class Supervisor:
    """Starts and stops the services; ``log_dir`` receives ``<service>.log`` files.

    ``extra_args`` maps a service name to arguments it alone gets (the watcher and
    dispatcher take ``--kube-server`` or ``--kubeconfig``).
    """

    nats_url: str
    log_dir: Path
    kube_args: list[str] = field(default_factory=list)
    decider_args: list[str] = field(default_factory=list)
    running: list[ServiceProcess] = field(default_factory=list)

    async def start(self, names: tuple[str, ...] = SERVICES) -> None:
        """Start every named service (all five by default)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            args = ["service", name, "--nats", self.nats_url]
            if name in ("watcher", "dispatcher"):
                args += self.kube_args
            else:
                args += self.decider_args
            log_path = self.log_dir / f"{name}.log"
            with log_path.open("ab") as sink:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "services.cli",
                    *args,
                    stdout=sink,
                    stderr=sink,
                    stdin=asyncio.subprocess.DEVNULL,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    # a service must not outlive whoever started it, even one killed abruptly
                    preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGTERM),
                )
            self.running.append(ServiceProcess(name=name, process=process, log_path=log_path))
            log.info("service_spawned", service=name, pid=process.pid)

    def dead(self) -> list[ServiceProcess]:
        """Services whose process has exited."""
        return [s for s in self.running if s.process.returncode is not None]

    async def stop(self, *, grace: float = 10.0) -> dict[str, int | None]:
        """SIGTERM every service, wait up to ``grace`` seconds, then kill; returns exit codes."""
        for service in self.running:
            if service.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    service.process.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for service in self.running:
            try:
                codes[service.name] = await asyncio.wait_for(service.process.wait(), timeout=grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    service.process.kill()
                codes[service.name] = await service.process.wait()
        self.running.clear()
        return codes
