"""The simulated AppWrapper controller's pure rules (kueue_es/sim/appwrappers.py; project-codeflare/appwrapper
appwrapper_controller.go)."""

from __future__ import annotations

from typing import Any

from kueue_es.jobframework import integrations
from kueue_es.jobframework.integrations import appwrapper as appwrapper_integration
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


def reasons(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_a_suspended_appwrapper_deploys_nothing() -> None:
    """The AppWrapper controller's first pass: phase Suspended, no condition set (nothing deployed to undo)."""
    out = appwrappers.sync(aw(suspend=True), [], [], now=NOW)
    assert out.create == [] and out.status["phase"] == "Suspended"
    assert "conditions" not in out.status


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
    assert reasons(out.status) == {
        "QuotaReserved": ("True", "Resuming"),
        "ResourcesDeployed": ("True", "Resuming"),
        "PodsReady": ("False", "Resuming"),
        "Unhealthy": ("False", "Resuming"),
    }


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
    """Suspending: its components deleted; once they and their pods are gone, ResourcesDeployed and QuotaReserved
    False ``Suspended`` (what Kueue waits for to release the quota), PodsReady cleared, phase Suspended."""
    owned = [{"kind": "Job", "metadata": {"name": "job-0"}}]
    running = appwrappers.sync(aw(suspend=False), owned, [pod("Running"), pod("Running")], now=NOW).status
    out = appwrappers.sync(aw(suspend=True, status=running), owned, [pod("Running")], now=NOW)
    assert out.delete == owned and out.status["phase"] == "Suspending"
    assert conditions(out.status)["QuotaReserved"] == "True", "still held while its pods go"
    done = appwrappers.sync(aw(suspend=True, status=out.status), [], [], now=NOW)
    assert done.status["phase"] == "Suspended" and done.delete == []
    assert reasons(done.status) == {
        "QuotaReserved": ("False", "Suspended"),
        "ResourcesDeployed": ("False", "Suspended"),
        "PodsReady": ("False", "Suspended"),
        "Unhealthy": ("False", "Resuming"),
    }


def test_a_component_that_cannot_be_created_fails_the_appwrapper() -> None:
    """createComponents' fatal error: Unhealthy True CreateFailed, phase Failed; then what was made is deleted and,
    once gone, ResourcesDeployed and QuotaReserved False ``Failed``, which Kueue reads as failed. Before, the stand-in
    skipped a kind it did not run and still wrote ResourcesDeployed True: the AppWrapper held its quota for good."""
    started = appwrappers.sync(aw(suspend=False), [], [], now=NOW)
    error = appwrappers.not_simulated("Widget", "example.com/v1")
    failed = appwrappers.create_failed(started.status, error, now=NOW)
    assert failed["phase"] == "Failed" and reasons(failed)["Unhealthy"] == ("True", "CreateFailed")
    [unhealthy] = [c for c in failed["conditions"] if c["type"] == "Unhealthy"]
    assert unhealthy["message"] == f"error creating components: {error}"
    assert integration_finished(failed) is None, "Kueue: still deleting resources for failed AppWrapper"
    owned = [{"kind": "Job", "metadata": {"name": "job-0"}}]
    deleting = appwrappers.sync(aw(suspend=False, status=failed), owned, [], now=NOW)
    assert deleting.delete == owned and deleting.status == failed
    gone = appwrappers.sync(aw(suspend=False, status=failed), [], [], now=NOW)
    assert gone.create == [] and gone.status["phase"] == "Failed"
    assert reasons(gone.status)["ResourcesDeployed"] == ("False", "Failed")
    assert reasons(gone.status)["QuotaReserved"] == ("False", "Failed")
    assert integration_finished(gone.status) == integrations.Finished(succeeded=False, message="AppWrapper failed")


def test_conditions_change_in_place_their_time_only_with_their_status() -> None:
    """SetStatusCondition: PodsReady keeps its place and its transition time while its message changes."""
    owned = [{"kind": "Job", "metadata": {"name": "job-0"}}]
    ready = appwrappers.sync(aw(suspend=False), owned, [pod("Running"), pod("Running")], now=NOW).status
    later = "2026-01-01T00:01:00Z"
    again = appwrappers.sync(aw(suspend=False, status=ready), owned, [pod("Running"), pod("Succeeded")], now=later)
    assert [c["type"] for c in again.status["conditions"]] == [c["type"] for c in ready["conditions"]]
    [before] = [c for c in ready["conditions"] if c["type"] == "PodsReady"]
    [after] = [c for c in again.status["conditions"] if c["type"] == "PodsReady"]
    assert (before["message"], after["message"]) == (
        "2 pods running; 0 pods succeeded",
        "1 pods running; 1 pods succeeded",
    )
    assert after["lastTransitionTime"] == before["lastTransitionTime"] == NOW


def integration_finished(status: dict[str, Any]) -> Any:
    return appwrapper_integration.finished({"status": status})


def out_phase(out: appwrappers.Sync) -> str:
    return str(out.status["phase"])
