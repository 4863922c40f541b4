"""Deleting the Workloads Kueue's retention policies let go of (``objectRetentionPolicies.workloads``).

Why this module exists: with ``afterFinished`` set, Kueue's workload controller deletes a finished Workload
once that long has passed since it finished; with ``afterDeactivatedByKueue``, its job reconciler deletes the
job of a Workload Kueue deactivated (propagation ``Background``) once that long has passed since its eviction,
and the Workload goes with the job. The rules are pure (:mod:`kueue_es.scheduling.retention`); this module
carries them out, as the dispatcher is the one that writes to the API server. Its inputs are the dispatcher's
fold: the Configuration in force (a ConfigurationObserved, so a changed file applies without a restart) and
each Workload's ``Finished`` and ``Evicted`` conditions as the dispatcher writes them (:mod:`.status`).

:class:`Retention` keeps the Workloads one rule will delete, ordered by the time their period counts from
(:meth:`touched`, after every event the fold takes about a workload), and :meth:`run` wakes when the first
one is due (or a new one comes, or the Configuration changes) and deletes what is due then, by the wall
clock. The deletion goes on the log as the workload's ``ObjectDeleted`` (kind Workload, the workload's UID):
every fold then forgets the workload (its quota released if it still held some), the dispatcher writes it no
more, a restarted dispatcher does not make it again, and ``explain`` shows it deleted. A finished Workload's
the dispatcher publishes itself (with its time), as it publishes the deletion of a workload whose job it
found gone; the watcher, seeing the object go, publishes the same fact with the same Msg-Id
(``gone@<object UID>``, :func:`~kueue_es.jobframework.workloads.object_gone_version`), whatever made the
Workload (a job of any kind, a Pod or a pod group, a prebuilt or a standalone one), so it is stored once. A
deleted job the watcher reports, as any job deleted (also
after a restart: its relist); the dispatcher publishes the workload's deletion only for a job it finds gone
already. Nothing is a decision: replay re-checks the deciders' decisions, and this deletion is a fact they
read like any other.

A dispatcher that was down when a period ended deletes what is due as soon as its fold has caught up
(its index is rebuilt from the fold, or from a snapshot's records); one that deleted an object but stopped
before its fact was stored finds the object gone (404) and stores the fact then (``retention@<workload UID>``:
the object's UID is known only to a dispatcher that still holds the object, :meth:`Retention._gone_already`).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog

from kueue_es.events import subjects, types
from kueue_es.events.bus.base import Bus
from kueue_es.jobframework import integrations
from kueue_es.jobframework.workloads import object_gone_version
from kueue_es.projections.cluster import WorkloadState
from kueue_es.scheduling import retention
from kueue_es.services.dispatcher import core, kube_events
from kueue_es.services.dispatcher.job_writes import JOB_REF, POD_REF, JobWrites
from kueue_es.services.dispatcher.object_sync import (
    API_ERRORS,
    RESOURCE_IN_USE_FINALIZER,
    StoredObjects,
    WorkloadSync,
    retryable,
)
from kueue_es.services.dispatcher.recording import Recording
from kueue_es.services.dispatcher.status import JOB_UID_LABEL
from kueue_es.services.dispatcher.write_budget import WriteClass
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import objects, resources
from kueue_es.services.runtime import wall_clock_ms

log = structlog.get_logger(__name__)

DELETED_REASON = "Deleted"
"""The reason of Kueue's Events on what it deleted (ReasonDeleted)."""

STALE_ENTRIES = 1024
"""How many entries of workloads no longer kept a rule's heap may hold beyond twice those kept before it is rebuilt
from them (entries are skipped when reached; a rule whose period is long would otherwise gather them)."""

Entry = tuple[retention.Rule, int, str]
"""What :class:`Retention` keeps of a workload one rule will delete: the rule, the time its period counts from
(ms), the workload's UID on the log."""


def standing_of(view: core.DispatchState, key: str) -> tuple[retention.Standing, str] | None:
    """What the retention rules read of workload ``key`` (its conditions as the dispatcher writes them) and its UID
    on the log; None when the fold has no such workload (deleted) or no status for it yet."""
    wl = view.cluster.workloads.get(key)
    record = view.records.get(key)
    if wl is None or wl.deleted_seq or record is None:
        return None
    finished = record.conditions.get("Finished")
    evicted = record.conditions.get("Evicted")
    evicted_true = evicted is not None and evicted.status
    standing = retention.Standing(
        finished_since_ms=finished.since_ms if finished is not None and finished.status else None,
        evicted_reason=evicted.reason if evicted is not None and evicted_true else "",
        evicted_since_ms=evicted.since_ms if evicted is not None and evicted_true else 0,
        active=wl.active,
        owned=wl.workload.owner is not None,
    )
    return standing, wl.workload.metadata.uid


class Retention:
    """Deletes the Workloads (and jobs) the retention policies in force let go of (see the module).

    ``view``: the dispatcher's fold; ``stored``: its Workload objects; ``workloads``: its Workload writes (a
    deleted one is not written again); ``jobs``: its job writes (their API and limiter); ``recording``: its
    Kubernetes Events; ``bus`` and ``cluster``: where the deletions are recorded; ``gate``: whether this replica
    may write (its lease), None for always; ``clock``: the wall clock (ms since the epoch)."""

    def __init__(
        self,
        *,
        view: core.DispatchState,
        stored: StoredObjects,
        workloads: WorkloadSync,
        jobs: JobWrites,
        recording: Recording,
        bus: Bus,
        gate: Callable[[], bool] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.view, self.stored, self.workloads, self.jobs = view, stored, workloads, jobs
        self.recording, self.bus, self.gate, self.clock = recording, bus, gate, clock
        self.policy = retention.NO_POLICY  # the policy in force, as the fold last told (:meth:`configured`)
        self.kept: dict[str, Entry] = {}  # workload key -> what a rule in force will delete it for
        # per rule, (since, key, uid) in time order; an entry that is no longer kept's is skipped when reached
        self._heaps: dict[retention.Rule, list[tuple[int, str, str]]] = {rule: [] for rule in retention.Rule}
        self._wake = asyncio.Event()
        self.deleted = 0  # Workloads (finished) and jobs or pods (deactivated) deleted so far

    # -- the index, from the fold -----------------------------------------------------------------

    def touched(self, key: str) -> None:
        """The fold took an event about workload ``key``: keep it when a rule in force will delete it, forget it
        otherwise. Nothing is kept while no rule is in force (a cluster without the setting pays a lookup)."""
        if not self.policy.enabled and not self.kept:
            return
        found = standing_of(self.view, key)
        entry: Entry | None = None
        if found is not None:
            standing, uid = found
            kept = retention.retained(standing)
            if kept is not None and kept.due_ms(self.policy) is not None and self.workloads.retired.get(key) != uid:
                entry = (kept.rule, kept.since_ms, uid)
        if entry is None:
            self.kept.pop(key, None)
            return
        if self.kept.get(key) == entry:
            return
        self.kept[key] = entry
        heap = self._heaps[entry[0]]
        heapq.heappush(heap, (entry[1], key, entry[2]))
        if len(heap) > 2 * len(self.kept) + STALE_ENTRIES:  # entries of workloads deleted or changed since
            self._heaps[entry[0]] = [(since, k, uid) for k, (rule, since, uid) in self.kept.items() if rule is entry[0]]
            heapq.heapify(self._heaps[entry[0]])
        self._wake.set()

    def configured(self) -> None:
        """The fold took a ConfigurationObserved: the policy in force is its, and a rule turned on or off changes
        what is kept (every workload of the fold looked at again); the periods are looked at again at once."""
        policy = retention.policy_of(self.view.cluster.configuration)
        switched = [policy.after(rule) is None for rule in retention.Rule] != [
            self.policy.after(rule) is None for rule in retention.Rule
        ]
        self.policy = policy
        if switched:
            self.rebuild()
        self._wake.set()

    def rebuild(self) -> None:
        """Index every workload of the fold afresh, under the policy of the fold's Configuration (a dispatcher
        started from a snapshot, a rule turned on or off)."""
        self.policy = retention.policy_of(self.view.cluster.configuration)
        self.kept.clear()
        for heap in self._heaps.values():
            heap.clear()
        if self.policy.enabled:
            for key in list(self.view.cluster.workloads):
                self.touched(key)

    def due(self, policy: retention.Policy, *, now_ms: int) -> list[tuple[str, Entry]]:
        """The workloads due at ``now_ms`` under ``policy``, the longest due first (taken out of the index: the
        caller puts back, :meth:`again`, what it could not delete)."""
        out: list[tuple[str, Entry]] = []
        for rule, heap in self._heaps.items():
            after = policy.after(rule)
            if after is None:
                continue
            while heap and heap[0][0] + after <= now_ms:
                since, key, uid = heapq.heappop(heap)
                entry = (rule, since, uid)
                if self.kept.get(key) == entry:
                    out.append((key, entry))
        return sorted(out, key=lambda item: item[1][1] + (policy.after(item[1][0]) or 0))

    def again(self, key: str, entry: Entry) -> None:
        """Keep ``key`` for another try (its deletion failed for now)."""
        if self.kept.get(key) == entry:
            heapq.heappush(self._heaps[entry[0]], (entry[1], key, entry[2]))

    def next_due_ms(self, policy: retention.Policy) -> int | None:
        """When the first kept workload is due under ``policy`` (ms; maybe early, for an entry no longer kept), or
        None: none will be."""
        found = None
        for rule, heap in self._heaps.items():
            after = policy.after(rule)
            if after is not None and heap:
                at = heap[0][0] + after
                found = at if found is None else min(found, at)
        return found

    # -- the deletions --------------------------------------------------------------------------

    async def run(self, *, ready: Callable[[], bool], every: float = 1.0) -> None:
        """Delete what is due, whenever something is (at the latest every ``every`` s), while ``ready()`` (the
        fold caught up) and the gate is open (cancel to stop). A deletion that fails is tried again ``every``
        s later; one the server refuses for good is logged and left until its workload changes."""
        wait = 0.0
        while True:
            if wait > 0:
                try:
                    async with asyncio.timeout(wait):
                        await self._wake.wait()
                except TimeoutError:
                    pass
            self._wake.clear()
            if not ready() or (self.gate is not None and not self.gate()):
                wait = every
                continue
            policy = self.policy
            failed = await self.delete_due(policy, now_ms=self.clock()) if policy.enabled else False
            next_ms = self.next_due_ms(policy) if policy.enabled else None
            wait = every
            if next_ms is not None and not failed:
                wait = min(every, max(0.0, (next_ms - self.clock()) / 1000))

    async def delete_due(self, policy: retention.Policy, *, now_ms: int) -> bool:
        """Delete every workload due at ``now_ms``; returns whether a deletion is to be tried again."""
        failed = False
        for key, entry in self.due(policy, now_ms=now_ms):
            if self.gate is not None and not self.gate():
                self.again(key, entry)
                failed = True
                continue
            try:
                await self._delete(key, entry, policy)
            except kube_errors.UnknownKindError as err:  # a job kind the API server does not serve (any more)
                log.warning("retention_delete_failed", workload=key, rule=entry[0].value, error=str(err))
                self.kept.pop(key, None)
            except API_ERRORS as err:
                if retryable(err):
                    log.warning("retention_delete_retry", workload=key, rule=entry[0].value, error=str(err))
                    self.again(key, entry)
                    failed = True
                else:
                    log.warning("retention_delete_failed", workload=key, rule=entry[0].value, error=str(err))
                    self.kept.pop(key, None)
        return failed

    async def _delete(self, key: str, entry: Entry, policy: retention.Policy) -> None:
        rule, since, uid = entry
        wl = self.view.cluster.workloads.get(key)
        if wl is None or wl.workload.metadata.uid != uid:
            self.kept.pop(key, None)
            return
        notes: list[_Note] = []
        version: str | None
        if rule is retention.Rule.FINISHED:
            version = await self.workloads.retire(key, uid, lambda: self._delete_workload_object(wl, notes))
        else:
            version = await self.workloads.retire(key, uid, lambda: self._delete_job(wl, notes))
        self.kept.pop(key, None)
        after = policy.after(rule)
        log.info(
            "workload_retention_deleted",
            workload=key,
            rule=rule.value,
            since_ms=since,
            after_ms=after,
            late_ms=self.clock() - since - (after or 0),
        )
        if version is not None:  # else the watcher reports the job gone, as any job deleted
            ref = wl.ref
            deleted = types.ObjectDeleted(
                kind="Workload", namespace=ref.namespace, name=ref.name, uid=ref.uid, at_ms=self.clock()
            )
            await self.bus.publish(subjects.fact_message(deleted, version=version))
        self.deleted += 1
        for note in notes:  # Kueue's Events, best effort, once the deletion is on the log
            await self.recording.write_now(note.item, name=note.name, uid=note.uid)

    async def _delete_workload_object(self, wl: WorkloadState, notes: list[_Note]) -> str:
        """The finished rule (Kueue's workload.Delete): Kueue's finalizer off the Workload object, then the object
        deleted (the job stays; its Event added to ``notes``). Returns the Msg-Id version of its ObjectDeleted:
        ``gone@<object UID>``, the watcher's for the same deletion."""
        meta = wl.workload.metadata
        try:
            current = await self.stored.api.get_object(resources.WORKLOADS, namespace=meta.namespace, name=meta.name)
        except kube_errors.NotFoundError:
            return self._gone_already(wl)  # by hand, or by this rule before a restart
        object_meta = objects.meta(objects.as_stored(current))
        object_uid = str(object_meta.get("uid") or "")
        if not _is_object_of(wl, object_meta):
            return self._gone_already(wl)  # another workload's object of that name: ours is gone
        if RESOURCE_IN_USE_FINALIZER in (object_meta.get("finalizers") or []) or object_meta.get("deletionTimestamp"):
            await self.stored.let_go(meta.namespace, meta.name, deleting=True)
        if not object_meta.get("deletionTimestamp"):
            await self.stored.limiter.acquire(WriteClass.WORKLOADS)
            try:
                await self.stored.api.delete_object(
                    resources.WORKLOADS,
                    namespace=meta.namespace,
                    name=meta.name,
                    options={"preconditions": {"uid": object_uid}} if object_uid else None,
                )
            except kube_errors.NotFoundError:
                pass
            else:
                self.stored.writes += 1
                notes.append(
                    self._note(
                        types.WorkloadRef(namespace=meta.namespace, name=meta.name),
                        message=retention.FINISHED_EVENT_MESSAGE,
                        job=None,
                        uid=object_uid,
                    )
                )
        self.stored.objects.pop(("Workload", meta.namespace, meta.name), None)
        return object_gone_version(object_uid) if object_uid else f"retention@{meta.uid}"

    def _gone_already(self, wl: WorkloadState) -> str:
        """The Msg-Id version of the ObjectDeleted of a finished workload whose object is gone already: that of the
        object's deletion (the watcher's, when it saw it go) when the dispatcher still holds the object it last
        wrote, ``retention@<workload UID>`` when it does not (a dispatcher started since)."""
        meta = wl.workload.metadata
        stored = self.stored.objects.get(("Workload", meta.namespace, meta.name))
        object_meta = objects.meta(stored) if stored is not None else None
        object_uid = str(object_meta.get("uid") or "") if object_meta is not None else ""
        if object_meta is None or not object_uid or not _is_object_of(wl, object_meta):
            return f"retention@{meta.uid}"
        return object_gone_version(object_uid)

    async def _delete_job(self, wl: WorkloadState, notes: list[_Note]) -> str | None:
        """The deactivated rule (Kueue's handleWorkloadAfterDeactivatedPolicy): the workload's job deleted with
        propagation Background (a Pod workload's pods, each as Kueue's pod reconciler deletes its own; their Events
        added to ``notes``); the Workload object follows once the deletion is on the log, as after any job's.
        Returns None when it deleted something: the watcher reports the job (or the pods) gone, as after a
        ``kubectl delete job``, also after a restart (its relist); else, the job being gone already, the Msg-Id
        version of the workload's ObjectDeleted, which the dispatcher records itself (as for a job it finds gone
        when it writes). Raises UnknownKindError for a kind the API server does not serve."""
        owner = wl.workload.owner
        meta = wl.workload.metadata
        assert owner is not None
        gone = f"retention@{meta.uid}"
        options = {"propagationPolicy": retention.DELETE_PROPAGATION}
        if owner.kind == "Pod":
            stop = core.stop_of(self.view, wl, wl.ref, reason=DELETED_REASON, seq=self.view.cluster.last_seq)
            if not isinstance(stop, core.StopPods):
                return gone
            deleting = False
            for pod in await self.jobs.pods_of(stop):
                pod_meta = objects.meta(pod)
                if pod_meta.get("deletionTimestamp") or (not stop.group and pod_meta.get("uid") != owner.uid):
                    continue
                name = str(pod_meta.get("name") or "")
                if await self._delete_one(POD_REF, meta.namespace, name, str(pod_meta.get("uid") or ""), options):
                    deleting = True
                    notes.append(
                        self._note(
                            types.WorkloadRef(namespace=meta.namespace, name=name),
                            message=retention.DEACTIVATED_EVENT_MESSAGE,
                            job=("v1", "Pod", str(pod_meta.get("uid") or "")),
                        )
                    )
            return None if deleting else gone
        integration = integrations.by_kind(owner.kind) if owner.kind != "Job" else None
        ref = JOB_REF if integration is None else resources.ref_for(integration.api_version, integration.kind)
        if not await self._delete_one(ref, meta.namespace, owner.name, owner.uid, options):
            return gone
        notes.append(
            self._note(
                types.WorkloadRef(namespace=meta.namespace, name=owner.name),
                message=retention.DEACTIVATED_EVENT_MESSAGE,
                job=(ref.api_version, owner.kind, owner.uid),
            )
        )
        return None

    async def _delete_one(
        self, ref: resources.ResourceRef, namespace: str, name: str, uid: str, options: Mapping[str, object]
    ) -> bool:
        """DELETE one job or pod, only the one of UID ``uid`` (a precondition); False when it is gone (or a
        namesake stands in its place)."""
        body = {**options, "preconditions": {"uid": uid}} if uid else dict(options)
        await self.jobs.limiter.acquire(WriteClass.JOBS)
        try:
            await self.jobs.api.delete_object(ref, namespace=namespace, name=name, options=body)
        except (kube_errors.NotFoundError, kube_errors.ConflictError):
            return False
        log.info("retention_job_deleted", kind=ref.kind, job=f"{namespace}/{name}", propagation=options)
        return True

    def _note(
        self, about: types.WorkloadRef, *, message: str, job: tuple[str, str, str] | None, uid: str = ""
    ) -> _Note:
        """Kueue's Normal ``Deleted`` Event on what was deleted (the Workload, or the job), named after it."""
        item = kube_events.KubeEvent(
            workload=about,
            type="Normal",
            reason=DELETED_REASON,
            message=message,
            at_ms=self.clock(),
            job=job,
        )
        name_uid = uid or (job[2] if job is not None else "")
        return _Note(item=item, name=f"{about.name}.{name_uid[:8] or 'x'}.deleted", uid=uid)


@dataclass(frozen=True, slots=True)
class _Note:
    """A Kubernetes Event to write once a deletion is on the log: the Event, its name, the Workload object's UID."""

    item: kube_events.KubeEvent
    name: str
    uid: str = ""


def _is_object_of(wl: WorkloadState, object_meta: objects.ObjectMeta) -> bool:
    """Whether a Workload object of the workload's name is that workload's: one created as such is the workload
    itself (its UID is the log's: a standalone Workload, a job's prebuilt one), a job's carries its job's UID
    (``kueue.x-k8s.io/job-uid``; the log's UID of a workload made from a job is its job's)."""
    uid = wl.workload.metadata.uid
    if object_meta.get("uid") == uid:
        return bool(uid)
    if wl.workload.owner is None:
        return not uid
    job_uid = (object_meta.get("labels") or {}).get(JOB_UID_LABEL)
    return job_uid is None or job_uid == uid
