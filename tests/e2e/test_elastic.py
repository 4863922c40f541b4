"""Live, through real processes: an elastic Job scaled from 2 to 4 pods while it runs (issue 21).

nats-server, the five services with ElasticJobsViaWorkloadSlices on, the emulated API server
(its Kueue Job webhook gates an elastic Job's pod template) and its simulated controllers (which
make an elastic Job's pods). Job ``elastic`` (2 pods of 1 CPU, ``kueue.x-k8s.io/elastic-job:
"true"``) is admitted in a ClusterQueue of 4 CPU and its two pods released; then the real
``kubectl patch`` sets its parallelism to 4. A replacement slice is admitted for the 2 CPU more
without the Job ever being suspended, the first slice is finished ``WorkloadSliceReplaced``, the
two new pods are released and the first two keep running with the same UIDs. Then a scale-down
to 1 gives quota back at once. Every decision replays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kueue_es.events import slices
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.e2e.elastic_system import KUBECTL, elastic_system
from tests.e2e.test_reclaim import cpu_usage
from tests.e2e.waiting import eventually
from tests.integration.harness import cluster_queue, flavor, job, local_queue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

JOB_REF = kube.ref_for("batch/v1", "Job")


def elastic_job(name: str, *, parallelism: int) -> dict[str, Any]:
    """A queued batch/v1 Job annotated elastic."""
    manifest = job(name, parallelism=parallelism, completions=10)
    manifest["metadata"]["annotations"] = {slices.ELASTIC_JOB_ANNOTATION: "true"}
    return manifest


def running_pods(pods: list[dict[str, Any]], job_name: str) -> dict[str, str]:
    """Name -> UID of the job's pods that run (released: no scheduling gate, phase Running)."""
    return {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in pods
        if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == job_name
        and not (p.get("spec") or {}).get("schedulingGates")
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The status condition of type ``kind`` ({} when absent)."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


@pytest.mark.skipif(KUBECTL is None, reason="the real kubectl is not on PATH")
async def test_elastic_job_scales_up_without_restarting_its_pods_live(tmp_path: Path) -> None:
    assert KUBECTL is not None
    async with elastic_system(tmp_path, feature_gates=f"{slices.GATE}=true") as system:
        for manifest in (flavor("default-flavor"), cluster_queue("cq", cpu=4), local_queue("user-queue", "cq")):
            await kube.apply_manifest(system.api, manifest)
        await kube.apply_manifest(system.api, elastic_job("elastic", parallelism=2))

        created = await system.get(JOB_REF, "elastic", "default")
        gates = created["spec"]["template"]["spec"].get("schedulingGates")
        assert gates == [{"name": slices.ELASTIC_JOB_GATE}]  # Kueue's Job webhook, in the emulator
        first_pods = running_pods(
            await eventually(
                system.pods, lambda ps: len(running_pods(ps, "elastic")) == 2, what="two system.pods running"
            ),
            "elastic",
        )
        (first_slice,) = [w["metadata"]["name"] for w in await system.workloads()]

        # the real kubectl, as a process: the emulator serves it from this event loop
        out = await system.kubectl("patch", "job", "elastic", "--type=merge", "-p", '{"spec":{"parallelism":4}}')
        assert out.strip() == "job.batch/elastic patched"
        four = await eventually(
            system.pods, lambda ps: len(running_pods(ps, "elastic")) == 4, what="four system.pods running"
        )
        now_running = running_pods(four, "elastic")
        assert first_pods.items() <= now_running.items()  # the first two kept running: same names, same UIDs
        assert (await system.get(JOB_REF, "elastic", "default"))["spec"]["suspend"] is False

        listed = await eventually(
            system.workloads,
            lambda ws: any(condition(w, "Finished").get("status") == "True" for w in ws),
            what="the first slice finished",
        )
        by_name = {w["metadata"]["name"]: w for w in listed}
        old = by_name.pop(first_slice)
        assert condition(old, "Finished")["reason"] == slices.REPLACED_REASON
        ((new_name, new),) = by_name.items()
        assert new["metadata"]["annotations"][slices.REPLACEMENT_FOR_ANNOTATION] == f"default/{first_slice}"
        assert new["metadata"]["annotations"][slices.SLICE_NAME_ANNOTATION] == first_slice
        # Kueue's message names the new slice's Workload object (its UID), not the Job's UID
        job_uid = created["metadata"]["uid"]
        assert new["metadata"]["uid"] != job_uid
        assert condition(old, "Finished")["message"] == slices.replaced_message(
            uid=new["metadata"]["uid"], job_uid=job_uid
        )
        admitted = await eventually(
            lambda: system.get(resources.WORKLOADS, new_name, "default"),
            lambda w: condition(w, "Admitted").get("status") == "True",
            what="the replacement slice admitted",
        )
        assert admitted["status"]["admission"]["podSetAssignments"][0]["count"] == 4
        cq = await eventually(
            lambda: system.get(resources.CLUSTER_QUEUES, "cq"),
            lambda o: cpu_usage(o) == "4",
            what="ClusterQueue cq using 4 CPU (not 6: the first slice is not counted twice)",
        )
        assert cpu_usage(cq) == "4"
        # the replacement's PodsReady holds for the new count: the Job's status follows its four pods
        # (the emulated Job kept active=ready=2, so the slice waited for start for ever: found by a new user)
        await eventually(
            lambda: system.get(resources.WORKLOADS, new_name, "default"),
            lambda w: condition(w, "PodsReady").get("status") == "True",
            what="the replacement slice PodsReady",
        )

        await kube.patch_object(
            system.api, JOB_REF, namespace="default", name="elastic", patch={"spec": {"parallelism": 1}}
        )
        await eventually(
            lambda: system.get(resources.CLUSTER_QUEUES, "cq"),
            lambda o: cpu_usage(o) == "1",
            what="quota given back at once on the scale-down",
        )
        assert len(await system.workloads()) == 2  # updated in place: no new slice
