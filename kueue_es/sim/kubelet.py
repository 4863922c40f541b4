"""A simulated kubelet plus Job controller: unsuspended Jobs get pods, run for a while, then succeed.

Why this module exists: with an emulated API server nothing runs pods, yet
``kueue-es demo`` and the bench need Jobs to start when the dispatcher
unsuspends them and to finish so quota is released, and a Kueue user following
Kueue's docs runs ``kubectl get pods`` to see them.  ``SimulatedKubelet``
watches batch/v1 Jobs, makes their pods as Kubernetes' Job controller does
(pkg/controller/job job_controller.go manageJob) and writes, through the
``status`` subresource, what the real Job controller would write:

* a Job that is not suspended and not finished starts: its pods are created from
  its template (:func:`kueue_es.sim.controllers.job_pod`: ``<job>-<5 chars>``, or
  ``<job>-<index>-<5 chars>`` with the completion index annotation and label for an
  Indexed Job; the template's labels -- the API server's ``controller-uid`` and
  ``job-name`` ones among them -- nodeSelector, tolerations and scheduling gates as
  Kueue's dispatcher set them; a controller owner reference to the Job),
  ``parallelism`` of them capped by the completions left (:func:`pods_to_create`);
  then ``startTime``, ``active``/``ready`` = parallelism, ``Suspended`` condition
  set False.  :mod:`kueue_es.sim.controllers`, the scheduler stand-in, binds each
  ungated pod to a Node that fits it (when there are Nodes) and runs it; a pod held
  by the TAS gate waits for Kueue's ungater, and one no Node has room for stays Pending
  (Unschedulable). When the cluster has Nodes (listed as the Job starts), ``ready`` counts
  the Job's Ready pods as they come and go, and ``succeeded`` its pods that finished, as the Job
  controller counts them (so a Job whose pods end one by one stays ready for Kueue: ready plus
  succeeded), so a pod left
  Pending keeps the Job from being ready (Kueue's waitForPodsReady sees it), and each pod runs
  its share of the duration (below) from its own ``startTime``: a Pending pod never finishes,
  and the Job completes once its completions are reached. With no Node, all its pods count
  ready from the start and run at once, as before;
* after its duration -- the annotation ``kueue-es.dev/sim-duration-seconds``
  or the constructor default -- its pods succeed (what a kubelet writes when the
  containers exit 0, as for plain pods below) and then the Job: ``completionTime``,
  ``succeeded`` = completions (or parallelism), ``completedIndexes`` for an Indexed
  Job, ``active`` 0, conditions
  ``SuccessCriteriaMet`` and ``Complete`` True (reason CompletionsReached).  With
  more completions than parallelism the pods run in waves of ``parallelism``, the
  duration shared out over them; as each wave ends, ``succeeded`` counts the pods that
  succeeded and ``active`` (and, without Nodes, ``ready``) those of the next wave, as the
  Job controller keeps them current (so Kueue's reclaimablePods frees the pods no longer needed);
* a suspended Job (at creation, or suspended while running, as the
  dispatcher does to evict it) has its run cancelled, its active pods deleted, and
  gets ``active`` 0, ``ready`` 0, no ``startTime``, ``Suspended`` True and no
  completion -- the Job controller's status for a suspended Job, which
  the watcher reads as "no longer active" (Kueue jobs/job/job_controller.go
  IsActive) -- so it runs its full duration again, with new pods, when unsuspended.
  A Job this kubelet never ran (a restart) but whose status still counts active
  pods gets the same when seen suspended;
* a deleted Job's pods are collected by the garbage collector of
  :mod:`kueue_es.sim.controllers` (its owner is gone);
* a pod of a running Job that fails -- phase Failed, or deleted before it succeeded (``kubectl delete pod``)
  -- counts as failed, as the Job controller counts it (job_controller.go isPodFailed; with
  ``podReplacementPolicy: Failed``, the default under a ``podFailurePolicy``, a pod being deleted counts once
  it is Failed or gone): ``status.failed`` goes up by one, ``status.ready`` down by one until the replacement,
  created after the Job controller's pod failure backoff (:data:`POD_FAILURE_BACKOFF_SECONDS` doubled for each
  failure since the Job's last success, at most :data:`MAX_POD_FAILURE_BACKOFF_SECONDS`, counted from the last
  failure; for an Indexed Job, of the same index: :func:`pods_to_create`), has started
  (:data:`REPLACEMENT_START_SECONDS` later), with its ``SuccessfulCreate`` Event, until the
  failures exceed ``spec.backoffLimit`` (6 by default); then the Job fails: its active pods are deleted, it
  gets ``FailureTarget`` and ``Failed`` True with reason ``BackoffLimitExceeded`` and message "Job has reached
  the specified backoff limit", and the Warning Event of that reason and message. Not modelled: the rules of a
  ``podFailurePolicy`` (a deleted pod's failure counts, as one no rule matches: a plain deletion gives no
  DisruptionTarget condition), ``backoffLimitPerIndex`` (whose Job has no global limit), and the pod finalizer the Job controller tracks its pods with (a pod deleted here
  goes at once; ``status.terminating`` stays unwritten). A pod the Job's suspension, failure or deletion
  removes is no failure.

The pods are not Kueue's: they carry no ``kueue.x-k8s.io/managed`` label, and
Kueue's pod webhook and the watcher skip a pod whose controller is a Job
(:func:`kueue_es.jobframework.pods.is_managed`), so no Workload is made for
them.  An elastic Job's (``kueue.x-k8s.io/elastic-job: "true"``) pods are made by
:mod:`kueue_es.sim.controllers`, which scales them with its parallelism, counts its Ready ones in its
``status.ready`` (this module writes its start without a ready count) and writes them Succeeded once it
completes.
The Job controller's Events on a Job are recorded as Kubernetes records them (source ``job-controller``;
:func:`job_event`), so ``kubectl describe job`` lists what Kueue's "Run a Kubernetes Job" page shows:
``Suspended`` ("Job suspended") when the Job's ``Suspended`` condition becomes True, ``Resumed`` ("Job
resumed") when it turns False, ``SuccessfulCreate`` ("Created pod: NAME") and ``SuccessfulDelete``
("Deleted pod: NAME") for each pod made or removed, Warning ``FailedCreate`` ("Error creating: <the API
server's refusal>", once per reason) for a pod the API server refuses, and ``Completed`` ("Job completed");
pods get none.

A Job whose ``spec.managedBy`` names another controller than Kubernetes' Job
controller (MultiKueue's ``kueue.x-k8s.io/multikueue`` on a manager cluster) is left
alone: it runs on a worker, and its status comes from there.

A restarted kubelet resumes running Jobs from their ``startTime`` and the pods it
finds, so a Job never runs much longer than declared.

Plain pods (a Kueue single pod or pod group) run too: a pod that has started --
ungated and given phase Running by :mod:`kueue_es.sim.controllers`, which stand in
for the scheduler -- runs for the same duration (its own annotation, else the
default) counted from its ``startTime`` (to the second, so from the end of that second,
or from when this kubelet sees it run if that is sooner), then gets what a kubelet writes when its
containers exit 0: phase ``Succeeded``, each container ``terminated`` (exit code 0,
reason ``Completed``), ``Ready`` and ``ContainersReady`` False with reason
``PodCompleted``, and no ``message``.  Only pods nothing else runs finish here:

* a pod with a controller owner reference (a ReplicaSet's, a StatefulSet's, an
  elastic Job's, a RayCluster's) is left to that owner, as before -- but for a Kubeflow training job's
  (a PyTorchJob's, an MPIJob's, ...: :mod:`kueue_es.sim.training`) and an AppWrapper's (a pod it wraps:
  :mod:`kueue_es.sim.appwrappers`), which run as plain pods;
* a pod with ``restartPolicy`` Always (the default) never succeeds, as a kubelet
  restarts its exited containers;
* a serving pod (``kueue.x-k8s.io/pod-group-serving: "true"``) runs until deleted
  unless it carries the duration annotation.

A running pod that is deleted but held by a finalizer (Kueue's ``kueue.x-k8s.io/managed`` on a managed pod)
is terminated as a kubelet terminates it: phase ``Failed``, each container ``terminated`` (exit code 137,
reason ``Error``: killed), ``Ready`` and ``ContainersReady`` False with reason ``PodFailed``
(:func:`pod_killed_status`); it then stays, Terminating, until the finalizer comes off.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog
import tenacity
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import slices
from kueue_es.jobframework.pods import SERVING_ANNOTATION
from kueue_es.services.kube import client, errors, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import controllers, store, training

logger = structlog.get_logger(__name__)

SIM_DURATION_ANNOTATION = "kueue-es.dev/sim-duration-seconds"
#: Seconds a replacement pod of a running Job takes to start and pass readiness (its Job's ``status.ready`` counts
#: it only then; a kubelet pulls, starts and probes a container in about that time).
REPLACEMENT_START_SECONDS = 1.0
#: Seconds the Job controller waits after a Job's first pod failure before it creates pods again; each further
#: failure since the Job's last success doubles it, up to :data:`MAX_POD_FAILURE_BACKOFF_SECONDS`
#: (job_controller.go DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff; backoff_utils.go). Without it a pod
#: failed again at once (Kueue failing a pod stranded on a failed node) is replaced at once, and the Job spends its
#: backoffLimit in a second.
POD_FAILURE_BACKOFF_SECONDS = 10.0
MAX_POD_FAILURE_BACKOFF_SECONDS = 600.0
#: Seconds between looks at a Job whose time is up while one of its pods is still Pending (its scheduling waits
#: for room on a node): the wave ends once every pod has run its time.
PENDING_POLL_SECONDS = 1.0
_FINISHED_TYPES = ("Complete", "Failed")
_T = TypeVar("_T")


class SimulatedKubelet:
    """Runs unsuspended Jobs (with their pods) and started plain pods for a declared time and completes them
    through their status.

    ``api``: an ApiClient (emulator or real cluster -- do not point it at a
    cluster with a real Job controller).  ``default_duration_seconds``: run
    time of Jobs and pods without the duration annotation.  ``namespace``: watch one
    namespace, or all if None.  ``clock`` and ``sleep`` replace the UTC time
    source and asyncio.sleep in tests.  ``watch_options`` go to
    ``client.watch_objects`` (e.g. ``timeout_seconds``, ``backoff_seconds``).
    ``pod_failure_backoff_seconds``: the Job controller's first delay before it replaces a failed pod
    (:data:`POD_FAILURE_BACKOFF_SECONDS`; tests of other things may shorten it).
    """

    def __init__(
        self,
        api: k8s_client.ApiClient,
        *,
        default_duration_seconds: float = 5.0,
        namespace: str | None = None,
        clock: Callable[[], datetime.datetime] = store.utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        watch_options: dict[str, Any] | None = None,
        pod_failure_backoff_seconds: float = POD_FAILURE_BACKOFF_SECONDS,
    ) -> None:
        self._api = api
        self._pod_failure_backoff = pod_failure_backoff_seconds
        self._default_duration = default_duration_seconds
        self._namespace = namespace
        self._clock = clock
        self._sleep = sleep
        self._watch_options = watch_options or {}
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._pod_runs: dict[str, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._log = logger.bind(namespace=namespace)
        self._event_serial = itertools.count()  # keeps Event names apart within one clock tick
        # Jobs whose Suspended Event was recorded and no Resumed since: a watch event still carrying the status
        # from before this kubelet wrote Suspended must not record it twice
        self._said_suspended: set[str] = set()
        # Job UID -> the UIDs of its pods accounted for: counted failed, or deleted by its suspension (no failure);
        # a pod's deletion is seen as an update, then DELETED
        self._failed_pods: dict[str, set[str]] = {}
        self._killing: set[str] = set()  # UIDs of deleted pods being written Failed
        self._replacements: set[asyncio.Task[None]] = set()  # replacement pods starting (_replacement_ready)
        # Job UID -> the UIDs of its pods that are Ready (the pod watch's view), and the Jobs whose status.ready
        # counts them (run while the cluster has Nodes: _counts_ready), with the last count written
        self._ready_pods: dict[str, set[str]] = {}
        # Job UID -> the UIDs of its pods that succeeded: the Job controller counts them in status.succeeded as
        # they finish, so ready + succeeded stays the pod count (Kueue's Job PodsReady adds both)
        self._succeeded_pods: dict[str, set[str]] = {}
        self._counting: dict[str, tuple[dict[str, Any], tuple[int, int]]] = {}
        # Job UID -> the last refusal of a pod of it recorded as FailedCreate (the recorder folds repeats)
        self._failed_create_said: dict[str, str] = {}
        # Job UID -> its pod failures since its last success and the time of the last (backoff_utils.go
        # backoffRecord), and the task that creates its pods once that backoff is over
        self._pod_backoff: dict[str, tuple[int, datetime.datetime]] = {}
        self._backoff_waits: dict[str, asyncio.Task[None]] = {}
        # Job UID -> the task that counts the replacements of its failed pods ready, with the count it restores
        self._ready_restores: dict[str, tuple[asyncio.Task[None], int]] = {}

    def start(self) -> None:
        """Run ``run()`` in a background task (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name="simulated-kubelet")

    async def stop(self) -> None:
        """Cancel the background task and every Job and pod run, and wait for them."""
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def run(self) -> None:
        """Watch Jobs and pods and keep runs in step with them until cancelled."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._watch_jobs(), name="simulated-kubelet-jobs")
                group.create_task(self._watch_pods(), name="simulated-kubelet-pods")
        finally:
            await cancel_and_wait(
                [*self._runs.values(), *self._pod_runs.values(), *self._replacements, *self._backoff_waits.values()]
            )

    async def _watch_jobs(self) -> None:
        async for item in client.watch_objects(
            self._api, resources.JOBS, namespace=self._namespace, **self._watch_options
        ):
            if isinstance(item, client.Resynced):
                await self._resync(item.objects)
            elif item.type == "DELETED":
                self._cancel_run(_uid(item.object))
                self._failed_pods.pop(_uid(item.object), None)
                self._succeeded_pods.pop(_uid(item.object), None)
                self._failed_create_said.pop(_uid(item.object), None)
                self._forget_backoff(_uid(item.object))
            else:
                await self._reconcile(item.object)

    async def _watch_pods(self) -> None:
        async for item in client.watch_objects(
            self._api, resources.PODS, namespace=self._namespace, **self._watch_options
        ):
            if isinstance(item, client.Resynced):
                live = {_uid(pod) for pod in item.objects}
                for uid in set(self._pod_runs) - live:
                    self._cancel_pod_run(uid)
                self._ready_pods = {}
                for pod in item.objects:
                    self._reconcile_pod(pod)
                    self._track_ready(pod, gone=False)
                for uid in list(self._counting):
                    await self._ready_changed(uid)
            elif item.type == "DELETED":
                self._cancel_pod_run(_uid(item.object))
                await self._ready_changed(self._track_ready(item.object, gone=True))
                await self._job_pod_changed(item.object, gone=True)
            else:
                self._reconcile_pod(item.object)
                await self._ready_changed(self._track_ready(item.object, gone=False))
                await self._job_pod_changed(item.object, gone=False)
                if terminates_pod(item.object) and _uid(item.object) not in self._killing:
                    await self._kill(item.object)

    @property
    def running(self) -> set[str]:
        """UIDs of the Jobs being run right now."""
        return set(self._runs)

    @property
    def running_pods(self) -> set[str]:
        """UIDs of the plain pods being run right now."""
        return set(self._pod_runs)

    async def _resync(self, jobs: tuple[dict[str, Any], ...]) -> None:
        live = {_uid(job) for job in jobs}
        for uid in set(self._runs) - live:
            self._cancel_run(uid)
        for job in jobs:
            await self._reconcile(job)

    async def _reconcile(self, job: dict[str, Any]) -> None:
        uid = _uid(job)
        if not _managed_here(job):
            return  # another controller runs it (MultiKueue's copy on a worker: docs/multikueue.md)
        if _is_finished(job) or job["metadata"].get("deletionTimestamp"):
            self._cancel_run(uid)
            self._said_suspended.discard(uid)
            self._failed_pods.pop(uid, None)
            self._forget_backoff(uid)
        elif job.get("spec", {}).get("suspend"):
            cancelled = self._cancel_run(uid)
            if cancelled is not None:
                await asyncio.gather(cancelled, return_exceptions=True)
            if cancelled is not None or _needs_suspended_status(job):
                # the condition becomes True: it was False, or a run this kubelet resumed (its Resumed Event
                # recorded) was cut short before its status said so -- the Job controller writes both in one sync
                if uid not in self._said_suspended and (not _suspended(job) or cancelled is not None):
                    self._said_suspended.add(uid)
                    await self._record(job, "Suspended", "Job suspended")
                if (
                    cancelled is not None
                    or job.get("status", {}).get("active")
                    or job.get("status", {}).get("startTime")
                ):
                    await self._delete_pods(job)  # not for a Job created suspended: it never had pods
                await self._write_status(job, _suspended_status(job, now=self._clock()))
        elif uid not in self._runs:
            task = asyncio.create_task(self._run_job(job), name=f"sim-job-{job['metadata']['name']}")
            self._runs[uid] = task
            task.add_done_callback(functools.partial(self._forget_run, uid))

    async def _kill(self, pod: dict[str, Any]) -> None:
        """Write a deleted running pod Failed, as its kubelet does once it killed the containers
        (:func:`pod_killed_status`)."""
        metadata = pod["metadata"]
        self._killing.add(_uid(pod))
        try:
            await _until_reachable(
                client.patch_object,
                self._api,
                resources.PODS,
                namespace=metadata.get("namespace"),
                name=metadata["name"],
                patch={"status": pod_killed_status(pod, now=self._clock())},
                subresource="status",
            )
            self._log.info("sim_pod_killed", pod=metadata["name"], pod_namespace=metadata.get("namespace"))
        except errors.KubeError as exc:  # gone already (its finalizer came off): nothing to write
            self._log.info("sim_pod_not_killed", pod=metadata["name"], error=str(exc))
        finally:
            self._killing.discard(_uid(pod))

    async def _job_pod_changed(self, pod: dict[str, Any], *, gone: bool) -> None:
        """Count a failed pod of a running Job (:func:`job_pod_failed`) once: its ``status.failed``, then a
        replacement, or the Job's failure once the failures exceed its ``backoffLimit`` (job_controller.go
        syncJob: exceedsBackoffLimit, manageJob)."""
        owner = _job_owner(pod)
        if owner is None or (_uid(pod) in self._failed_pods.get(owner["uid"], ())):
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Succeeded" or not (
            gone or phase == "Failed" or (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            return  # no failure whatever the Job: not worth reading it
        namespace = (pod.get("metadata") or {}).get("namespace")
        try:
            job = await _until_reachable(
                client.get_object, self._api, resources.JOBS, namespace=namespace, name=owner["name"]
            )
        except errors.KubeError:
            return  # gone (its pods are collected, no failure), or unreadable
        if (
            _uid(job) != owner["uid"]
            or not _managed_here(job)
            or not makes_pods(job)
            or _is_finished(job)
            or job["metadata"].get("deletionTimestamp")
            or (job.get("spec") or {}).get("suspend")
            or not job_pod_failed(pod, job, gone=gone)
        ):
            return
        self._failed_pods.setdefault(_uid(job), set()).add(_uid(pod))
        failures = self._pod_backoff[_uid(job)][0] if _uid(job) in self._pod_backoff else 0
        self._pod_backoff[_uid(job)] = (failures + 1, self._clock())
        failed = int((job.get("status") or {}).get("failed") or 0) + 1
        log = self._log.bind(job=job["metadata"]["name"], job_namespace=namespace)
        log.info("sim_job_pod_failed", pod=(pod.get("metadata") or {}).get("name"), failed=failed)
        if failed > _backoff_limit(job):
            self._cancel_run(_uid(job))
            await self._delete_pods(job)
            await self._record(job, "BackoffLimitExceeded", BACKOFF_LIMIT_MESSAGE, kind="Warning")
            await self._write_status(job, _failed_status(job, failed=failed, now=self._clock()))
            log.info("sim_job_failed", reason="BackoffLimitExceeded")
            return
        # the failed pod is no longer ready: the Job controller counts one pod less in status.ready until the
        # replacement's containers have started (job_controller.go countReadyPods), which Kueue reads as the
        # Workload's PodsReady turning False, reason WaitForRecovery (waitForPodsReady.recoveryTimeout)
        # (a Job whose ready pods are counted, _counts_ready, has its count follow the pods themselves)
        counted = _uid(job) in self._counting
        was_ready = int((job.get("status") or {}).get("ready") or 0)
        await self._write_status(
            job, {"failed": failed} if counted else {"failed": failed, "ready": max(0, was_ready - 1)}
        )
        await self._create_pods(job, await self._job_pods(job))
        if was_ready and not counted:
            earlier = self._ready_restores.pop(_uid(job), None)
            if earlier is not None:  # one restore for the failures of one backoff, to the count before the first
                earlier[0].cancel()
                was_ready = max(was_ready, earlier[1])
            after = self._backoff_left(_uid(job)) + REPLACEMENT_START_SECONDS
            task = asyncio.create_task(
                self._replacement_ready(job, was_ready, after=after), name=f"replacement-{_uid(job)}"
            )
            self._ready_restores[_uid(job)] = (task, was_ready)
            self._replacements.add(task)
            task.add_done_callback(self._replacements.discard)

    async def _replacement_ready(self, job: dict[str, Any], ready: int, *, after: float) -> None:
        """``after`` seconds on (the pod failure backoff plus :data:`REPLACEMENT_START_SECONDS`), the replacement of a
        failed pod of ``job`` is ready: the Job's ``status.ready`` is ``ready`` again, unless the Job has stopped
        running meanwhile."""
        await self._sleep(after)
        if self._ready_restores.get(_uid(job), (None, 0))[0] is asyncio.current_task():
            del self._ready_restores[_uid(job)]
        log = self._log.bind(job=job["metadata"]["name"], job_namespace=job["metadata"].get("namespace"))
        current = await self._still_running(job, log=log)
        if current is not None:
            await self._write_status(current, {"ready": min(ready, _pod_count(current))})

    def _cancel_run(self, uid: str) -> asyncio.Task[None] | None:
        """Cancel the run of a Job if there is one; returns the cancelled task."""
        task = self._runs.pop(uid, None)
        if task is not None:
            task.cancel()
        return task

    def _forget_run(self, uid: str, task: asyncio.Task[None]) -> None:
        if self._runs.get(uid) is task:
            del self._runs[uid]
            self._counting.pop(uid, None)
            self._succeeded_pods.pop(uid, None)

    def _track_ready(self, pod: dict[str, Any], *, gone: bool) -> str | None:
        """Note whether a Job's ``pod`` is Ready now (not once ``gone`` or being deleted: the Job controller's
        countReadyPods); returns its Job's UID, None for a pod no Job controls."""
        owner = _job_owner(pod)
        if owner is None:
            return None
        job_uid, ready = str(owner.get("uid")), self._ready_pods.setdefault(str(owner.get("uid")), set())
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            self._succeeded_pods.setdefault(job_uid, set()).add(_uid(pod))
            self._pod_backoff.pop(job_uid, None)  # failures count from the last success (backoff_utils.go)
        if not gone and controllers.is_ready(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            ready.add(_uid(pod))
        else:
            ready.discard(_uid(pod))
            if not ready and job_uid not in self._runs:
                del self._ready_pods[job_uid]
        return job_uid

    async def _ready_changed(self, job_uid: str | None) -> None:
        """Write the ``status.ready`` and ``status.succeeded`` of a running Job whose ready pods are counted
        (:meth:`_counts_ready`) when the count of its Ready or of its succeeded pods changed since the last
        write."""
        if job_uid is None or job_uid not in self._counting:
            return
        job, written = self._counting[job_uid]
        counts = (len(self._ready_pods.get(job_uid, ())), len(self._succeeded_pods.get(job_uid, ())))
        if counts != written:
            self._counting[job_uid] = (job, counts)
            ready, succeeded = counts
            await self._write_status(job, {"ready": ready, "succeeded": succeeded} if succeeded else {"ready": ready})

    async def _counts_ready(self) -> bool:
        """Whether the Jobs starting now count only their Ready pods in ``status.ready`` and wait for their pods to
        run, as on a real cluster: when the cluster has Nodes, where :mod:`kueue_es.sim.controllers`' scheduler
        stand-in leaves a pod that fits no node Pending. Without Nodes (or when they cannot be listed) every pod
        runs at once, and a Job counts all its pods ready from its start, as before Nodes were read here."""
        try:
            nodes, _ = await client.list_objects(self._api, resources.NODES)
        except errors.KubeError:
            return False
        return bool(nodes)

    def _reconcile_pod(self, pod: dict[str, Any]) -> None:
        """Start the run of a pod this kubelet finishes, or cancel it once the pod no longer runs."""
        uid = _uid(pod)
        if not finishes_pod(pod):
            self._cancel_pod_run(uid)
        elif uid not in self._pod_runs:
            task = asyncio.create_task(self._run_pod(pod), name=f"sim-pod-{pod['metadata']['name']}")
            self._pod_runs[uid] = task
            task.add_done_callback(functools.partial(self._forget_pod_run, uid))

    def _cancel_pod_run(self, uid: str) -> None:
        task = self._pod_runs.pop(uid, None)
        if task is not None:
            task.cancel()

    def _forget_pod_run(self, uid: str, task: asyncio.Task[None]) -> None:
        if self._pod_runs.get(uid) is task:
            del self._pod_runs[uid]

    async def _run_pod(self, pod: dict[str, Any]) -> None:
        """Wait out a running pod's duration from its ``startTime``, then write it Succeeded."""
        metadata = pod["metadata"]
        namespace, name = metadata.get("namespace"), metadata["name"]
        log = self._log.bind(pod=name, pod_namespace=namespace)
        duration = _duration_of(pod, default=self._default_duration, log=log)
        started_at = _pod_started_at(pod.get("status", {}).get("startTime"), now=self._clock())
        log.info("sim_pod_running", duration_seconds=duration)
        await self._sleep(max(0.0, duration - (self._clock() - started_at).total_seconds()))
        try:
            current = await _until_reachable(
                client.get_object, self._api, resources.PODS, namespace=namespace, name=name
            )
            if _uid(current) != _uid(pod) or not finishes_pod(current):
                return
            await _until_reachable(
                client.patch_object,
                self._api,
                resources.PODS,
                namespace=namespace,
                name=name,
                patch={"status": controllers.succeeded_status(current, now=self._clock())},
                subresource="status",
            )
        except errors.NotFoundError:
            return
        except errors.KubeError as exc:
            log.warning("sim_pod_not_completed", error=str(exc))
            return
        log.info("sim_pod_succeeded", duration_seconds=duration)

    async def _run_job(self, job: dict[str, Any]) -> None:
        """Start (or resume) one Job, wait its duration, then complete it."""
        metadata = job["metadata"]
        log = self._log.bind(job=metadata["name"], job_namespace=metadata.get("namespace"))
        # the Job as it is now: a watch event for a Job suspended and at once unsuspended (Kueue's reconciler
        # resumes an admitted Job suspended by hand) can still carry the startTime this kubelet's suspension removed
        current = await self._still_running(job, log=log)
        if current is None:
            return
        job = current
        duration = _duration_of(job, default=self._default_duration, log=log)
        started_at = _parse_time(job.get("status", {}).get("startTime"))
        pods = await self._job_pods(job)
        counting = makes_pods(job) and await self._counts_ready()
        if counting:
            self._counting[_uid(job)] = (job, (-1, 0))
        if started_at is None:
            started_at = self._clock()
            if _suspended(job) or _uid(job) in self._said_suspended:  # the condition turns False
                self._said_suspended.discard(_uid(job))
                await self._record(job, "Resumed", "Job resumed")
            pods = await self._create_pods(job, pods)
            ready = len(self._ready_pods.get(_uid(job), ())) if counting else None
            if counting:
                self._counting[_uid(job)] = (job, (ready or 0, len(self._succeeded_pods.get(_uid(job), ()))))
            status = _started_status(job, now=started_at, ready=ready)
            if not makes_pods(job):
                # an elastic Job's pods are the simulated controllers': they count its Ready ones as the pods run,
                # from none, as the Job controller does (a count of all of them here, then none, then all again,
                # was Kueue's PodsReady Started, WaitForRecovery, Recovered within a moment)
                del status["ready"]
            await self._write_status(job, status)
            log.info("sim_job_started", duration_seconds=duration)
        elif counting:
            await self._ready_changed(_uid(job))
        # one wave of pods at a time (parallelism of them, fewer at the end), the Job's duration shared out over
        # the waves; a restarted kubelet picks the run up from the pods it finds
        waves, current = _waves_left(job, pods), job
        if counting:
            # on a cluster with Nodes each pod runs its share from its own start: one left Pending (no node has
            # room, or a gate holds it) runs later, and the Job completes once its completions are reached
            remaining = duration - (self._clock() - started_at).total_seconds()
            share = max(0.0, remaining / waves)
            while True:
                pods = await self._create_pods(current, pods)
                await self._write_counts(current, pods, all_ready=False)
                await self._sleep(self._next_due(pods, share))
                still = await self._still_running(current, log=log)
                if still is None:
                    return
                current = still
                pods = await self._finish_pods(current, ran_for=share)
                if not _completions_left(current, pods):
                    break
        while not counting:
            pods = await self._create_pods(current, pods)
            await self._write_counts(current, pods, all_ready=True)
            remaining = duration - (self._clock() - started_at).total_seconds()
            await self._sleep(max(0.0, remaining / waves))
            still = await self._still_running(current, log=log)
            if still is None:
                return
            current = still
            pods = await self._finish_pods(current)
            waves = min(waves - 1, _waves_left(current, pods)) if _completions_left(current, pods) else 0
            if waves < 1:
                break
        # the Event before the status: the finished Job's watch event cancels this run
        await self._record(current, "Completed", "Job completed")
        await self._write_status(current, _succeeded_status(current, started_at=started_at, now=self._clock()))
        log.info("sim_job_completed", duration_seconds=duration)

    async def _write_counts(self, job: dict[str, Any], pods: list[dict[str, Any]], *, all_ready: bool) -> None:
        """Write the running ``job``'s ``status.succeeded`` and ``status.active`` from its ``pods`` once one of them
        succeeded and either differs from its status (read when its last wave ended), as the Job controller
        keeps them current while its pods finish (job_controller.go syncJob), so Kueue's reclaimablePods frees the
        quota of the pods no longer needed. ``all_ready`` (a cluster without Nodes, every pod counted ready from
        its start): ``status.ready`` is the active count too; otherwise :meth:`_ready_changed` counts it."""
        succeeded = len(_succeeded(pods))
        if not succeeded:
            return  # its start wrote the counts
        active = sum(1 for pod in pods if controllers.is_active(pod))
        counts: dict[str, Any] = {"succeeded": succeeded, "active": active or None}
        if all_ready:
            counts["ready"] = active
        status = job.get("status") or {}
        if any(status.get(key) != value for key, value in counts.items()):
            await self._write_status(job, counts)

    async def _still_running(self, job: dict[str, Any], *, log: Any) -> dict[str, Any] | None:
        """The Job as it is now, or None when it is gone, replaced, suspended or finished (or unreadable)."""
        metadata = job["metadata"]
        try:
            current = await _until_reachable(
                client.get_object, self._api, resources.JOBS, namespace=metadata.get("namespace"), name=metadata["name"]
            )
        except errors.NotFoundError:
            return None
        except errors.KubeError as exc:
            log.warning("sim_job_not_completed", error=str(exc))
            return None
        if _uid(current) != _uid(job) or current.get("spec", {}).get("suspend") or _is_finished(current):
            return None
        return current

    async def _job_pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        """The pods whose controller is ``job``, listed by the Job's selector as the Job controller does (the
        whole namespace when the selector has expressions); [] for a Job whose pods are not made here."""
        if not makes_pods(job):
            return []
        metadata, selector = job["metadata"], (job.get("spec") or {}).get("selector") or {}
        labels = selector.get("matchLabels") or {}
        label_selector = None
        if labels and not selector.get("matchExpressions"):
            label_selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
        try:
            items, _ = await _until_reachable(
                client.list_objects,
                self._api,
                resources.PODS,
                namespace=metadata.get("namespace"),
                label_selector=label_selector,
            )
        except errors.KubeError as exc:
            self._log.warning("sim_job_pods_not_listed", job=metadata["name"], error=str(exc))
            return []
        return [pod for pod in items if controllers.controller_uid(pod) == _uid(job)]

    async def _create_pods(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create the pods the running ``job`` lacks (:func:`pods_to_create`, given its ``pods``); returns its pods
        with the new ones. A refused pod is logged and left out."""
        if not makes_pods(job):
            return pods
        bodies = pods_to_create(job, pods)
        if bodies and self._backoff_left(_uid(job)) > 0:
            self._create_after_backoff(job)
            return pods
        out = list(pods)
        metadata = job["metadata"]
        for body in bodies:
            try:
                created = await _until_reachable(
                    client.create_object, self._api, resources.PODS, namespace=metadata.get("namespace"), body=body
                )
            except errors.KubeError as exc:
                self._log.warning("sim_job_pod_not_created", job=metadata["name"], error=str(exc))
                # the Job controller's Warning (FailedCreatePodReason, "Error creating: <err>"), once per reason
                # whatever pod it names: its retries back off and its recorder folds the repeats
                said = exc.message if isinstance(exc, errors.ApiError) else str(exc)
                why = controllers.REFUSED_POD.sub("", said)
                if self._failed_create_said.get(_uid(job)) != why:
                    self._failed_create_said[_uid(job)] = why
                    await self._record(job, "FailedCreate", f"Error creating: {said}", kind="Warning")
                continue
            await self._record(job, "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
            out.append(created)
        return out

    def _backoff_left(self, job_uid: str) -> float:
        """Seconds before the Job controller creates pods of the Job again after its pod failures (0 when it may
        now): :data:`POD_FAILURE_BACKOFF_SECONDS` (as given) doubled for each failure after the first since its last
        success, capped, from the last failure (backoff_utils.go getRemainingTimeForFailuresCount)."""
        record = self._pod_backoff.get(job_uid)
        if record is None:
            return 0.0
        failures, last = record
        delay = min(self._pod_failure_backoff * 2 ** min(failures - 1, 30), MAX_POD_FAILURE_BACKOFF_SECONDS)
        return max(0.0, delay - (self._clock() - last).total_seconds())

    def _create_after_backoff(self, job: dict[str, Any]) -> None:
        """Create the pods ``job`` lacks once its pod failure backoff is over (the Job controller's sync queued
        with that delay), unless it stopped running meanwhile; one wait per Job."""
        uid = _uid(job)
        if uid in self._backoff_waits:
            return

        async def wait() -> None:
            try:
                await self._sleep(self._backoff_left(uid))
            finally:
                if self._backoff_waits.get(uid) is asyncio.current_task():
                    del self._backoff_waits[uid]
            current = await self._still_running(job, log=self._log.bind(job=job["metadata"]["name"]))
            if current is not None:
                await self._create_pods(current, await self._job_pods(current))

        self._backoff_waits[uid] = asyncio.create_task(wait(), name=f"pod-backoff-{uid}")

    def _forget_backoff(self, job_uid: str) -> None:
        """Drop a deleted or finished Job's backoff record and its wait (the Job controller removes the record)."""
        self._pod_backoff.pop(job_uid, None)
        task = self._backoff_waits.pop(job_uid, None)
        if task is not None:
            task.cancel()

    def _next_due(self, pods: list[dict[str, Any]], share: float) -> float:
        """Seconds until the first of the running ``pods`` has run ``share`` seconds from its ``startTime``; at most
        :data:`PENDING_POLL_SECONDS` while an active pod is not running yet (it may be bound at any time)."""
        now, due, waiting = self._clock(), [], False
        for pod in pods:
            if not controllers.is_active(pod):
                continue
            started = _parse_time((pod.get("status") or {}).get("startTime"))
            if (pod.get("status") or {}).get("phase") != "Running" or started is None:
                waiting = True
                continue
            due.append(max(0.0, share - (now - started).total_seconds()))
        wait = min(due, default=PENDING_POLL_SECONDS)
        return min(wait, PENDING_POLL_SECONDS) if waiting else wait

    async def _finish_pods(self, job: dict[str, Any], *, ran_for: float | None = None) -> list[dict[str, Any]]:
        """Write each active pod of ``job`` Succeeded (:func:`kueue_es.sim.controllers.succeeded_status`); with ``ran_for`` (seconds),
        only the Running ones that started at least that long ago (a Pending pod has not started); returns its
        pods as they are then."""
        out = []
        for pod in await self._job_pods(job):
            if controllers.is_active(pod) and (ran_for is None or self._ran(pod, ran_for)):
                metadata = pod["metadata"]
                try:
                    pod = await _until_reachable(
                        client.patch_object,
                        self._api,
                        resources.PODS,
                        namespace=metadata.get("namespace"),
                        name=metadata["name"],
                        patch={"status": controllers.succeeded_status(pod, now=self._clock())},
                        subresource="status",
                    )
                except errors.NotFoundError:
                    continue
                except errors.KubeError as exc:
                    self._log.warning("sim_pod_not_completed", pod=metadata["name"], error=str(exc))
            out.append(pod)
        return out

    def _ran(self, pod: dict[str, Any], seconds: float) -> bool:
        """Whether ``pod`` is Running and started at least ``seconds`` ago (its ``startTime``, whole seconds)."""
        started = _parse_time((pod.get("status") or {}).get("startTime"))
        if (pod.get("status") or {}).get("phase") != "Running" or started is None:
            return False
        return (self._clock() - started).total_seconds() >= seconds - 0.001

    async def _delete_pods(self, job: dict[str, Any]) -> None:
        """Delete the active pods of a suspended ``job``, as the Job controller does (finished pods stay); they are
        no failures, even when their deletion is seen after the Job runs again."""
        for pod in await self._job_pods(job):
            if not controllers.is_active(pod):
                continue
            # counted already, so _job_pod_changed leaves them: the Job may be unsuspended before their deletion
            # reaches the pod watch
            self._failed_pods.setdefault(_uid(job), set()).add(_uid(pod))
            metadata = pod["metadata"]
            try:
                await _until_reachable(
                    client.delete_object,
                    self._api,
                    resources.PODS,
                    namespace=metadata.get("namespace"),
                    name=metadata["name"],
                )
            except errors.NotFoundError:
                continue
            except errors.KubeError as exc:
                self._log.warning("sim_pod_not_deleted", pod=metadata["name"], error=str(exc))
                continue
            await self._record(job, "SuccessfulDelete", f"Deleted pod: {metadata['name']}")

    async def _record(self, job: dict[str, Any], reason: str, message: str, *, kind: str = "Normal") -> None:
        """Record an Event (type ``kind``) about ``job`` (:func:`job_event`); one the API server refuses is logged
        and dropped, as a recorder drops it."""
        body = job_event(
            job, reason=reason, message=message, now=self._clock(), serial=next(self._event_serial), kind=kind
        )
        try:
            await _until_reachable(
                client.create_object, self._api, resources.EVENTS, namespace=body["metadata"]["namespace"], body=body
            )
        except errors.KubeError as exc:
            self._log.warning("sim_job_event_not_recorded", job=job["metadata"]["name"], reason=reason, error=str(exc))

    async def _write_status(self, job: dict[str, Any], status: dict[str, Any]) -> None:
        """Merge-patch ``.status`` through the subresource, waiting out connection failures."""
        metadata = job["metadata"]
        try:
            await _until_reachable(
                client.patch_object,
                self._api,
                resources.JOBS,
                namespace=metadata.get("namespace"),
                name=metadata["name"],
                patch={"status": status},
                subresource="status",
            )
        except errors.NotFoundError:
            self._log.info("sim_job_gone", job=metadata["name"])
        except errors.KubeError as exc:
            self._log.warning("sim_job_status_not_written", job=metadata["name"], error=str(exc))


async def _until_reachable(fn: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any) -> _T:
    """Call ``fn`` again (backing off up to 5 s) for as long as the API server cannot be reached."""
    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception_type(errors.ConnectionFailedError),
        wait=tenacity.wait_exponential_jitter(multiplier=0.2, max=5.0),
        stop=tenacity.stop_never,
        reraise=True,
    )
    return await retrying(fn, *args, **kwargs)


JOB_CONTROLLER = "kubernetes.io/job-controller"
"""The ``spec.managedBy`` value (or none) under which Kubernetes' Job controller runs a Job."""


def _managed_here(job: dict[str, Any]) -> bool:
    """Whether the Job controller runs ``job``: no ``spec.managedBy``, or Kubernetes' own (a Job
    managed by ``kueue.x-k8s.io/multikueue`` runs on a worker cluster, never here)."""
    return (job.get("spec") or {}).get("managedBy") in (None, "", JOB_CONTROLLER)


#: The controllers whose pods this kubelet runs to their end as plain pods (they only read the pods' phase).
_RUN_AS_PLAIN = frozenset((*training.KINDS, "AppWrapper"))


def finishes_pod(pod: dict[str, Any]) -> bool:
    """Whether this kubelet finishes ``pod``: running, not being deleted, owned by no controller (whose
    simulation runs its pods), and one a kubelet lets succeed (see the module docstring)."""
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if (pod.get("status") or {}).get("phase") != "Running" or metadata.get("deletionTimestamp"):
        return False
    for ref in metadata.get("ownerReferences") or []:
        # a training operator's pod, or a pod an AppWrapper wraps, runs its containers to their end as a plain
        # pod does (those controllers only read the pod's phase: kueue_es.sim.training, kueue_es.sim.appwrappers);
        # other controllers' pods are theirs to finish
        if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") not in _RUN_AS_PLAIN:
            return False
    if spec.get("restartPolicy") not in ("Never", "OnFailure"):
        return False  # Always, the default: a kubelet restarts containers that exit, so the pod never succeeds
    annotations = metadata.get("annotations") or {}
    return annotations.get(SERVING_ANNOTATION) != "true" or SIM_DURATION_ANNOTATION in annotations


def terminates_pod(pod: dict[str, Any]) -> bool:
    """Whether ``pod`` is one this kubelet terminates now: deleted (held by a finalizer) while Running."""
    metadata = pod.get("metadata") or {}
    return bool(metadata.get("deletionTimestamp")) and (pod.get("status") or {}).get("phase") == "Running"


def pod_killed_status(pod: dict[str, Any], *, now: datetime.datetime) -> dict[str, Any]:
    """What a kubelet writes once it killed the containers of a deleted running ``pod``: phase Failed, each
    container terminated with exit code 137 and reason Error, Ready and ContainersReady False with reason
    PodFailed."""
    status = controllers.succeeded_status(pod, now=now)
    for container in status["containerStatuses"]:
        container["state"]["terminated"].update(exitCode=137, reason="Error")
    stamp = store.format_timestamp(now)
    conditions = [c for c in status["conditions"] if c.get("type") not in ("Ready", "ContainersReady")]
    for kind in ("ContainersReady", "Ready"):
        conditions.append({"type": kind, "status": "False", "reason": "PodFailed", "lastTransitionTime": stamp})
    return {**status, "phase": "Failed", "conditions": conditions}


BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"
"""The message of a Job failed for its backoffLimit (job_controller.go, reason BackoffLimitExceeded)."""


def job_pod_failed(pod: dict[str, Any], job: dict[str, Any], *, gone: bool = False) -> bool:
    """Whether the Job controller counts ``pod`` of ``job`` failed (job_controller.go isPodFailed): phase Failed;
    or, unless the Job replaces only failed pods (``podReplacementPolicy: Failed``, or a ``podFailurePolicy``:
    onlyReplaceFailedPods), being deleted before it succeeded. A pod ``gone`` (deleted from the API; the Job
    controller's tracking finalizer, not modelled here, would have held it until counted) that had not
    succeeded counts too."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Failed":
        return True
    if phase == "Succeeded":
        return False
    if gone:
        return True
    spec = job.get("spec") or {}
    if spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None:
        return False
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _backoff_limit(job: dict[str, Any]) -> int:
    """``spec.backoffLimit`` as the API server defaults it: 6, or the int32 maximum with ``backoffLimitPerIndex``."""
    spec = job.get("spec") or {}
    value = spec.get("backoffLimit")
    if isinstance(value, int) and value >= 0:
        return value
    return 2**31 - 1 if spec.get("backoffLimitPerIndex") is not None else 6


def _job_owner(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's controller owner reference when it is a batch/v1 Job (with a name and UID), else None."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            if (ref.get("apiVersion"), ref.get("kind")) == ("batch/v1", "Job") and ref.get("name") and ref.get("uid"):
                return ref
            return None
    return None


def _failed_status(job: dict[str, Any], *, failed: int, now: datetime.datetime) -> dict[str, Any]:
    """A Job failed for its backoffLimit: ``failed`` counted, no pod active, FailureTarget and Failed True."""
    conditions = _conditions_of(job)
    for kind in ("FailureTarget", "Failed"):
        conditions = _with_condition(
            conditions,
            _condition(kind, status="True", reason="BackoffLimitExceeded", message=BACKOFF_LIMIT_MESSAGE, now=now),
        )
    return {"failed": failed, "active": None, "ready": 0, "conditions": conditions}


def _uid(job: dict[str, Any]) -> str:
    return str(job.get("metadata", {}).get("uid", ""))


def _is_finished(job: dict[str, Any]) -> bool:
    return any(
        condition.get("type") in _FINISHED_TYPES and condition.get("status") == "True"
        for condition in job.get("status", {}).get("conditions") or []
    )


JOB_CONTROLLER_COMPONENT = "job-controller"
"""The source of the Job controller's Events (kube-controller-manager's recorder for pkg/controller/job)."""


def job_event(
    job: dict[str, Any], *, reason: str, message: str, now: datetime.datetime, serial: int = 0, kind: str = "Normal"
) -> dict[str, Any]:
    """The core v1 Event Kubernetes' Job controller records about ``job`` (a Job manifest as stored: its
    ``metadata.name``, ``namespace`` and ``uid``): type ``kind`` (Normal, or Warning for a failure),
    ``reason`` and ``message`` (job_controller.go's ``Suspended``/``Resumed``/``Completed``, the Warning
    ``BackoffLimitExceeded``, controller_utils.go's ``SuccessfulCreate``/``SuccessfulDelete``),
    source ``job-controller``, count 1, first and last seen ``now`` (an aware datetime). Its name is client-go's
    ``<job>.<hex nanoseconds>``, ``serial`` added to the nanoseconds so that two Events of one instant differ."""
    return controllers.core_event(
        job,
        api_version="batch/v1",
        kind="Job",
        event_type=kind,
        reason=reason,
        message=message,
        component=JOB_CONTROLLER_COMPONENT,
        now=now,
        serial=serial,
    )


def _suspended(job: dict[str, Any]) -> bool:
    """Whether ``job``'s ``Suspended`` condition is True (what the Job controller compares to record an Event)."""
    return any(
        condition.get("type") == "Suspended" and condition.get("status") == "True"
        for condition in job.get("status", {}).get("conditions") or []
    )


def _needs_suspended_status(job: dict[str, Any]) -> bool:
    status = job.get("status", {})
    suspended = any(
        condition.get("type") == "Suspended" and condition.get("status") == "True"
        for condition in status.get("conditions") or []
    )
    return not suspended or bool(status.get("active")) or bool(status.get("startTime"))


def _duration_of(job: dict[str, Any], *, default: float, log: Any) -> float:
    text = (job["metadata"].get("annotations") or {}).get(SIM_DURATION_ANNOTATION)
    if text is None:
        return default
    try:
        return max(0.0, float(text))
    except ValueError:
        log.warning("sim_duration_invalid", annotation=SIM_DURATION_ANNOTATION, value=text, used_seconds=default)
        return default


def _parse_time(text: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(text) if text else None


def _pod_started_at(start_time: str | None, *, now: datetime.datetime) -> datetime.datetime:
    """When a pod with ``status.startTime`` ``start_time`` (RFC 3339) is taken to have started, seen ``now``.

    A startTime of whole seconds (what the API writes) only says the pod started within that second: counted
    from the second's end, but never later than ``now``, a pod just started runs its whole duration instead of
    up to a second less, and one a restarted kubelet finds runs at most a second longer than declared."""
    started = _parse_time(start_time)
    if started is None:
        return now
    if started.microsecond == 0:
        started += datetime.timedelta(seconds=1)
    return min(started, now)


def _conditions_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(condition) for condition in job.get("status", {}).get("conditions") or []]


def _with_condition(conditions: list[dict[str, Any]], condition: dict[str, Any]) -> list[dict[str, Any]]:
    """The conditions with one type set in place; its lastTransitionTime is kept if its status did not change."""
    updated, replaced = [], False
    for existing in conditions:
        if existing.get("type") != condition["type"]:
            updated.append(existing)
            continue
        kept_time = existing.get("lastTransitionTime") if existing.get("status") == condition["status"] else None
        updated.append({**condition, "lastTransitionTime": kept_time or condition["lastTransitionTime"]})
        replaced = True
    return updated if replaced else [*updated, condition]


def _condition(kind: str, *, status: str, reason: str, message: str, now: datetime.datetime) -> dict[str, Any]:
    stamp = store.format_timestamp(now)
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }


def makes_pods(job: dict[str, Any]) -> bool:
    """Whether this module makes ``job``'s pods: every Job but an elastic one (``kueue.x-k8s.io/elastic-job:
    "true"``), whose pods :mod:`kueue_es.sim.controllers` scales with its parallelism."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    return annotations.get(slices.ELASTIC_JOB_ANNOTATION) != "true"


def _indexed(job: dict[str, Any]) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def _index_of(pod: dict[str, Any]) -> int | None:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(controllers.JOB_COMPLETION_INDEX)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _succeeded(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [pod for pod in pods if (pod.get("status") or {}).get("phase") == "Succeeded"]


def _completions_left(job: dict[str, Any], pods: list[dict[str, Any]]) -> int:
    """How many more pods of ``job`` must succeed: its completions less the succeeded pods (distinct indexes for
    an Indexed Job); without ``completions``, the parallelism until one pod succeeded, then none (a work queue:
    job_controller.go)."""
    completions = (job.get("spec") or {}).get("completions")
    done = _succeeded(pods)
    if completions is None:
        return 0 if done else _pod_count(job)
    if _indexed(job):
        return max(0, int(completions) - len({_index_of(pod) for pod in done} - {None}))
    return max(0, int(completions) - len(done))


def _waves_left(job: dict[str, Any], pods: list[dict[str, Any]]) -> int:
    """The rounds of ``parallelism`` pods still to run for ``job`` (at least 1; 1 for a Job whose pods are not
    made here)."""
    if not makes_pods(job):
        return 1
    return max(1, -(-_completions_left(job, pods) // max(1, _pod_count(job))))


def pods_to_create(job: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod bodies (:func:`controllers.job_pod`) the Job controller creates for a running ``job`` whose pods are
    ``pods`` (job_controller.go manageJob): active pods up to ``parallelism``, capped by the completions left;
    an Indexed Job's pods take the lowest indexes neither succeeded nor running. [] for a Job this module
    leaves to another (:func:`makes_pods`)."""
    if not makes_pods(job):
        return []
    active = [pod for pod in pods if controllers.is_active(pod)]
    wanted = min(_pod_count(job), _completions_left(job, pods)) - len(active)
    if wanted <= 0:
        return []
    if not _indexed(job):
        return [controllers.job_pod(job) for _ in range(wanted)]
    taken = {_index_of(pod) for pod in [*active, *_succeeded(pods)]}
    completions = int((job.get("spec") or {}).get("completions") or 0)
    free = [index for index in range(completions) if index not in taken]
    return [controllers.job_pod(job, index=index) for index in free[:wanted]]


def _pod_count(job: dict[str, Any]) -> int:
    spec = job.get("spec", {})
    return int(spec.get("parallelism") if spec.get("parallelism") is not None else 1)


def _started_status(job: dict[str, Any], *, now: datetime.datetime, ready: int | None = None) -> dict[str, Any]:
    """The status of ``job`` as it starts: ``startTime`` ``now``, its pods active, ``ready`` of them Ready (all
    when None: a cluster without Nodes runs them at once), the Suspended condition turned False."""
    status: dict[str, Any] = {
        "startTime": store.format_timestamp(now),
        "active": _pod_count(job) or None,
        "ready": _pod_count(job) if ready is None else ready,
    }
    if any(condition.get("type") == "Suspended" for condition in _conditions_of(job)):
        status["conditions"] = _with_condition(
            _conditions_of(job),
            _condition("Suspended", status="False", reason="JobResumed", message="Job resumed", now=now),
        )
    return status


def _suspended_status(job: dict[str, Any], *, now: datetime.datetime) -> dict[str, Any]:
    return {
        "active": None,
        "ready": 0,
        "startTime": None,
        "conditions": _with_condition(
            _conditions_of(job),
            _condition("Suspended", status="True", reason="JobSuspended", message="Job suspended", now=now),
        ),
    }


def _succeeded_status(job: dict[str, Any], *, started_at: datetime.datetime, now: datetime.datetime) -> dict[str, Any]:
    spec = job.get("spec", {})
    succeeded = spec.get("completions") if spec.get("completions") is not None else _pod_count(job)
    conditions = _conditions_of(job)
    for kind in ("SuccessCriteriaMet", "Complete"):
        conditions = _with_condition(
            conditions,
            _condition(
                kind,
                status="True",
                reason="CompletionsReached",
                message="Reached expected number of succeeded pods",
                now=now,
            ),
        )
    indexes = {"completedIndexes": completed_indexes(int(succeeded))} if _indexed(job) and succeeded else {}
    return {
        **indexes,
        "startTime": store.format_timestamp(started_at),
        "completionTime": store.format_timestamp(now),
        "succeeded": succeeded,
        "active": None,  # JobStatus.active is omitempty: a Job with none reads back without it
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
        "conditions": conditions,
    }


def completed_indexes(count: int) -> str:
    """``status.completedIndexes`` of an Indexed Job whose indexes ``0 .. count - 1`` all succeeded, in the Job
    controller's interval notation (indexed_job_utils.go orderedIntervals.String): "" for none, "0", "0,1",
    then "0-2" and on. Raises ValueError for a negative count."""
    if count < 0:
        raise ValueError(f"completed index count {count} is negative")
    if count == 0:
        return ""
    last = count - 1
    return "0" if last == 0 else f"0{',' if last == 1 else '-'}{last}"
