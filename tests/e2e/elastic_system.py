"""The live system the elastic-workload end-to-end tests drive (tests/e2e/test_elastic*.py, test_ray_elastic.py).

nats-server, the services as processes (the watcher with the given feature gates), the emulated API
server with elastic jobs on (its webhooks gate an elastic job's pod templates) and its simulated
controllers (which make an elastic job's pods), a kubeconfig for the real kubectl, and a reader of the
log. On leaving: every service stopped with exit code 0, and every decision on the log replays.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from kueue_es import deciders
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.replay import replay_bus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim.controllers import SimulatedControllers
from kueue_es.sim.emulator import serve_emulator
from kueue_es.supervisor import Supervisor

KUBECTL = shutil.which("kubectl")


@dataclasses.dataclass
class ElasticSystem:
    """``api``: a client of the emulated API server; ``kubeconfig``: for the real kubectl; ``bus``: the log."""

    api: Any
    kubeconfig: Path
    bus: Bus

    async def get(self, ref: resources.ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The object, {} when it does not exist."""
        try:
            return await kube.get_object(self.api, ref, namespace=namespace, name=name)
        except kube_errors.NotFoundError:
            return {}

    async def pods(self) -> list[dict[str, Any]]:
        """The pods of namespace ``default``."""
        return (await kube.list_objects(self.api, resources.PODS, namespace="default"))[0]

    async def workloads(self) -> list[dict[str, Any]]:
        """The Workloads of namespace ``default``."""
        return (await kube.list_objects(self.api, resources.WORKLOADS, namespace="default"))[0]

    async def kubectl(self, *args: str) -> str:
        """Run the real kubectl against the emulated API server; its stdout (AssertionError on failure)."""
        assert KUBECTL is not None, "the real kubectl is not on PATH"
        process = await asyncio.create_subprocess_exec(
            KUBECTL,
            *args,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), timeout=60)
        assert process.returncode == 0, err.decode()
        return out.decode()


@contextlib.asynccontextmanager
async def elastic_system(
    tmp_path: Path, *, feature_gates: str, extra_resources: Sequence[resources.ResourceRef] = ()
) -> AsyncIterator[ElasticSystem]:
    """Start the system (see the module) with the watcher's ``--feature-gates feature_gates``; yield it;
    then stop it, assert every service exited 0 and that every decision replays."""
    async with (
        NatsServer(store_dir=tmp_path / "nats") as server,
        serve_emulator(elastic_jobs=True, extra_resources=tuple(extra_resources)) as emulator,
    ):
        supervisor = Supervisor(
            nats_url=server.url,
            log_dir=tmp_path / "logs",
            kube_args=["--kube-server", emulator.url],
            watcher_args=["--feature-gates", feature_gates],
        )
        await supervisor.start()
        api = await kube.make_api_client(server=emulator.url)
        controllers = asyncio.create_task(SimulatedControllers(api, lws=False).run())
        kubeconfig = tmp_path / "kubeconfig"
        kube.write_kubeconfig(kubeconfig, server=emulator.url)
        bus = await nats_bus.connect(server.url)
        try:
            yield ElasticSystem(api=api, kubeconfig=kubeconfig, bus=bus)
        finally:
            await cancel_and_wait([controllers])
            codes = await supervisor.stop()
            await api.close()
        assert codes == {name: 0 for name in codes}, codes
        report = await replay_bus(bus, deciders.BY_ROLE)
        await bus.close()
        assert report.ok and report.matched == report.decisions
