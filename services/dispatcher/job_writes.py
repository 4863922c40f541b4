"""Carrying out the dispatcher's plan on the jobs: start an admitted one, stop an evicted one.

Why this module exists: :func:`kueue_es.services.dispatcher.core.plan` says what a
decision calls for (an :data:`~kueue_es.services.dispatcher.core.Action`); this
module writes it to the API server, for each kind of job Kueue integrates: a
batch/v1 Job (unsuspend it with the flavors' node selectors, tolerations and the
TAS gate, or suspend it and give its template back, Kueue job_controller.go
Run/Stop), a table-driven integration's job (a JobSet, a PyTorchJob, ...: the same on each pod set's
template, its own suspend field) and plain Pods (ungate them,
or mark and delete them, pod_controller.go). Each write waits for the dispatcher's
write limiter first, in the most urgent class (``WriteClass.JOBS``); the result is
the DispatchApplied or DispatchFailed the dispatcher (:mod:`.service`) records on
the log. A job that is gone, or a namesake
with another UID, is a DispatchFailed 404; other API errors are raised.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, assert_never

import structlog

from kueue_es.events import manifests, types
from kueue_es.jobframework import integrations, prebuilt
from kueue_es.jobframework import pods as pod_integration
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.kube_api import KubeApi, RawObject, WriteLimiter
from kueue_es.services.dispatcher.write_budget import WriteClass
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import objects, resources

log = structlog.get_logger(__name__)

JOB_REF = resources.ref_for("batch/v1", "Job")
POD_REF = resources.ref_for("v1", "Pod")
FAILED_TO_START = "FailedToStart"
"""The reason of a DispatchFailed for a start that cannot be carried out: its workload is finished with it."""

Result = types.DispatchApplied | types.DispatchFailed
JobAction = core.StartJob | core.StopJob | core.StartIntegration | core.StopIntegration
PodsAction = core.StartPods | core.StopPods


def action_name(action: core.Action) -> str:
    """``StartJob`` or ``Evict``, whatever the job kind (the DispatchApplied/Failed action)."""
    return "Evict" if isinstance(action, core.StopJob | core.StopIntegration | core.StopPods) else "StartJob"


def target_name(action: core.Action) -> str:
    """``namespace/name`` of the job (or pod, or pod group) an action writes."""
    match action:
        case core.StartPods() | core.StopPods():
            name = action.group or action.pod_name
        case _:
            name = action.name
    return f"{action.namespace}/{name}"


EXCESS_POD_REASON = "ExcessPodDeleted"
EXCESS_POD_MESSAGE = "Excess pod deleted"
"""Kueue's Normal Event on each pod it deletes beyond its group's count (pod_controller.go removeExcessPods)."""
ExcessHook = Callable[[objects.Pod], None]


async def delete_excess(
    api: KubeApi,
    limiter: WriteLimiter,
    action: core.StartPods,
    members: list[objects.Pod],
    *,
    on_deleted: ExcessHook | None = None,
) -> set[str]:
    """Delete the active pods of ``action``'s group beyond its count (:func:`pods.excess_pods`: the newest
    gated ones go first), as Kueue's pod group reconciler does, so no pod runs outside the workload's quota, each
    let go of Kueue's pod finalizer first (removeExcessPods finalizes, then deletes: an excess pod is no member
    to count); ``on_deleted`` is told of each (its Event). Returns the names deleted (or found gone), or, for a
    group on a prebuilt Workload (``keep_excess``, or pods naming one: :func:`prebuilt.members_name_prebuilt`;
    Kueue's prebuilt path never calls removeExcessPods), those left gated."""
    if not action.group or action.total <= 0:
        return set()
    keep = action.keep_excess or prebuilt.members_name_prebuilt(members)
    deleted: set[str] = set()
    for pod in pod_integration.excess_pods(members, action.total):
        name = str((pod.get("metadata") or {}).get("name") or "")
        if keep:
            deleted.add(name)
            continue
        try:
            if pod_integration.holds_finalizer(pod):
                kept = [
                    f for f in (pod.get("metadata") or {}).get("finalizers") or [] if f != pod_integration.POD_FINALIZER
                ]
                await limiter.acquire(WriteClass.JOBS)
                await api.patch_object(
                    POD_REF, namespace=action.namespace, name=name, patch={"metadata": {"finalizers": kept or None}}
                )
            if not (pod.get("metadata") or {}).get("deletionTimestamp"):  # one being deleted is only let go
                await limiter.acquire(WriteClass.JOBS)
                await api.delete_object(POD_REF, namespace=action.namespace, name=name)
        except kube_errors.NotFoundError:
            deleted.add(name)
            continue
        deleted.add(name)
        log.info("excess_pod_deleted", pod=f"{action.namespace}/{name}", group=action.group, total=action.total)
        if on_deleted is not None:
            on_deleted(objects.as_pod(dict(pod)))
    return deleted


class JobWrites:
    """Writes the jobs of admitted and evicted workloads, one action at a time, each write rate-limited.
    ``on_excess``: told of each pod deleted beyond its group's count."""

    def __init__(self, *, api: KubeApi, limiter: WriteLimiter, on_excess: ExcessHook | None = None) -> None:
        self.api, self.limiter, self.on_excess = api, limiter, on_excess
        # decision sequence -> the pods (name, UID) its start ungated or its stop deleted, kept across a write tried
        # again (those written before the failure are not written again, and still get their Event)
        self._pods_written: dict[int, list[tuple[str, str]]] = {}
        # decision sequences whose stop found its job suspended already: nothing stopped now, no Stopped Event
        self._found_suspended: set[int] = set()

    def take_pods_written(self, seq: int) -> list[tuple[str, str]]:
        """The pods (``(name, uid)``) the start or stop of the decision at ``seq`` ungated or deleted, in order;
        forgotten once taken."""
        return self._pods_written.pop(seq, [])

    def stopped_now(self, seq: int) -> bool:
        """Whether the job write of the decision at ``seq`` stopped a job that was not suspended yet (True for any
        other write): Kueue records its Stopped Event only then (reconciler.go stopJob: Job.Stop's ``stoppedNow``,
        ``if job.IsSuspended() { return nil }`` for the other kinds). Forgotten once asked."""
        if seq in self._found_suspended:
            self._found_suspended.discard(seq)
            return False
        return True

    def _pod_written(self, seq: int, pod: objects.Pod) -> None:
        meta = objects.meta(pod)
        self._pods_written.setdefault(seq, []).append((str(meta.get("name") or ""), str(meta.get("uid") or "")))

    async def carry_out(self, action: core.Action, *, seq: int) -> Result:
        """Write ``action`` (planned for the decision at ``seq``); raises the API's errors but 404."""
        match action:
            case core.StartJob():
                return await self.start_job(action, seq=seq)
            case core.StopJob():
                return await self.stop_job(action, seq=seq)
            case core.StartIntegration() | core.StopIntegration():
                return await self.write_integration(action, seq=seq)
            case core.StartPods():
                return await self.start_pods(action, seq=seq)
            case core.StopPods():
                return await self.stop_pods(action, seq=seq)
            case core.FailStart():
                log.warning("job_not_started", workload=action.workload.key, reason=action.message, seq=seq)
                return failed_start(action.workload, seq=seq, message=action.message)
            case _:
                assert_never(action)

    # -- Jobs and the integrations' jobs ------------------------------------------------------------------------

    async def _same_job(
        self, action: JobAction, *, seq: int, ref: resources.ResourceRef
    ) -> RawObject | types.DispatchFailed:
        """The action's Job (or integration job) as the API server has it, or DispatchFailed 404 when it is gone
        or a namesake with another UID took its place."""
        target = f"{ref.kind} {action.namespace}/{action.name}"
        try:
            job = await self.api.get_object(ref, namespace=action.namespace, name=action.name)
        except kube_errors.NotFoundError as err:
            return self.gone(action, seq=seq, message=str(err))
        uid = (job.get("metadata") or {}).get("uid", "")
        if action.uid and uid and uid != action.uid:
            return self.gone(action, seq=seq, message=f"{target} has UID {uid}, not {action.uid}: it was re-created")
        return job

    async def stop_never_started(self, action: core.StopJob, *, seq: int) -> tuple[Result, bool]:
        """Stop the Job of a workload whose start this dispatcher skipped (its admission came with an
        eviction already on the log); returns the result and whether it took a write.

        Kueue's stop of a batch/v1 Job that is suspended writes nothing (jobframework/reconciler.go
        stopJob: ``if job.IsSuspended() { return nil }``) and the reconciler goes on to clear the
        reservation. So a Job found suspended with no pod active takes no write here either, and the
        dispatcher reports it stopped itself (WorkloadStopped: the watcher reports only Jobs marked by a
        stop's write). A Job found running (unsuspended by someone else) is stopped as usual; one that is
        gone, or a namesake, is a DispatchFailed 404.
        """
        found = await self._same_job(action, seq=seq, ref=JOB_REF)
        if isinstance(found, types.DispatchFailed):
            return found, False
        if (found.get("spec") or {}).get("suspend") is True and not (found.get("status") or {}).get("active"):
            log.info("job_stop_not_written", job=f"{action.namespace}/{action.name}", seq=seq, why="suspended")
            return self.stopped(action, seq=seq), False
        return await self.stop_job(action, seq=seq), True

    async def runs(self, action: core.StopJob | core.StopIntegration) -> bool:
        """Whether the action's job is there (the same UID, not being deleted) and not suspended: the stop of a
        job whose Workload was deleted is written only then (Kueue reconciler.go stopJob: a suspended job takes
        no write; a deleted job has nothing left to stop). Raises the API's errors but 404."""
        if isinstance(action, core.StopJob):
            ref, suspended = JOB_REF, lambda job: (job.get("spec") or {}).get("suspend") is True
        else:
            integration = integrations.registry()[action.kind]
            ref = resources.ref_for(integration.api_version, integration.kind)
            suspended = lambda job: integrations.suspended(integration, job)  # noqa: E731
        try:
            job = await self.api.get_object(ref, namespace=action.namespace, name=action.name)
        except kube_errors.NotFoundError:
            return False
        meta = job.get("metadata") or {}
        if (action.uid and meta.get("uid", action.uid) != action.uid) or meta.get("deletionTimestamp"):
            return False
        return not suspended(job)

    @staticmethod
    def stopped(action: core.StopJob, *, seq: int) -> types.DispatchApplied:
        """The result of a Job's stop for the eviction at ``seq``, written or not (the Job is suspended)."""
        target = f"Job {action.namespace}/{action.name}"
        return types.DispatchApplied(workload=action.workload, decision_seq=seq, action="Evict", target=target)

    async def start_job(self, action: core.StartJob, *, seq: int) -> Result:
        """Unsuspend the admitted workload's Job with the flavors' node labels and tolerations, and with the
        admitted pod count as its parallelism when it accepts partial admission.

        A Job that is gone, or a namesake with another UID, is a DispatchFailed 404; one whose pod template
        sets a label, annotation or nodeSelector key the start sets otherwise is left suspended, a DispatchFailed
        422 ``FailedToStart`` naming the conflict (:meth:`core.StartJob.conflict`), which finishes its workload.
        """
        target = f"Job {action.namespace}/{action.name}"
        found = await self._same_job(action, seq=seq, ref=JOB_REF)
        if isinstance(found, types.DispatchFailed):
            return found
        job = objects.as_job(found)
        conflict = action.conflict((found.get("spec") or {}).get("template") or {})
        if conflict is not None:
            log.warning("job_not_started", job=target, workload=action.workload.key, reason=conflict, seq=seq)
            return failed_start(action.workload, seq=seq, message=conflict)
        pod_spec = objects.pod_spec(job)
        patch = action.patch(
            current_tolerations=pod_spec.get("tolerations") or [],
            current_gates=pod_spec.get("schedulingGates") or [],
            job_annotations=objects.meta(job).get("annotations") or {},
        )
        if action.uid:
            patch["metadata"]["uid"] = action.uid  # a precondition: a namesake created meanwhile is refused
        await self.limiter.acquire(WriteClass.JOBS)
        await self.api.patch_object(JOB_REF, namespace=action.namespace, name=action.name, patch=patch)
        log.info("job_started", job=f"{action.namespace}/{action.name}", workload=action.workload.key, seq=seq)
        return types.DispatchApplied(
            workload=action.workload,
            decision_seq=seq,
            action="StartJob",
            target=target,
            node_selector=action.node_selector,
        )

    async def stop_job(self, action: core.StopJob, *, seq: int) -> Result:
        """Suspend the evicted workload's Job, restore its template and its parallelism, and mark it (Kueue
        job_controller.go Stop). A running Job's template is immutable, so one that must be restored is
        suspended first and its ``status.startTime`` reset, as Kueue does, then restored and marked.

        A Job that is gone, or a namesake with another UID, is a DispatchFailed 404.
        """
        found = await self._same_job(action, seq=seq, ref=JOB_REF)
        if isinstance(found, types.DispatchFailed):
            return found
        if (found.get("spec") or {}).get("suspend") is True:
            self._found_suspended.add(seq)  # never started, or stopped already: restored and marked, no Event
        patch = action.patch(current_pod_spec=objects.pod_spec(objects.as_job(found)), job=found)
        if "template" in patch["spec"] and not _template_mutable(found):
            # The API server lets a Job's pod template change only while the Job is suspended and has not
            # started: suspend it, reset its start time (the job controller would, later), then restore.
            precondition = {"uid": action.uid} if action.uid else {}
            suspend = {"metadata": precondition, "spec": {"suspend": True}}
            await self.limiter.acquire(WriteClass.JOBS)
            found = await self.api.patch_object(JOB_REF, namespace=action.namespace, name=action.name, patch=suspend)
            if (found.get("status") or {}).get("startTime"):
                reset = {"metadata": precondition, "status": {"startTime": None}}
                await self.limiter.acquire(WriteClass.JOBS)
                await self.api.patch_object(
                    JOB_REF, namespace=action.namespace, name=action.name, patch=reset, subresource="status"
                )
        await self.limiter.acquire(WriteClass.JOBS)
        await self.api.patch_object(JOB_REF, namespace=action.namespace, name=action.name, patch=patch)
        log.info("job_stopped", job=f"{action.namespace}/{action.name}", workload=action.workload.key, seq=seq)
        return self.stopped(action, seq=seq)

    async def write_integration(self, action: core.StartIntegration | core.StopIntegration, *, seq: int) -> Result:
        """Unsuspend a job of a table-driven integration (a JobSet, a PyTorchJob, ...) with its templates
        started, or suspend it with them given back (:mod:`kueue_es.jobframework.integrations`).

        A job that is gone, or a namesake, is a DispatchFailed 404; one that no longer converts (its pod
        sets cannot be read) a DispatchFailed 422 ``Invalid`` naming the field.
        """
        integration = integrations.registry()[action.kind]
        ref = resources.ref_for(integration.api_version, integration.kind)
        target = f"{action.kind} {action.namespace}/{action.name}"
        found = await self._same_job(action, seq=seq, ref=ref)
        if isinstance(found, types.DispatchFailed):
            return found
        try:
            patch = action.patch(found)
        except core.TemplateConflict as err:
            log.warning("job_not_started", job=target, workload=action.workload.key, reason=str(err), seq=seq)
            return failed_start(action.workload, seq=seq, message=str(err))
        except manifests.ManifestError as err:
            log.warning("job_not_written", job=target, workload=action.workload.key, error=str(err), seq=seq)
            return types.DispatchFailed(
                workload=action.workload,
                decision_seq=seq,
                action=action_name(action),
                status=422,
                reason="Invalid",
                message=str(err),
            )
        starting = isinstance(action, core.StartIntegration)
        if not starting and integrations.suspended(integration, found):
            self._found_suspended.add(seq)  # never started, or stopped already: given back and marked, no Event
        await self.limiter.acquire(WriteClass.JOBS)
        await self.api.patch_object(ref, namespace=action.namespace, name=action.name, patch=patch)
        log.info("job_started" if starting else "job_stopped", job=target, workload=action.workload.key, seq=seq)
        selector = {k: v for info in action.pod_sets for k, v in info.node_selector.items()} if starting else {}
        return types.DispatchApplied(
            workload=action.workload,
            decision_seq=seq,
            action=action_name(action),
            target=target,
            node_selector=dict(sorted(selector.items())),
        )

    # -- Pods --------------------------------------------------------------------------------------

    async def pods_of(self, action: PodsAction) -> list[objects.Pod]:
        """The pods of a Pod workload: the one pod, or every pod of the group in the namespace."""
        if not action.group:
            try:
                return [
                    objects.as_pod(await self.api.get_object(POD_REF, namespace=action.namespace, name=action.pod_name))
                ]
            except kube_errors.NotFoundError:
                return []
        items, _ = await self.api.list_objects(POD_REF, namespace=action.namespace)
        return sorted(
            (objects.as_pod(pod) for pod in items if pod_integration.group_name(pod) == action.group),
            key=objects.name_of,
        )

    @staticmethod
    def _pods_target(action: PodsAction) -> str:
        return (
            f"Pod group {action.namespace}/{action.group}"
            if action.group
            else f"Pod {action.namespace}/{action.pod_name}"
        )

    async def start_pods(self, action: core.StartPods, *, seq: int) -> Result:
        """Ungate the workload's pods with their pod set's node selector and tolerations (pod_controller.go Run);
        each pod ungated is kept for its Started Event (:meth:`take_pods_written`).

        No pod left (or the single pod replaced by a namesake) is a DispatchFailed 404, except for a serving
        parent's group (:attr:`core.StartPods.serving`): a StatefulSet scaled up again is admitted before its
        controller creates the pods, which start as they come (Kueue's pod reconciler ungates each pod of an
        admitted group when it sees it). A pod to start that sets a label, annotation or nodeSelector key its start
        sets otherwise leaves every pod gated, a DispatchFailed 422 ``FailedToStart`` naming the conflict
        (:func:`_pods_conflict`), which finishes the workload.
        """
        target = self._pods_target(action)
        members = await self.pods_of(action)
        uid = objects.meta(members[0]).get("uid", "") if members and not action.group else ""
        if not members and action.serving:
            log.info("pods_started", pods=target, workload=action.workload.key, seq=seq, pods_now=0)
            return _pods_started(action, seq=seq, target=target)
        if not members or (action.uid and uid and uid != action.uid):
            return self.gone(action, seq=seq, message=f"{target} is gone")
        excess = await delete_excess(self.api, self.limiter, action, members, on_deleted=self.on_excess)
        starts = [(pod, patch) for pod in members if (patch := self._start_of(action, pod, excess)) is not None]
        if (conflict := _pods_conflict(action, [pod for pod, _ in starts])) is not None:
            log.warning("job_not_started", pods=target, workload=action.workload.key, reason=conflict, seq=seq)
            return failed_start(action.workload, seq=seq, message=conflict)
        for pod, patch in starts:
            name = objects.meta(pod).get("name", "")
            try:
                if (relabel := action.relabel(pod)) is not None:  # its StatefulSet's LocalQueue first (syncQueueLabel)
                    await self.limiter.acquire(WriteClass.JOBS)
                    await self.api.patch_object(POD_REF, namespace=action.namespace, name=name, patch=relabel)
                await self.limiter.acquire(WriteClass.JOBS)
                await self.api.patch_object(POD_REF, namespace=action.namespace, name=name, patch=patch)
            except kube_errors.NotFoundError:
                continue  # deleted meanwhile: the watcher sees the group change
            self._pod_written(seq, pod)
        log.info("pods_started", pods=target, workload=action.workload.key, seq=seq)
        return _pods_started(action, seq=seq, target=target)

    @staticmethod
    def _start_of(action: core.StartPods, pod: objects.Pod, excess: Collection[str]) -> dict[str, Any] | None:
        """The merge patch starting ``pod``, or None: an excess pod (deleted), or one started already."""
        if objects.meta(pod).get("name") in excess:
            return None
        return action.patch(pod, pod_set=_pod_set_of(action, pod))

    async def stop_pods(self, action: core.StopPods, *, seq: int) -> Result:
        """Mark every pod of the workload with the eviction and delete those that run (pod_controller.go Stop);
        each pod deleted that was not being deleted already is kept for its Stopped Event (:meth:`take_pods_written`).

        The watcher reports WorkloadStopped once no marked pod runs. No pod left is a DispatchFailed 404.
        """
        target = self._pods_target(action)
        members = await self.pods_of(action)
        if not members:
            return self.gone(action, seq=seq, message=f"{target} is gone")
        for pod in members:
            name = objects.meta(pod).get("name", "")
            try:
                await self.limiter.acquire(WriteClass.JOBS)
                await self.api.patch_object(POD_REF, namespace=action.namespace, name=name, patch=action.mark())
                if not pod_integration.is_gated(pod) and not pod_integration.is_terminated(pod):
                    await self.limiter.acquire(WriteClass.JOBS)
                    await self.api.delete_object(POD_REF, namespace=action.namespace, name=name)
                    if not objects.meta(pod).get("deletionTimestamp"):  # Pod.Stop's stoppedNow: its Stopped Event
                        self._pod_written(seq, pod)
            except kube_errors.NotFoundError:
                continue
        log.info("pods_stopped", pods=target, workload=action.workload.key, seq=seq)
        return types.DispatchApplied(workload=action.workload, decision_seq=seq, action="Evict", target=target)

    @staticmethod
    def gone(action: core.Action, *, seq: int, message: str) -> types.DispatchFailed:
        """The DispatchFailed 404 of an action whose job is gone."""
        log.info("job_gone", target=target_name(action), workload=action.workload.key, seq=seq)
        return types.DispatchFailed(
            workload=action.workload,
            decision_seq=seq,
            action=action_name(action),
            status=404,
            reason="NotFound",
            message=message,
        )


def _pod_set_of(action: core.StartPods, pod: Mapping[str, Any]) -> str:
    """The pod set ``pod`` starts in: its role's in a group, else its workload's one pod set, named as a prebuilt
    Workload's user chose (pod_controller.go Run: podSetsInfo[0])."""
    if action.group:
        return pod_integration.role_hash(pod)
    return action.pod_sets[0].name if action.pod_sets else "main"


def _pods_conflict(action: core.StartPods, pods: Sequence[Mapping[str, Any]]) -> str | None:
    """Kueue's message when a pod to start sets a label, annotation or nodeSelector key its pod set's start sets
    otherwise (pod_controller.go Run merges each pod with podset.Merge: :func:`core.template_conflict`), else None;
    checked for every pod before any is written, so a refused start ungates none."""
    for pod in pods:
        info = next((i for i in action.pod_sets if i.name == _pod_set_of(action, pod)), None)
        if info is None:
            continue
        conflict = core.template_conflict(
            pod, labels=info.labels, annotations=info.annotations, node_selector=info.node_selector
        )
        if conflict is not None:
            return conflict
    return None


def failed_start(workload: types.WorkloadRef, *, seq: int, message: str) -> types.DispatchFailed:
    """The result of a start that cannot be carried out (its pod set information conflicts): Kueue finishes the
    workload with reason FailedToStart and ``message`` (reconciler.go, podset.IsPermanent)."""
    return types.DispatchFailed(
        workload=workload,
        decision_seq=seq,
        action="StartJob",
        status=422,
        reason=FAILED_TO_START,
        message=message,
    )


def _pods_started(action: core.StartPods, *, seq: int, target: str) -> types.DispatchApplied:
    """The DispatchApplied of a started Pod workload: its pod sets' node selectors merged, sorted by key."""
    selector = {k: v for info in action.pod_sets for k, v in info.node_selector.items()}
    return types.DispatchApplied(
        workload=action.workload,
        decision_seq=seq,
        action="StartJob",
        target=target,
        node_selector=dict(sorted(selector.items())),
    )


def _template_mutable(job: Mapping[str, Any]) -> bool:
    """Whether the API server lets the Job's pod template's scheduling directives change now: it is suspended
    and has not started (AllowMutableSchedulingDirectives: ``spec.suspend`` and no ``status.startTime``)."""
    return bool((job.get("spec") or {}).get("suspend")) and not (job.get("status") or {}).get("startTime")
