"""The simulated AppWrapper controller's pure rules (kueue_es/sim/appwrappers.py; project-codeflare/appwrapper
appwrapper_controller.go)."""

from __future__ import annotations

from typing import Any

from kueue_es.sim import appwrappers

NOW = "2026-01-01T00:00:00Z"


def aw(*, suspend: bool, infos: list[Any] | None = None, status: Any = None) -> dict[str, Any]:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job-0"},
        "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    component: dict[str, Any] = {"template": job}
    if infos is not None:
        component["podSetInfos"] = infos
    out = {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": "aw", "namespace": "ns", "uid": "u1"},
        "spec": {"suspend": suspend, "components": [component]},
    }
    if status is not None:
        out["status"] = status
    return out


def pod(phase: str) -> dict[str, Any]:
    return {"metadata": {"labels": {appwrappers.APPWRAPPER_LABEL: "aw"}}, "status": {"phase": phase}}


def conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_a_suspended_appwrapper_deploys_nothing() -> None:
    out = appwrappers.sync(aw(suspend=True), [], [], now=NOW)
    assert out.create == [] and out.status["phase"] == "Suspended"
    assert conditions(out.status) == {"QuotaReserved": "False", "ResourcesDeployed": "False"}


def test_an_unsuspended_appwrapper_creates_its_components_with_kueues_pod_set_infos() -> None:
    info = {"nodeSelector": {"instance-type": "on-demand"}, "labels": {"kueue.x-k8s.io/podset": "aw-0"}}
    out = appwrappers.sync(aw(suspend=False, infos=[info]), [], [], now=NOW)
    (job,) = out.create
    assert job["metadata"]["namespace"] == "ns" and job["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert job["metadata"]["labels"] == {appwrappers.APPWRAPPER_LABEL: "aw"}
    template = job["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"instance-type": "on-demand"}
    assert template["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "aw-0", appwrappers.APPWRAPPER_LABEL: "aw"}
    assert out.status["phase"] == "Running"
    assert conditions(out.status) == {"QuotaReserved": "True", "ResourcesDeployed": "True", "PodsReady": "False"}


def test_the_appwrapper_succeeds_once_its_expected_pods_all_succeeded() -> None:
    owned = [{"kind": "Job", "metadata": {"name": "job-0"}}]
    running = appwrappers.sync(aw(suspend=False), owned, [pod("Running"), pod("Succeeded")], now=NOW)
    assert out_phase(running) == "Running" and conditions(running.status)["PodsReady"] == "True"
    one = appwrappers.sync(aw(suspend=False), owned, [pod("Succeeded")], now=NOW)
    assert out_phase(one) == "Running"  # two pods expected (the Job's parallelism)
    done = appwrappers.sync(aw(suspend=False), owned, [pod("Succeeded"), pod("Succeeded")], now=NOW)
    assert out_phase(done) == "Succeeded" and done.create == []
    assert conditions(done.status)["QuotaReserved"] == "False"


def test_suspending_a_running_appwrapper_deletes_its_components() -> None:
    owned = [{"kind": "Job", "metadata": {"name": "job-0"}}]
    out = appwrappers.sync(aw(suspend=True, status={"phase": "Running"}), owned, [], now=NOW)
    assert out.delete == owned and out.status["phase"] == "Suspended"


def out_phase(out: appwrappers.Sync) -> str:
    return str(out.status["phase"])
