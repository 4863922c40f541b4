"""Live, through real processes: the statuses Kueue writes on queues and Cohorts, and partial admission on the Job.

nats-server, the five services and the emulated API server, objects created through the
API as a user would: a Job of parallelism 10 that accepts 4
(``kueue.x-k8s.io/job-min-parallelism``) in a ClusterQueue with room for 6 is admitted
with 6 pods and runs with ``spec.parallelism: 6``; its ClusterQueue and LocalQueue show
Active=True ``Ready`` with the counts and usage; a ClusterQueue naming a missing flavor
shows Active=False ``FlavorNotFound`` with Kueue's message; a Cohort that is its own
parent shows the cycle. Stopping the ClusterQueue (``HoldAndDrain``) evicts the workload:
the Job is suspended with its parallelism back at 10, its Workload the same one, and the
ClusterQueue shows ``Stopped``. Every decision replays.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.jobframework import jobs
from kueue_es.replay import replay_bus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.sim.emulator import serve_emulator
from kueue_es.sim.kubelet import SIM_DURATION_ANNOTATION, SimulatedKubelet
from kueue_es.supervisor import Supervisor
from tests.e2e.waiting import eventually
from tests.integration.harness import cluster_queue, flavor, job, local_queue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

JOB_REF = kube.ref_for("batch/v1", "Job")


def active(obj: dict[str, Any]) -> dict[str, Any]:
    """The Active condition of an object's status, without its time and generation ({} when none)."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Active":
            return {k: condition.get(k) for k in ("status", "reason", "message")}
    return {}


async def test_statuses_and_partial_admission_live(tmp_path: Path) -> None:
    async with NatsServer(store_dir=tmp_path / "nats") as server, serve_emulator() as emulator:
        supervisor = Supervisor(
            nats_url=server.url, log_dir=tmp_path / "logs", kube_args=["--kube-server", emulator.url]
        )
        await supervisor.start()
        api = await kube.make_api_client(server=emulator.url)
        kubelet = asyncio.create_task(SimulatedKubelet(api, default_duration_seconds=300).run())
        bus = await nats_bus.connect(server.url)
        try:
            wide = job("wide", parallelism=10, completions=10)
            wide["metadata"]["annotations"] = {jobs.MIN_PARALLELISM_ANNOTATION: "4", SIM_DURATION_ANNOTATION: "300"}
            self_parent = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Cohort",
                "metadata": {"name": "loop"},
                "spec": {"parentName": "loop"},
            }
            for manifest in (
                flavor("default-flavor"),
                cluster_queue("cq", cpu=6),
                local_queue("user-queue", "cq"),
                cluster_queue("broken", flavor_name="gpu"),
                self_parent,
                wide,
            ):
                await kube.apply_manifest(api, manifest)

            async def get(ref: resources.ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any]:
                return await kube.get_object(api, ref, namespace=namespace, name=name)

            running = await eventually(
                lambda: get(JOB_REF, "wide", "default"),
                lambda j: j["spec"].get("suspend") is False,
                what="Job wide started",
            )
            assert (running["spec"]["parallelism"], running["spec"]["completions"]) == (6, 10)
            workloads, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
            assert [w["status"]["admission"]["podSetAssignments"][0]["count"] for w in workloads] == [6]
            assert workloads[0]["spec"]["podSets"][0]["count"] == 10  # the Workload keeps what the Job asked
            admitted_uid = workloads[0]["metadata"]["uid"]

            cq = await eventually(
                lambda: get(resources.CLUSTER_QUEUES, "cq"),
                lambda o: (o.get("status") or {}).get("admittedWorkloads") == 1 and active(o),
                what="ClusterQueue cq status",
            )
            assert active(cq) == {"status": "True", "reason": "Ready", "message": "Can admit new workloads"}
            assert cq["status"]["pendingWorkloads"] == 0 and cq["status"]["reservingWorkloads"] == 1
            assert cq["status"]["flavorsUsage"] == [
                {
                    "name": "default-flavor",
                    "resources": [
                        {"name": "cpu", "total": "6", "borrowed": "0"},
                        {"name": "memory", "total": "1200Mi", "borrowed": "0"},
                    ],
                }
            ]
            # LocalQueue status is its own write, after the ClusterQueue's: wait for it too.
            lq = await eventually(
                lambda: get(resources.LOCAL_QUEUES, "user-queue", "default"),
                lambda o: (o.get("status") or {}).get("admittedWorkloads") == 1 and active(o),
                what="LocalQueue user-queue status",
            )
            assert active(lq) == {
                "status": "True",
                "reason": "Ready",
                "message": "Can submit new workloads to localQueue",
            }
            assert lq["status"]["admittedWorkloads"] == 1

            broken = await eventually(
                lambda: get(resources.CLUSTER_QUEUES, "broken"), active, what="ClusterQueue broken status"
            )
            assert active(broken) == {
                "status": "False",
                "reason": "FlavorNotFound",
                "message": "Can't admit new workloads: references missing ResourceFlavor(s): gpu.",
            }
            loop = await eventually(lambda: get(resources.COHORTS, "loop"), active, what="Cohort loop status")
            assert active(loop) == {
                "status": "False",
                "reason": "CohortHasCycle",
                "message": "Can't admit new workloads: the cohort has a cycle: loop -> loop.",
            }

            # Stop the ClusterQueue and drain it: the workload is evicted, the Job given back its parallelism.
            await kube.patch_object(
                api, resources.CLUSTER_QUEUES, name="cq", patch={"spec": {"stopPolicy": "HoldAndDrain"}}
            )
            stopped = await eventually(
                lambda: get(JOB_REF, "wide", "default"),
                lambda j: j["spec"].get("suspend") is True and j["spec"]["parallelism"] != 6,
                what="Job wide suspended and given back its parallelism",
            )
            assert (stopped["spec"]["parallelism"], stopped["spec"]["completions"]) == (10, 10)
            cq = await eventually(
                lambda: get(resources.CLUSTER_QUEUES, "cq"),
                lambda o: active(o).get("reason") == "Stopped",
                what="ClusterQueue cq stopped",
            )
            assert active(cq) == {
                "status": "False",
                "reason": "Stopped",
                "message": "Can't admit new workloads: is stopped.",
            }
            lq = await eventually(
                lambda: get(resources.LOCAL_QUEUES, "user-queue", "default"),
                lambda o: active(o).get("status") == "False",
                what="LocalQueue inactive",
            )
            assert active(lq)["reason"] == "ClusterQueueIsInactive"
            # the same Workload, evicted: the Job suspended before its parallelism came back still matched the pod
            # sets it ran (Kueue's EquivalentToWorkload, expectedRunningPodSets); before, it was deleted as not
            # matching and made again (found by a new user's trial)
            workloads, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
            assert [w["metadata"]["uid"] for w in workloads] == [admitted_uid]
            evicted = [c for c in workloads[0]["status"]["conditions"] if c["type"] == "Evicted"]
            assert [c["status"] for c in evicted] == ["True"]
        finally:
            kubelet.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await kubelet
            codes = await supervisor.stop()
            await api.close()
        assert codes == {name: 0 for name in codes}, codes
        report = await replay_bus(bus, deciders.BY_ROLE)
        await bus.close()
        assert report.ok and report.matched == report.decisions
