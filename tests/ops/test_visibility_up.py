"""Kueue's visibility API end to end: ``kueue-es up --emulator`` runs the visibility server as a process,
registers it with the emulated API server, and the real kubectl reads pending positions with
``get --raw`` as Kueue's docs show it (pending_workloads_on_demand.md): six sample Jobs on Kueue's quick
start, three admitted (9 CPU, 3 each), three pending in the admitter's order."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from pathlib import Path

import aiohttp
import pytest

from kueue_es.supervisor import SERVICES
from tests.ops.test_up import EXAMPLES, free_ports, kubectl, start_up, until

GROUP = "visibility.kueue.x-k8s.io"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_kubectl_get_raw_shows_pending_positions_under_up(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = tmp_path / "up.out"
    port = free_ports(
        len(SERVICES) + 6
    )  # the services, supervisor, compactor, visibility, publisher, edge, provisioning
    visibility_health = f"http://127.0.0.1:{port + len(SERVICES) + 2}"
    # the admitted Jobs run (the simulated kubelet) longer than the test: three stay pending
    up = await start_up(
        "--emulator", "--duration", "600", "--dir", str(home), "--health-port", str(port), log=out
    )  # fmt: skip
    kubeconfig = home / "kubeconfig"
    try:

        async def ready() -> bool:
            assert up.returncode is None, out.read_text()
            if "kueue-es is up" not in out.read_text():
                return False
            try:
                async with aiohttp.ClientSession() as session, session.get(f"{visibility_health}/readyz") as answer:
                    return answer.status == 200
            except aiohttp.ClientError:
                return False

        await until(ready, timeout=90, what="the visibility server ready", log=out)
        await kubectl(kubeconfig, "apply", "-f", str(EXAMPLES / "admin/single-clusterqueue-setup.yaml"))
        for _ in range(6):
            await kubectl(kubeconfig, "create", "-f", str(EXAMPLES / "jobs/sample-job.yaml"))

        async def settled() -> list[dict] | None:
            workloads = json.loads(await kubectl(kubeconfig, "get", "workloads", "-n", "default", "-o", "json"))
            items = workloads["items"]
            admitted = [w for w in items if any(c["type"] == "Admitted" and c["status"] == "True"
                                                for c in w.get("status", {}).get("conditions", []))]  # fmt: skip
            pending = [w for w in items if w not in admitted]
            if len(items) < 6 or len(admitted) < 3:
                return None
            summary = json.loads(
                await kubectl(
                    kubeconfig, "get", "--raw", f"/apis/{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads"
                )
            )
            return summary["items"] if len(summary["items"]) == len(pending) == 3 else None

        items = await until(settled, timeout=120, what="three admitted and three pending, listed", log=out)
        assert [i["positionInClusterQueue"] for i in items] == [0, 1, 2]
        assert [i["positionInLocalQueue"] for i in items] == [0, 1, 2]
        assert {i["localQueueName"] for i in items} == {"user-queue"}
        assert all(i["metadata"]["ownerReferences"][0]["kind"] == "Job" for i in items)
        # same-second creations are ordered by UID (the Job's, which the workload carries), as the admitter does
        order = [(i["metadata"]["creationTimestamp"], i["metadata"]["ownerReferences"][0]["uid"]) for i in items]
        assert order == sorted(order)

        local = json.loads(
            await kubectl(
                kubeconfig,
                "get",
                "--raw",
                f"/apis/{GROUP}/v1beta1/namespaces/default/localqueues/user-queue/pendingworkloads?limit=1&offset=1",
            )
        )
        assert local["apiVersion"] == f"{GROUP}/v1beta1"
        assert [(i["metadata"]["name"], i["positionInLocalQueue"]) for i in local["items"]] == [
            (items[1]["metadata"]["name"], 1)
        ]
        process = await asyncio.create_subprocess_exec(
            "kubectl", f"--kubeconfig={kubeconfig}", "get", "--raw",
            f"/apis/{GROUP}/v1beta2/clusterqueues/no-such-queue/pendingworkloads",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await process.communicate()
        assert process.returncode != 0
        assert f'clusterqueue.{GROUP} "no-such-queue" not found' in err.decode()
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(up.wait(), timeout=30)
    assert code == 130, out.read_text()
    assert "visibility 0" in " ".join(out.read_text().split())
