"""Plain Pods as the watcher follows them: pod groups, and how far a Pod workload got.

Why this module exists: a Pod is one workload on its own, but pods that share a
``kueue.x-k8s.io/pod-group-name`` are one workload together (Kueue
pkg/controller/jobs/pod), which exists only once the group is complete and changes
with any of its members. :class:`PodGroups` keeps the index of which pods make up
which group, converts a group again when a member changes
(:func:`kueue_es.jobframework.pods.group_facts`), and reports a Pod workload's
stop after an eviction and its PodsReady. Single pods are converted with the other
jobs (:mod:`kueue_es.services.watcher.job_tracking`), which owns the pods kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import msgspec

from kueue_es.events import job_owners, models, types
from kueue_es.jobframework import pods, prebuilt, workloads
from kueue_es.services.kube import objects
from kueue_es.services.watcher import progress
from kueue_es.services.watcher.inputs import ConversionInputs
from kueue_es.services.watcher.kinds import Key
from kueue_es.services.watcher.publishing import Publisher, log_rejection
from kueue_es.services.watcher.reporting import ProgressReporter


class PodGroups:
    """The pod groups among ``pods`` (the managed pods kept, by (namespace, name)) and their workloads."""

    def __init__(
        self,
        *,
        pods: dict[Key, objects.KubeObject],
        publisher: Publisher,
        inputs: ConversionInputs,
        reporter: ProgressReporter,
        clock: Callable[[], int],
        doomed: dict[Key, set[str]] | None = None,
        parents: Mapping[Key, objects.KubeObject] | None = None,
        statefulsets: Mapping[Key, objects.KubeObject] | None = None,
    ) -> None:
        self.pods = pods
        # the LeaderWorkerSets kept (JobTracker's): a group's workload is marked as its LeaderWorkerSet's
        self.parents: Mapping[Key, objects.KubeObject] = parents if parents is not None else {}
        # the StatefulSets kept (JobTracker's): a StatefulSet's group's workload is in its LocalQueue
        self.statefulsets: Mapping[Key, objects.KubeObject] = statefulsets if statefulsets is not None else {}
        self.publisher, self.inputs, self.reporter, self.clock = publisher, inputs, reporter, clock
        self.doomed = doomed if doomed is not None else {}  # groups whose Workload was deleted by hand (JobTracker)
        self.groups: dict[Key, set[str]] = {}  # (namespace, pod group) -> names of its pods
        # (namespace, pod group) -> its pods deleted after they succeeded, by name, while its workload runs:
        # Kueue's kueue.x-k8s.io/managed finalizer keeps such a pod until the group finishes, so it still
        # counts towards "Pods succeeded: n/total" (the dispatcher lets one go early once it no longer counts and
        # is replaced, and a pod's finalizer may be taken off by hand)
        self.succeeded_gone: dict[Key, dict[str, objects.KubeObject]] = {}

    # -- the index --------------------------------------------------------------------------------

    def index(self, pod_key: Key, group: str, *, present: bool) -> None:
        """Add the pod ``pod_key`` to ``group``, or (``present`` false) take it out."""
        members = self.groups.setdefault((pod_key[0], group), set())
        if present:
            members.add(pod_key[1])
        else:
            members.discard(pod_key[1])
            if not members:
                del self.groups[(pod_key[0], group)]

    def reindex(self) -> None:
        """Index every pod kept again (after a relist)."""
        self.groups = {}
        for key, pod in self.pods.items():
            if group := pods.group_name(pod):
                self.index(key, group, present=True)

    def version_of(self, group_key: Key) -> str:
        """The newest resourceVersion among a group's pods (decimal strings compare by length first)."""
        versions = [
            objects.resource_version(self.pods[(group_key[0], name)]) for name in self.groups.get(group_key, ())
        ]
        return max(versions, key=lambda v: (len(v), v), default="")

    # -- the group's workload ---------------------------------------------------------------------

    async def sync(self, group_key: Key, *, version: str) -> None:
        """Publish what the managed pods of one pod group stand for now (nothing while it is incomplete)."""
        namespace, group = group_key
        members = [self.pods[(namespace, name)] for name in sorted(self.groups.get(group_key, ()))]
        doomed = self.doomed.get(group_key)
        if doomed and any(objects.uid_of(pod) in doomed for pod in members):
            return  # its Workload was deleted by hand: its pods are being deleted, not given a new one
        holder = self.publisher.workloads.get(group_key)
        context = self.inputs.context(group_key, previous=holder)
        # what Kueue's LeaderWorkerSet reconciler reads to build a group's Workload (its UID, for the owner marks),
        # and its StatefulSet reconciler to keep it in the StatefulSet's LocalQueue (reconcileWorkload)
        parents = cast(Mapping[Key, Mapping[str, Any]], self.parents)
        statefulsets = cast(Mapping[Key, Mapping[str, Any]], self.statefulsets)
        context = dataclasses.replace(
            context, objects={**context.objects, "LeaderWorkerSet": parents, "StatefulSet": statefulsets}
        )
        managed = [pod for pod in members if pods.is_managed(pod, context)]
        if not managed:
            self.succeeded_gone.pop(group_key, None)
            if self.publisher.sources.get(group_key) == "Pod":
                await self.publisher.delete_workload(group_key, version=version)
            return
        if conflict := pods.name_conflict(managed, holder, now_ms=self.clock()):
            # a Workload of something else holds the group's name: never taken over (Kueue refuses the group
            # until that Workload is gone, then its reconciler looks again: :meth:`name_freed`)
            log_rejection(conflict)
            await self.publisher.publish(conflict, version=version, source="Pod")
            return
        counted = self._with_gone(group_key, managed)
        fact = pods.group_facts(counted, now_ms=self.clock(), context=context)
        if isinstance(fact, types.WorkloadFinished):
            self.succeeded_gone.pop(group_key, None)
        if fact is None and holder is not None and self.publisher.sources.get(group_key) == "Pod":
            # its Workload stays while the group is short of pods (Kueue keeps it): it waits for replacements
            if waits_for_replacement(counted, holder) and not holder.waiting_for_replacement_pods:
                waiting_fact = types.WorkloadObserved(
                    workload=msgspec.structs.replace(holder, waiting_for_replacement_pods=True)
                )
                await self.publisher.publish(waiting_fact, version=version, source="Pod")
            return
        if isinstance(fact, types.WorkloadObserved):
            lacking = waits_for_replacement(counted, fact.workload)
            if lacking != fact.workload.waiting_for_replacement_pods:
                workload = msgspec.structs.replace(fact.workload, waiting_for_replacement_pods=lacking)
                fact = types.WorkloadObserved(workload=workload)
        if fact is None:
            # Kueue's Warning while the group is short of pods and has no Workload; once per first pod and
            # problem (the publisher drops a rejection it published already)
            waiting = pods.incomplete_group(managed, now_ms=self.clock(), context=context)
            if waiting is not None:
                await self.publisher.publish(waiting, version=version, source="Pod")
            return
        if (
            isinstance(fact, types.WorkloadObserved)
            and group_key in self.publisher.known["Workload"]
            and pods.is_running(managed)
            and not _newly_parented(holder, fact.workload)
            and (holder is None or holder.waiting_for_replacement_pods == fact.workload.waiting_for_replacement_pods)
        ):
            return
        log_rejection(fact)
        await self.publisher.publish(self.publisher.keep_active(group_key, fact), version=version, source="Pod")
        if not isinstance(fact, types.ObjectRejected):  # a later rejection of a member is news again
            for pod in managed:
                self.publisher.last_published.pop(("Pod", namespace, objects.name_of(pod)), None)

    def members(self, group_key: Key) -> list[objects.KubeObject]:
        """The managed pods of one pod group, with those it keeps counting after they went (see
        :attr:`succeeded_gone`, forgotten once no managed pod is left)."""
        context = self.inputs.managed_context()
        managed = [
            pod
            for name in sorted(self.groups.get(group_key, ()))
            if (pod := self.pods.get((group_key[0], name))) is not None and pods.is_managed(pod, context)
        ]
        if not managed:
            self.succeeded_gone.pop(group_key, None)
        return self._with_gone(group_key, managed)

    def _with_gone(self, group_key: Key, managed: list[objects.KubeObject]) -> list[objects.KubeObject]:
        live = {objects.name_of(pod) for pod in managed}
        kept = [pod for name, pod in sorted(self.succeeded_gone.get(group_key, {}).items()) if name not in live]
        return [*managed, *kept]

    def member_deleted(self, group_key: Key, pod: objects.KubeObject) -> None:
        """A pod of the group was deleted: one that had succeeded while the group's workload is known and not
        finished is kept as a member (see :attr:`succeeded_gone`)."""
        status = cast(Mapping[str, Any], pod).get("status")
        succeeded = isinstance(status, dict) and status.get("phase") == "Succeeded"
        if succeeded and group_key in self.publisher.known["Workload"]:
            self.succeeded_gone.setdefault(group_key, {})[objects.name_of(pod)] = pod

    # -- how far it got ---------------------------------------------------------------------------

    async def progress(self, pod: objects.KubeObject, *, version: str) -> None:
        """After a change to a managed pod: WorkloadStopped once no marked pod of its workload runs, and its
        workload's PodsReady (a single pod: PodReady; a group: every pod of the counted total ready)."""
        if not pods.is_managed(pod, self.inputs.managed_context()):
            return
        wl_key = pods.workload_key(pod)
        group = pods.group_name(pod)
        if group:
            members = [
                self.pods[(wl_key[0], name)]
                for name in sorted(self.groups.get((wl_key[0], group), ()))
                if (wl_key[0], name) in self.pods
            ]
        else:
            live = self.pods.get((wl_key[0], objects.name_of(pod)))
            members = [live] if live is not None else []
        now_ms = self.clock()
        known = self.publisher.workloads.get(wl_key)
        if wl_key in self.publisher.known["Workload"] and members:
            # its PodsReady before its stop: an evicted workload's WaitForStart (its pods marked) is then on the log
            # before the WorkloadStopped, so before the quota release that makes it not admitted
            await self._report_pods_ready(wl_key, pod, members, group=group, known=known, version=version)
        # a group's members being deleted past their grace period no longer run (IsActive): the stop is reported
        running = pods.is_running(members, now_ms=now_ms if group else None)
        await self.reporter.report_mark_stopped(wl_key, [pod, *members], running=running, now_ms=now_ms)
        if wl_key not in self.publisher.known["Workload"] or not members:
            return
        if group and known is not None:  # a finished group's report is not taken by the fold
            reclaimable = pods.group_reclaimable_pods(members)
            ref = self.publisher.workload_ref(wl_key)
            await self.reporter.reclaimable_changed(ref, known, reclaimable, version=version)

    async def _report_pods_ready(
        self,
        wl_key: Key,
        pod: objects.KubeObject,
        members: list[objects.KubeObject],
        *,
        group: str,
        known: models.Workload | None,
        version: str,
    ) -> None:
        """The PodsReady of a Pod workload (a single pod: PodReady; a group: every pod of the counted total ready),
        reported unless it finished."""
        # a finished pod or group: Kueue's job reconciler returns before it writes PodsReady (reconciler.go step 3
        # before step 5), so a single pod that succeeded keeps PodsReady True rather than WaitForRecovery
        finished = pods.group_has_finished(members) if group else pods.is_terminated(members[0])
        if finished:
            return
        if group:
            total = workloads.parse_int(
                workloads.job_ref(pod, kind="Pod", api_version=pods.POD_API).annotations.get(
                    pods.GROUP_TOTAL_COUNT_ANNOTATION
                )
            ) or len(members)
            ready = progress.group_ready([m for m in members if not pods.is_terminated(m)] or members, total=total)
        else:
            ready = progress.pod_ready(members[0])
        # not admitted (evicted, its pods marked; or a held workload: its StatefulSet scaled to zero): Kueue's
        # generatePodsReadyCondition says WaitForStart whatever its going pods still report, so the pods of a new
        # admission are Started, not Recovered
        started = progress.started("Pod", members) and not (known is not None and known.on_hold)
        await self.reporter.report_pods_ready(wl_key, started=started, ready=ready, version=version)


def waits_for_replacement(members: Sequence[Mapping[str, Any]], workload: models.Workload) -> bool:
    """Whether the pod group of ``members`` (its managed pods seen, with the succeeded ones it keeps counting)
    lacks pods against its ``workload``'s pod sets (:func:`kueue_es.jobframework.pods.absent_pods`; with fast
    admission a role with none): Kueue's WaitingForReplacementPods True (pod_controller.go countAbsentPods), which
    keeps the Workload out of its queue (workload.go IsAdmissible). Never for a group on a prebuilt Workload (a
    StatefulSet's, a LeaderWorkerSet's, one adopted: Kueue counts absent pods only in FindMatchingWorkloads,
    which its prebuilt path skips) nor for a Workload the pod group framework did not make."""
    if not members or not pods.is_group_workload(workload) or prebuilt.group_on_prebuilt(workload):
        return False
    first = pods.oldest_first(members)[0]
    fast = workloads.as_mapping(workloads.as_mapping(first.get("metadata")).get("annotations")).get(
        pods.FAST_ADMISSION_ANNOTATION
    )
    pod_sets = [(pod_set.name, pod_set.count) for pod_set in workload.spec.pod_sets]
    return pods.absent_pods(members, pod_sets, fast=fast == "true") > 0


def _newly_parented(known: models.Workload | None, workload: models.Workload) -> bool:
    """Whether ``workload`` names a serving parent (a LeaderWorkerSet seen only after its group's workload was
    made) that the ``known`` one did not: then it is published again, running or not, so that its Workload
    object becomes that parent's (:func:`~kueue_es.events.job_owners.serving_parent`)."""
    return (
        known is not None
        and job_owners.serving_parent(known) is None
        and job_owners.serving_parent(workload) is not None
    )
