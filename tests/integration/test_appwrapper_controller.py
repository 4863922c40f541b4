"""Kueue's AppWrapper samples run to their end on the simulated cluster, as on ``kueue-es demo --keep``
(kueue_es/sim/appwrappers.py, the AppWrapper controller's stand-in).

Watcher, admitter and dispatcher on one MemoryBus, the simulated controllers and kubelet, one emulated API server
serving AppWrapper, PyTorchJob and LeaderWorkerSet, and the real kubectl: each sample, created with ``kubectl
create``, is admitted; the stand-in deploys what it wraps with Kueue's podSetInfos applied to the pod templates
(the flavor's nodeSelector and toleration, the ``workload.codeflare.dev/appwrapper`` label), the wrapped kind's own
simulated controller makes and runs its pods, and the AppWrapper follows them: the PyTorchJob sample succeeds and
its Workload finishes, the Deployment and LeaderWorkerSet samples (serving: their pods never end) are Running with
PodsReady. Before, only Jobs, JobSets, Deployments, StatefulSets, Pods and Ray objects were deployed: a wrapped
PyTorchJob or LeaderWorkerSet was never created, yet the AppWrapper said ResourcesDeployed True and held its quota
for good. A component of a kind nothing here runs, or whose CRD is not installed, fails the AppWrapper as the
AppWrapper controller fails one it cannot create (CreateFailed), and its quota is given back.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim import appwrappers
from kueue_es.sim.controllers import LWS_REF, SimulatedControllers
from kueue_es.sim.emulator import serve_emulator
from kueue_es.sim.kubelet import SimulatedKubelet
from tests.integration.harness import (
    SPOT_TOLERATION,
    admitter,
    dispatcher_with_consumer,
    events_of,
    running,
    set_up_queues,
    wait_for,
)
from tests.integration.lifecycle import served
from tests.kube import examples
from tests.kube.test_kubectl import Kubectl

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one"),
]
SPOT = {"instance-type": "spot"}
AW = served("AppWrapper")
PYTORCHJOB = served("PyTorchJob")


@contextlib.asynccontextmanager
async def _emulator(*kinds: resources.ResourceRef) -> AsyncIterator[tuple[Any, k8s_client.ApiClient]]:
    async with serve_emulator(bookmark_interval=0.2, extra_resources=(AW, *kinds)) as emu:
        api = await kube.make_api_client(server=emu.url)
        try:
            yield emu, api
        finally:
            await api.close()


@contextlib.asynccontextmanager
async def _demo_services(api: Any, bus: MemoryBus) -> AsyncIterator[None]:
    """The watcher, admitter, dispatcher, simulated kubelet and simulated controllers, as the demo runs them."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    kubelet = SimulatedKubelet(api, default_duration_seconds=1, watch_options={"backoff_seconds": 0.05})
    async with running(
        Watcher(bus=bus, api=api).run(),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        kubelet.run(),
        SimulatedControllers(api, ray=False).run(),
    ):
        await set_up_queues(api, cpu=64)
        yield


async def _until(api: Any, ref: resources.ResourceRef, name: str, check: Callable[[dict[str, Any]], bool]) -> Any:
    """Poll default/``name`` until ``check`` holds (30 s at most)."""
    async with asyncio.timeout(30):
        while True:
            with contextlib.suppress(kube_errors.NotFoundError):
                obj = await kube.get_object(api, ref, namespace="default", name=name)
                if check(obj):
                    return obj
            await asyncio.sleep(0.05)


def _conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions") or []}


async def _labelled_pods(api: Any, name: str, count: int) -> list[dict[str, Any]]:
    """The pods the AppWrapper's label names, once there are ``count``."""

    async def listed() -> list[dict[str, Any]]:
        found, _ = await kube.list_objects(api, resources.PODS, namespace="default")
        return [p for p in found if (p["metadata"].get("labels") or {}).get(appwrappers.APPWRAPPER_LABEL) == name]

    async with asyncio.timeout(30):
        while len(pods := await listed()) < count:
            await asyncio.sleep(0.05)
    return pods


def _placed(pod: dict[str, Any]) -> bool:
    """The pod carries Kueue's podSetInfo for the spot flavor, as the AppWrapper controller put it in its template."""
    return pod["spec"].get("nodeSelector") == SPOT and SPOT_TOLERATION in (pod["spec"].get("tolerations") or [])


async def test_the_pytorchjob_sample_runs_its_pytorchjob_to_the_end(tmp_path: Path, bus: MemoryBus) -> None:
    """appwrapper/pytorch-sample.yaml: the PyTorchJob is created, owned by the AppWrapper, its Master and Worker
    templates with Kueue's podSetInfos; its pods run and succeed, the PyTorchJob succeeds, the AppWrapper
    succeeds (every expected pod succeeded) and Kueue finishes its Workload."""
    async with _emulator(PYTORCHJOB) as (emu, api), _demo_services(api, bus):
        kubectl = Kubectl(emu.url, tmp_path)
        text = (examples.EXAMPLES / "appwrapper/pytorch-sample.yaml").read_text()
        await kubectl.ok("create", "-f", "-", stdin=text)
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=15)
        job = await _until(api, PYTORCHJOB, "pytorch-simple", lambda o: True)
        made = await _labelled_pods(api, "sample-appwrapper-pytorch-job", 2)
        aw = await _until(api, AW, "sample-appwrapper-pytorch-job", lambda o: o["status"].get("phase") == "Succeeded")
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=15)
        done = await _until(api, PYTORCHJOB, "pytorch-simple", lambda o: "Succeeded" in _conditions(o))

    [owner] = job["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("AppWrapper", "sample-appwrapper-pytorch-job", True)
    for replica in ("Master", "Worker"):
        template = job["spec"]["pytorchReplicaSpecs"][replica]["template"]
        assert template["metadata"]["labels"][appwrappers.APPWRAPPER_LABEL] == "sample-appwrapper-pytorch-job"
        assert template["spec"]["nodeSelector"] == SPOT and SPOT_TOLERATION in template["spec"]["tolerations"]
    assert sorted(p["metadata"]["name"] for p in made) == ["pytorch-simple-master-0", "pytorch-simple-worker-0"]
    assert all(_placed(p) for p in made)
    assert _conditions(done)["Succeeded"][0] == "True"
    assert _conditions(aw)["QuotaReserved"] == ("False", "Succeeded")
    assert _conditions(aw)["ResourcesDeployed"] == ("True", "Succeeded")
    assert (finished.workload, finished.succeeded, finished.message) == (
        admitted.workload,
        True,
        "AppWrapper finished successfully",
    )


@pytest.mark.parametrize(
    ("sample", "name", "pods"),
    [
        # 2 groups of size 3: 2 leaders and 2 x 2 workers (the sample declares 2 and 3 pods)
        ("appwrapper/leaderworkerset-sample.yaml", "sample-appwrapper-lws", 6),
        ("appwrapper/deployment-sample.yaml", "sample-appwrapper-deployment", 3),
    ],
)
async def test_the_serving_samples_deploy_their_pods_and_are_ready(
    tmp_path: Path, bus: MemoryBus, sample: str, name: str, pods: int
) -> None:
    """appwrapper/leaderworkerset-sample.yaml and deployment-sample.yaml: the LeaderWorkerSet or Deployment is
    created with Kueue's podSetInfos, its pods run (serving pods never end), the AppWrapper is Running with
    PodsReady True and Kueue's Workload gets PodsReady."""
    async with _emulator(LWS_REF) as (emu, api), _demo_services(api, bus):
        kubectl = Kubectl(emu.url, tmp_path)
        await kubectl.ok("create", "-f", "-", stdin=(examples.EXAMPLES / sample).read_text())
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=15)
        made = await _labelled_pods(api, name, pods)
        aw = await _until(api, AW, name, lambda o: _conditions(o).get("PodsReady", ("",))[0] == "True")
        await wait_for(bus, types.WorkloadPodsReady, ready=True, timeout=15)
        printed = await kubectl.ok("get", "appwrapper", name, "-o", "jsonpath={.status.phase}")

    assert all(_placed(p) for p in made), [p["spec"] for p in made]
    assert printed == "Running"
    assert _conditions(aw)["QuotaReserved"] == ("True", "Resuming")
    assert _conditions(aw)["ResourcesDeployed"] == ("True", "Resuming")
    assert _conditions(aw)["PodsReady"] == ("True", "SufficientPodsReady")
    assert await events_of(bus, types.WorkloadFinished) == [] and admitted.workload.name.startswith("appwrapper-")


async def test_a_wrapped_pod_runs_to_its_end(tmp_path: Path, bus: MemoryBus) -> None:
    """A Pod an AppWrapper wraps (its controller the AppWrapper) runs its time in the simulated kubelet and
    succeeds, so the AppWrapper does. Before, the kubelet left a pod with a controller to that controller, which
    for an AppWrapper never finishes pods: the AppWrapper stayed Running."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "wrapped"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    aw = {
        "apiVersion": AW.api_version,
        "kind": "AppWrapper",
        "metadata": {"name": "pod-aw", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"components": [{"template": pod}]},
    }
    async with _emulator() as (emu, api), _demo_services(api, bus):
        await Kubectl(emu.url, tmp_path).ok("create", "-f", "-", stdin=json.dumps(aw))
        [made] = await _labelled_pods(api, "pod-aw", 1)
        done = await _until(api, AW, "pod-aw", lambda o: o["status"].get("phase") == "Succeeded")
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=15)

    assert _placed(made) and made["metadata"]["ownerReferences"][0]["kind"] == "AppWrapper"
    assert _conditions(done)["QuotaReserved"] == ("False", "Succeeded") and finished.succeeded


def _widget_appwrapper() -> dict[str, Any]:
    """Kueue's Deployment sample with its component turned into a kind nothing runs here (declared pod set)."""
    [aw] = examples.load("appwrapper/deployment-sample.yaml")
    aw["metadata"]["name"] = "widget"
    component = aw["spec"]["components"][0]
    component["template"] = copy.deepcopy(component["template"]) | {"apiVersion": "example.com/v1", "kind": "Widget"}
    return aw


@pytest.mark.parametrize(
    ("manifest", "error"),
    [
        (_widget_appwrapper, appwrappers.not_simulated("Widget", "example.com/v1")),
        # the PyTorchJob's CRD not installed: the AppWrapper controller's REST mapper finds no match
        (
            lambda: examples.load("appwrapper/pytorch-sample.yaml")[0],
            appwrappers.no_matches("PyTorchJob", "kubeflow.org/v1"),
        ),
    ],
)
async def test_a_component_it_cannot_create_fails_the_appwrapper(
    tmp_path: Path, bus: MemoryBus, manifest: Callable[[], dict[str, Any]], error: str
) -> None:
    """Not deployed, so never ResourcesDeployed True with nothing deployed: the AppWrapper fails as the AppWrapper
    controller fails on a fatal create error (Unhealthy True CreateFailed "error creating components: ...",
    phase Failed, then ResourcesDeployed and QuotaReserved False, reason Failed); Kueue reads it finished,
    failed, and gives its quota back."""
    async with _emulator() as (emu, api), _demo_services(api, bus):
        aw = manifest()
        await Kubectl(emu.url, tmp_path).ok("create", "-f", "-", stdin=json.dumps(aw))
        name = aw["metadata"]["name"]
        await wait_for(bus, types.WorkloadAdmitted, timeout=15)
        failed = await _until(api, AW, name, lambda o: _conditions(o).get("QuotaReserved") == ("False", "Failed"))
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=15)
        await wait_for(bus, types.QuotaReleased, timeout=15)

    assert failed["status"]["phase"] == "Failed"
    [unhealthy] = [c for c in failed["status"]["conditions"] if c["type"] == "Unhealthy"]
    assert (unhealthy["status"], unhealthy["reason"]) == ("True", "CreateFailed")
    assert unhealthy["message"] == f"error creating components: {error}"
    assert _conditions(failed)["ResourcesDeployed"] == ("False", "Failed")
    assert (finished.succeeded, finished.message) == (False, "AppWrapper failed")
