"""Ungating the pods of TAS workloads: each gated pod gets its topology domain, then may schedule.

Why this module exists: Topology-Aware Scheduling (SEMANTICS-ADVANCED A.12) places a
workload's pods in topology domains, but the pods are created by the job's own
controller. A started job's TAS pod sets carry the ``kueue.x-k8s.io/topology``
scheduling gate, the ``kueue.x-k8s.io/podset`` label and the
``kueue.x-k8s.io/workload`` annotation (:mod:`.job_writes`); this module watches
those pods and, for each gated pod of an Admitted workload, adds its domain's
nodeSelector and removes the gate (Kueue topology_ungater.go). Which pod goes where
is pure (:mod:`kueue_es.services.dispatcher.ungater`); the patch carries the pod's
resourceVersion as precondition, and a failed write is tried again.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable

import structlog

from kueue_es.events import slices, tas
from kueue_es.jobframework import pods as pod_integration
from kueue_es.jobframework import prebuilt
from kueue_es.jobframework.integrations import serving
from kueue_es.jobframework.workloads import MANAGED_LABEL, QUEUE_LABEL
from kueue_es.projections.cluster import WorkloadState
from kueue_es.scheduling.tas import replacement
from kueue_es.services.dispatcher import core, job_writes, ungater
from kueue_es.services.dispatcher.job_writes import POD_REF
from kueue_es.services.dispatcher.kube_api import KubeApi, WriteLimiter
from kueue_es.services.dispatcher.object_sync import API_ERRORS
from kueue_es.services.dispatcher.write_budget import WriteClass
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import objects, resources
from kueue_es.services.runtime import wall_clock_ms

log = structlog.get_logger(__name__)

STATEFULSET_REF = resources.STATEFUL_SETS


class Ungating:
    """Keeps the pods that carry the pod set label and ungates those of Admitted TAS workloads; starts the late
    pods of admitted pod groups (``on_excess`` told of each pod deleted beyond its group's count, ``on_started`` of
    each late pod started).

    Workloads are marked (:meth:`mark`) when the fold sees them admitted or assigned a
    topology and when one of their pods changes; :meth:`run` ungates the marked ones.
    """

    def __init__(
        self,
        *,
        api: KubeApi,
        limiter: WriteLimiter,
        view: core.DispatchState,
        on_excess: job_writes.ExcessHook | None = None,
        on_started: Callable[[objects.Pod, str], None] | None = None,
        workload_owners: Callable[[str, str], set[str] | None] | None = None,
    ) -> None:
        self.api, self.limiter, self.view, self.on_excess = api, limiter, view, on_excess
        # the UIDs the Workload object ``namespace/name`` names as owners, as last written (None: no object)
        self.workload_owners = workload_owners
        self.on_started = on_started  # told of each late pod started (the pod, its ClusterQueue): its Started Event
        self.pods: dict[objects.PodKey, objects.Pod] = {}
        self.ungated = 0
        self._dirty: dict[str, None] = {}
        self.group_pods: dict[objects.PodKey, objects.Pod] = {}
        # (namespace, pod group) -> the names of its pods in group_pods
        self._groups: dict[tuple[str, str], set[str]] = {}
        self._late: dict[str, None] = {}  # pod groups (namespace/name) with a gated pod
        # serving groups (namespace/name) whose gated pods may name another LocalQueue than their Workload, with the
        # LocalQueue its last observation named ("": the log's, while the workload holds no quota)
        self._relabel: dict[str, str] = {}
        # managed pods whose kueue.x-k8s.io/managed finalizer is to come off (pods.finalizer_released), as listed
        self._release: dict[objects.PodKey, objects.Pod] = {}
        # the StatefulSets' (namespace, name) -> (uid, currentRevision, updateRevision), as watched
        self.statefulsets: dict[tuple[str, str], tuple[str, str, str]] = {}
        # gated StatefulSet pods to look at for their rollout (serving.rollout_ungates)
        self._rollout: dict[objects.PodKey, None] = {}
        # workloads with gated pods held back from an unhealthy node -> the status.unhealthyNodes that held them
        self._held: dict[str, tuple[str, ...]] = {}
        self._wakeup = asyncio.Event()

    def mark(self, key: str) -> None:
        """Workload ``key``'s pods may need ungating."""
        self._dirty[key] = None
        self._wakeup.set()

    def recheck_held(self) -> None:
        """Mark the workloads whose gated pods were held back from a node in their ``status.unhealthyNodes``
        (:func:`ungater.without_unhealthy`, Kueue topology_ungater.go) once that list changed as folded: a
        replacement domain was assigned or the node is healthy again. Cheap when none is held."""
        for key, nodes in list(self._held.items()):
            record = self.view.records.get(key)
            if record is None or record.unhealthy_nodes != nodes:
                del self._held[key]
                self.mark(key)

    async def watch_group_pods(self) -> None:
        """Keep the pods of pod groups and start, as its member, each gated one that arrives after its group's
        workload was admitted and started (:func:`core.late_start`; cancel to stop). A group is named by the
        ``kueue.x-k8s.io/pod-group-name`` label or annotation (read first, WorkloadIdentifierAnnotations): the
        pods carrying the label and those Kueue's webhook marked managed are watched, and kept when they name
        a group."""
        await asyncio.gather(
            self._watch_group_pods(pod_integration.GROUP_NAME_KEY), self._watch_group_pods(MANAGED_LABEL)
        )

    async def _watch_group_pods(self, selector: str) -> None:
        seen: set[objects.PodKey] = set()  # what this watch keeps: a resync drops only its own pods
        # the managed pods' watch (every pod Kueue's webhook marked) also lets their finalizer go
        releases = selector == MANAGED_LABEL
        async for item in self.api.watch_objects(POD_REF, label_selector=selector):
            if isinstance(item, kube.Resynced):
                pods = [objects.as_pod(raw) for raw in item.objects]
                for key in seen:
                    self._forget(key)
                seen = {objects.pod_key(pod) for pod in pods if pod_integration.group_name(pod)}
                for pod in pods:
                    if pod_integration.group_name(pod):
                        self._keep(pod)
                        self._group_pod_changed(pod)
                if releases:
                    for pod in pods:
                        self._check_release(pod)
            elif item.type == "DELETED":
                gone = objects.as_pod(item.object)
                key = objects.pod_key(gone)
                self._release.pop(key, None)
                if self._forget(key) is not None and (group := pod_integration.group_name(gone)):
                    self._members_changed(key[0], group)
                    if releases:  # a member gone may leave another's replacement due (or not)
                        self.group_workload_changed(key[0], group)
                seen.discard(key)
            else:
                pod = objects.as_pod(item.object)
                if releases and not pod_integration.group_name(pod):
                    self._check_release(pod)
                if not (group := pod_integration.group_name(pod)):
                    continue
                key = objects.pod_key(pod)
                seen.add(key)
                before = self.group_pods.get(key)
                self._keep(pod)
                if (
                    before is None
                    or bool(objects.meta(before).get("deletionTimestamp"))
                    != bool(objects.meta(pod).get("deletionTimestamp"))
                    or pod_integration.counts_in_group(before) != pod_integration.counts_in_group(pod)
                ):
                    # its owners, or the pods it lacks (WaitingForReplacementPods), may have changed
                    self._members_changed(key[0], group)
                self._group_pod_changed(pod)
                if releases:
                    self._check_release(pod)

    def _check_release(self, pod: objects.Pod) -> None:
        """After a managed pod changed: queue it for its finalizer to come off when Kueue's pod reconciler would
        take it off now (:func:`pod_integration.finalizer_released`); for a pod of a group, every member is
        looked at again: the group or its Workload may have finished, or a member may now be replaced
        (:func:`pod_integration.replaced_members`, against the pod sets of the group's Workload as folded)."""
        if not (group := pod_integration.group_name(pod)):
            self._queue_release(pod, workload_finished=self._workload_finished(pod))
            return
        namespace = objects.pod_key(pod)[0]
        members = {objects.pod_key(m): m for m in self._group_members(namespace, group)}
        members[objects.pod_key(pod)] = pod
        self._check_group_release(pod, list(members.values()))

    def _check_group_release(self, first: objects.Pod, members: list[objects.Pod]) -> None:
        """:meth:`_check_release` for the pods ``members`` of one group (``first`` among them)."""
        key = "/".join(pod_integration.workload_key(first))
        wl = self.view.cluster.workloads.get(key)
        # Kueue's Stop of a Workload deleted by hand deletes the group's pods and Finalize lets them all go
        workload_finished = wl is not None and (wl.finished is not None or wl.deleted_seq > 0)
        group_finished = pod_integration.group_has_finished(members)
        pod_sets = None
        if wl is not None and pod_integration.is_group_workload(wl.workload):
            pod_sets = [(ps.name, ps.count) for ps in wl.workload.spec.pod_sets]
        replaced = {
            objects.pod_key(objects.as_pod(dict(m)))
            for m in pod_integration.replaced_members(members, pod_sets, now_ms=wall_clock_ms())
        }
        if replaced and pod_sets is not None and not self._owned_by_all(key, members):
            # Kueue makes the replacements owners of the Workload before it lets the replaced pods go
            # (EnsureWorkloadOwnedByAllMembers, then finalizePods), so the garbage collector never takes the
            # Workload when its last named owner goes: looked at again once the owners are written
            replaced = set()
        for member in members:
            self._queue_release(
                member,
                group_finished=group_finished,
                workload_finished=workload_finished,
                replaced=objects.pod_key(member) in replaced,
            )

    def _owned_by_all(self, key: str, members: list[objects.Pod]) -> bool:
        """Whether the Workload object ``key`` (``namespace/name``) names as owners every member that is not being
        deleted (true when no object is kept, or no owners are told)."""
        if self.workload_owners is None:
            return True
        namespace, _, name = key.partition("/")
        owners = self.workload_owners(namespace, name)
        if owners is None:
            return True
        live = {
            str(objects.meta(m).get("uid") or "")
            for m in members
            if not objects.meta(m).get("deletionTimestamp") and objects.meta(m).get("uid")
        }
        return live <= owners

    def _workload_finished(self, pod: objects.Pod) -> bool:
        wl = self.view.cluster.workloads.get("/".join(pod_integration.workload_key(pod)))
        return wl is not None and wl.finished is not None

    def _queue_release(self, pod: objects.Pod, **why: bool) -> None:
        if pod_integration.finalizer_released(pod, **why):
            self._release[objects.pod_key(pod)] = pod
            self._wakeup.set()

    def group_workload_changed(self, namespace: str, group: str) -> None:
        """The workload of pod group ``namespace/group`` changed on the log (observed with other pod sets,
        finished, deleted): its members' finalizers are looked at again (:meth:`_check_release`)."""
        members = [m for m in self._group_members(namespace, group) if pod_integration.group_name(m) == group]
        if members:
            self._check_group_release(members[0], members)

    def absent_pods(self, namespace: str, name: str, pod_sets: list[tuple[str, int]]) -> int | None:
        """How many pods the pod group ``namespace/name`` lacks against its Workload's ``pod_sets`` (role hash,
        count) (:func:`pod_integration.absent_pods`: WaitingForReplacementPods); None when none of its pods is
        watched (a dispatcher without a real API server, or a group whose pods are all gone)."""
        members = self._group_members(namespace, name)
        if not members:
            return None
        first = objects.as_pod(dict(pod_integration.oldest_first(members)[0]))
        fast = (objects.meta(first).get("annotations") or {}).get(pod_integration.FAST_ADMISSION_ANNOTATION) == "true"
        return pod_integration.absent_pods(members, pod_sets, fast=fast)

    def _group_members(self, namespace: str, group: str) -> list[objects.Pod]:
        return [
            pod
            for name in sorted(self._groups.get((namespace, group), ()))
            if (pod := self.group_pods.get((namespace, name))) is not None
        ]

    def _keep(self, pod: objects.Pod) -> None:
        key = objects.pod_key(pod)
        before = self.group_pods.get(key)
        if before is not None and (old := pod_integration.group_name(before)) != pod_integration.group_name(pod):
            self._unindex(key, old)
        self.group_pods[key] = pod
        self._groups.setdefault((key[0], pod_integration.group_name(pod)), set()).add(key[1])

    def _forget(self, key: objects.PodKey) -> objects.Pod | None:
        gone = self.group_pods.pop(key, None)
        if gone is not None:
            self._unindex(key, pod_integration.group_name(gone))
        return gone

    def _unindex(self, key: objects.PodKey, group: str) -> None:
        names = self._groups.get((key[0], group))
        if names is not None:
            names.discard(key[1])
            if not names:
                del self._groups[(key[0], group)]

    async def release_finalizers(self) -> bool:
        """Take Kueue's ``kueue.x-k8s.io/managed`` finalizer off the pods queued by :meth:`_check_release`, the
        other finalizers kept; the patch carries the pod's resourceVersion as precondition, and a pod changed
        since (409) is looked at again on its watch event, one gone (404) is done with (Kueue
        removePodFinalizers). False when a write failed otherwise: that pod stays queued, to be tried again."""
        done = True
        taken, self._release = list(self._release.values()), {}
        for pod in taken:
            meta = objects.meta(pod)
            kept = [f for f in meta.get("finalizers") or [] if f != pod_integration.POD_FINALIZER]
            patch = {"metadata": {"finalizers": kept or None, "resourceVersion": meta.get("resourceVersion")}}
            await self.limiter.acquire(WriteClass.JOBS)  # a pod being deleted waits for it to go
            try:
                await self.api.patch_object(
                    POD_REF, namespace=meta.get("namespace"), name=str(meta.get("name") or ""), patch=patch
                )
            except (kube_errors.NotFoundError, kube_errors.ConflictError):
                continue  # gone, or changed since listed: its watch event queues it again if still held
            except API_ERRORS as err:
                log.warning("pod_finalizer_retry", pod=f"{meta.get('namespace')}/{meta.get('name')}", error=str(err))
                self._release.setdefault(objects.pod_key(pod), pod)
                self._wakeup.set()
                done = False
                continue
            log.info("pod_finalizer_removed", pod=f"{meta.get('namespace')}/{meta.get('name')}")
        return done

    def members(self, namespace: str, group: str) -> list[tuple[str, str]]:
        """The pods of pod group ``namespace/group`` that exist, as ``(name, uid)``: the Workload's owners. A pod
        being deleted (held by a finalizer) stays one until it is gone: Kueue only adds owner references
        (pod_controller.go EnsureWorkloadOwnedByAllMembers, controllerutil.SetOwnerReference), and the garbage
        collector takes one off once its pod is gone while others remain. Empty before the group's pods are
        watched (a dispatcher without a real API server)."""
        return sorted(
            (objects.name_of(pod), str(objects.meta(pod).get("uid") or ""))
            for pod in self._group_members(namespace, group)
            if objects.meta(pod).get("uid")
        )

    def _members_changed(self, namespace: str, group: str) -> None:
        """A pod joined or left the group: its Workload's owners are written again (once the fold knows it)."""
        key = f"{namespace}/{group}"
        if key in self.view.cluster.workloads and self.view.track_objects:
            self.view.dirty_workloads.setdefault(key, self.view.cluster.last_seq)

    def _group_pod_changed(self, pod: objects.Pod) -> None:
        if serving.rollout_statefulset(pod) is not None and (pod.get("spec") or {}).get("schedulingGates"):
            self._rollout[objects.pod_key(pod)] = None
            self._wakeup.set()
        if pod_integration.is_gated(pod) and (group := pod_integration.group_name(pod)):
            key = f"{objects.pod_key(pod)[0]}/{group}"
            self._late[key] = None
            self._relabel.setdefault(key, "")
            self._wakeup.set()

    def requeued(self, key: str, queue: str) -> None:
        """Workload ``key`` was observed in LocalQueue ``queue`` (its parent's now, also while it holds quota and
        the log keeps the one it was admitted in): its group's gated pods are relabelled if they name another
        (:meth:`relabel_pods`)."""
        self._relabel[key] = queue
        self._wakeup.set()

    async def relabel_pods(self) -> bool:
        """Give the gated pods of the marked StatefulSet and LeaderWorkerSet groups their Workload's LocalQueue as
        ``kueue.x-k8s.io/queue-name`` (:func:`serving.queue_relabels`; Kueue statefulset_reconciler.go
        syncQueueLabel, leaderworkerset_reconciler.go setDefault), each patch carrying the pod's resourceVersion:
        a pod changed since (409) or gone (404) is looked at again on its watch event. False when a write failed
        otherwise: the group stays marked, to be tried again."""
        done = True
        taken, self._relabel = self._relabel, {}
        for key, observed in taken.items():
            wl = self.view.cluster.workloads.get(key)
            if wl is None:
                continue
            # the LocalQueue the watcher saw its parent name; else the log's, which is that while it holds no quota
            queue = observed or ("" if wl.reservation is not None else wl.workload.spec.queue_name)
            namespace, _, group = key.partition("/")
            members = {
                name: pod
                for (ns, name), pod in sorted(self.group_pods.items())
                if ns == namespace and pod_integration.group_name(pod) == group
            }
            for name in serving.queue_relabels(wl.workload, list(members.values()), queue=queue):
                resource_version = objects.meta(members[name]).get("resourceVersion")
                patch = {"metadata": {"labels": {QUEUE_LABEL: queue}, "resourceVersion": resource_version}}
                await self.limiter.acquire(WriteClass.JOBS)
                try:
                    stored = await self.api.patch_object(POD_REF, namespace=namespace, name=name, patch=patch)
                except (kube_errors.NotFoundError, kube_errors.ConflictError):
                    continue  # gone, or changed since listed: its watch event marks the group again if still gated
                except API_ERRORS as err:
                    log.warning("pod_relabel_retry", pod=f"{namespace}/{name}", error=str(err))
                    self._relabel[key] = observed
                    done = False
                    break
                self.group_pods[(namespace, name)] = objects.as_pod(stored)
                log.info("pod_queue_relabelled", pod=f"{namespace}/{name}", workload=key, queue=queue)
        return done

    async def _start_late(self) -> None:
        """Start the gated pods of the admitted groups marked by :meth:`watch_group_pods`."""
        taken, self._late = list(self._late), {}
        for key in taken:
            action = core.late_start(self.view, key)
            if action is None:
                continue
            namespace, _, group = key.partition("/")
            members = {objects.name_of(pod): pod for pod in self._group_members(namespace, group)}
            # a pod beyond the group's count is deleted, not started (Kueue's removeExcessPods; a group on a prebuilt
            # Workload's, a StatefulSet's or LeaderWorkerSet's too, is left gated)
            kept_gated = action.keep_excess or prebuilt.members_name_prebuilt(list(members.values()))
            excess = await job_writes.delete_excess(
                self.api, self.limiter, action, list(members.values()), on_deleted=self.on_excess
            )
            for name, pod in members.items():
                ns = namespace
                if name in excess:
                    if not kept_gated:
                        self._forget((ns, name))
                    continue
                patch = action.patch(pod, pod_set=pod_integration.role_hash(pod))
                if patch is None:
                    continue
                patch["metadata"]["resourceVersion"] = objects.meta(pod).get("resourceVersion")
                try:
                    if (relabel := action.relabel(pod)) is not None:  # its StatefulSet's LocalQueue first
                        relabel["metadata"]["resourceVersion"] = patch["metadata"]["resourceVersion"]
                        await self.limiter.acquire(WriteClass.JOBS)
                        relabelled = await self.api.patch_object(POD_REF, namespace=namespace, name=name, patch=relabel)
                        patch["metadata"]["resourceVersion"] = (relabelled.get("metadata") or {}).get("resourceVersion")
                    await self.limiter.acquire(WriteClass.JOBS)
                    stored = await self.api.patch_object(POD_REF, namespace=namespace, name=name, patch=patch)
                except (kube_errors.NotFoundError, kube_errors.ConflictError):
                    continue  # gone, or changed since listed: its watch event marks the group again if still gated
                self._keep(objects.as_pod(stored))
                log.info("pod_started_late", pod=f"{namespace}/{name}", workload=key)
                wl = self.view.cluster.workloads.get(key)
                if self.on_started is not None and wl is not None and wl.reservation is not None:
                    self.on_started(pod, wl.reservation.cluster_queue)  # Pod.Run's Event on each pod it ungates

    async def watch_statefulsets(self) -> None:
        """Keep the StatefulSets' revisions and look again at their gated pods when they change, for the rollout
        ungating of :meth:`ungate_rollouts` (cancel to stop)."""
        async for item in self.api.watch_objects(STATEFULSET_REF):
            if isinstance(item, kube.Resynced):
                self.statefulsets = {}
                for raw in item.objects:
                    self._statefulset_changed(objects.as_stored(raw))
            elif item.type == "DELETED":
                gone = objects.as_stored(item.object)
                self.statefulsets.pop((objects.namespace_of(gone), objects.name_of(gone)), None)
            else:
                self._statefulset_changed(objects.as_stored(item.object))

    def _statefulset_changed(self, sts: objects.KubeObject) -> None:
        key = (objects.namespace_of(sts), objects.name_of(sts))
        kept = (objects.uid_of(sts), *serving.statefulset_revisions(sts))
        if self.statefulsets.get(key) == kept:
            return
        self.statefulsets[key] = kept
        for pod_key, pod in self.group_pods.items():
            owner = serving.rollout_statefulset(pod)
            if pod_key[0] == key[0] and owner is not None and owner == (key[1], kept[0]):
                self._rollout[pod_key] = None
        self._wakeup.set()

    async def ungate_rollouts(self) -> bool:
        """Take Kueue's gates off the current-revision pods of the StatefulSets under a rollout
        (:func:`~kueue_es.jobframework.integrations.serving.rollout_ungates`; Kueue statefulset_reconciler.go
        ungatePods), with the pod's resourceVersion as precondition; False when a write must be tried again."""
        done = True
        taken, self._rollout = list(self._rollout), {}
        for key in taken:
            pod = self.group_pods.get(key)
            owner = serving.rollout_statefulset(pod) if pod is not None else None
            if pod is None or owner is None or objects.meta(pod).get("deletionTimestamp"):
                continue
            kept = self.statefulsets.get((key[0], owner[0]))
            if kept is None or kept[0] != owner[1]:
                continue  # not (yet) seen: looked at again when it is
            gates = serving.rollout_ungates((kept[1], kept[2]), pod)
            if not gates:
                continue
            left = core.without_gates(list((pod.get("spec") or {}).get("schedulingGates") or []), gates)
            patch = {
                "metadata": {"resourceVersion": objects.meta(pod).get("resourceVersion")},
                "spec": {"schedulingGates": left or None},
            }
            await self.limiter.acquire(WriteClass.JOBS)
            try:
                stored = await self.api.patch_object(POD_REF, namespace=key[0], name=key[1], patch=patch)
            except kube_errors.NotFoundError:
                continue
            except API_ERRORS as err:  # a conflict: the pod changed, its watch event brings it back here
                log.warning("rollout_ungate_retry", pod=f"{key[0]}/{key[1]}", error=str(err))
                self._rollout[key] = None
                done = False
                continue
            self._keep(objects.as_pod(stored))
            log.info("pod_ungated_for_rollout", pod=f"{key[0]}/{key[1]}", statefulset=owner[0], gates=gates)
        return done

    async def watch_pods(self) -> None:
        """Keep the pods that carry the pod set label (started pods of a workload) and mark their
        workloads (cancel to stop)."""
        async for item in self.api.watch_objects(POD_REF, label_selector=core.PODSET_LABEL):
            if isinstance(item, kube.Resynced):
                pods = [objects.as_pod(raw) for raw in item.objects]
                self.pods = {objects.pod_key(pod): pod for pod in pods}
                for pod in pods:
                    self._pod_changed(pod)
            elif item.type == "DELETED":
                self.pods.pop(objects.pod_key(objects.as_pod(item.object)), None)
            else:
                pod = objects.as_pod(item.object)
                self.pods[objects.pod_key(pod)] = pod
                self._pod_changed(pod)

    def _pod_changed(self, pod: objects.Pod) -> None:
        workload = (objects.meta(pod).get("annotations") or {}).get(core.WORKLOAD_ANNOTATION)
        if workload and (
            ungater.is_gated(pod) or ungater.is_elastic_gated(pod) or ungater.pending_on_selected_node(pod)
        ):
            self.mark(f"{objects.pod_key(pod)[0]}/{workload}")

    def node_changed(self, name: str) -> None:
        """Node ``name`` changed as folded (its Ready status, taints, or it is gone): mark the workloads whose
        ungated pods wait for it by nodeSelector, for :meth:`_fail_stranded` (Kueue's TAS node controller
        reconciles a node's pods on each such change)."""
        for (namespace, _), pod in self.pods.items():
            workload = (objects.meta(pod).get("annotations") or {}).get(core.WORKLOAD_ANNOTATION)
            if workload and ungater.pending_on_selected_node(pod) == name:
                self.mark(f"{namespace}/{workload}")

    async def run(self, *, retry_seconds: float = 1.0) -> None:
        """Ungate the marked workloads' pods whenever one is marked (cancel to stop)."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            relabelled = await self.relabel_pods()  # first: a pod started late can no longer be relabelled
            try:
                await self._start_late()
            except API_ERRORS as err:
                log.warning("late_start_retry", error=str(err))
            released = await self.release_finalizers()
            rolled = await self.ungate_rollouts()
            if not await self.ungate_dirty() or not released or not relabelled or not rolled:
                await asyncio.sleep(retry_seconds)  # a write failed: the workload (or pod) stays marked

    async def ungate_dirty(self) -> bool:
        """Ungate what the dirty workloads need now; False when a write must be tried again."""
        done = True
        taken, self._dirty = list(self._dirty), {}
        for key in taken:
            try:
                await self._ungate(key)
            except API_ERRORS as err:
                log.warning("ungate_retry", workload=key, error=str(err))
                self.mark(key)
                done = False
        return done

    def _topology_pod_sets(self, key: str) -> list[ungater.PodSetTopology]:
        """The pod sets of an Admitted workload with a topology assignment (Kueue IsAdmittedByTAS), else []."""
        wl = self.view.cluster.workloads.get(key)
        record = self.view.records.get(key)
        if wl is None or wl.gone or not wl.admitted or wl.reservation is None or record is None:
            return []
        own = {ps.name: ps for ps in wl.workload.spec.pod_sets}
        out = []
        for psa in wl.reservation.pod_set_assignments:
            ta = record.topology.get(psa.name)
            if ta is None:
                continue
            request = own[psa.name].topology_request if psa.name in own else None
            out.append(
                ungater.PodSetTopology(name=psa.name, count=psa.count, assignment=tas.decode(ta), request=request)
            )
        return out

    def _pods_of(self, namespace: str, workload: str, pod_set: str) -> list[objects.Pod]:
        """The live pods of ``pod_set`` of workload ``namespace/workload`` (an elastic job's: of the chain
        ``workload`` names first, :func:`ungater.chain_name`), by name."""
        return sorted(
            (
                pod
                for (ns, _), pod in self.pods.items()
                if ns == namespace
                and ungater.chain_name(pod) == workload
                and (objects.meta(pod).get("labels") or {}).get(core.PODSET_LABEL) == pod_set
                and not pod_integration.is_terminated(pod)
            ),
            key=objects.name_of,
        )

    def _elastic_head(self, key: str) -> WorkloadState | None:
        """The newest slice of the chain of elastic workload ``key`` that is admitted, holds quota and is
        not being evicted (elastic_job_ungater.go), or None."""
        state = self.view.cluster
        wl = state.workloads.get(key)
        if wl is None or not slices.is_elastic(wl.workload.metadata.annotations):
            return None
        origin, namespace = slices.slice_name(wl.workload), wl.workload.metadata.namespace
        heads = [
            other
            for other in state.workloads.values()
            if other.workload.metadata.namespace == namespace
            and slices.slice_name(other.workload) == origin
            and other.admitted
            and other.reservation is not None
            and other.eviction is None
            and not other.gone
        ]
        return max(heads, key=lambda w: (w.workload.metadata.creation_timestamp_ms, w.key), default=None)

    async def _ungate_elastic(self, key: str) -> None:
        """Release the gated pods of an elastic job up to its newest admitted slice's counts, lowest
        names first (SEMANTICS-ADVANCED D.4): the pods that run keep running."""
        head = self._elastic_head(key)
        if head is None:
            return
        namespace, origin = head.workload.metadata.namespace, slices.slice_name(head.workload)
        for pod_set in head.workload.spec.pod_sets:
            pods = self._pods_of(namespace, origin, pod_set.name)
            by_name = {objects.name_of(p): p for p in pods}
            for name in ungater.elastic_release(pod_set.count, pods):
                await self._release_elastic(by_name[name], workload=head.key)

    async def _release_elastic(self, pod: objects.Pod, *, workload: str) -> None:
        """Remove the elastic-job gate of ``pod``, if the pod is still as listed."""
        meta, spec = objects.meta(pod), pod.get("spec") or {}
        gates = core.without_gates(list(spec.get("schedulingGates") or []), [slices.ELASTIC_JOB_GATE])
        patch = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},  # a precondition: 409 if it changed
            "spec": {"schedulingGates": gates or None},
        }
        await self.limiter.acquire(WriteClass.JOBS)
        try:
            stored = await self.api.patch_object(
                POD_REF, namespace=meta.get("namespace"), name=objects.name_of(pod), patch=patch
            )
        except kube_errors.NotFoundError:
            self.pods.pop(objects.pod_key(pod), None)
            return
        self.pods[objects.pod_key(objects.as_pod(stored))] = objects.as_pod(stored)
        self.ungated += 1
        log.info("elastic_pod_released", pod=f"{meta.get('namespace')}/{objects.name_of(pod)}", workload=workload)

    async def _ungate(self, key: str) -> None:
        """Give the gated pods of workload ``key`` their domains (topology_ungater.go Reconcile), and
        release an elastic job's pods its newest admitted slice has room for."""
        await self._ungate_elastic(key)
        # An elastic job's pods name the chain's first slice: its newest admitted slice places them,
        # found by the chain's name (topology_ungater.go podsForPodSet by workloadslicing.SliceName).
        head = self._elastic_head(key)
        pod_sets = self._topology_pod_sets(head.key if head is not None else key)
        if not pod_sets:
            return
        namespace, _, name = key.partition("/")
        if head is not None:
            name = slices.slice_name(head.workload)
        bounds = ungater.rank_bounds(pod_sets)
        record_key = head.key if head is not None else key
        record = self.view.records.get(record_key)
        unhealthy = record.unhealthy_nodes if record is not None else ()
        self._held.pop(record_key, None)
        for pod_set in pod_sets:
            pods = self._pods_of(namespace, name, pod_set.name)
            offset, max_rank = bounds[pod_set.name]
            try:
                plan = ungater.plan_pod_set(pod_set, pods, offset=offset, max_rank=max_rank)
            except ValueError as err:
                log.warning("ungate_failed", workload=key, pod_set=pod_set.name, error=str(err))
                continue
            plan, held = ungater.without_unhealthy(plan, pod_set.assignment.levels, unhealthy)
            if held:
                # looked at again once the list changes (a replacement assigned, the node healthy again)
                self._held[record_key] = unhealthy
                log.info("ungate_held", workload=key, pod_set=pod_set.name, pods=[s.name for s in held])
            by_name = {objects.name_of(p): p for p in pods}
            for step in plan:
                await self._ungate_pod(by_name[step.name], step, workload=key)
            await self._fail_stranded(record_key, [self.pods.get(objects.pod_key(p), p) for p in pods])

    async def _fail_stranded(self, key: str, pods: list[objects.Pod]) -> None:
        """Fail the pending pods of workload ``key`` that a nodeSelector binds to a node they cannot run on
        (:func:`~kueue_es.scheduling.tas.replacement.terminates_pending_pods`: not Ready, a taint not tolerated
        for good, or no longer in the assignment), as Kueue's TAS node controller does (node_controller.go
        markPodsFailed: phase Failed, condition TerminatedByKueue ``UnschedulableOnAssignedNode``): their job
        makes them again, gated, and they are ungated onto the replacement. Without it a pod ungated onto a
        failing node just before it was listed unhealthy stayed Pending for good (found by a new user's trial)."""
        wl = self.view.cluster.workloads.get(key)
        if wl is None:
            return
        for pod in pods:
            host = ungater.pending_on_selected_node(pod)
            if host is None or not replacement.terminates_pending_pods(self.view.cluster, wl, host):
                continue
            meta = objects.meta(pod)
            now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            patch = {
                "metadata": {"resourceVersion": meta.get("resourceVersion")},
                "status": ungater.terminated_by_kueue_status(pod, now=now),
            }
            await self.limiter.acquire(WriteClass.JOBS)
            try:
                stored = await self.api.patch_object(
                    POD_REF,
                    namespace=meta.get("namespace"),
                    name=objects.name_of(pod),
                    patch=patch,
                    subresource="status",
                )
            except (kube_errors.NotFoundError, kube_errors.ConflictError):
                continue  # gone, or changed since listed: its watch event marks the workload again
            self.pods[objects.pod_key(pod)] = objects.as_pod(stored)
            log.info("pod_terminated_on_assigned_node", pod=f"{meta.get('namespace')}/{meta.get('name')}", node=host)

    async def _ungate_pod(self, pod: objects.Pod, step: ungater.Ungate, *, workload: str) -> None:
        """Remove the topology gate and add the domain's nodeSelector, if the pod is still as listed."""
        meta, spec = objects.meta(pod), pod.get("spec") or {}
        gates = core.without_gates(list(spec.get("schedulingGates") or []), [core.TOPOLOGY_GATE])
        patch = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},  # a precondition: 409 if it changed
            "spec": {"schedulingGates": gates or None, "nodeSelector": step.node_selector},
        }
        await self.limiter.acquire(WriteClass.JOBS)  # a pod waits for it to run
        try:
            stored = await self.api.patch_object(POD_REF, namespace=meta.get("namespace"), name=step.name, patch=patch)
        except kube_errors.NotFoundError:
            self.pods.pop(objects.pod_key(pod), None)
            return
        self.pods[objects.pod_key(objects.as_pod(stored))] = objects.as_pod(stored)
        self.ungated += 1
        log.info(
            "pod_ungated",
            pod=f"{meta.get('namespace')}/{step.name}",
            workload=workload,
            node_selector=step.node_selector,
        )
