"""The watcher service: list+watch the cluster and put facts on the log.

One watch loop per kind, through kubernetes-asyncio: Kueue's v1beta2 objects, the
PriorityClasses a job's priority may name, and the jobs Kueue queues -- batch/v1
Jobs (with the ``kueue.x-k8s.io/queue-name`` label, or all of them with
``manage_jobs_without_queue_name``), JobSets, and Pods (single or in groups). The
conversion is pure (:mod:`kueue_es.services.watcher.convert`, ``jobset``, ``pods``, with
what they share in ``jobframework``); this runner keeps what a conversion needs to
know about the rest of the cluster (LocalQueues, priority classes, the jobs that
own other jobs, the workload it published before) and publishes the facts with a
``Nats-Msg-Id`` made of kind, object and resourceVersion, so a re-delivered watch
event is deduplicated.

:meth:`Watcher.run` starts a kind only after the kinds its conversion reads have
been listed once (as Kueue's controllers wait for their caches), and a change to
one of those (a ``default`` LocalQueue, a PriorityClass) converts the jobs again. A
kind the cluster does not serve (no JobSet CRD) is probed again every
``probe_seconds``; the others go on. After a relist (start-up, or 410 Gone) every
object the log knows but the cluster no longer has gets an ObjectDeleted fact, so
deletions during a gap are not lost. A Job the dispatcher stopped for an eviction
gives one WorkloadStopped per eviction once its pods are gone, however often it is
seen (Msg-Id and memory keyed by the eviction, also across restarts); so does a
stopped JobSet once no Job of it is active, and a Pod workload once none of its
marked pods runs (the dispatcher deletes them).

It also reports how far started jobs got and what admission check controllers
say (:mod:`kueue_es.services.watcher.progress`): WorkloadPodsReady when a job's PodsReady
(status, reason) changes (SEMANTICS-ADVANCED C.2), and, from the Workload objects
(watched too), AdmissionCheckStateChanged when an entry of
``status.admissionChecks`` changes (B.5) and a WorkloadObserved when ``spec.active``
is flipped (deactivation by hand, reactivation).

For Topology-Aware Scheduling it watches Topologies (v1beta2, else v1alpha1), Nodes
and the pods bound to nodes (:mod:`kueue_es.services.watcher.nodes`): TopologyObserved,
NodeObserved, PodObserved and their ObjectDeleted, each published only when its
content changes (a kubelet heartbeat publishes nothing), relisted on 410 like the
other kinds, and known from the log after a restart.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog

from kueue_es.events import codec, manifests, models, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus, LogMessage
from kueue_es.jobframework import jobs, jobsets, pods, workloads
from kueue_es.projections.cluster import ClusterState
from kueue_es.projections.topology import TopologyState
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.runtime import fold_message, run_until_stopped
from kueue_es.services.watcher import convert, nodes, progress

log = structlog.get_logger(__name__)

KUEUE_KINDS = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")
JOB_KINDS = ("JobSet", "Job", "Pod")
#: The Workload objects the dispatcher writes: read back for admission check states and spec.active.
WORKLOAD_KIND = "Workload"
#: Cluster objects a job's conversion reads, kept in memory and never put on the log.
INPUT_KINDS = ("PriorityClass", "RuntimeClass", "LimitRange")
#: What Topology-Aware Scheduling reads: Topologies, Nodes and the pods bound to nodes (:mod:`.nodes`).
TAS_KINDS = nodes.TAS_KINDS
BOUND_PODS_REF = nodes.BOUND_PODS_REF
WATCHED_KINDS = (*KUEUE_KINDS, *INPUT_KINDS, *JOB_KINDS, WORKLOAD_KIND, *TAS_KINDS)

#: scheduling.k8s.io/v1 PriorityClass: read for the priority of jobs naming one (SEMANTICS §2.4).
PRIORITY_CLASSES = kube.ResourceRef(
    group="scheduling.k8s.io", version="v1", plural="priorityclasses", kind="PriorityClass", namespaced=False
)
#: node.k8s.io/v1 RuntimeClass: its fixed pod overhead counts for pods naming it (SEMANTICS §2.3 step 1).
RUNTIME_CLASSES = kube.ResourceRef(
    group="node.k8s.io", version="v1", plural="runtimeclasses", kind="RuntimeClass", namespaced=False
)
#: v1 LimitRange: container defaults and bounds in a namespace (SEMANTICS §2.3 step 2).
LIMIT_RANGES = kube.ResourceRef(group="", version="v1", plural="limitranges", kind="LimitRange", namespaced=True)
_INPUT_REFS = {"PriorityClass": PRIORITY_CLASSES, "RuntimeClass": RUNTIME_CLASSES, "LimitRange": LIMIT_RANGES}
_API_VERSIONS = {"Job": jobs.JOB_API, "JobSet": jobsets.JOBSET_API, "Pod": pods.POD_API}
_SHARED_READS = ("LocalQueue", "WorkloadPriorityClass", *INPUT_KINDS)
#: What each kind's conversion reads; run() lists these first.
_READS: dict[str, tuple[str, ...]] = {
    "JobSet": _SHARED_READS,
    "Job": (*_SHARED_READS, "JobSet"),
    "Pod": (*_SHARED_READS, "JobSet", "Job"),
    WORKLOAD_KIND: JOB_KINDS,
}
#: Admission check entries the dispatcher writes itself, not news from a check controller.
_OWN_CHECK_MESSAGE = "Reset to Pending after eviction."
_TAS_FACT_TYPES = ("TopologyObserved", "NodeObserved", "PodObserved", "ObjectDeleted")
_CONVERTERS: dict[str, Callable[..., types.Fact | None]] = {
    "Job": jobs.job_facts,
    "JobSet": jobsets.jobset_facts,
    "Pod": pods.pod_facts,
}

Key = tuple[str, str]


class Watcher:
    """Turns watch events into facts on ``bus``; knows which objects the log holds.

    ``manage_jobs_without_queue_name``: Kueue's option (default false): Jobs and
    JobSets without the queue-name label are managed too, and go to their
    namespace's ``default`` LocalQueue when it exists. ``probe_seconds``: how often
    a kind the cluster does not serve is looked for again.
    """

    def __init__(
        self, *, bus: Bus, api: Any, manage_jobs_without_queue_name: bool = False, probe_seconds: float = 30.0
    ) -> None:
        self.bus, self.api = bus, api
        self.manage_jobs_without_queue_name = manage_jobs_without_queue_name
        self.probe_seconds = probe_seconds
        self.known: dict[str, set[Key]] = {
            kind: set() for kind in (*KUEUE_KINDS, "Workload", "Topology", "Node", "Pod")
        }
        self.topology_ref = nodes.TOPOLOGY_REFS[0]  # the Topology version the cluster serves
        self.last_published: dict[tuple[str, str, str], bytes] = {}
        self.stopped: dict[Key, str] = {}  # workload (namespace, name) -> last stop version reported
        self.published = 0
        self.synced: dict[str, asyncio.Event] = {kind: asyncio.Event() for kind in WATCHED_KINDS}
        # what conversions read
        self.objects: dict[str, dict[Key, dict[str, Any]]] = {kind: {} for kind in (*JOB_KINDS, *INPUT_KINDS)}
        self.groups: dict[Key, set[str]] = {}  # (namespace, pod group) -> names of its pods
        self.local_queues: set[Key] = set()
        self.workload_priority_classes: set[str] = set()
        self.owners: dict[str, Key] = {}  # UID of a Job or JobSet seen -> its (namespace, name)
        self.workloads: dict[Key, models.Workload] = {}  # the last workload published for each job
        self.sources: dict[Key, str] = {}  # workload -> the job kind it came from
        self.pods_ready: dict[Key, progress.ReadyState] = {}  # workload -> PodsReady last reported
        self.check_states: dict[tuple[str, str, str], tuple[Any, ...]] = {}  # (ns, workload, check) -> last seen

    # -- start-up ---------------------------------------------------------------------------------

    async def learn_from_log(self) -> None:
        """Fold the log once so deletions that happened while no watcher ran can be detected."""
        last = await self.bus.last_seq()
        state = ClusterState()
        topology = TopologyState()
        if last:
            async for message in self.bus.read(subjects=(subjects.FACTS,), start_seq=1):
                fold_message(state, message)
                if message.headers.get("Kq-Type") in _TAS_FACT_TYPES:
                    try:
                        topology.apply(codec.decode(message.data))
                    except codec.DecodeError:
                        pass
                self._learn_stop(message)
                self._learn_progress(message)
                if message.seq >= last or message.pending == 0:
                    break
        self.known["ResourceFlavor"] = {("", n) for n in state.flavors}
        self.known["Cohort"] = {("", n) for n in state.cohorts}
        self.known["ClusterQueue"] = {("", n) for n in state.cluster_queues}
        self.known["LocalQueue"] = set(state.local_queues)
        self.known["WorkloadPriorityClass"] = {("", n) for n in state.priority_classes}
        self._learn_tas(topology)
        for wl in state.workloads.values():
            if wl.workload.owner and not wl.deleted_seq:
                key = (wl.workload.metadata.namespace, wl.workload.metadata.name)
                self.known["Workload"].add(key)
                self.workloads[key] = wl.workload
                self.sources[key] = wl.workload.owner.kind

    def _learn_tas(self, topology: TopologyState) -> None:
        """Know the Topologies, Nodes and pods the log holds, and their content, so an unchanged one is not
        published again after a restart and one deleted meanwhile gets its ObjectDeleted."""
        facts: list[types.Fact] = [types.TopologyObserved(topology=t) for t in topology.topologies.values()]
        facts += [types.NodeObserved(node=n) for n in topology.nodes.values()]
        facts += [types.PodObserved(pod=p) for p in topology.pods.values()]
        for fact in facts:
            kind, namespace, name = subjects.fact_identity(fact)
            self.known[kind].add((namespace, name))
            self.last_published[(kind, namespace, name)] = codec.encode(fact)

    def _learn_stop(self, message: LogMessage) -> None:
        """Remember the version of a WorkloadStopped on the log (the last part of its Msg-Id)."""
        if message.headers.get("Kq-Type") != "WorkloadStopped":
            return
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            return
        if isinstance(event, types.WorkloadStopped):
            version = message.headers.get("Nats-Msg-Id", "").rsplit(":", 1)[-1]
            self.stopped[(event.workload.namespace, event.workload.name)] = version

    def _learn_progress(self, message: LogMessage) -> None:
        """Remember the PodsReady and admission check states already on the log."""
        if message.headers.get("Kq-Type") not in ("WorkloadPodsReady", "AdmissionCheckStateChanged"):
            return
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            return
        # What this watcher publishes comes back here later: a state it already holds is newer
        # than the log's echo of an earlier one, so the log only fills in what it does not know.
        if isinstance(event, types.WorkloadPodsReady):
            self.pods_ready.setdefault((event.workload.namespace, event.workload.name), (event.ready, event.reason))
        elif isinstance(event, types.AdmissionCheckStateChanged):
            key = (event.workload.namespace, event.workload.name, event.check)
            self.check_states.setdefault(key, _check_view(event))

    async def run(self, kinds: tuple[str, ...] = WATCHED_KINDS) -> None:
        """Watch ``kinds`` forever, each once the kinds its conversion reads were listed (cancel to stop)."""

        async def after_reads(kind: str) -> None:
            for needed in _READS.get(kind, ()):
                if needed in kinds:
                    await self.synced[needed].wait()
            await self.watch(kind)

        await asyncio.gather(*(after_reads(kind) for kind in kinds))

    # -- watching ---------------------------------------------------------------------------------

    async def watch(self, kind: str) -> None:
        """Watch one kind forever (cancel to stop); a kind the cluster does not serve is probed for."""
        selector, fields = self._selector(kind), self._field_selector(kind)
        ref = await self._until_served(kind, self._refs(kind), selector, fields)
        async for item in kube.watch_objects(self.api, ref, label_selector=selector, field_selector=fields):
            try:
                if isinstance(item, kube.Resynced):
                    await self._resynced(kind, list(item.objects), resource_version=item.resource_version)
                    self.synced[kind].set()
                else:
                    await self._changed(kind, item.type, item.object)
            except Exception:  # a bad object never stops the watch
                log.exception("watch_event_failed", kind=kind)

    def _refs(self, kind: str) -> tuple[kube.ResourceRef, ...]:
        """Where ``kind`` may be served, the preferred version first."""
        if kind in _INPUT_REFS:
            return (_INPUT_REFS[kind],)
        if kind == "Topology":
            return nodes.TOPOLOGY_REFS
        if kind == "Node":
            return (resources.NODES,)
        if kind == "PodUsage":
            return (BOUND_PODS_REF,)
        return (kube.ref_for(_API_VERSIONS.get(kind, "kueue.x-k8s.io/v1beta2"), kind),)

    def _field_selector(self, kind: str) -> str | None:
        """Only pods bound to a node can take node capacity (A.2.2)."""
        return nodes.BOUND_PODS if kind == "PodUsage" else None

    def _selector(self, kind: str) -> str | None:
        """Jobs are listed by the queue-name label unless jobs without it are managed too."""
        if kind in JOB_KINDS and not self.manage_jobs_without_queue_name:
            return workloads.QUEUE_LABEL
        return None

    async def _until_served(
        self, kind: str, refs: tuple[kube.ResourceRef, ...], selector: str | None, fields: str | None = None
    ) -> kube.ResourceRef:
        """Return the first of ``refs`` the cluster serves, once it serves one; until then ``kind`` counts as
        listed and empty (a Topology: v1beta2, else v1alpha1 of an older Kueue).

        Kueue sets an integration up only once its CRD exists (jobframework setup.go).
        Any other error (403 without RBAC for the kind, the server unreachable) is left
        to watch_objects, which retries with backoff; the kind counts as listed meanwhile,
        so the kinds that read it are not held back.
        """
        warned = False
        while True:
            for ref in refs:
                try:
                    await kube.list_objects(self.api, ref, label_selector=selector, field_selector=fields)
                except kube_errors.NotFoundError:
                    continue
                except kube_errors.KubeError as err:
                    log.warning("kind_not_listed", kind=kind, api_version=ref.api_version, error=str(err))
                    self.synced[kind].set()
                    return self._served(kind, refs[0])
                return self._served(kind, ref)
            if not warned:
                versions = [ref.api_version for ref in refs]
                log.warning("kind_not_served", kind=kind, api_versions=versions, retry_in=self.probe_seconds)
                warned = True
            self.synced[kind].set()
            await asyncio.sleep(self.probe_seconds)

    def _served(self, kind: str, ref: kube.ResourceRef) -> kube.ResourceRef:
        if kind == "Topology":
            self.topology_ref = ref
        return ref

    # -- changes --------------------------------------------------------------------------------------

    async def _resynced(self, kind: str, objects: list[dict[str, Any]], *, resource_version: str = "") -> None:
        # The dedup id names the relist: a constant one would swallow the deletion of a re-created namesake.
        version = f"resync@{resource_version}" if resource_version else f"resync@{time.time_ns()}"
        if kind in JOB_KINDS:
            await self._resynced_jobs(kind, objects, version=version)
            return
        if kind in INPUT_KINDS:
            self.objects[kind] = {(_meta(o).get("namespace", ""), _meta(o).get("name", "")): o for o in objects}
            await self._reconvert(trigger=version)
            return
        if kind == WORKLOAD_KIND:
            for obj in objects:
                await self._workload_object_changed(obj)
            return
        if kind in TAS_KINDS:
            await self._resynced_tas(kind, objects, version=version)
            return
        live = {self._key(kind, obj) for obj in objects}
        for namespace, name in sorted(self.known[kind] - live):
            await self._publish(types.ObjectDeleted(kind=kind, namespace=namespace, name=name), version=version)
        if kind == "LocalQueue":
            self.local_queues = set(live)
        if kind == "WorkloadPriorityClass":
            self.workload_priority_classes = {name for _, name in live}
        for obj in objects:
            await self._changed(kind, "ADDED", obj, reconvert=False)
        if kind == "WorkloadPriorityClass" or (kind == "LocalQueue" and self.manage_jobs_without_queue_name):
            await self._reconvert(trigger=version)

    async def _changed(self, kind: str, change: str, obj: dict[str, Any], *, reconvert: bool = True) -> None:
        if kind == WORKLOAD_KIND:
            if change != "DELETED":
                await self._workload_object_changed(obj)
            return
        if kind in JOB_KINDS:
            await self._job_changed(kind, change, obj)
            return
        if kind in INPUT_KINDS:
            await self._input_changed(kind, change, obj)
            return
        if kind in TAS_KINDS:
            await self._tas_changed(kind, change, obj)
            return
        meta = _meta(obj)
        namespace, name = self._key(kind, obj)
        version = str(meta.get("resourceVersion") or "")
        if change == "DELETED":
            await self._publish(
                types.ObjectDeleted(kind=kind, namespace=namespace, name=name, uid=meta.get("uid", "")),
                version=version,
            )
        else:
            fact = convert.kueue_fact(obj, now_ms=_now_ms())
            self._log_rejection(fact)
            await self._publish(fact, version=version)
        if reconvert:
            await self._defaults_changed(kind, change, (namespace, name), version=version)

    async def _defaults_changed(self, kind: str, change: str, key: Key, *, version: str) -> None:
        """Keep the LocalQueues and WorkloadPriorityClasses conversions read; a ``default`` one
        appearing changes what jobs without a queue or a priority class get."""
        if kind == "LocalQueue":
            (self.local_queues.discard if change == "DELETED" else self.local_queues.add)(key)
        elif kind == "WorkloadPriorityClass":
            (self.workload_priority_classes.discard if change == "DELETED" else self.workload_priority_classes.add)(
                key[1]
            )
        else:
            return
        if kind == "LocalQueue" and not self.manage_jobs_without_queue_name:
            return  # only jobs without a queue label go to the default LocalQueue
        if key[1] == workloads.DEFAULT_LOCAL_QUEUE and change != "DELETED":
            await self._reconvert(trigger=f"{kind}@{version}")

    async def _resynced_tas(self, kind: str, objects: list[dict[str, Any]], *, version: str) -> None:
        """A fresh list of Topologies, Nodes or bound pods: the ones gone are deleted, the rest published if changed."""
        fact_kind = nodes.FACT_KIND[kind]
        live = {nodes.key_of(kind, obj) for obj in objects}
        for namespace, name in sorted(self.known[fact_kind] - live):
            await self._publish(types.ObjectDeleted(kind=fact_kind, namespace=namespace, name=name), version=version)
        for obj in objects:
            await self._tas_changed(kind, "ADDED", obj)

    async def _tas_changed(self, kind: str, change: str, obj: dict[str, Any]) -> None:
        """A Topology, Node or bound pod changed: its fact, published only if it differs from the last one
        (``_publish``), so heartbeats and status writes that TAS does not read publish nothing."""
        fact_kind = nodes.FACT_KIND[kind]
        namespace, name = nodes.key_of(kind, obj)
        version = str(_meta(obj).get("resourceVersion") or "")
        if change == "DELETED":
            uid = str(_meta(obj).get("uid") or "")
            await self._publish(
                types.ObjectDeleted(kind=fact_kind, namespace=namespace, name=name, uid=uid), version=version
            )
            return
        fact = nodes.tas_fact(kind, obj, now_ms=_now_ms())
        if fact is None:
            return  # a TAS pod: counted through its workload's assignment
        self._log_rejection(fact)
        await self._publish(fact, version=version)

    async def _input_changed(self, kind: str, change: str, obj: dict[str, Any]) -> None:
        """A PriorityClass, RuntimeClass or LimitRange changed: keep it, convert the jobs again.

        Workloads already published keep their PriorityClass value (``previous``), and
        started ones are not converted again (``_sync_job``): only pending ones change.
        """
        key = (str(_meta(obj).get("namespace") or ""), str(_meta(obj).get("name") or ""))
        if change == "DELETED":
            self.objects[kind].pop(key, None)
        else:
            self.objects[kind][key] = obj
        await self._reconvert(trigger=f"{kind}@{_meta(obj).get('resourceVersion', '')}")

    async def _job_changed(self, kind: str, change: str, obj: dict[str, Any]) -> None:
        key = (_namespace(obj), str(_meta(obj).get("name") or ""))
        version = str(_meta(obj).get("resourceVersion") or "")
        before = self.objects[kind].get(key)
        if kind == "Pod" and before is not None and (old_group := pods.group_name(before)) != pods.group_name(obj):
            self._index_group(key, old_group, present=False)  # Kueue forbids this; keep the old group right anyway
            await self._sync_group((key[0], old_group), version=version)
        if change == "DELETED":
            self.objects[kind].pop(key, None)
            self._forget_owner(obj)
        else:
            self.objects[kind][key] = obj
            self._remember_owner(kind, obj)
        if kind == "Pod":
            await self._pods_progress(obj, version=version)
        if kind == "Pod" and (group := pods.group_name(obj)):
            self._index_group(key, group, present=change != "DELETED")
            await self._sync_group((key[0], group), version=version)
        elif change == "DELETED":
            wl_key = self._workload_key(kind, obj)
            if wl_key is not None:
                await self._delete_workload(wl_key, version=version, uid=str(_meta(obj).get("uid") or ""))
        else:
            await self._sync_job(kind, obj, version=version)

    async def _resynced_jobs(self, kind: str, objects: list[dict[str, Any]], *, version: str) -> None:
        """A fresh list of one job kind: replace what is kept, delete the workloads gone, convert the rest."""
        for obj in self.objects[kind].values():
            self._forget_owner(obj)
        self.objects[kind] = {(_namespace(o), str(_meta(o).get("name") or "")): o for o in objects}
        for obj in objects:
            self._remember_owner(kind, obj)
        if kind == "Pod":
            self.groups = {}
            for key, pod in self.objects["Pod"].items():
                if group := pods.group_name(pod):
                    self._index_group(key, group, present=True)
        live = {k for obj in objects if self._managed(kind, obj) and (k := self._workload_key(kind, obj))}
        gone = {k for k in self.known["Workload"] if self.sources.get(k, "Job") == kind} - live
        for key in sorted(gone):
            await self._delete_workload(key, version=version)
        await self._convert_all(kinds=(kind,), trigger="")

    async def _reconvert(self, *, trigger: str) -> None:
        """Convert every job kept again: what conversions read has changed."""
        await self._convert_all(kinds=JOB_KINDS, trigger=trigger)

    async def _convert_all(self, *, kinds: tuple[str, ...], trigger: str) -> None:
        for kind in kinds:
            for key in sorted(self.objects[kind]):
                obj = self.objects[kind].get(key)
                if obj is None or (kind == "Pod" and pods.group_name(obj)):
                    continue
                version = str(_meta(obj).get("resourceVersion") or "")
                await self._sync_job(kind, obj, version=f"{version}~{trigger}" if trigger else version)
            if kind == "Pod":
                for group_key in sorted(self.groups):
                    await self._sync_group(group_key, version=trigger or self._group_version(group_key))

    # -- one job --------------------------------------------------------------------------------------

    async def _sync_job(self, kind: str, obj: dict[str, Any], *, version: str) -> None:
        """Publish what a Job, a JobSet or a single Pod stands for now."""
        wl_key = self._workload_key(kind, obj)
        if wl_key is None:
            return
        now_ms = _now_ms()
        fact = _CONVERTERS[kind](obj, now_ms=now_ms, context=self._context(wl_key))
        if fact is None:
            if self.sources.get(wl_key) == kind:  # it was managed and no longer is
                await self._delete_workload(wl_key, version=version)
            return
        if isinstance(fact, types.WorkloadObserved) and wl_key in self.known["Workload"] and self._running(kind, [obj]):
            # pod sets are immutable while quota is reserved (SEMANTICS §1.6): ignore our own injections
            await self._job_progress(kind, obj, wl_key, version=version, now_ms=now_ms)
            return
        self._log_rejection(fact)
        await self._publish(self._keep_active(wl_key, fact), version=version, source=kind)
        if not isinstance(fact, types.ObjectRejected):  # a later rejection of this job is news again
            self.last_published.pop((kind, _namespace(obj), str(_meta(obj).get("name") or "")), None)
        await self._job_progress(kind, obj, wl_key, version=version, now_ms=now_ms)

    async def _job_progress(self, kind: str, obj: dict[str, Any], wl_key: Key, *, version: str, now_ms: int) -> None:
        """WorkloadStopped of an evicted Job or JobSet that no longer runs, and its PodsReady."""
        if kind == "Job":
            await self._report_stopped(obj, now_ms=now_ms)
        if kind == "JobSet":
            running = progress.jobset_active(obj) or (obj.get("spec") or {}).get("suspend") is not True
            await self._report_mark_stopped(wl_key, [obj], running=running, now_ms=now_ms)
        if kind in ("Job", "JobSet") and wl_key in self.known["Workload"]:
            ready = progress.job_ready(obj) if kind == "Job" else progress.jobset_ready(obj)
            await self._report_pods_ready(wl_key, started=progress.started(kind, [obj]), ready=ready, version=version)

    async def _sync_group(self, group_key: Key, *, version: str) -> None:
        """Publish what the managed pods of one pod group stand for now (nothing while it is incomplete)."""
        namespace, group = group_key
        members = [self.objects["Pod"][(namespace, name)] for name in sorted(self.groups.get(group_key, ()))]
        context = self._context(group_key)
        managed = [pod for pod in members if pods.is_managed(pod, context)]
        if not managed:
            if self.sources.get(group_key) == "Pod":
                await self._delete_workload(group_key, version=version)
            return
        fact = pods.group_facts(managed, now_ms=_now_ms(), context=context)
        if fact is None:
            return
        if (
            isinstance(fact, types.WorkloadObserved)
            and group_key in self.known["Workload"]
            and pods.is_running(managed)
        ):
            return
        self._log_rejection(fact)
        await self._publish(self._keep_active(group_key, fact), version=version, source="Pod")
        if not isinstance(fact, types.ObjectRejected):  # a later rejection of a member is news again
            for pod in managed:
                self.last_published.pop(("Pod", namespace, str(_meta(pod).get("name") or "")), None)

    def _keep_active(self, wl_key: Key, fact: types.Fact) -> types.Fact:
        """A job's workload keeps the ``spec.active`` last published for it (set on its Workload object)."""
        known = self.workloads.get(wl_key)
        if isinstance(fact, types.WorkloadObserved) and known is not None and not known.spec.active:
            spec = msgspec.structs.replace(fact.workload.spec, active=False)
            return types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, spec=spec))
        return fact

    async def _delete_workload(self, key: Key, *, version: str, uid: str = "") -> None:
        known = self.workloads.get(key)
        uid = uid or (known.metadata.uid if known is not None else "")
        await self._publish(
            types.ObjectDeleted(kind="Workload", namespace=key[0], name=key[1], uid=uid), version=version
        )

    def _running(self, kind: str, objs: list[dict[str, Any]]) -> bool:
        """A started job: its workload's template now carries the flavor's node selector and
        tolerations, which the dispatcher put there, and must not be reported as the workload's
        (also after a restart: ``known`` comes from the log, ``learn_from_log``)."""
        if kind == "Pod":
            return pods.is_running(objs)
        return not any((obj.get("spec") or {}).get("suspend", False) for obj in objs)

    def _managed(self, kind: str, obj: dict[str, Any]) -> bool:
        """Whether a job is one Kueue manages (an invalid one counts: its last valid workload stays)."""
        context = self._context(None)
        if kind == "Pod":
            return pods.is_managed(obj, context)
        ref = workloads.job_ref(obj, kind=kind, api_version=_API_VERSIONS[kind])
        try:
            return (
                not workloads.owned_by_managed_job(ref, context)
                and workloads.queue_name(ref, context) is not None
            )
        except manifests.ManifestError:
            return True

    def _workload_key(self, kind: str, obj: dict[str, Any]) -> Key | None:
        meta = _meta(obj)
        name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
        if kind == "Pod":
            return pods.workload_key(obj)
        if kind == "JobSet":
            return _namespace(obj), jobsets.workload_name_for_jobset(name, uid)
        if kind == "Job":
            return _namespace(obj), jobs.workload_name_for_job(name, uid)
        return None

    def _context(self, wl_key: Key | None) -> workloads.Context:
        """What converting the job of workload ``wl_key`` reads (None: only whether it is managed)."""
        if wl_key is None:
            return workloads.Context(
                manage_jobs_without_queue_name=self.manage_jobs_without_queue_name, managed_owners=self.owners.keys()
            )
        return workloads.Context(
            manage_jobs_without_queue_name=self.manage_jobs_without_queue_name,
            local_queues=self.local_queues,
            workload_priority_classes=self.workload_priority_classes,
            priority_classes=self._priority_classes(),
            managed_owners=self.owners.keys(),
            runtime_classes={
                name: fixed
                for (_, name), obj in self.objects["RuntimeClass"].items()
                if isinstance(fixed := _field(obj, "overhead", "podFixed"), dict)
            },
            limit_ranges=[
                item
                for (namespace, _), obj in sorted(self.objects["LimitRange"].items())
                if namespace == wl_key[0] and isinstance(limits := _field(obj, "spec", "limits"), list)
                for item in limits
            ],
            previous=self.workloads.get(wl_key),
        )

    def _priority_classes(self) -> dict[str, workloads.PriorityClass]:
        found = {}
        for (_, name), obj in self.objects["PriorityClass"].items():
            value = workloads.parse_int(obj.get("value"))
            if value is not None:
                found[name] = workloads.PriorityClass(
                    name=name, value=value, global_default=obj.get("globalDefault") is True
                )
        return found

    def _remember_owner(self, kind: str, obj: dict[str, Any]) -> None:
        if kind in ("Job", "JobSet") and (uid := str(_meta(obj).get("uid") or "")):
            self.owners[uid] = (_namespace(obj), str(_meta(obj).get("name") or ""))

    def _forget_owner(self, obj: dict[str, Any]) -> None:
        self.owners.pop(str(_meta(obj).get("uid") or ""), None)

    def _index_group(self, pod_key: Key, group: str, *, present: bool) -> None:
        members = self.groups.setdefault((pod_key[0], group), set())
        if present:
            members.add(pod_key[1])
        else:
            members.discard(pod_key[1])
            if not members:
                del self.groups[(pod_key[0], group)]

    def _group_version(self, group_key: Key) -> str:
        """The newest resourceVersion among a group's pods (decimal strings compare by length first)."""
        versions = [
            str(_meta(self.objects["Pod"][(group_key[0], name)]).get("resourceVersion") or "")
            for name in self.groups.get(group_key, ())
        ]
        return max(versions, key=lambda v: (len(v), v), default="")

    # -- evictions ------------------------------------------------------------------------------------

    async def _report_stopped(self, job: dict[str, Any], *, now_ms: int) -> None:
        """WorkloadStopped for an evicted Job that no longer runs, once per eviction (jobs.stop_version)."""
        stopped = jobs.stopped_fact(job, now_ms=now_ms)
        if stopped is None:
            return
        key, version = (stopped.workload.namespace, stopped.workload.name), jobs.stop_version(job)
        if self.stopped.get(key) == version:
            return
        await self.bus.publish(subjects.fact_message(stopped, version=version))
        self.stopped[key] = version
        self.published += 1
        log.info("workload_stopped", workload=stopped.workload.key, reason=stopped.reason, version=version)

    async def _report_mark_stopped(
        self, wl_key: Key, objs: list[dict[str, Any]], *, running: bool, now_ms: int
    ) -> None:
        """WorkloadStopped for a JobSet or Pod workload the dispatcher marked evicted, once nothing of it
        runs; once per eviction (the mark's sequence is the Msg-Id version, as for a Job)."""
        mark = progress.eviction_mark(objs)
        if mark is None or running:
            return
        reason, seq = mark
        version = f"evict-{seq}"
        if self.stopped.get(wl_key) == version:
            return
        known = self.workloads.get(wl_key)
        ref = types.WorkloadRef(namespace=wl_key[0], name=wl_key[1], uid=known.metadata.uid if known else "")
        stopped = types.WorkloadStopped(workload=ref, reason=reason, at_ms=now_ms)
        await self.bus.publish(subjects.fact_message(stopped, version=version))
        self.stopped[wl_key] = version
        self.published += 1
        log.info("workload_stopped", workload=ref.key, reason=reason, version=version)

    async def _pods_progress(self, pod: dict[str, Any], *, version: str) -> None:
        """After a change to a managed pod: WorkloadStopped once no marked pod of its workload runs, and its
        workload's PodsReady (a single pod: PodReady; a group: every pod of the counted total ready)."""
        if not pods.is_managed(pod, self._context(None)):
            return
        wl_key = pods.workload_key(pod)
        group = pods.group_name(pod)
        if group:
            members = [
                self.objects["Pod"][(wl_key[0], name)]
                for name in sorted(self.groups.get((wl_key[0], group), ()))
                if (wl_key[0], name) in self.objects["Pod"]
            ]
        else:
            live = self.objects["Pod"].get((wl_key[0], str(_meta(pod).get("name") or "")))
            members = [live] if live is not None else []
        now_ms = _now_ms()
        await self._report_mark_stopped(wl_key, [pod, *members], running=pods.is_running(members), now_ms=now_ms)
        if wl_key not in self.known["Workload"] or not members:
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
        await self._report_pods_ready(wl_key, started=progress.started("Pod", members), ready=ready, version=version)

    async def _report_pods_ready(self, wl_key: Key, *, started: bool, ready: bool, version: str) -> None:
        """WorkloadPodsReady when the workload's PodsReady (status, reason) changes; nothing before it started once."""
        previous = self.pods_ready.get(wl_key)
        if previous is None and not started:
            return  # not admitted yet: Kueue's WaitForStart, nothing to report
        current = progress.next_pods_ready(previous, started=started, ready=ready)
        if current == previous:
            return
        known = self.workloads.get(wl_key)
        ref = types.WorkloadRef(namespace=wl_key[0], name=wl_key[1], uid=known.metadata.uid if known else "")
        fact = types.WorkloadPodsReady(workload=ref, ready=current[0], reason=current[1], at_ms=_now_ms())
        await self.bus.publish(subjects.fact_message(fact, version=f"{version}.{current[1]}"))
        self.pods_ready[wl_key] = current
        self.published += 1

    async def _workload_object_changed(self, obj: dict[str, Any]) -> None:
        """A Workload object of a job's workload: report its admission check entries that a check controller
        changed, and a flip of ``spec.active`` (a WorkloadObserved of the job's workload with that value)."""
        meta = _meta(obj)
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        known = self.workloads.get(key)
        if known is None or known.owner is None:
            return  # not a job's workload the log knows (standalone Workloads are not watched here)
        version = str(meta.get("resourceVersion") or "")
        ref = types.WorkloadRef(namespace=key[0], name=key[1], uid=known.metadata.uid)
        status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
        for entry in status.get("admissionChecks") or []:
            if isinstance(entry, dict):
                await self._check_entry(ref, entry, version=version)
        active = (obj.get("spec") or {}).get("active", True) is not False
        if active != known.spec.active:
            changed = msgspec.structs.replace(known, spec=msgspec.structs.replace(known.spec, active=active))
            await self._publish(
                types.WorkloadObserved(workload=changed), version=version, source=self.sources.get(key, "")
            )

    async def _check_entry(self, ref: types.WorkloadRef, entry: dict[str, Any], *, version: str) -> None:
        """AdmissionCheckStateChanged for one ``status.admissionChecks[]`` entry that differs from what was
        last seen, unless it is a Pending entry the dispatcher wrote itself (added, or reset after eviction)."""
        try:
            fact = types.AdmissionCheckStateChanged(
                workload=ref,
                check=str(entry.get("name") or ""),
                state=entry.get("state") or "Pending",
                message=str(entry.get("message") or ""),
                requeue_after_seconds=workloads.parse_int(entry.get("requeueAfterSeconds")),
                pod_set_updates=msgspec.convert(
                    entry.get("podSetUpdates") or [], list[models.PodSetUpdate], str_keys=True
                ),
                at_ms=manifests.parse_time_ms(entry.get("lastTransitionTime")) or _now_ms(),
            )
            msgspec.convert(msgspec.to_builtins(fact), types.AdmissionCheckStateChanged)  # the state is one of four
        except (msgspec.ValidationError, manifests.ManifestError, TypeError) as err:
            log.warning("admission_check_entry_invalid", workload=ref.key, entry=entry, error=str(err))
            return
        key = (ref.namespace, ref.name, fact.check)
        view = _check_view(fact)
        if self.check_states.get(key) == view:
            return
        self.check_states[key] = view
        if fact.state == "Pending" and (not fact.message or fact.message.startswith(_OWN_CHECK_MESSAGE)):
            return
        await self.bus.publish(subjects.fact_message(fact, version=f"{version}.{fact.check}"))
        self.published += 1
        log.info("admission_check_state", workload=ref.key, check=fact.check, state=fact.state)

    # -- publishing -----------------------------------------------------------------------------------

    def _key(self, kind: str, obj: dict[str, Any]) -> Key:
        """``(namespace, name)`` of a Kueue object (namespace "" for cluster-scoped kinds)."""
        meta = _meta(obj)
        return meta.get("namespace", "") if kind == "LocalQueue" else "", meta.get("name", "")

    def _log_rejection(self, fact: types.Fact) -> None:
        if isinstance(fact, types.ObjectRejected):
            log.warning(
                "object_rejected",
                kind=fact.kind,
                name=fact.name,
                namespace=fact.namespace,
                field=fact.field,
                problem=fact.problem,
            )

    async def _publish(self, fact: types.Fact, *, version: str, source: str = "") -> None:
        """Publish ``fact`` unless it changes nothing; ``source`` names the job kind of a workload's fact.

        A job's facts are keyed by resourceVersion and content: the same object version
        converted again after a change to what conversions read must not be dropped as a
        duplicate.
        """
        kind, namespace, name = subjects.fact_identity(fact)
        data = codec.encode(fact)
        identity = (kind, namespace, name)
        # A rejection seen again (a status write, a conversion redone) is the same rejection, whenever seen.
        same_as = (
            codec.encode(msgspec.structs.replace(fact, at_ms=0)) if isinstance(fact, types.ObjectRejected) else data
        )
        if isinstance(fact, types.ObjectDeleted):
            if (namespace, name) not in self.known.get(kind, set()):
                return
            self.known[kind].discard((namespace, name))
            self.last_published.pop(identity, None)
            if kind == "Workload":
                self.workloads.pop((namespace, name), None)
                self.sources.pop((namespace, name), None)
        elif self.last_published.get(identity) == same_as:
            return  # nothing that matters changed (a status write, a resync)
        else:
            self.last_published[identity] = same_as
            if not isinstance(fact, types.ObjectRejected):
                self.known.setdefault(kind, set()).add((namespace, name))
            if isinstance(fact, types.WorkloadObserved):
                self.workloads[(namespace, name)] = fact.workload
            if kind == "Workload" and not isinstance(fact, types.ObjectRejected):
                owner = fact.workload.owner if isinstance(fact, types.WorkloadObserved) else None
                self.sources[(namespace, name)] = source or (owner.kind if owner else "")
            if source:
                version = f"{version}.{hashlib.sha256(data).hexdigest()[:8]}"
        await self.bus.publish(subjects.fact_message(fact, version=version))
        self.published += 1


def _check_view(fact: types.AdmissionCheckStateChanged) -> tuple[Any, ...]:
    """What of a check entry counts as a change: state, message, requeueAfterSeconds, podSetUpdates."""
    return (fact.state, fact.message, fact.requeue_after_seconds, tuple(fact.pod_set_updates))


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _field(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None where a step is missing or not a mapping."""
    for step in path:
        obj = obj.get(step) if isinstance(obj, dict) else None
    return obj


def _namespace(obj: dict[str, Any]) -> str:
    return str(_meta(obj).get("namespace") or "default")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def serve_watcher(
    *,
    nats_url: str,
    api: Any,
    stop: asyncio.Event,
    manage_jobs_without_queue_name: bool = False,
    connect: Callable[[str], Awaitable[Bus]] = nats_bus.connect,
) -> None:
    """Run the watcher until ``stop`` is set (``connect``: how to get the bus)."""
    bus = await connect(nats_url)
    watcher = Watcher(bus=bus, api=api, manage_jobs_without_queue_name=manage_jobs_without_queue_name)
    await watcher.learn_from_log()
    log.info(
        "service_started", kinds=list(WATCHED_KINDS), manage_jobs_without_queue_name=manage_jobs_without_queue_name
    )
    try:
        await run_until_stopped(stop, watcher.run())
    finally:
        await bus.close()
        log.info("service_stopped", published=watcher.published)
