"""A JobSet runs to its end on the simulated cluster, as on ``kueue-es demo --keep`` (kueue_es/sim/jobsets.py).

Watcher, admitter and dispatcher on one MemoryBus, the simulated controllers and kubelet, one emulated API
server, and the real kubectl: Kueue's jobs/sample-jobset.yaml created with ``kubectl create`` is admitted; the
simulated JobSet controller makes its child Jobs ``<jobset>-<replicatedJob>-<index>`` with the JobSet's labels,
owner reference and Kueue's flavor nodeSelector and toleration; the watcher queues no Workload of their own;
they run, the JobSet gets its replicatedJobsStatus and Completed ``AllJobsCompleted``, and Kueue's JobSet
integration finishes the Workload with the condition's message. An eviction suspends the child Jobs (the
controller's suspendJobs), the workload stops and starts again. Before, no JobSet controller ran: the JobSet
made no Jobs and held its quota until deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim import jobsets
from kueue_es.sim.controllers import SimulatedControllers
from kueue_es.sim.emulator import ClusterEmulator
from kueue_es.sim.kubelet import SimulatedKubelet
from tests.integration.harness import (
    SPOT_TOLERATION,
    admitter,
    commit,
    dispatcher_with_consumer,
    events_of,
    eviction,
    running,
    set_up_queues,
    wait_for,
)
from tests.integration.test_jobset_pod_dispatch import JOBSETS, SPOT_SELECTOR, until
from tests.kube import examples
from tests.kube.test_kubectl import Kubectl

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one"),
]


def sample(duration: str) -> str:
    """Kueue's jobs/sample-jobset.yaml with the simulation's run time on the JobSet, as JSON for kubectl."""
    [doc] = examples.load("jobs/sample-jobset.yaml")
    doc["metadata"]["annotations"] = {"kueue-es.dev/sim-duration-seconds": duration}
    return json.dumps(doc)


async def child_jobs(api: Any, jobset: str, *, count: int = 2) -> dict[str, dict[str, Any]]:
    """The Jobs the JobSet controls, by name, once there are ``count``."""
    async with asyncio.timeout(10):
        while True:
            listed, _ = await kube.list_objects(api, resources.JOBS, namespace="default")
            mine = {
                j["metadata"]["name"]: j
                for j in listed
                if j["metadata"]["labels"].get(jobsets.JOBSET_NAME_LABEL) == jobset
            }
            if len(mine) >= count:
                return mine
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def _demo_services(api: Any, bus: MemoryBus) -> AsyncIterator[None]:
    """The watcher, admitter, dispatcher, simulated kubelet and simulated controllers, as the demo runs them."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    kubelet = SimulatedKubelet(api, default_duration_seconds=60, watch_options={"backoff_seconds": 0.05})
    async with running(
        Watcher(bus=bus, api=api).run(),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        kubelet.run(),
        SimulatedControllers(api, lws=False, ray=False).run(),
    ):
        yield


async def test_a_sample_jobset_runs_its_jobs_and_finishes_its_workload(
    api: Any, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    kubectl = Kubectl(emu.url, tmp_path)
    async with _demo_services(api, bus):
        await set_up_queues(api)
        created = json.loads(await kubectl.ok("create", "-o", "json", "-f", "-", stdin=sample("0.5")))
        name, uid = created["metadata"]["name"], created["metadata"]["uid"]
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=15)
        jobs = await child_jobs(api, name)
        done = await until(api, JOBSETS, name, lambda o: o.get("status", {}).get("terminalState") == "Completed")
        listed = json.loads(await kubectl.ok("get", "jobs", "-l", f"{jobsets.JOBSET_NAME_LABEL}={name}", "-o", "json"))
        submitted = await events_of(bus, types.WorkloadObserved)

    assert sorted(jobs) == [f"{name}-driver-0", f"{name}-workers-0"]
    assert sorted(j["metadata"]["name"] for j in listed["items"]) == sorted(jobs)
    worker = jobs[f"{name}-workers-0"]
    labels = worker["metadata"]["labels"]
    assert {
        k: labels[k] for k in (jobsets.JOBSET_NAME_LABEL, jobsets.REPLICATED_JOB_NAME_LABEL, jobsets.JOB_INDEX_LABEL)
    } == {
        jobsets.JOBSET_NAME_LABEL: name,
        jobsets.REPLICATED_JOB_NAME_LABEL: "workers",
        jobsets.JOB_INDEX_LABEL: "0",
    }
    assert labels[jobsets.JOBSET_UID_LABEL] == uid and labels[jobsets.GLOBAL_REPLICAS_LABEL] == "2"
    assert jobs[f"{name}-driver-0"]["metadata"]["labels"][jobsets.JOB_GLOBAL_INDEX_LABEL] == "1"
    [owner] = worker["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("JobSet", name, uid, True)
    for job in jobs.values():
        pod = job["spec"]["template"]
        assert pod["spec"]["nodeSelector"] == SPOT_SELECTOR and pod["spec"]["tolerations"] == [SPOT_TOLERATION]
        assert pod["metadata"]["labels"][jobsets.JOBSET_NAME_LABEL] == name
        assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])
    # the child Jobs are part of the JobSet's workload, never queued on their own
    assert sorted({s.workload.metadata.name for s in submitted}) == [admitted.workload.name]
    assert (finished.workload, finished.succeeded, finished.message) == (
        admitted.workload,
        True,
        "jobset completed successfully",
    )
    status = done["status"]
    assert [c for c in status["conditions"] if c["type"] == "Completed"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": status["conditions"][-1]["lastTransitionTime"],
        }
    ]
    assert sorted((r["name"], r["succeeded"], r["active"]) for r in status["replicatedJobsStatus"]) == [
        ("driver", 1, 0),
        ("workers", 1, 0),
    ]


async def test_an_evicted_jobset_suspends_its_jobs_and_runs_again(
    api: Any, bus: MemoryBus, emu: ClusterEmulator, tmp_path: Path
) -> None:
    kubectl = Kubectl(emu.url, tmp_path)
    async with _demo_services(api, bus):
        await set_up_queues(api)
        created = json.loads(await kubectl.ok("create", "-o", "json", "-f", "-", stdin=sample("600")))
        name = created["metadata"]["name"]
        [ready] = await wait_for(bus, types.WorkloadPodsReady, ready=True, timeout=10)
        await commit(bus, eviction(ready.workload))
        [stopped] = await wait_for(bus, types.WorkloadStopped, timeout=10)
        suspended = await child_jobs(api, name)
        described = await until(
            api,
            JOBSETS,
            name,
            lambda o: any(
                c["type"] == "Suspended" and c["status"] == "True" for c in o["status"].get("conditions", [])
            ),
        )
        # back in its queue with the quota free: started again, its Jobs resumed on the flavor
        await wait_for(bus, types.DispatchApplied, action="StartJob", count=2, timeout=10)
        await until(api, resources.JOBS, f"{name}-workers-0", lambda o: o["spec"]["suspend"] is False)
        resumed = await child_jobs(api, name)

    assert stopped.workload == ready.workload and stopped.reason == "Preempted"
    assert all(j["spec"]["suspend"] is True for j in suspended.values())  # suspended, not deleted
    assert sorted(j["metadata"]["uid"] for j in resumed.values()) == sorted(
        j["metadata"]["uid"] for j in suspended.values()
    )
    [cond] = [c for c in described["status"]["conditions"] if c["type"] == "Suspended"]
    assert (cond["reason"], cond["message"]) == ("SuspendedJobs", "jobset is suspended")
    for job in resumed.values():
        assert job["spec"]["template"]["spec"]["nodeSelector"] == SPOT_SELECTOR
