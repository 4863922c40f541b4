"""A finished pod stays finished: the emulated API server refuses a ``pods/status`` write that has a container which
may not restart leave ``terminated`` (Kubernetes ValidateContainerStateTransition), and the simulated scheduler
writes a pod's Running onto the pod as it saw it.

Two simulated writers set pod status, the kubelet (a Job's pods Succeeded) and the scheduler stand-in (a pending pod
Running). The scheduler's Running, written from a view taken before the kubelet's Succeeded, used to land after it:
the pod ran again for good, its AppWrapper never finished (CI: test_kueue_extended_e2e_cases_on_the_demo,
admits_a_wrapped_job, whose Job was Complete with a pod Running).
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, errors, resources
from kueue_es.sim import controllers
from kueue_es.sim.controllers import SimulatedControllers


def pod(name: str, *, restart_policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"restartPolicy": restart_policy, "containers": [{"name": "c", "image": "busybox"}]},
    }


def terminated(exit_code: int) -> dict[str, Any]:
    phase = "Succeeded" if exit_code == 0 else "Failed"
    state = {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}}
    return {"phase": phase, "containerStatuses": [{"name": "c", "image": "busybox", "ready": False, "state": state}]}


RUNNING = {
    "phase": "Running",
    "containerStatuses": [{"name": "c", "image": "busybox", "ready": True, "state": {"running": {}}}],
}


async def write_status(api: k8s_client.ApiClient, name: str, status: dict[str, Any]) -> dict[str, Any]:
    return await client.patch_object(
        api, resources.PODS, namespace="default", name=name, patch={"status": status}, subresource="status"
    )


@pytest.mark.parametrize(
    ("restart_policy", "exit_code", "refused"),
    [("Never", 0, True), ("Never", 1, True), ("OnFailure", 0, True), ("OnFailure", 1, False), ("Always", 0, False)],
)
async def test_a_terminated_container_runs_again_only_when_it_may_restart(
    api: k8s_client.ApiClient, restart_policy: str, exit_code: int, refused: bool
) -> None:
    await client.create_object(api, resources.PODS, namespace="default", body=pod("p", restart_policy=restart_policy))
    await write_status(api, "p", terminated(exit_code))
    if not refused:
        stored = await write_status(api, "p", RUNNING)
        assert stored["status"]["phase"] == "Running"
        return
    with pytest.raises(errors.ApiError) as caught:
        await write_status(api, "p", RUNNING)
    stored = await client.get_object(api, resources.PODS, namespace="default", name="p")

    assert caught.value.status == 422
    assert caught.value.message == (
        'Pod "p" is invalid: status.containerStatuses[0].state: Forbidden: may not be transitioned to '
        "non-terminated state"
    )
    assert stored["status"]["phase"] == terminated(exit_code)["phase"]
    # a write that leaves the container statuses alone is not one
    assert (await write_status(api, "p", {"message": "done"}))["status"]["message"] == "done"


async def test_a_sidecar_init_container_may_run_again(api: k8s_client.ApiClient) -> None:
    body = pod("p", restart_policy="Never")
    body["spec"]["initContainers"] = [{"name": "side", "image": "busybox", "restartPolicy": "Always"}]
    await client.create_object(api, resources.PODS, namespace="default", body=body)
    done = {"name": "side", "image": "busybox", "ready": False, "state": {"terminated": {"exitCode": 0}}}
    await write_status(api, "p", {"initContainerStatuses": [done]})
    again = {**done, "state": {"running": {}}}

    stored = await write_status(api, "p", {"initContainerStatuses": [again]})

    assert stored["status"]["initContainerStatuses"][0]["state"] == {"running": {}}


async def test_a_stale_running_write_leaves_a_finished_pod_finished(api: k8s_client.ApiClient) -> None:
    """The scheduler stand-in's pass saw the pod Pending; the kubelet then wrote it Succeeded; the pass's
    Running write comes after: the pod stays Succeeded."""
    created = await client.create_object(
        api, resources.PODS, namespace="default", body=pod("p", restart_policy="Never")
    )
    seen = copy.deepcopy(created)
    now = datetime.datetime.now(datetime.UTC)
    await write_status(api, "p", controllers.succeeded_status(created, now=now))
    sim = SimulatedControllers(api)
    sim.objects["Pod"] = {("default", "p"): seen}

    await sim._run_pods()
    stored = await client.get_object(api, resources.PODS, namespace="default", name="p")

    assert stored["status"]["phase"] == "Succeeded"
    assert stored["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


async def test_a_stale_running_write_keeps_a_running_pods_start_time(api: k8s_client.ApiClient) -> None:
    """A pass that saw the pod Pending after another already ran it does not write it Running again (its
    ``startTime`` anew): the write names the version it saw."""
    created = await client.create_object(
        api, resources.PODS, namespace="default", body=pod("p", restart_policy="Never")
    )
    first = {**RUNNING, "startTime": "2026-01-01T00:00:00Z"}
    await write_status(api, "p", first)
    sim = SimulatedControllers(api)
    sim.objects["Pod"] = {("default", "p"): copy.deepcopy(created)}

    await sim._run_pods()
    stored = await client.get_object(api, resources.PODS, namespace="default", name="p")

    assert stored["status"]["startTime"] == "2026-01-01T00:00:00Z"
