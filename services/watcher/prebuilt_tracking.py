"""Jobs that name a prebuilt Workload, and the Workload objects they name, as the watcher follows them.

Why this module exists: a job labelled (or annotated) ``kueue.x-k8s.io/prebuilt-workload-name: NAME``
gets no Workload of its own: it adopts the Workload object NAME of its namespace, as Kueue's job
reconciler does (:mod:`kueue_es.jobframework.prebuilt`). What the log holds for it then depends on
two objects at once, the job and that Workload object, and either may come first or change.
:class:`PrebuiltWorkloads` keeps the Workload objects a job may adopt (those no object owns, and
those a job names) and which jobs name which, and publishes, whenever either changes:

- nothing while the Workload object does not exist, or another object controls it: the job waits;
- the adoption: WorkloadObserved of the Workload as its object has it, owned by the job, in the
  job's LocalQueue while it holds no quota (the dispatcher writes the owner reference and starts
  the job when the workload is admitted, also when it was admitted before the job came);
- WorkloadFinished ``OutOfSync`` once, when the Workload does not match the job (the job waits);
- the job's own progress for that workload, as for any job's: its finish, its stop after an eviction,
  PodsReady, reclaimable pods;
- ObjectDeleted when the Workload object is deleted while the job remains, or the job is deleted.

A Workload object a job adopts is this module's, not :mod:`~kueue_es.services.watcher.standalone`'s,
even before the dispatcher wrote its owner reference: the job plays the job's part, not its user.

Pods name one too: a single pod as any job (:meth:`PrebuiltWorkloads.sync_job`), a pod group as a whole
(:meth:`PrebuiltWorkloads.sync_group`: its pods are
:class:`~kueue_es.services.watcher.pod_tracking.PodGroups`'s, which reports their progress as for any group).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import msgspec
import structlog

from kueue_es.events import manifests, models, types
from kueue_es.jobframework import integrations, jobs, pods, prebuilt, workloads
from kueue_es.services.kube import objects
from kueue_es.services.watcher.inputs import ConversionInputs
from kueue_es.services.watcher.kinds import API_VERSIONS, Key
from kueue_es.services.watcher.publishing import Publisher, log_rejection
from kueue_es.services.watcher.reporting import ProgressReporter

log = structlog.get_logger(__name__)

JobId = tuple[str, str]
"""``(kind, name)`` of a job, in the namespace of the workload it names."""
Converter = Callable[[str, objects.KubeObject, int, workloads.Context], types.Fact | None]
"""A job's kind, the job, the time now (ms) and what its conversion reads, to the fact it stands for."""
GroupMembers = Callable[[Key], list[objects.KubeObject]]
"""``(namespace, pod group)`` to the group's managed pods (and those it keeps counting after they went)."""


def names(kind: str, obj: objects.KubeObject) -> str:
    """The prebuilt Workload a job of ``kind`` names ("" none); a Pod's: a single pod's, or its pod group's
    (:func:`kueue_es.jobframework.pods.prebuilt_workload`)."""
    raw = cast(Mapping[str, Any], obj)
    return pods.prebuilt_workload(raw) if kind == "Pod" else workloads.prebuilt_workload(raw)


class PrebuiltWorkloads:
    """Publishes the adoption of prebuilt Workloads and their jobs' progress through ``publisher``.

    ``jobs``: the jobs the watcher keeps, by kind (the JobTracker's); ``managed``: whether Kueue manages a job
    of a kind; ``convert``: a job to the fact it stands for (its finish); ``group_members``: a pod group's pods
    (:meth:`~kueue_es.services.watcher.pod_tracking.PodGroups.members`); ``clock``: the time now in ms.
    """

    def __init__(
        self,
        *,
        publisher: Publisher,
        inputs: ConversionInputs,
        reporter: ProgressReporter,
        jobs: Mapping[str, Mapping[Key, objects.KubeObject]],
        managed: Callable[[str, objects.KubeObject], bool],
        convert: Converter,
        group_members: GroupMembers,
        clock: Callable[[], int],
    ) -> None:
        self.publisher, self.inputs, self.reporter, self.clock = publisher, inputs, reporter, clock
        self.jobs, self.managed, self.convert, self.group_members = jobs, managed, convert, group_members
        self.objects: dict[Key, objects.KubeObject] = {}  # Workload objects: owned by nothing, or named by a job
        self.named: dict[Key, dict[JobId, None]] = {}  # workload key -> the jobs that name it
        self._names: dict[tuple[str, str, str], str] = {}  # (kind, namespace, job name) -> the workload it names
        # workload key -> (UID, reason) of the one whose finish was published here (before the object says so)
        self.finished: dict[Key, tuple[str, str]] = {}

    # -- which job names which Workload -----------------------------------------------------------

    def index(self, kind: str, obj: objects.KubeObject, *, present: bool) -> Key | None:
        """Remember (``present``) or forget the Workload job ``obj`` names; returns the key it named before
        when that was another one (its Workload is to be looked at again), else None."""
        ident = (kind, objects.namespace_of(obj), objects.name_of(obj))
        before = self._names.pop(ident, "")
        name = names(kind, obj) if present else ""
        job: JobId = (kind, ident[2])
        if before and before != name:
            holders = self.named.get((ident[1], before), {})
            holders.pop(job, None)
            if not holders:
                self.named.pop((ident[1], before), None)
        if name:
            self._names[ident] = name
            self.named.setdefault((ident[1], name), {})[job] = None
        return (ident[1], before) if before and before != name else None

    def reindex(self, kind: str) -> None:
        """Rebuild what the jobs of ``kind`` name from the jobs kept (after a relist)."""
        for ident in [i for i in self._names if i[0] == kind]:
            job = self.jobs[kind].get((ident[1], ident[2]))
            if job is None:
                self.index(kind, {"metadata": {"namespace": ident[1], "name": ident[2]}}, present=False)
        for obj in self.jobs[kind].values():
            self.index(kind, obj, present=True)

    def _candidates(self, key: Key) -> list[tuple[str, objects.KubeObject]]:
        """The jobs Kueue manages that name workload ``key``, by name."""
        out = []
        for kind, name in sorted(self.named.get(key, {}), key=lambda j: (j[1], j[0])):
            job = self.jobs[kind].get((key[0], name))
            if job is not None and self.managed(kind, job):
                out.append((kind, job))
        return out

    def adopter(self, key: Key, obj: objects.KubeObject | None = None) -> tuple[str, objects.KubeObject] | None:
        """The job that adopts workload ``key`` (:func:`kueue_es.jobframework.prebuilt.adopter`), given its Workload
        object (``obj``, else the one kept), or None while that is not known, no job Kueue manages names it or
        another object controls it."""
        obj = obj if obj is not None else self.objects.get(key)
        candidates = self._candidates(key)
        if obj is None or not candidates:
            return None
        known = self.publisher.workloads.get(key)
        adopted_by = known.owner.uid if known is not None and known.owner is not None else ""
        chosen = prebuilt.adopter(
            cast(Mapping[str, Any], obj), [cast(Mapping[str, Any], job) for _, job in candidates], adopted_by=adopted_by
        )
        return None if chosen is None else candidates[chosen]

    def claims(self, obj: objects.KubeObject) -> bool:
        """Whether a Workload object is a job's prebuilt one (a job Kueue manages names it and may adopt it): its
        changes are this module's (:meth:`workload_changed`), not a standalone Workload's."""
        key = _key(obj)
        return key in self.named and self.adopter(key, obj) is not None

    # -- Workload objects -------------------------------------------------------------------------

    def remember(self, change: str, obj: objects.KubeObject) -> None:
        """A Workload object no job adopts changed: keep it while nothing owns it (a job may name it later)."""
        key = _key(obj)
        if change == "DELETED" or objects.meta(obj).get("ownerReferences"):
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj

    async def workload_changed(self, change: str, obj: objects.KubeObject) -> None:
        """A Workload object a job adopts changed (:meth:`claims`): its adoption is looked at again, its admission
        check entries reported; deleted (or marked for deletion) while the job remains: ObjectDeleted (Kueue
        stops the job, which waits for a Workload of that name again)."""
        key = _key(obj)
        version = objects.resource_version(obj)
        if change == "DELETED" or objects.meta(obj).get("deletionTimestamp"):
            self.objects.pop(key, None)
            finished = self.finished.pop(key, None) is not None or _finished(cast(Mapping[str, Any], obj)) is not None
            known = self.publisher.workloads.get(key)
            if (
                known is not None
                and prebuilt.is_adopted(known)
                and known.metadata.uid == objects.uid_of(obj)
                and key in self.publisher.known["Workload"]
            ):
                # the Msg-Id names the object's deletion: the dispatcher's when the retention policies deleted it (a
                # finished one), which has its time too, so it is stored once whoever tells first
                await self.publisher.delete_workload(
                    key,
                    version=workloads.object_gone_version(known.metadata.uid),
                    uid=known.metadata.uid,
                    at_ms=self.clock() if finished else msgspec.UNSET,
                )
                log.info("prebuilt_workload_deleted", workload=f"{key[0]}/{key[1]}")
            return
        self.objects[key] = obj
        await self.sync(key, trigger=version)
        known = self.publisher.workloads.get(key)
        if known is not None and prebuilt.is_adopted(known):
            status = cast(Mapping[str, Any], obj).get("status")
            ref = types.WorkloadRef(namespace=key[0], name=key[1], uid=known.metadata.uid)
            await self.reporter.check_entries(ref, status if isinstance(status, dict) else {}, version=version)
            await self.reporter.evicted_by_others(ref, obj)

    async def workloads_listed(self, listed: list[objects.KubeObject], *, version: str) -> None:
        """A fresh list of the Workload objects: keep those a job may adopt, delete the adopted workloads whose
        object is gone (deleted while no watcher ran), and look at every named one again."""
        live = {_key(obj): obj for obj in listed}
        self.objects = {
            key: obj for key, obj in live.items() if key in self.named or not objects.meta(obj).get("ownerReferences")
        }
        for key in sorted(self.named):
            known = self.publisher.workloads.get(key)
            if (
                key not in live
                and known is not None
                and prebuilt.is_adopted(known)
                and key in self.publisher.known["Workload"]
            ):
                await self.publisher.delete_workload(key, version=version, uid=known.metadata.uid)
            await self.sync(key, trigger=version)

    async def sync(self, key: Key, *, trigger: str) -> None:
        """Look at workload ``key`` again through the job that adopts it (``trigger`` names why)."""
        chosen = self.adopter(key)
        if chosen is not None:
            kind, job = chosen
            await self.sync_job(kind, job, version=f"{objects.resource_version(job)}~{trigger}")

    # -- jobs -------------------------------------------------------------------------------------

    async def job_deleted(self, kind: str, obj: objects.KubeObject, *, version: str) -> None:
        """A job naming a prebuilt Workload was deleted: the workload it had adopted is deleted with it (the
        garbage collector deletes a Workload its job controls); another job naming it may adopt it next."""
        self.index(kind, obj, present=False)
        key = (objects.namespace_of(obj), names(kind, obj))
        known = self.publisher.workloads.get(key)
        if known is not None and known.owner is not None and known.owner.uid == objects.uid_of(obj):
            await self.publisher.delete_workload(key, version=version, uid=known.metadata.uid)
            self.objects.pop(key, None)
            self.finished.pop(key, None)
        elif key[1]:
            await self.sync(key, trigger=version)

    async def _finish_out_of_sync(self, key: Key, wl_ref: types.WorkloadRef, *, now_ms: int) -> None:
        """WorkloadFinished ``OutOfSync`` (Kueue's reason and message) for the prebuilt Workload at ``key``, once."""
        out = types.WorkloadFinished(
            workload=wl_ref,
            succeeded=False,
            reason=prebuilt.OUT_OF_SYNC_REASON,
            message=prebuilt.OUT_OF_SYNC_MESSAGE,
            at_ms=now_ms,
        )
        await self.publisher.emit(out, version=f"{wl_ref.uid}.out-of-sync")
        self.finished[key] = (wl_ref.uid, prebuilt.OUT_OF_SYNC_REASON)

    async def sync_job(self, kind: str, obj: objects.KubeObject, *, version: str) -> None:
        """Publish what a job naming a prebuilt Workload stands for now (see the module); a pod of a group: its
        group's (:meth:`sync_group`)."""
        key = (objects.namespace_of(obj), names(kind, obj))
        if kind == "Pod" and pods.group_name(cast(Mapping[str, Any], obj)):
            await self.sync_group(key, version=version)
            return
        job_name = f"{kind} {key[0]}/{objects.name_of(obj)}"
        chosen = self.adopter(key)
        if chosen is None or objects.uid_of(chosen[1]) != objects.uid_of(obj):
            log.debug("prebuilt_workload_waits", job=job_name, workload=key[1], known=key in self.objects)
            return
        now_ms = self.clock()
        parsed = await self._parsed(key, version=version, now_ms=now_ms)
        if parsed is None:
            return
        raw = cast(Mapping[str, Any], obj)
        context = self.inputs.context(key, previous=self.publisher.workloads.get(key))
        try:
            job_workload = _job_workload(kind, raw, context)
            templates = _templates(kind, raw)
        except manifests.ManifestError as err:
            await self._rejected(raw, err, version=version, now_ms=now_ms)
            return
        ref = workloads.job_ref(raw, kind=kind, api_version=API_VERSIONS[kind])
        workload_object = cast(Mapping[str, Any], self.objects[key])
        workload = prebuilt.adopted(
            parsed, ref, queue=job_workload.spec.queue_name, reserved=_reserved(workload_object)
        )
        suspended = _suspended(kind, raw)
        finished = await self._adopt(
            key,
            workload,
            out_of_sync=lambda: prebuilt.out_of_sync(job_workload, templates, workload_object, suspended=suspended),
            job_name=job_name,
            source=kind,
            version=version,
            now_ms=now_ms,
        )
        if finished == prebuilt.OUT_OF_SYNC_REASON:
            return  # finished out of sync: the job waits
        job_fact = self.convert(kind, obj, now_ms, context)
        if isinstance(job_fact, types.WorkloadFinished) and finished is None:  # the job finished: so does its workload
            await self._finish(key, _finished_as(job_fact, self._ref(key, workload)), source=kind, version=version)
        await self.reporter.job_progress(kind, obj, key, version=version, now_ms=now_ms, context=context)
        if not isinstance(job_fact, types.WorkloadFinished):
            await self.reporter.report_reclaimable(kind, obj, key, version=version, context=context)

    async def sync_group(self, key: Key, *, version: str) -> None:
        """Publish what the pod group named as prebuilt Workload ``key`` stands for now, as Kueue's pod group
        reconciler on a prebuilt Workload: adopted as soon as one of its pods is there (complete or not), matched
        by its roles (:func:`kueue_es.jobframework.prebuilt.group_out_of_sync`), finished when the group is
        (:func:`kueue_es.jobframework.pods.group_finished`); with every pod gone, deleted (the garbage collector
        deletes a Workload once none of its owners is left). Its pods' readiness, stop and reclaimable pods are
        reported as any group's (:class:`~kueue_es.services.watcher.pod_tracking.PodGroups`)."""
        members = pods.oldest_first(self.group_members(key))
        known = self.publisher.workloads.get(key) if key in self.publisher.known["Workload"] else None
        if not members:
            if (
                known is not None
                and prebuilt.is_adopted(known)
                and known.owner is not None
                and known.owner.kind == "Pod"
            ):
                await self.publisher.delete_workload(key, version=version, uid=known.metadata.uid)
                self.objects.pop(key, None)
                self.finished.pop(key, None)
            return
        first = members[0]
        job_name = f"pod group {key[0]}/{pods.group_name(first)}"
        chosen = self.adopter(key)
        if chosen is None or chosen[0] != "Pod" or pods.group_name(cast(Mapping[str, Any], chosen[1])) != key[1]:
            log.debug("prebuilt_workload_waits", job=job_name, workload=key[1], known=key in self.objects)
            return
        now_ms = self.clock()
        parsed = await self._parsed(key, version=version, now_ms=now_ms)
        if parsed is None:
            return
        context = self.inputs.context(key, previous=known)
        ref = workloads.job_ref(first, kind="Pod", api_version=pods.POD_API)
        try:
            total = pods.group_total_count(first)
            roles = pods.group_roles(members, total=total)
            queue = workloads.queue_name(ref, context, managed_without_queue=True) or ""
        except pods.MemberError as err:
            await self._rejected(err.pod, err.error, version=version, now_ms=now_ms)
            return
        except manifests.ManifestError as err:
            await self._rejected(first, err, version=version, now_ms=now_ms)
            return
        workload_object = cast(Mapping[str, Any], self.objects[key])
        reserved = _reserved(workload_object)
        queue = "" if pods.is_serving(first) else queue  # a serving group's workload keeps its queue
        workload = prebuilt.adopted(parsed, ref, queue=queue, reserved=reserved, group=True)
        finished = await self._adopt(
            key,
            workload,
            out_of_sync=lambda: prebuilt.group_out_of_sync(roles, workload_object),
            job_name=job_name,
            source="Pod",
            version=version,
            now_ms=now_ms,
        )
        if finished is not None:
            return
        done = pods.group_finished(members, total=total, name=key[1], uid=workload.metadata.uid, now_ms=now_ms)
        if done is not None:
            await self._finish(key, done, source="Pod", version=version)

    async def _parsed(self, key: Key, *, version: str, now_ms: int) -> models.Workload | None:
        """The Workload object kept for ``key`` as a model, or None once it is reported unreadable."""
        workload_object = cast(Mapping[str, Any], self.objects[key])
        try:
            parsed = manifests.parse_object(dict(workload_object), strict=False)  # the API server checked it
        except manifests.ManifestError as err:
            await self._rejected(workload_object, err, version=version, now_ms=now_ms)
            return None
        assert isinstance(parsed, models.Workload)
        return parsed

    async def _rejected(
        self, manifest: Mapping[str, Any], err: manifests.ManifestError, *, version: str, now_ms: int
    ) -> None:
        fact = workloads.rejected(manifest, err, now_ms=now_ms)
        log_rejection(fact)
        await self.publisher.publish(fact, version=version)

    async def _adopt(
        self,
        key: Key,
        workload: models.Workload,
        *,
        out_of_sync: Callable[[], str],
        job_name: str,
        source: str,
        version: str,
        now_ms: int,
    ) -> str | None:
        """Publish ``workload``, the prebuilt Workload at ``key`` as its job adopts it, and finish it ``OutOfSync``
        once when ``out_of_sync()`` says why it does not match the job (not asked once it has finished). Returns
        the reason it has finished with (as published here, else as its object says), or None while it runs on."""
        uid = workload.metadata.uid
        mine = self.finished.get(key)
        finished_as = (
            mine[1] if mine is not None and mine[0] == uid else _finished(cast(Mapping[str, Any], self.objects[key]))
        )
        finished = finished_as is not None
        known = self.publisher.workloads.get(key) if key in self.publisher.known["Workload"] else None
        wl_ref = self._ref(key, workload)
        why = "" if finished else out_of_sync()
        if why and known is not None and known.metadata.uid == uid:
            # Kueue finishes a Workload that does not match its job before the job could run on it: on the log
            # already (admitted, maybe), it is finished before the adoption, whose fold then starts nothing
            await self._finish_out_of_sync(key, wl_ref, now_ms=now_ms)
            finished = True
        if known != workload and not (finished and known is not None and known.owner == workload.owner):
            # owned by the job: the dispatcher writes the owner reference, and starts the job once admitted
            await self.publisher.publish(types.WorkloadObserved(workload=workload), version=version, source=source)
        if why:
            if not finished:  # new on the log: it is there (adopted) before its finish can be folded
                await self._finish_out_of_sync(key, wl_ref, now_ms=now_ms)
            log.info("prebuilt_workload_out_of_sync", workload=f"{key[0]}/{key[1]}", job=job_name, why=why)
            return prebuilt.OUT_OF_SYNC_REASON
        return finished_as

    async def _finish(self, key: Key, fact: types.WorkloadFinished, *, source: str, version: str) -> None:
        """The job finished: so does its prebuilt workload (``fact``, about it), once."""
        await self.publisher.publish(fact, version=version, source=source)
        self.finished[key] = (fact.workload.uid, fact.reason)

    @staticmethod
    def _ref(key: Key, workload: models.Workload) -> types.WorkloadRef:
        return types.WorkloadRef(namespace=key[0], name=key[1], uid=workload.metadata.uid)


def _job_workload(kind: str, job: Mapping[str, Any], context: workloads.Context) -> models.Workload:
    """The workload Kueue would make for the job (what its prebuilt one is compared with); raises ManifestError."""
    if kind == "Job":
        return jobs.job_to_workload(job, context=context)
    if kind == "Pod":
        return pods.pod_workload(job, context=context)
    return integrations.to_workload(integrations.registry()[kind], job, context=context)


def _templates(kind: str, job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The job's pod templates by pod set name; a single pod's is its own spec (pod_controller.go
    constructPodSet). Raises ManifestError."""
    if kind == "Pod":
        return {"main": {"spec": workloads.as_mapping(job.get("spec"))}}
    return integrations.job_pod_templates(API_VERSIONS[kind], kind, job)


def _suspended(kind: str, job: Mapping[str, Any]) -> bool:
    if kind == "Job":
        return (job.get("spec") or {}).get("suspend") is True
    if kind == "Pod":
        return pods.is_gated(job) or pods.is_terminated(job)  # pod_controller.go podSuspended
    return integrations.suspended(integrations.registry()[kind], job)


def _reserved(workload_object: Mapping[str, Any]) -> bool:
    """Whether the Workload object holds quota (its ``status.admission``)."""
    status = workload_object.get("status")
    return isinstance(status, dict) and isinstance(status.get("admission"), dict)


def _finished(workload_object: Mapping[str, Any]) -> str | None:
    """The reason of the Workload object's Finished condition (the dispatcher wrote the log's finish there), or
    None when it has not finished."""
    condition = workloads.true_condition(workload_object, ("Finished",))
    return None if condition is None else str(condition.get("reason") or "")


def _finished_as(fact: types.WorkloadFinished, ref: types.WorkloadRef) -> types.WorkloadFinished:
    return types.WorkloadFinished(
        workload=ref, succeeded=fact.succeeded, reason=fact.reason, message=fact.message, at_ms=fact.at_ms
    )


def _key(obj: objects.KubeObject) -> Key:
    return str(objects.meta(obj).get("namespace") or "default"), objects.name_of(obj)
