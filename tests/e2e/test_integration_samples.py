"""Issue 17's done-when, as a user runs it: Kueue's sample of every integrated kind on ``kueue-es demo --keep``.

``kueue-es demo --keep`` runs as its own process (nats-server, the services, the emulated API server with
its simulated kubelet and controllers); the real kubectl, with the kubeconfig the demo writes, installs the
integrations' published CRDs (``kubectl apply --server-side -f tests/fixtures/crds/``, the README's
command), then creates each kind's sample as Kueue publishes it (``kubectl create -f``). Each must give
admitted Workloads with the pod sets Kueue gives that kind (names and counts, written out here from Kueue's
integration code, not computed by ours), and the object must be started: its suspend field false, or, for
kinds run through their pods, its pods ungated. Deleting the object releases its Workloads (each sample's
release is waited for once the last sample started, so a sample may first wait for the quota the one before it
still holds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.demo_process import Demo, admitted, eventually, workloads
from tests.kube.examples import EXAMPLES
from tests.kube.test_custom_resources import FIXTURES
from tests.kube.test_kubectl import Kubectl

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PodSets = list[tuple[str, int]]


@dataclass(frozen=True)
class Sample:
    """One kind's sample: its file, the Workloads Kueue makes of it (each a list of (pod set, count); a
    ``*`` name: any name, for a pod group's role hash), and how to tell it started."""

    kind: str
    path: Path
    workloads: list[PodSets]
    started: str  # "suspend:<jsonpath>" of the object, or "pods": every pod of it ungated
    stdin_fix: Callable[[str], str] | None = None
    extra: list[Path] = field(default_factory=list)  # created first (a TrainJob's runtime)


def _quote_xgboost_cpu(text: str) -> str:
    """Kueue's XGBoostJob sample asks for ``cpu: 0.5``, a number its CRD refuses (integer or string only),
    as a real API server refuses it (tests/kube/test_kubectl_crds.py): quoted, as a user must."""
    return re.sub(r"cpu: 0\.5", 'cpu: "0.5"', text)


def _without_gpus(text: str) -> str:
    """The TrainJob of Kueue's TrainJob page asks for one nvidia.com/gpu per node; the demo's ClusterQueue has
    none (it would wait, as in Kueue), so the GPU request is taken out."""
    return "\n".join(line for line in text.splitlines() if "nvidia.com/gpu" not in line) + "\n"


SAMPLES = [
    Sample("Job", EXAMPLES / "jobs/sample-job.yaml", [[("main", 3)]], "suspend:{.spec.suspend}"),
    Sample(
        "JobSet", EXAMPLES / "jobs/sample-jobset.yaml", [[("workers", 1), ("driver", 1)]], "suspend:{.spec.suspend}"
    ),
    Sample("Pod", EXAMPLES / "pods-kueue/kueue-pod.yaml", [[("main", 1)]], "pods"),
    Sample("Pod", EXAMPLES / "pods-kueue/kueue-pod-group.yaml", [[("*", 2)]], "pods"),
    Sample(
        "PyTorchJob",
        EXAMPLES / "jobs/sample-pytorchjob.yaml",
        [[("master", 1), ("worker", 1)]],
        "suspend:{.spec.runPolicy.suspend}",
    ),
    Sample(
        "TFJob", EXAMPLES / "jobs/sample-tfjob.yaml", [[("ps", 1), ("worker", 2)]], "suspend:{.spec.runPolicy.suspend}"
    ),
    Sample(
        "XGBoostJob",
        EXAMPLES / "jobs/sample-xgboostjob.yaml",
        [[("master", 1), ("worker", 2)]],
        "suspend:{.spec.runPolicy.suspend}",
        stdin_fix=_quote_xgboost_cpu,
    ),
    Sample(
        "PaddleJob", EXAMPLES / "jobs/sample-paddlejob.yaml", [[("worker", 2)]], "suspend:{.spec.runPolicy.suspend}"
    ),
    Sample("JAXJob", EXAMPLES / "jobs/sample-jaxjob.yaml", [[("worker", 2)]], "suspend:{.spec.runPolicy.suspend}"),
    Sample(
        "MPIJob",
        EXAMPLES / "jobs/sample-mpijob.yaml",
        [[("launcher", 1), ("worker", 2)]],
        "suspend:{.spec.runPolicy.suspend}",
    ),
    Sample(
        "TrainJob",
        FIXTURES / "samples/trainjob-pytorch-distributed.yaml",
        [[("node", 2)]],
        "suspend:{.spec.suspend}",
        stdin_fix=_without_gpus,
        extra=[FIXTURES / "samples/clustertrainingruntime-torch-distributed.yaml"],
    ),
    Sample(
        "RayJob",
        EXAMPLES / "jobs/ray-job-sample.yaml",
        [[("head", 1), ("small-group", 1), ("submitter", 1)]],
        "suspend:{.spec.suspend}",
    ),
    Sample(
        "RayCluster",
        EXAMPLES / "jobs/ray-cluster-sample.yaml",
        [[("head", 1), ("small-group", 1)]],
        "suspend:{.spec.suspend}",
    ),
    Sample(
        "RayService",
        EXAMPLES / "jobs/ray-service-sample.yaml",
        [[("head", 1), ("small-group", 1)]],
        "suspend:{.spec.rayClusterConfig.suspend}",
    ),
    Sample(
        "AppWrapper",
        EXAMPLES / "appwrapper/pytorch-sample.yaml",
        [[("sample-appwrapper-pytorch-job-0", 1), ("sample-appwrapper-pytorch-job-1", 1)]],
        "suspend:{.spec.suspend}",
    ),
    Sample(
        "SparkApplication",
        EXAMPLES / "jobs/sample-sparkapplication.yaml",
        [[("driver", 1), ("executor", 2)]],
        "suspend:{.spec.suspend}",
    ),
    Sample("Deployment", EXAMPLES / "serving-workloads/sample-deployment.yaml", [[("main", 1)]] * 3, "pods"),
    Sample("StatefulSet", EXAMPLES / "serving-workloads/sample-statefulset.yaml", [[("main", 3)]], "pods"),
    Sample(
        "LeaderWorkerSet",
        EXAMPLES / "serving-workloads/sample-leaderworkerset.yaml",
        [[("leader", 1), ("worker", 2)]] * 2,
        "pods",
    ),
]


def pod_sets(workload: dict[str, Any]) -> PodSets:
    return [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]]


def matches(want: list[PodSets], got: list[PodSets]) -> bool:
    def normal(sets: PodSets, pattern: PodSets) -> PodSets:
        return [("*", c) if p[0] == "*" else (n, c) for (n, c), p in zip(sets, pattern, strict=False)]

    if len(want) != len(got):
        return False
    remaining = list(got)
    for pattern in want:
        found = next((g for g in remaining if len(g) == len(pattern) and normal(g, pattern) == pattern), None)
        if found is None:
            return False
        remaining.remove(found)
    return True


async def test_every_kinds_sample_is_admitted_and_started_on_the_demo(tmp_path: Path) -> None:
    demo = Demo(tmp_path / "demo")
    kubectl = await demo.start()
    try:
        applied = await kubectl.ok("apply", "--server-side", "-f", str(FIXTURES))
        assert "serverside-applied" in applied
        await kubectl.ok("wait", "--for", "condition=established", "crd", "--all")
        await eventually(
            lambda: _quiet(kubectl), what="the demo's own Job finished and its workload released", timeout=120
        )
        # each sample's release is waited for at the end, not before the next sample: a sample whose quota is
        # still held waits for it to be released to be admitted, as the next one did before
        releasing = [await _one_sample(kubectl, sample) for sample in SAMPLES]
        for what, names in releasing:
            await eventually(
                lambda names=names: _gone(kubectl, names),
                what=f"{what}: its Workloads released after the delete",
                timeout=120,
            )
    finally:
        await demo.stop()


async def _quiet(kubectl: Kubectl) -> bool:
    return not [w for w in (await workloads(kubectl)).values() if admitted(w) and not _finished(w)]


def _brief(new: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Each Workload's name and its True conditions: what a failure shows of the Workloads last read."""
    return [
        (
            w["metadata"]["name"],
            [c["type"] for c in (w.get("status") or {}).get("conditions") or [] if c.get("status") == "True"],
        )
        for w in new
    ]


def _finished(workload: dict[str, Any]) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Finished" and c.get("status") == "True" for c in conditions)


async def _one_sample(kubectl: Kubectl, sample: Sample) -> tuple[str, set[str]]:
    """Create the sample, check its Workloads and that it started, and delete it; returns what it is and the names
    of its Workloads, whose release the caller waits for."""
    what = f"{sample.kind} ({sample.path.name})"
    before = set(await workloads(kubectl))
    pods_before = set(await _pods(kubectl))
    for extra in sample.extra:
        await kubectl.ok("apply", "--server-side", "-f", str(extra))
    text = sample.path.read_text()
    created = await kubectl.ok("create", "-f", "-", stdin=sample.stdin_fix(text) if sample.stdin_fix else text)
    objects = [line.split()[0] for line in created.splitlines() if line.endswith(" created")]
    assert objects, f"{what}: kubectl created nothing: {created!r}"

    async def new_workloads() -> list[dict[str, Any]]:
        # a finished one counts: it keeps its admission (Admitted stays True, as in Kueue), and a sample whose pods
        # run a second can finish between two reads
        return [w for name, w in (await workloads(kubectl)).items() if name not in before]

    def all_admitted(new: list[dict[str, Any]]) -> bool:
        return len(new) == len(sample.workloads) and all(admitted(w) for w in new)

    new = await eventually(
        new_workloads, all_admitted, what=f"{what}: {len(sample.workloads)} admitted Workload(s)", shown=_brief
    )
    got = [pod_sets(w) for w in new]
    assert matches(sample.workloads, got), f"{what}: pod sets {got}, Kueue gives {sample.workloads}"

    if sample.started.startswith("suspend:"):
        for obj in objects:
            path = sample.started.removeprefix("suspend:")
            await eventually(
                lambda obj=obj, path=path: _is(kubectl, obj, path, "false"), what=f"{what}: {obj} unsuspended"
            )
    else:
        members = sum(count for sets in sample.workloads for _, count in sets)
        await eventually(
            lambda: _pods_ungated(kubectl, pods_before, members), what=f"{what}: its {members} pods ungated"
        )

    for obj in reversed(objects):
        await kubectl.ok("delete", obj, "--wait=false")
    names = {w["metadata"]["name"] for w in new}
    if len(objects) > 1 and all(obj.startswith("pod/") for obj in objects):
        # a pod group not yet successful keeps its quota for replacement pods when its pods go: Kueue's "Run
        # plain Pods", Termination, frees it by a delete of the Workload (pod_controller.go keeps the members'
        # finalizers until the group is replaced, finished or its Workload deleted)
        # (a group whose pods all finished first loses its finalizers and its Workload goes with its owners, the
        # pods: already gone then)
        for name in sorted(names):
            await kubectl.ok("delete", "workload", name, "-n", "default", "--wait=false", "--ignore-not-found")
    return what, names


async def _is(kubectl: Kubectl, obj: str, jsonpath: str, want: str) -> bool:
    return (await kubectl.ok("get", obj, "-o", f"jsonpath={jsonpath}")).strip() == want


async def _pods(kubectl: Kubectl) -> dict[str, dict[str, Any]]:
    listed = json.loads(await kubectl.ok("get", "pods", "-n", "default", "-o", "json"))["items"]
    return {pod["metadata"]["name"]: pod for pod in listed}


async def _pods_ungated(kubectl: Kubectl, before: set[str], members: int) -> bool:
    """The sample's pods (those new since it was created) number its pod sets' and none is gated."""
    new = [pod for name, pod in (await _pods(kubectl)).items() if name not in before]
    return len(new) >= members and not any((pod.get("spec") or {}).get("schedulingGates") for pod in new)


async def _gone(kubectl: Kubectl, names: set[str]) -> bool:
    current = await workloads(kubectl)
    return all(name not in current or _finished(current[name]) for name in names)
