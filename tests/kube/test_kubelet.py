"""The simulated kubelet runs unsuspended Jobs for their declared time and completes them like the Job controller,
and finishes started plain pods as a kubelet does."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import slices
from kueue_es.jobframework.annotations import EVICTED_ANNOTATION, EVICTION_SEQ_ANNOTATION
from kueue_es.jobframework.pods import SERVING_ANNOTATION
from kueue_es.services.kube import client, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.services.watcher import progress
from kueue_es.sim import emulator, kubelet
from kueue_es.sim.controllers import SimulatedControllers

pytestmark = pytest.mark.timeout(20)


def job(name: str, *, suspend: bool, duration: float | None = None, **spec: Any) -> dict[str, Any]:
    """A Job manifest; ``duration`` sets the simulated run time annotation (seconds)."""
    annotations = {kubelet.SIM_DURATION_ANNOTATION: str(duration)} if duration is not None else {}
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"suspend": suspend, "template": template, **spec},
    }


#: The sim_kubelet fixture's first pod failure backoff, in seconds (the Job controller's is 10 s).
POD_BACKOFF = 0.5


@pytest.fixture
async def sim_kubelet(api: k8s_client.ApiClient) -> AsyncIterator[kubelet.SimulatedKubelet]:
    """A running SimulatedKubelet with a 0.2 s default duration and a pod failure backoff of
    :data:`POD_BACKOFF` s, stopped after the test."""
    simulated = kubelet.SimulatedKubelet(
        api,
        default_duration_seconds=0.2,
        watch_options={"timeout_seconds": 30, "backoff_seconds": 0.05},
        pod_failure_backoff_seconds=POD_BACKOFF,
    )
    simulated.start()
    try:
        yield simulated
    finally:
        await simulated.stop()


async def job_status(api: k8s_client.ApiClient, name: str) -> dict[str, Any]:
    """The current .status of a Job in the default namespace."""
    return (await client.get_object(api, resources.JOBS, namespace="default", name=name)).get("status", {})


async def wait_for_status(api: k8s_client.ApiClient, name: str, check: Any, *, timeout: float = 20.0) -> dict[str, Any]:
    """Poll the Job's status every 50 ms until ``check(status)`` holds; fail after ``timeout`` seconds (20: the
    README's suite on 2 busy cores once took more than 5 s to start a Job of 3 pods; a pass returns at once)."""
    async with asyncio.timeout(timeout):
        while not check(status := await job_status(api, name)):
            await asyncio.sleep(0.05)
    return status


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The condition of a type, if present."""
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), None)


def is_complete(status: dict[str, Any]) -> bool:
    """Whether the Complete condition is True."""
    return (condition(status, "Complete") or {}).get("status") == "True"


@pytest.mark.usefixtures("sim_kubelet")
async def test_unsuspended_job_runs_and_completes(api: k8s_client.ApiClient) -> None:
    """An unsuspended Job starts (startTime, active) and after its duration succeeds with Job-controller status."""
    await client.create_object(
        api, resources.JOBS, namespace="default", body=job("run", suspend=False, parallelism=3, completions=3)
    )
    running = await wait_for_status(api, "run", lambda s: s.get("active") == 3)
    assert running["startTime"] and not is_complete(running)
    done = await wait_for_status(api, "run", is_complete)
    assert done["succeeded"] == 3 and "active" not in done  # JobStatus.active is omitempty
    assert done["completionTime"] >= done["startTime"]
    assert [c["type"] for c in done["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert all(
        c["status"] == "True" and c["reason"] == "CompletionsReached" and c["lastTransitionTime"]
        for c in done["conditions"]
    )


@pytest.mark.usefixtures("sim_kubelet")
async def test_suspended_job_does_not_run(api: k8s_client.ApiClient) -> None:
    """A suspended Job gets Suspended=True and never completes while suspended."""
    await client.create_object(api, resources.JOBS, namespace="default", body=job("held", suspend=True))
    status = await wait_for_status(api, "held", lambda s: condition(s, "Suspended") is not None)
    assert condition(status, "Suspended")["status"] == "True"
    await asyncio.sleep(0.5)  # well past the 0.2 s duration
    status = await job_status(api, "held")
    assert not is_complete(status) and not status.get("startTime") and not status.get("active")


async def test_suspending_a_running_job_cancels_it_and_unsuspending_reruns_it(
    api: k8s_client.ApiClient, sim_kubelet: kubelet.SimulatedKubelet
) -> None:
    """Suspending mid-run sets active 0 and drops startTime; after unsuspending the Job runs its full time again."""
    await client.create_object(api, resources.JOBS, namespace="default", body=job("flip", suspend=False, duration=0.6))
    await wait_for_status(api, "flip", lambda s: s.get("active") == 1)
    await client.patch_object(api, resources.JOBS, namespace="default", name="flip", patch={"spec": {"suspend": True}})
    suspended = await wait_for_status(api, "flip", lambda s: (condition(s, "Suspended") or {}).get("status") == "True")
    assert "active" not in suspended and "startTime" not in suspended
    assert not sim_kubelet.running
    await asyncio.sleep(0.7)
    assert not is_complete(await job_status(api, "flip"))
    await client.patch_object(api, resources.JOBS, namespace="default", name="flip", patch={"spec": {"suspend": False}})
    resumed = await wait_for_status(api, "flip", lambda s: s.get("active") == 1)
    assert condition(resumed, "Suspended")["reason"] == "JobResumed"
    done = await wait_for_status(api, "flip", is_complete)
    assert done["succeeded"] == 1


async def job_events(api: k8s_client.ApiClient, name: str) -> list[tuple[str, str, str, str]]:
    """The Events about the Job ``name`` in ``default``, as (source, type, reason, message) in the order made."""
    listed, _ = await client.list_objects(api, resources.EVENTS, namespace="default")
    return [
        (e["source"]["component"], e["type"], e["reason"], e["message"])
        for e in sorted(listed, key=lambda e: e["metadata"]["name"])
        if e["involvedObject"]["kind"] == "Job" and e["involvedObject"]["name"] == name
    ]


async def test_the_job_controller_records_its_events(
    api: k8s_client.ApiClient, sim_kubelet: kubelet.SimulatedKubelet
) -> None:
    """kubectl describe job lists the Job controller's Events, as on Kueue's "Run a Kubernetes Job" page: Suspended
    at creation, Resumed and a SuccessfulCreate per pod when unsuspended, SuccessfulDelete per pod when suspended
    while running, Completed at the end; each once, from ``job-controller``."""
    body = job("told", suspend=True, duration=30, parallelism=2, completions=2)
    await client.create_object(api, resources.JOBS, namespace="default", body=body)
    await wait_for_status(api, "told", lambda s: (condition(s, "Suspended") or {}).get("status") == "True")
    await client.patch_object(api, resources.JOBS, namespace="default", name="told", patch={"spec": {"suspend": False}})
    await wait_for_status(api, "told", lambda s: s.get("active") == 2)
    await client.patch_object(api, resources.JOBS, namespace="default", name="told", patch={"spec": {"suspend": True}})
    await wait_for_status(api, "told", lambda s: (condition(s, "Suspended") or {}).get("status") == "True")
    pods, _ = await client.list_objects(api, resources.PODS, namespace="default")
    assert not [pod for pod in pods if pod["metadata"]["name"].startswith("told-")]
    annotate = {"metadata": {"annotations": {kubelet.SIM_DURATION_ANNOTATION: "0.1"}}, "spec": {"suspend": False}}
    await client.patch_object(api, resources.JOBS, namespace="default", name="told", patch=annotate)
    await wait_for_status(api, "told", is_complete)
    async with asyncio.timeout(5):  # the Event follows the status write
        while (recorded := await job_events(api, "told"))[-1][2] != "Completed":
            await asyncio.sleep(0.05)
    assert {source for source, *_ in recorded} == {"job-controller"}
    assert {kind for _, kind, *_ in recorded} == {"Normal"}
    said = [(reason, message.split(": ")[0]) for _, _, reason, message in recorded]
    assert said == [
        ("Suspended", "Job suspended"),
        ("Resumed", "Job resumed"),
        ("SuccessfulCreate", "Created pod"),
        ("SuccessfulCreate", "Created pod"),
        ("Suspended", "Job suspended"),
        ("SuccessfulDelete", "Deleted pod"),
        ("SuccessfulDelete", "Deleted pod"),
        ("Resumed", "Job resumed"),
        ("SuccessfulCreate", "Created pod"),
        ("SuccessfulCreate", "Created pod"),
        ("Completed", "Job completed"),
    ]
    created = {message.removeprefix("Created pod: ") for *_, message in recorded if message.startswith("Created")}
    assert len(created) == 4 and all(name.startswith("told-") for name in created)


async def test_a_job_suspended_and_resumed_at_once_says_it_runs_again(
    api: k8s_client.ApiClient, sim_kubelet: kubelet.SimulatedKubelet
) -> None:
    """``kubectl patch job J -p '{"spec":{"suspend":true}}'`` on an admitted Job: Kueue's reconciler unsuspends it at
    once (jobframework/reconciler.go "Job admitted, unsuspending"), so the watch brings the resume before the
    kubelet wrote the suspension. The Job controller still reports the new run: ``Suspended`` False (JobResumed), a
    fresh ``startTime``, ``active`` pods and a ``Resumed`` Event after ``Suspended``, and the pods its suspension deleted are no
    failures. Before, the resume was read from the stale watch event (startTime still set): the Job kept
    ``Suspended`` True and ``active`` 0 while its new pods ran, and the deleted pods counted in ``failed``."""
    body = job("flick", suspend=False, duration=30, parallelism=2, completions=2)
    await client.create_object(api, resources.JOBS, namespace="default", body=body)
    await wait_for_status(api, "flick", lambda s: s.get("active") == 2)
    for suspend in (True, False):
        patch = {"spec": {"suspend": suspend}}
        await client.patch_object(api, resources.JOBS, namespace="default", name="flick", patch=patch)
    resumed = await wait_for_status(
        api, "flick", lambda s: (condition(s, "Suspended") or {}).get("status") == "False" and s.get("active") == 2
    )
    assert resumed["startTime"] and condition(resumed, "Suspended")["reason"] == "JobResumed"
    async with asyncio.timeout(5):  # the pods and Events of the new run
        while len([e for e in await job_events(api, "flick") if e[2] == "SuccessfulCreate"]) < 4:
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # let the deletions' watch events reach the kubelet
    status = await job_status(api, "flick")
    assert not status.get("failed")
    reasons = [reason for _, _, reason, _ in await job_events(api, "flick")]
    assert reasons.count("Suspended") == 1 and reasons.count("Resumed") == 1
    assert reasons.index("Suspended") < reasons.index("Resumed")


async def test_a_job_suspended_while_its_pods_are_made_says_suspended_again(
    api: k8s_client.ApiClient, sim_kubelet: kubelet.SimulatedKubelet
) -> None:
    """A Job resumed and suspended again while its pods are still being made (Kueue preempting a workload it just
    admitted, as ``kueue-es demo --preempt`` does): the Job controller had written ``Suspended`` False with its
    ``Resumed`` Event, so the suspension gets a ``Suspended`` Event again. Before, the run was cancelled before
    its status was written, the Job still read ``Suspended`` True and ``kubectl describe job`` showed two
    ``Resumed`` Events in a row (found walking Kueue's troubleshooting pages)."""
    body = job("quick", suspend=True, duration=30, parallelism=60, completions=60)
    await client.create_object(api, resources.JOBS, namespace="default", body=body)
    await wait_for_status(api, "quick", lambda s: (condition(s, "Suspended") or {}).get("status") == "True")
    resume = {"spec": {"suspend": False}}
    await client.patch_object(api, resources.JOBS, namespace="default", name="quick", patch=resume)
    async with asyncio.timeout(5):
        while "Resumed" not in [reason for _, _, reason, _ in await job_events(api, "quick")]:
            await asyncio.sleep(0.005)
    suspend = {"spec": {"suspend": True}}
    await client.patch_object(api, resources.JOBS, namespace="default", name="quick", patch=suspend)
    async with asyncio.timeout(5):
        while [reason for _, _, reason, _ in await job_events(api, "quick")].count("Suspended") < 2:
            await asyncio.sleep(0.05)
    reasons = [reason for _, _, reason, _ in await job_events(api, "quick") if reason in ("Suspended", "Resumed")]
    assert reasons == ["Suspended", "Resumed", "Suspended"]


@pytest.mark.usefixtures("sim_kubelet")
async def test_duration_annotation_overrides_the_default(api: k8s_client.ApiClient) -> None:
    """A Job annotated with 1.0 s is still running when the default (0.2 s) Job is done."""
    await client.create_object(api, resources.JOBS, namespace="default", body=job("short", suspend=False))
    await client.create_object(api, resources.JOBS, namespace="default", body=job("long", suspend=False, duration=1.0))
    await wait_for_status(api, "short", is_complete)
    assert not is_complete(await job_status(api, "long"))
    await wait_for_status(api, "long", is_complete)


async def test_queued_jobs_are_created_suspended_by_default(api: k8s_client.ApiClient) -> None:
    """By default (suspend_queued_jobs) a Job naming a queue is stored suspended, as Kueue's webhook does; others are not."""
    queued = {
        **job("queued", suspend=False),
        "metadata": {"name": "queued", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
    }
    assert (await client.create_object(api, resources.JOBS, namespace="default", body=queued))["spec"][
        "suspend"
    ] is True
    plain = await client.create_object(api, resources.JOBS, namespace="default", body=job("plain", suspend=False))
    assert plain["spec"]["suspend"] is False


async def test_without_hooks_queued_jobs_keep_their_suspend_field() -> None:
    """create_hooks=() gives a bare cluster: a queue-labelled Job is stored as sent."""
    async with emulator.serve_emulator(create_hooks=()) as cluster:
        api = await client.make_api_client(server=cluster.url)
        try:
            queued = {
                **job("queued", suspend=False),
                "metadata": {"name": "queued", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            }
            assert (await client.create_object(api, resources.JOBS, namespace="default", body=queued))["spec"][
                "suspend"
            ] is False
        finally:
            await api.close()


async def test_evicted_running_job_stops_its_pods_and_never_completes(
    api: k8s_client.ApiClient, sim_kubelet: kubelet.SimulatedKubelet
) -> None:
    """The dispatcher's eviction patch (suspend, eviction annotations) on a running Job: its run is cancelled and
    status says active 0 without a startTime, as the Job controller writes for a suspended Job, so the watcher can
    report it stopped, and the template may then be restored; it does not complete while suspended. (The template
    of a running Job is immutable: restored in the same patch, it is refused.)"""
    body = job("victim", suspend=False, duration=0.6, parallelism=2)
    body["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "spot"}
    await client.create_object(api, resources.JOBS, namespace="default", body=body)
    await wait_for_status(api, "victim", lambda s: s.get("active") == 2)
    restore = {"spec": {"template": {"spec": {"nodeSelector": None}}}}
    evict = {
        "metadata": {"annotations": {EVICTED_ANNOTATION: "Preempted", EVICTION_SEQ_ANNOTATION: "7"}},
        "spec": {"suspend": True, **restore["spec"]},
    }
    with pytest.raises(client.errors.ApiError) as refused:
        await client.patch_object(api, resources.JOBS, namespace="default", name="victim", patch=evict)
    assert refused.value.status == 422 and "spec.template" in refused.value.message
    evict["spec"].pop("template")
    await client.patch_object(api, resources.JOBS, namespace="default", name="victim", patch=evict)
    stopped = await wait_for_status(api, "victim", lambda s: "active" not in s)
    assert stopped["ready"] == 0 and "startTime" not in stopped
    await client.patch_object(api, resources.JOBS, namespace="default", name="victim", patch=restore)
    assert (condition(stopped, "Suspended") or {}).get("status") == "True"
    assert not sim_kubelet.running
    await asyncio.sleep(0.8)  # past the 0.6 s the Job had to run
    final = await job_status(api, "victim")
    assert not is_complete(final) and "active" not in final and not final.get("succeeded")


async def test_job_suspended_while_no_kubelet_ran_is_stopped_by_the_next_one(api: k8s_client.ApiClient) -> None:
    """A Job left running (active 2) by a kubelet that went away, then suspended: the next kubelet, which never ran
    it, still writes active 0 when it lists it."""
    first = kubelet.SimulatedKubelet(api, default_duration_seconds=30, watch_options={"backoff_seconds": 0.05})
    first.start()
    try:
        await client.create_object(
            api, resources.JOBS, namespace="default", body=job("orphan", suspend=False, parallelism=2)
        )
        await wait_for_status(api, "orphan", lambda s: s.get("active") == 2)
    finally:
        await first.stop()
    await client.patch_object(
        api, resources.JOBS, namespace="default", name="orphan", patch={"spec": {"suspend": True}}
    )
    assert (await job_status(api, "orphan"))["active"] == 2
    second = kubelet.SimulatedKubelet(api, default_duration_seconds=30, watch_options={"backoff_seconds": 0.05})
    second.start()
    try:
        stopped = await wait_for_status(api, "orphan", lambda s: "active" not in s)
    finally:
        await second.stop()
    assert not is_complete(stopped) and "startTime" not in stopped


def plain_pod(
    name: str,
    *,
    restart_policy: str | None = "Never",
    annotations: dict[str, str] | None = None,
    owner_kind: str | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    """A plain Pod in ``default`` (status ``phase``); ``owner_kind`` gives it a controller owner reference."""
    spec: dict[str, Any] = {"containers": [{"name": "sleep", "image": "busybox"}]}
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "annotations": dict(annotations or {})}
    if owner_kind is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": owner_kind, "name": "owner", "uid": "owner-uid", "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(plain_pod("p"), True, id="running, restartPolicy Never, no owner: finishes"),
        pytest.param(plain_pod("p", restart_policy="OnFailure"), True, id="restartPolicy OnFailure: finishes"),
        pytest.param(plain_pod("p", phase="Pending"), False, id="not started (gated, pending): does not run"),
        pytest.param(plain_pod("p", phase="Succeeded"), False, id="already Succeeded: not finished twice"),
        pytest.param(plain_pod("p", owner_kind="Job"), False, id="an elastic Job's pod: the Job's controller's"),
        pytest.param(plain_pod("p", owner_kind="ReplicaSet"), False, id="a ReplicaSet's pod: serves for ever"),
        pytest.param(plain_pod("p", owner_kind="PyTorchJob"), True, id="a training operator's pod: finishes"),
        pytest.param(plain_pod("p", owner_kind="MPIJob"), True, id="an MPIJob's pod: finishes"),
        pytest.param(plain_pod("p", owner_kind="AppWrapper"), True, id="a pod an AppWrapper wraps: finishes"),
        pytest.param(plain_pod("p", restart_policy=None), False, id="restartPolicy Always (default): restarted"),
        pytest.param(plain_pod("p", restart_policy="Always"), False, id="restartPolicy Always: never succeeds"),
        pytest.param(plain_pod("p", annotations={SERVING_ANNOTATION: "true"}), False, id="a serving pod serves"),
        pytest.param(
            plain_pod("p", annotations={SERVING_ANNOTATION: "true", kubelet.SIM_DURATION_ANNOTATION: "1"}),
            True,
            id="a serving pod given a duration: finishes",
        ),
    ],
)
def test_which_pods_the_kubelet_finishes(pod: dict[str, Any], want: bool) -> None:
    """Only started plain pods that a kubelet lets succeed, and that no simulated controller runs, finish."""
    assert kubelet.finishes_pod(pod) is want


async def pod_where(api: k8s_client.ApiClient, name: str, check: Any, *, timeout: float = 5.0) -> dict[str, Any]:
    """Poll pod ``default/name`` every 50 ms until ``check(pod)`` holds; fail after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not check(pod := await client.get_object(api, resources.PODS, namespace="default", name=name)):
            await asyncio.sleep(0.05)
    return pod


@pytest.mark.usefixtures("sim_kubelet")
async def test_a_started_plain_pod_succeeds_as_a_kubelet_reports_it(api: k8s_client.ApiClient) -> None:
    """A plain pod (Kueue's sample pod: restartPolicy OnFailure) that the simulated controllers ungated and
    started runs its duration, then is Succeeded: containers terminated with exit code 0, Ready and
    ContainersReady False (PodCompleted), no message. Before, it ran for ever and its Workload never finished."""
    controllers = asyncio.create_task(SimulatedControllers(api).run())
    try:
        body = plain_pod("sample", restart_policy="OnFailure", annotations={kubelet.SIM_DURATION_ANNOTATION: "0"})
        del body["status"]
        await client.create_object(api, resources.PODS, namespace="default", body=body)
        done = await pod_where(api, "sample", lambda p: p.get("status", {}).get("phase") == "Succeeded")
    finally:
        await cancel_and_wait([controllers])
    status = done["status"]
    [container] = status["containerStatuses"]
    terminated = container["state"]["terminated"]
    assert (container["name"], container["ready"], terminated["exitCode"], terminated["reason"]) == (
        "sleep",
        False,
        0,
        "Completed",
    )
    assert terminated["finishedAt"] >= terminated["startedAt"] == status["startTime"]
    assert {c["type"]: (c["status"], c.get("reason")) for c in status["conditions"]} == {
        "PodScheduled": ("True", None),
        "Initialized": ("True", None),
        "ContainersReady": ("False", "PodCompleted"),
        "Ready": ("False", "PodCompleted"),
    }
    assert "message" not in status


@pytest.mark.parametrize(
    ("start_time", "now", "want"),
    [
        # just started, within the second its startTime names: the whole duration from now (it ran up to a
        # second less before: a 1 s pod of the demo finished at once, before a client could see it admitted)
        ("2026-12-06T01:07:41Z", "2026-12-06T01:07:41.960000+00:00", "2026-12-06T01:07:41.960000+00:00"),
        # found running by a restarted kubelet: from the end of its second, at most a second longer than declared
        ("2026-12-06T01:07:41Z", "2026-12-06T01:07:50+00:00", "2026-12-06T01:07:42+00:00"),
        # a startTime finer than seconds is taken as it is
        ("2026-12-06T01:07:41.250000Z", "2026-12-06T01:07:50+00:00", "2026-12-06T01:07:41.250000+00:00"),
        (None, "2026-12-06T01:07:50+00:00", "2026-12-06T01:07:50+00:00"),
    ],
)
def test_a_pods_run_is_counted_from_its_start_not_before(start_time: str | None, now: str, want: str) -> None:
    """The pod's duration counts from its start as well as a startTime of whole seconds tells it."""
    parsed = datetime.datetime.fromisoformat(now)
    assert kubelet._pod_started_at(start_time, now=parsed) == datetime.datetime.fromisoformat(want)


async def test_a_plain_pod_deleted_while_running_is_not_finished(
    api: k8s_client.ApiClient, sim_kubelet: kubelet.SimulatedKubelet
) -> None:
    """A running pod deleted (Kueue stops a single pod by deleting it) has its run cancelled."""
    body = plain_pod("gone", annotations={kubelet.SIM_DURATION_ANNOTATION: "30"})
    status = body.pop("status")
    created = await client.create_object(api, resources.PODS, namespace="default", body=body)
    await client.patch_object(
        api, resources.PODS, namespace="default", name="gone", patch={"status": status}, subresource="status"
    )
    async with asyncio.timeout(5):
        while created["metadata"]["uid"] not in sim_kubelet.running_pods:
            await asyncio.sleep(0.05)
    await client.delete_object(api, resources.PODS, namespace="default", name="gone")
    async with asyncio.timeout(5):
        while sim_kubelet.running_pods:
            await asyncio.sleep(0.05)


async def job_pods(api: k8s_client.ApiClient, name: str) -> list[dict[str, Any]]:
    """The pods of Job ``default/name`` (its ``job-name`` label), not being deleted, by name."""
    listed, _ = await client.list_objects(api, resources.PODS, namespace="default", label_selector=f"job-name={name}")
    return sorted(
        (p for p in listed if not p["metadata"].get("deletionTimestamp")), key=lambda p: p["metadata"]["name"]
    )


async def pods_until(api: k8s_client.ApiClient, name: str, check: Any, *, timeout: float = 5) -> list[dict[str, Any]]:
    async with asyncio.timeout(timeout):
        while not check(pods := await job_pods(api, name)):
            await asyncio.sleep(0.05)
    return pods


@pytest.mark.usefixtures("sim_kubelet")
async def test_a_running_jobs_deleted_pod_counts_as_failed_and_is_replaced(api: k8s_client.ApiClient) -> None:
    """``kubectl delete pod`` of a running Job's pod: the Job controller counts it failed (status.failed 1:
    job_controller.go isPodFailed counts a pod deleted before it succeeded) and creates a replacement once the
    pod failure backoff is over (SuccessfulCreate); the Job then completes with its completions. Before, the
    deletion was not counted and the Job ran on one pod short until its end."""
    await client.create_object(
        api, resources.JOBS, namespace="default", body=job("del", suspend=False, duration=3, parallelism=2)
    )
    first = await pods_until(api, "del", lambda pods: len(pods) == 2)
    victim = first[0]["metadata"]["name"]
    await client.delete_object(api, resources.PODS, namespace="default", name=victim)
    status = await wait_for_status(api, "del", lambda s: s.get("failed") == 1)
    assert not is_complete(status) and condition(status, "Failed") is None
    pods = await pods_until(api, "del", lambda pods: len(pods) == 2)
    assert victim not in {p["metadata"]["name"] for p in pods}
    done = await wait_for_status(api, "del", is_complete)
    assert (done["succeeded"], done["failed"]) == (2, 1)
    created = [e for e in await job_events(api, "del") if e[2] == "SuccessfulCreate"]
    assert len(created) == 3  # the two pods and the replacement


async def replaced_after(api: k8s_client.ApiClient, name: str, failed: str) -> tuple[str, float]:
    """Write the Job ``name``'s pod ``failed`` Failed (its container exited 1); return its replacement's name
    and the seconds from that write until the replacement was listed."""
    status = {"phase": "Failed", "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 1}}}]}
    await client.patch_object(
        api, resources.PODS, namespace="default", name=failed, patch={"status": status}, subresource="status"
    )
    start = asyncio.get_running_loop().time()
    new = await pods_until(api, name, lambda pods: any(not is_terminal(p) for p in pods), timeout=15)
    [replacement] = [p["metadata"]["name"] for p in new if not is_terminal(p)]
    return replacement, asyncio.get_running_loop().time() - start


def is_terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


@pytest.mark.usefixtures("sim_kubelet")
async def test_a_failed_pods_replacement_waits_out_the_job_controllers_backoff(api: k8s_client.ApiClient) -> None:
    """The Job controller replaces a failed pod only after its pod failure backoff: the first delay after one
    failure, twice it after a second failure since the Job's last success (backoff_utils.go
    getRemainingTimeForFailuresCount; 10 s, 20 s, ... in Kubernetes, POD_BACKOFF here). Before, the replacement
    came at once: a pod that Kueue's TAS node controller fails as stranded on a failed node was then made and
    failed again in a loop that spent the Job's backoffLimit in under a second
    (tests/e2e/test_tas_nodes_manifest.py's node failure walk-through, one run in a few under load)."""
    await client.create_object(
        api, resources.JOBS, namespace="default", body=job("bo", suspend=False, duration=60, parallelism=1)
    )
    [first] = await pods_until(api, "bo", lambda pods: len(pods) == 1)
    second, waited = await replaced_after(api, "bo", first["metadata"]["name"])
    assert waited >= POD_BACKOFF * 0.9, waited
    _, waited = await replaced_after(api, "bo", second)
    assert waited >= 2 * POD_BACKOFF * 0.9, waited
    status = await wait_for_status(api, "bo", lambda s: s.get("failed") == 2)
    assert not is_complete(status) and condition(status, "Failed") is None


@pytest.mark.usefixtures("sim_kubelet")
async def test_a_failed_pod_is_not_ready_until_its_replacement_has_started(api: k8s_client.ApiClient) -> None:
    """A running Job's pod that fails (its container exits 1) leaves the Job one ready pod short until the
    replacement has started (REPLACEMENT_START_SECONDS), as the Job controller counts ready pods: what Kueue's
    waitForPodsReady.recoveryTimeout watches (PodsReady False, reason WaitForRecovery). Before, status.ready
    stayed at parallelism and the Workload never lost PodsReady."""
    await client.create_object(
        api, resources.JOBS, namespace="default", body=job("rec", suspend=False, duration=30, parallelism=1)
    )
    await wait_for_status(api, "rec", lambda s: s.get("ready") == 1)
    victim = (await pods_until(api, "rec", lambda pods: len(pods) == 1))[0]["metadata"]["name"]
    failed = {"phase": "Failed", "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 1}}}]}
    await client.patch_object(
        api, resources.PODS, namespace="default", name=victim, patch={"status": failed}, subresource="status"
    )
    status = await wait_for_status(api, "rec", lambda s: s.get("failed") == 1)
    assert status.get("ready") == 0, status
    status = await wait_for_status(api, "rec", lambda s: s.get("ready") == 1)
    assert status.get("failed") == 1 and not is_complete(status), status


@pytest.mark.usefixtures("sim_kubelet")
async def test_a_jobs_pod_deleted_past_its_backoff_limit_fails_the_job(api: k8s_client.ApiClient) -> None:
    """With ``backoffLimit: 0`` a running Job's deleted pod fails the Job: its other pods are deleted, it gets
    FailureTarget and Failed True, reason BackoffLimitExceeded, and the Warning Event of that reason."""
    await client.create_object(
        api,
        resources.JOBS,
        namespace="default",
        body=job("brittle", suspend=False, duration=30, parallelism=2, backoffLimit=0),
    )
    first = await pods_until(api, "brittle", lambda pods: len(pods) == 2)
    await client.delete_object(api, resources.PODS, namespace="default", name=first[0]["metadata"]["name"])
    status = await wait_for_status(api, "brittle", lambda s: condition(s, "Failed") is not None)
    assert (status["failed"], "active" in status) == (1, False)  # JobStatus.active is omitempty
    for kind in ("FailureTarget", "Failed"):
        got = condition(status, kind)
        assert got is not None
        assert (got["status"], got["reason"], got["message"]) == (
            "True",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        )
    await pods_until(api, "brittle", lambda pods: not pods)
    assert (
        "job-controller",
        "Warning",
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    ) in await job_events(api, "brittle")
    await asyncio.sleep(0.3)
    assert not is_complete(await job_status(api, "brittle"))


def _job_spec(**spec: Any) -> dict[str, Any]:
    return {"spec": spec}


@pytest.mark.parametrize(
    ("phase", "deleting", "gone", "spec", "want"),
    [
        pytest.param("Failed", False, False, {}, True, id="Failed: failed"),
        pytest.param("Running", False, False, {}, False, id="running: not failed"),
        pytest.param("Running", True, False, {}, True, id="deleted while running (TerminatingOrFailed): failed"),
        pytest.param("Succeeded", True, True, {}, False, id="deleted after it succeeded: not failed"),
        pytest.param(
            "Running", True, False, {"podReplacementPolicy": "Failed"}, False, id="replacement policy Failed: waits"
        ),
        pytest.param("Running", True, False, {"podFailurePolicy": {"rules": []}}, False, id="pod failure policy"),
        pytest.param(
            "Running", True, True, {"podReplacementPolicy": "Failed"}, True, id="gone before it succeeded: failed"
        ),
    ],
)
def test_which_job_pods_count_as_failed(
    phase: str, deleting: bool, gone: bool, spec: dict[str, Any], want: bool
) -> None:
    """job_controller.go isPodFailed, as the simulated Job controller applies it."""
    pod = plain_pod("p", phase=phase)
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert kubelet.job_pod_failed(pod, _job_spec(**spec), gone=gone) is want


@pytest.mark.usefixtures("sim_kubelet")
async def test_a_running_pod_deleted_under_a_finalizer_is_terminated_failed(api: k8s_client.ApiClient) -> None:
    """A running pod deleted while a finalizer holds it (Kueue's on a managed pod) is terminated as a kubelet
    terminates it: phase Failed, its container killed (exit code 137), Ready False with reason PodFailed; it
    stays, Terminating, until the finalizer comes off. Before, it stayed Running for ever."""
    body = plain_pod("held", annotations={kubelet.SIM_DURATION_ANNOTATION: "30"})
    body["metadata"]["finalizers"] = ["example.com/hold"]
    status = body.pop("status")
    await client.create_object(api, resources.PODS, namespace="default", body=body)
    await client.patch_object(
        api, resources.PODS, namespace="default", name="held", patch={"status": status}, subresource="status"
    )
    await client.delete_object(api, resources.PODS, namespace="default", name="held")
    pod = await pod_where(api, "held", lambda p: p["status"].get("phase") == "Failed")
    assert pod["metadata"]["deletionTimestamp"]
    (container,) = pod["status"]["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == 137
    assert {c["type"]: c.get("reason") for c in pod["status"]["conditions"]}["Ready"] == "PodFailed"
    await client.patch_object(
        api, resources.PODS, namespace="default", name="held", patch={"metadata": {"finalizers": None}}
    )


async def test_a_refused_pod_is_the_jobs_failed_create_event(
    api: k8s_client.ApiClient, sim_kubelet: kubelet.SimulatedKubelet
) -> None:
    """A Job whose pod template names a PriorityClass that does not exist: the API server refuses each pod (the
    Priority admission plugin) and the Job controller records Warning FailedCreate "Error creating: <the
    refusal>", once however often it tries (its recorder folds repeats). Before, nothing said why no pod came."""
    body = job("badpc", suspend=False, duration=30, parallelism=2)
    body["spec"]["template"]["spec"]["priorityClassName"] = "nope"
    await client.create_object(api, resources.JOBS, namespace="default", body=body)
    async with asyncio.timeout(5):
        while not any(e[2] == "FailedCreate" for e in await job_events(api, "badpc")):
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # more tries, no more Events
    events = [e for e in await job_events(api, "badpc") if e[2] == "FailedCreate"]
    pods, _ = await client.list_objects(api, resources.PODS, namespace="default")

    assert len(events) == 1
    [(source, kind, _, message)] = events
    assert (source, kind) == ("job-controller", "Warning")
    assert message.startswith('Error creating: pods "badpc-')
    assert message.endswith('" is forbidden: no PriorityClass with name nope was found')
    assert pods == []


@pytest.mark.usefixtures("sim_kubelet")
async def test_an_elastic_jobs_ready_count_only_grows_and_its_pods_complete_as_a_kubelet_writes_them(
    api: k8s_client.ApiClient,
) -> None:
    """An elastic Job (its pods the simulated controllers') started: its ``status.ready`` grows from none as its
    pods become Ready, as the Job controller counts them, so Kueue's PodsReady (the watcher's reading of each
    status) goes WaitForStart -> Started, as for any Job; once Complete, its pods are Succeeded with their
    containers terminated ``Completed`` and Ready False ``PodCompleted`` (``kubectl get pods``: 0/1 Completed).
    Before, the kubelet wrote all of them ready at the start and the controllers none a moment later
    (Started, WaitForRecovery, Recovered within ~50 ms), and the pods of a completed Job kept running
    containers, Ready True (1/1 Succeeded)."""
    body = job("elastic", suspend=False, duration=1, parallelism=2, completions=4)
    body["metadata"]["annotations"][slices.ELASTIC_JOB_ANNOTATION] = "true"
    seen: list[dict[str, Any]] = []

    async def record() -> None:
        async for item in client.watch_objects(api, resources.JOBS, namespace="default", timeout_seconds=30):
            objs = item.objects if isinstance(item, client.Resynced) else (item.object,)
            seen.extend(o for o in objs if o["metadata"]["name"] == "elastic")

    recorder = asyncio.create_task(record())
    controllers = asyncio.create_task(SimulatedControllers(api).run())
    try:
        await asyncio.sleep(0.3)  # the watch and the controllers listed
        await client.create_object(api, resources.JOBS, namespace="default", body=body)
        await wait_for_status(api, "elastic", is_complete)
        done = await pods_of(
            api, "elastic", lambda pods: pods and all(p["status"]["phase"] == "Succeeded" for p in pods)
        )
    finally:
        await cancel_and_wait([controllers, recorder])

    running = [o for o in seen if o["spec"].get("suspend") is False and not is_complete(o.get("status") or {})]
    readies = [int((o.get("status") or {}).get("ready") or 0) for o in running]
    assert readies == sorted(readies) and readies[-1] == 2, readies
    pods_ready: list[tuple[bool, str]] = []
    for obj in running:
        state = progress.next_pods_ready(
            pods_ready[-1] if pods_ready else None,
            started=progress.started("Job", [obj]),
            ready=progress.job_ready(obj),
        )
        if not pods_ready or state != pods_ready[-1]:
            pods_ready.append(state)
    assert pods_ready == [(False, "WaitForStart"), (True, "Started")], pods_ready
    assert len(done) == 2
    for pod in done:
        status = pod["status"]
        assert [c["state"]["terminated"]["reason"] for c in status["containerStatuses"]] == ["Completed"]
        assert not any(c["ready"] for c in status["containerStatuses"])
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "PodCompleted")


async def pods_of(api: k8s_client.ApiClient, owner: str, check: Any, *, timeout: float = 10) -> list[dict[str, Any]]:
    """Poll until ``check`` holds for the pods whose controller is Job ``default/owner``; return them."""
    async with asyncio.timeout(timeout):
        while True:
            listed, _ = await client.list_objects(api, resources.PODS, namespace="default")
            pods = [
                p
                for p in listed
                if any(
                    r.get("name") == owner and r.get("controller") for r in p["metadata"].get("ownerReferences") or []
                )
            ]
            if check(pods):
                return pods
            await asyncio.sleep(0.05)


async def test_a_job_in_waves_counts_its_succeeded_pods_as_each_wave_ends(
    api: k8s_client.ApiClient, sim_kubelet: kubelet.SimulatedKubelet
) -> None:
    """A Job of parallelism 3 and completions 4 runs a wave of 3 pods then one of 1: once the first wave
    succeeded its status says ``succeeded`` 3, ``active`` 1, ``ready`` 1 before it completes, as the Job
    controller keeps them current (so Kueue's reclaimablePods of its workload is 2, job_controller.go
    ReclaimablePods). Before, the counts stayed at the start's (active 3, no succeeded) until the Job completed
    (found on the demo: ``kubectl get job`` said COMPLETIONS 0/4 with 3 pods Completed)."""
    body = job("waves", suspend=False, duration=2, parallelism=3, completions=4)
    await client.create_object(api, resources.JOBS, namespace="default", body=body)
    second = await wait_for_status(api, "waves", lambda s: s.get("succeeded") == 3 or is_complete(s))
    done = await wait_for_status(api, "waves", is_complete)
    assert not is_complete(second)
    assert (second.get("active"), second.get("ready")) == (1, 1)
    assert done["succeeded"] == 4 and "active" not in done
    current = await client.get_object(api, resources.JOBS, namespace="default", name="waves")
    assert progress.reclaimable_pods("Job", {**current, "status": second}) == {"main": 2}
