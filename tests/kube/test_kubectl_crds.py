"""The real kubectl installs the integrations' CRDs on the emulated API server and works with their kinds.

As a user does on ``kueue-es demo --keep``: ``kubectl apply --server-side -f tests/fixtures/crds/``
(after kubectl has cached the discovery of a cluster without them: kubectl must find the new kinds),
``kubectl wait --for condition=established``, then Kueue's sample of each kind with ``kubectl create -f``
(kubectl's strict validation against the published schemas), ``kubectl get`` with the CRDs' printer
columns, ``kubectl explain``, ``kubectl scale`` through the scale subresource, and ``kubectl delete
crd``. Skipped, saying so, where kubectl is not on PATH.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.kube.test_custom_resources import FIXTURES, SAMPLES, sample
from tests.kube.test_kubectl import Kubectl, kubectl  # noqa: F401 -- the fixture

pytestmark = pytest.mark.timeout(240)


@pytest.mark.slow  # 20 s: every fixture CRD through the real kubectl
async def test_every_fixture_crd_installed_with_kubectl_serves_kueue_samples(kubectl: Kubectl) -> None:  # noqa: F811
    assert (await kubectl.ok("get", "crd")) == ""  # discovery cached without the CRDs' groups
    applied = await kubectl.ok("apply", "--server-side", "-f", str(FIXTURES))
    assert applied.count("serverside-applied") == 16, applied
    assert "condition met" in await kubectl.ok("wait", "--for", "condition=established", "crd", "--all")
    listed = (await kubectl.ok("get", "crd", "-o", "name")).split()
    assert "customresourcedefinition.apiextensions.k8s.io/rayjobs.ray.io" in listed and len(listed) == 16

    files: list[str] = []
    for kind, path in SAMPLES.items():
        files += ["-f", str(path)] if kind != "XGBoostJob" else []
    created = await kubectl.ok("create", *files)
    for line in ("rayjob.ray.io/rayjob-sample created", "pytorchjob.kubeflow.org/pytorch-simple created"):
        assert line in created
    assert "trainjob.trainer.kubeflow.org/pytorch-distributed created" in created

    printed = await kubectl.ok("get", "rayjobs,pytorchjobs,lws,aw,sparkapp,trainjobs,mpijobs")
    assert "JOB STATUS" in printed and "DEPLOYMENT STATUS" in printed  # KubeRay's printer columns
    for name in ("rayjob-sample", "pytorch-simple", "nginx-leaderworkerset", "sample-appwrapper-pytorch-job"):
        assert name in printed
    assert "raycluster.ray.io/raycluster-complete" in await kubectl.ok("get", "all")  # KubeRay's category

    explained = await kubectl.ok("explain", "rayjob.spec.suspend")
    assert "FIELD: suspend <boolean>" in explained
    assert "scaled" in await kubectl.ok("scale", "lws", "nginx-leaderworkerset", "--replicas=3")
    assert await kubectl.ok("get", "lws", "nginx-leaderworkerset", "-o", "jsonpath={.spec.replicas}") == "3"

    # Kueue's XGBoostJob example (cpu: 0.5, a number) is refused as a real API server refuses it; quoted it goes in
    code, _, err = await kubectl.run("create", "-f", str(SAMPLES["XGBoostJob"]))
    assert code != 0 and 'requests.cpu in body must be of type integer,string: "number"' in err
    created = await kubectl.ok("create", "-f", "-", stdin=yaml.safe_dump(sample("XGBoostJob")))
    assert "xgboostjob.kubeflow.org/xgboost-dist-iris-test-train created" in created

    # a field the published schema does not have is refused, as kubectl's strict validation asks
    code, _, err = await kubectl.run("create", "-f", "-", stdin=_misspelt_rayjob())
    assert code != 0 and 'unknown field "spec.entrypont"' in err

    # client-side apply of a large CRD: its last-applied annotation is over 256 KiB, refused as in a cluster
    code, _, err = await kubectl.run("apply", "-f", str(FIXTURES / "kubeflow.org_tfjobs.yaml"))
    assert code != 0 and "Too long: must have at most 262144 bytes" in err

    assert "deleted" in await kubectl.ok("delete", "crd", "rayjobs.ray.io")
    code, _, err = await kubectl.run("get", "rayjob", "rayjob-sample")
    assert code != 0 and ("NotFound" in err or "doesn't have a resource type" in err)
    assert "rayjobs.ray.io" not in await kubectl.ok("get", "crd")


async def test_a_small_crd_applies_client_side_too(kubectl: Kubectl, tmp_path: Path) -> None:  # noqa: F811
    """AppWrapper's CRD (20 KB) takes a plain ``kubectl apply``; applying it again changes nothing."""
    crd = str(FIXTURES / "workload.codeflare.dev_appwrappers.yaml")
    assert "created" in await kubectl.ok("apply", "-f", crd)
    assert "unchanged" in await kubectl.ok("apply", "-f", crd)
    assert "condition met" in await kubectl.ok(
        "wait", "--for=condition=established", "crd/appwrappers.workload.codeflare.dev"
    )
    assert "appwrapper.workload.codeflare.dev/sample-appwrapper-pytorch-job created" in await kubectl.ok(
        "apply", "-f", str(SAMPLES["AppWrapper"])
    )
    assert "sample-appwrapper-pytorch-job" in await kubectl.ok("get", "aw")


def _misspelt_rayjob() -> str:
    return (
        "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: misspelt}\n"
        "spec: {entrypont: python x.py, rayClusterSpec: {headGroupSpec: {rayStartParams: {}, "
        "template: {spec: {containers: [{name: h, image: ray}]}}}}}\n"
    )
