"""The watcher service: list+watch the cluster and put facts on the log.

One watch loop per kind, through kubernetes-asyncio: Kueue's v1beta2 objects
(AdmissionChecks with their Active condition among them), Namespaces (their labels,
for namespaceSelector), the PriorityClasses a job's priority may name, and the jobs Kueue queues -- batch/v1
Jobs (with the ``kueue.x-k8s.io/queue-name`` label, or all of them with
``manage_jobs_without_queue_name``), JobSets, and Pods (single or in groups). The
conversion is pure (:mod:`kueue_es.services.watcher.convert` for Kueue's objects,
:mod:`kueue_es.jobframework` for the jobs); the watcher keeps what a conversion
needs to know about the rest of the cluster (LocalQueues, priority classes, the
jobs that own other jobs, the workload it published before) and publishes the
facts with a ``Nats-Msg-Id`` made of kind, object, resourceVersion and content, so a
re-delivered watch event is deduplicated.

:meth:`Watcher.run` starts a kind only after the kinds its conversion reads have
been listed once (as Kueue's controllers wait for their caches), and a change to
one of those (a ``default`` LocalQueue, a PriorityClass) converts the jobs again. A
kind the cluster does not serve (no JobSet CRD) is probed again after
``probe_seconds``, then twice as long each time up to ``probe_max_seconds`` (1 s to 2 minutes,
Kueue's backoff while it waits for an integration's CRD); the others go on. After a relist (start-up, or 410 Gone) every
object the log knows but the cluster no longer has gets an ObjectDeleted fact, so
deletions during a gap are not lost; and since the start-up fold remembers the last fact the
log holds about each object (:func:`kueue_es.services.watcher.publishing.remember`), the relist
after a restart publishes only the objects that changed, not every object again. A Job the dispatcher stopped for an eviction
gives one WorkloadStopped per eviction once its pods are gone, however often it is
seen (Msg-Id and memory keyed by the eviction, also across restarts); so does a
stopped JobSet once no Job of it is active, and a Pod workload once none of its
marked pods runs (the dispatcher deletes them).

It also reports how far started jobs got and what admission check controllers
say (:mod:`kueue_es.services.watcher.progress`, reported by
:mod:`kueue_es.services.watcher.reporting`): WorkloadPodsReady when a job's PodsReady
(status, reason) changes (SEMANTICS-ADVANCED C.2), and, from the Workload objects
(watched too), AdmissionCheckStateChanged when an entry of
``status.admissionChecks`` changes (B.5) and a WorkloadObserved when ``spec.active``
is flipped (deactivation by hand, reactivation).

For Topology-Aware Scheduling it watches Topologies (v1beta2, else v1alpha1), Nodes
and the pods bound to nodes (:mod:`kueue_es.services.watcher.nodes`): TopologyObserved,
NodeObserved, PodObserved and their ObjectDeleted, each published only when its
content changes (a kubelet heartbeat publishes nothing), relisted on 410 like the
other kinds, and known from the log after a restart.

Kueue's manager configuration file (``--config``, Kueue's format) is read at start and
polled (:mod:`kueue_es.services.watcher.config_file`): ConfigurationObserved at start and
on each change; its integrations.frameworks choose which job kinds are watched.

This module is the wiring and the only async runner: :class:`Watcher` lists and
watches each kind through a :class:`kueue_es.services.watcher.reading.KubeReader`
and hands each event to the collaborator for its family -- Kueue's objects
(``kueue_tracking``), the jobs and pod groups (``job_tracking``,
``pod_tracking``), the prebuilt Workloads jobs adopt and the Workload objects they
name (``prebuilt_tracking``), the objects conversions read (``inputs``), the TAS kinds
(``topology_tracking``), the Workload objects and job progress (``reporting``) --
which all publish through one :class:`kueue_es.services.watcher.publishing.Publisher`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import msgspec
import structlog

from kueue_es.events import codec, manager_config, slices, subjects
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus, BusError
from kueue_es.jobframework import pods, webhooks, workloads
from kueue_es.projections.cluster import ClusterState
from kueue_es.projections.topology import TopologyState
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import objects, resources
from kueue_es.services.runtime import StartPoint, fold_message, log_mismatch, require_from_start, run_until_stopped
from kueue_es.services.watcher import kinds as watched
from kueue_es.services.watcher import nodes, publishing, standalone
from kueue_es.services.watcher.config_file import DEFAULT_POLL_SECONDS, ConfigFile
from kueue_es.services.watcher.config_file import load as load_config
from kueue_es.services.watcher.dra_tracking import DeviceTracker
from kueue_es.services.watcher.inputs import ConversionInputs
from kueue_es.services.watcher.job_tracking import JobTracker
from kueue_es.services.watcher.kueue_tracking import KueueTracker
from kueue_es.services.watcher.publishing import Publisher
from kueue_es.services.watcher.reading import KubeReader, Listed
from kueue_es.services.watcher.reporting import ProgressReporter
from kueue_es.services.watcher.topology_tracking import TopologyTracker

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

log = structlog.get_logger(__name__)

#: The label selector of the jobs without the queue-name label (:meth:`Watcher.watch_unqueued_owners`).
UNQUEUED = f"!{workloads.QUEUE_LABEL}"
#: How long the watcher waits before it looks again for a kind the cluster does not serve; doubled after each look
#: (Kueue's baseBackoffWaitForIntegration, jobframework/setup.go).
PROBE_SECONDS = 1.0
#: The longest wait between two looks (Kueue's maxBackoffWaitForIntegration).
PROBE_MAX_SECONDS = 120.0

_TAS_FACT_TYPES = ("TopologyObserved", "NodeObserved", "PodObserved", "ObjectDeleted")


class ApiReader:
    """The :class:`~kueue_es.services.watcher.reading.KubeReader` over a kubernetes-asyncio client
    (``list_objects`` and ``watch_objects`` of :mod:`kueue_es.services.kube.client`)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def list(
        self, ref: kube.ResourceRef, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> Listed:
        items, version = await kube.list_objects(
            self.api, ref, label_selector=label_selector, field_selector=field_selector
        )
        return cast(list[objects.KubeObject], items), version

    def watch(
        self, ref: kube.ResourceRef, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> AsyncIterator[kube.WatchEvent | kube.Resynced]:
        return kube.watch_objects(self.api, ref, label_selector=label_selector, field_selector=field_selector)


class Watcher:
    """Turns watch events into facts on ``bus``; knows which objects the log holds.

    ``api``: the API server, a kubernetes-asyncio client or any :class:`KubeReader`.
    ``manage_jobs_without_queue_name``: Kueue's option (default false): Jobs and
    JobSets without the queue-name label are managed too, and go to their
    namespace's ``default`` LocalQueue when it exists. ``probe_seconds``: how long before
    a kind the cluster does not serve is looked for again, doubled after each look up to ``probe_max_seconds``
    (Kueue's jobframework.WaitForAPI: 1 s to 2 minutes). ``config_path``: Kueue's manager
    configuration file (None: Kueue's defaults), ``config``: its settings as read at start-up
    (:func:`kueue_es.services.watcher.config_file.load`), ``feature_gates``: Kueue's
    ``--feature-gates`` value; the file is polled every ``config_poll_seconds``.
    """

    def __init__(
        self,
        *,
        bus: Bus,
        api: ApiClient | KubeReader,
        manage_jobs_without_queue_name: bool = False,
        probe_seconds: float = PROBE_SECONDS,
        probe_max_seconds: float = PROBE_MAX_SECONDS,
        config_path: Path | None = None,
        config: manager_config.ManagerConfig | None = None,
        feature_gates: str = "",
        config_poll_seconds: float = DEFAULT_POLL_SECONDS,
        batch_facts: bool = False,
    ) -> None:
        self.bus = bus
        self.reader: KubeReader = api if isinstance(api, KubeReader) else ApiReader(api)
        self.manage_jobs_without_queue_name = manage_jobs_without_queue_name
        self.probe_seconds = probe_seconds
        self.probe_max_seconds = probe_max_seconds
        self.topology_ref = nodes.TOPOLOGY_REFS[0]  # the Topology version the cluster serves
        self.synced: dict[str, asyncio.Event] = {kind: asyncio.Event() for kind in watched.WATCHED_KINDS}
        # the jobs without the queue-name label listed as owners (:meth:`watch_unqueued_owners`), by kind
        self.owners_synced: dict[str, asyncio.Event] = {kind: asyncio.Event() for kind in watched.JOB_KINDS}
        self.publisher = Publisher(bus=bus, kinds=watched.LOGGED_KINDS, batch_facts=batch_facts)
        initial = config or load_config(None, feature_gates=feature_gates)
        self.inputs = ConversionInputs(
            manage_jobs_without_queue_name=manage_jobs_without_queue_name,
            managed_jobs_namespace_selector=config.managed_jobs_namespace_selector if config is not None else None,
            external_owners=config.external_owners if config is not None else frozenset(),
            elastic_jobs=slices.gate_enabled(initial.configuration.feature_gates),
            finish_orphans=workloads.finish_orphans(initial.configuration.feature_gates),
            topology_aware_scheduling=initial.configuration.feature_gates.get("TopologyAwareScheduling", True),
            concurrent_admission=initial.configuration.feature_gates.get("ConcurrentAdmission", False),
            pod_integration_implicit="Pod" in webhooks.implicitly_enabled_kinds(config.frameworks if config else None),
            label_keys_to_copy=initial.label_keys_to_copy,
            annotations_to_copy=initial.annotations_to_copy,
        )
        self.reporter = ProgressReporter(
            publisher=self.publisher,
            clock=_now_ms,
            reclaimable_pods=initial.configuration.feature_gates.get("ReclaimablePods", True),
        )
        self.jobs = JobTracker(
            publisher=self.publisher,
            inputs=self.inputs,
            reporter=self.reporter,
            clock=_now_ms,
            read_workload=self._read_workload,
            read_job=self._read_job,
        )
        self.kueue = KueueTracker(
            publisher=self.publisher, inputs=self.inputs, reconvert=self.jobs.reconvert, clock=_now_ms
        )
        self.topology = TopologyTracker(publisher=self.publisher, clock=_now_ms)
        self.devices = DeviceTracker(publisher=self.publisher, clock=_now_ms)
        self.standalone = standalone.StandaloneTracker(
            publisher=self.publisher,
            reporter=self.reporter,
            clock=_now_ms,
            finish_orphans=self.inputs.finish_orphans,
            inputs=self.inputs,
        )
        self.config = ConfigFile(
            path=config_path,
            initial=initial,
            publisher=self.publisher,
            feature_gates=feature_gates,
            poll_seconds=config_poll_seconds,
            clock=_now_ms,
        )

    @property
    def published(self) -> int:
        """How many facts this watcher has published."""
        return self.publisher.published

    # -- start-up ---------------------------------------------------------------------------------

    async def learn_from_log(self, start: StartPoint | None = None) -> None:
        """Fold the log once so deletions that happened while no watcher ran can be detected.

        It also learns the last fact the log holds about each object (:func:`publishing.remember`), so
        a relist after the restart publishes only what differs from the log: an unchanged ClusterQueue,
        Job or finished Workload is not published again (the stream's duplicate window, which
        ``Nats-Msg-Id`` relies on, is long past after a restart of any length).

        ``start``: a snapshot of the log (kueue_es.snapshots) to fold on from, used only if it is of
        this log; its view is (topology, the facts the reporter and the configuration learn from,
        the count of ConfigurationObserved, the facts' memory). Without one on a purged log: LogPurgedError."""
        last = await self.bus.last_seq()
        state = ClusterState()
        topology = TopologyState()
        memory: dict[tuple[str, str, str], bytes] = {}
        start_seq = 1
        if start is not None and (problem := await log_mismatch(self.bus, start)) is not None:
            log.warning("checkpoint_not_used", checkpoint=start.origin, seq=start.seq, reason=problem)
            start = None
        if start is None:
            await require_from_start(self.bus, "watcher")
        else:
            state = start.state
            topology, learned, config_count, remembered = start.view
            memory = dict(remembered)
            for message in learned:
                self.reporter.learn(message)
                self.config.learn(message)
            self.config.count = config_count
            start_seq = start.seq + 1
            log.info("started_from_checkpoint", checkpoint=start.origin, seq=start.seq)
        if last >= start_seq and await self.bus.last_subject_seq(subjects.FACTS) >= start_seq:
            async for message in self.bus.read(subjects=(subjects.FACTS,), start_seq=start_seq):
                fold_message(state, message)
                if message.headers.get("Kq-Type") in _TAS_FACT_TYPES:
                    try:
                        topology.apply(codec.decode(message.data))
                    except codec.DecodeError:
                        pass
                self.reporter.learn(message)
                self.config.learn(message)
                publishing.remember(memory, message.data)
                if message.seq >= last or message.pending == 0:
                    break
        self.bus.folded_through(last)  # read to the end, or nothing it reads followed (a snapshot at the end)
        self.publisher.learn(state=state, topology=topology, memory=memory)

    async def run(self, kinds: tuple[str, ...] = watched.WATCHED_KINDS) -> None:
        """Publish the Configuration in force, then watch ``kinds`` forever, each once the kinds its conversion
        reads were listed (the jobs that may own it, with and without the queue-name label), and follow the
        configuration file (cancel to stop)."""
        await self.config.start()
        owner_kinds = self.unqueued_owner_kinds(kinds)
        disabled_kinds = self.disabled_owner_kinds(kinds)

        async def after_reads(kind: str) -> None:
            if kind in owner_kinds:
                # its jobs without the queue-name label first: the workloads of those that lost it stay
                # (:meth:`JobTracker.unqueued_jobs_listed`), not deleted as the jobs listed by the label lack them
                await self.owners_synced[kind].wait()
            for needed in watched.READS.get(kind, ()):
                if needed in kinds:
                    await self.synced[needed].wait()
                if needed in owner_kinds or needed in disabled_kinds:
                    await self.owners_synced[needed].wait()
            await self.watch(kind)

        await asyncio.gather(
            *(after_reads(kind) for kind in kinds),
            *(self.watch_unqueued_owners(kind) for kind in owner_kinds),
            *(self.watch_unqueued_owners(kind, enabled=False) for kind in disabled_kinds),
            self.config.follow(),
        )

    def unqueued_owner_kinds(self, kinds: tuple[str, ...]) -> tuple[str, ...]:
        """The job kinds of ``kinds`` whose jobs without the queue-name label are watched as owners
        (:meth:`watch_unqueued_owners`): while ``manageJobsWithoutQueueName`` is off (else every job is seen
        already), each kind that may own a job (a Job, an integration that suspends: not a Pod, nor a kind run
        through its pods, which the walk does not go through)."""
        if self.manage_jobs_without_queue_name:
            return ()
        return tuple(
            kind
            for kind in kinds
            if kind in watched.JOB_KINDS
            and kind != "Pod"
            and pods.is_job_owner(watched.API_VERSIONS.get(kind, ""), kind)
        )

    def disabled_owner_kinds(self, kinds: tuple[str, ...]) -> tuple[str, ...]:
        """The job kinds left out of ``kinds`` (their integrations not in ``integrations.frameworks``) that may
        own a job: Kueue walks through such an owner, never taking it as the ancestor (FindAncestorJobManagedByKueue
        reads any owner of a kind it has an integration for, enabled or not; Kueue PR #4824), so a Job of a
        JobSet an AppWrapper wraps is the AppWrapper's with the JobSet integration off. Watched as owners only
        (:meth:`watch_unqueued_owners` with ``enabled=False``)."""
        return tuple(
            kind
            for kind in watched.JOB_KINDS
            if kind not in kinds and kind != "Pod" and pods.is_job_owner(watched.API_VERSIONS.get(kind, ""), kind)
        )

    async def watch_unqueued_owners(self, kind: str, *, enabled: bool = True) -> None:
        """Watch the jobs of ``kind`` without the queue-name label forever, keeping of them only what walking a
        child's owners reads (:meth:`ConversionInputs.unqueued_owner_changed`): the job watches list by that
        label, and Kueue walks through owners that are not managed (FindAncestorJobManagedByKueue). The label
        selector ``!kueue.x-k8s.io/queue-name`` is the complement of :meth:`watch`'s, so no job is in both.
        Nothing is published from here but a running child of a managed job (:meth:`JobTracker.child_seen`: one
        without the label is Kueue's too, under its labelled ancestor); an owner newly kept converts its children
        again (their events may have come first: the two watches are separate streams).

        ``enabled=False``: ``kind``'s integration is off (:meth:`disabled_owner_kinds`), so its jobs are not
        watched otherwise: every one is watched here, labelled or not, kept as an owner that is never the
        ancestor, and none is reported as a child (Kueue runs no reconciler for the kind to suspend it)."""
        selector = UNQUEUED if enabled else None
        ref = await self._until_served(
            kind, self._refs(kind), selector, synced=self.owners_synced[kind], quiet=not enabled
        )
        async for item in self.reader.watch(ref, label_selector=selector):
            try:
                if isinstance(item, kube.Resynced):
                    listed = cast(list[objects.KubeObject], list(item.objects))
                    self.inputs.unqueued_owners_listed(kind, listed, enabled=enabled)
                    if enabled:
                        version = f"unqueued-resync@{item.resource_version}"
                        await self.jobs.unqueued_jobs_listed(kind, listed, version=version)
                    self.owners_synced[kind].set()
                    for obj in listed if enabled else ():
                        await self.jobs.child_seen(kind, obj)
                else:
                    await self.unqueued_owner_event(
                        kind, item.type, cast(objects.KubeObject, item.object), enabled=enabled
                    )
            except Exception:  # a bad object never stops the watch
                log.exception("watch_event_failed", kind=kind, unqueued=True)

    async def unqueued_owner_event(
        self, kind: str, change: str, obj: objects.KubeObject, *, enabled: bool = True
    ) -> None:
        """One job of ``kind`` without the queue-name label added, modified or deleted
        (:meth:`watch_unqueued_owners`): kept as an owner, and the jobs it controls converted again when it is
        newly kept (:meth:`JobTracker.owner_seen`). A running one with a managed ancestor is reported
        (:meth:`JobTracker.child_seen`): the dispatcher suspends it while that ancestor's workload is not admitted.
        ``enabled=False``: any job of a kind whose integration is off, kept as an owner only. A job whose
        queue-name label was taken off keeps its workload until it is deleted (:meth:`JobTracker.unqueued_job_changed`)."""
        if self.inputs.unqueued_owner_changed(kind, change, obj, enabled=enabled):
            await self.jobs.owner_seen(objects.uid_of(obj), trigger=f"owner@{objects.resource_version(obj)}")
        if not enabled:
            return
        await self.jobs.unqueued_job_changed(kind, change, obj)
        if change == "DELETED":
            self.jobs.children_running.pop(objects.uid_of(obj), None)
        else:
            await self.jobs.child_seen(kind, obj)

    # -- watching ---------------------------------------------------------------------------------

    async def watch(self, kind: str) -> None:
        """Watch one kind forever (cancel to stop); a kind the cluster does not serve is probed for."""
        selector, fields = self._selector(kind), self._field_selector(kind)
        ref = await self._until_served(kind, self._refs(kind), selector, fields)
        async for item in self.reader.watch(ref, label_selector=selector, field_selector=fields):
            try:
                if isinstance(item, kube.Resynced):
                    listed = cast(list[objects.KubeObject], list(item.objects))
                    await self._resynced(kind, listed, resource_version=item.resource_version)
                    self.synced[kind].set()
                else:
                    await self._changed(kind, item.type, cast(objects.KubeObject, item.object))
            except Exception:  # a bad object never stops the watch
                log.exception("watch_event_failed", kind=kind)

    def _refs(self, kind: str) -> tuple[kube.ResourceRef, ...]:
        """Where ``kind`` may be served, the preferred version first."""
        if kind in watched.INPUT_REFS:
            return (watched.INPUT_REFS[kind],)
        if kind in watched.DRA_REFS:
            return (watched.DRA_REFS[kind],)
        if kind == "Topology":
            return nodes.TOPOLOGY_REFS
        if kind == "Node":
            return (resources.NODES,)
        if kind == "PodUsage":
            return (watched.BOUND_PODS_REF,)
        return (kube.ref_for(watched.API_VERSIONS.get(kind, "kueue.x-k8s.io/v1beta2"), kind),)

    def _field_selector(self, kind: str) -> str | None:
        """Only pods bound to a node can take node capacity (A.2.2)."""
        return nodes.BOUND_PODS if kind == "PodUsage" else None

    def _selector(self, kind: str) -> str | None:
        """Jobs are listed by the queue-name label unless jobs without it are managed too."""
        if kind in watched.JOB_KINDS and not self.manage_jobs_without_queue_name:
            return workloads.QUEUE_LABEL
        return None

    async def _until_served(
        self,
        kind: str,
        refs: tuple[kube.ResourceRef, ...],
        selector: str | None,
        fields: str | None = None,
        *,
        synced: asyncio.Event | None = None,
        quiet: bool = False,
    ) -> kube.ResourceRef:
        """Return the first of ``refs`` the cluster serves, once it serves one; until then ``kind`` counts as
        listed and empty (a Topology: v1beta2, else v1alpha1 of an older Kueue).

        Kueue sets an integration up only once its CRD exists (jobframework setup.go).
        Any other error (403 without RBAC for the kind, the server unreachable) is left
        to watch_objects, which retries with backoff; the kind counts as listed meanwhile,
        so the kinds that read it are not held back (``synced``: the event to set then, the kind's own by default).
        ``quiet``: a kind not served is logged at debug level (the owners-only watch of a kind whose integration
        is off: most clusters serve few of them, and nothing is missed).
        """
        listed = self.synced[kind] if synced is None else synced
        warned = False
        wait = self.probe_seconds
        while True:
            for ref in refs:
                try:
                    await self.reader.list(ref, label_selector=selector, field_selector=fields)
                except kube_errors.NotFoundError:
                    continue
                except kube_errors.KubeError as err:
                    log.warning("kind_not_listed", kind=kind, api_version=ref.api_version, error=str(err))
                    listed.set()
                    return self._served(kind, refs[0])
                return self._served(kind, ref)
            if not warned:
                versions = [ref.api_version for ref in refs]
                report = log.debug if quiet else log.warning
                report("kind_not_served", kind=kind, api_versions=versions, retry_in=self.probe_seconds)
                warned = True
            listed.set()
            await asyncio.sleep(wait)
            wait = min(wait * 2, max(self.probe_max_seconds, self.probe_seconds))

    def _served(self, kind: str, ref: kube.ResourceRef) -> kube.ResourceRef:
        if kind == "Topology":
            self.topology_ref = ref
        return ref

    # -- changes, by family -----------------------------------------------------------------------

    async def _read_workload(self, namespace: str, name: str) -> objects.KubeObject | None:
        """The Workload object ``namespace/name`` as the API server holds it now, None when there is none or it
        cannot be read (logged: the caller then does as when it is gone)."""
        try:
            return await self._read_one(resources.WORKLOADS, namespace, name)
        except (kube_errors.ApiError, kube_errors.ConnectionFailedError) as err:
            log.warning("workload_read_failed", workload=f"{namespace}/{name}", error=str(err))
            return None

    async def _read_job(self, kind: str, namespace: str, name: str) -> objects.KubeObject | None:
        """The job of ``kind`` (one of ``kinds.JOB_KINDS``) ``namespace/name`` as the API server holds it now; None
        when there is none. Raises ``kube_errors.ApiError`` or ``ConnectionFailedError`` when it cannot be read."""
        return await self._read_one(resources.ref_for(watched.API_VERSIONS[kind], kind), namespace, name)

    async def _read_one(self, ref: resources.ResourceRef, namespace: str, name: str) -> objects.KubeObject | None:
        """One object as the API server holds it now, None when there is none: a LIST by field selector, the
        watcher's seam being lists and watches (:class:`KubeReader`). Raises what the list raises."""
        fields = f"metadata.namespace={namespace},metadata.name={name}"
        listed, _ = await self.reader.list(ref, field_selector=fields)
        return listed[0] if listed else None

    async def _resynced(self, kind: str, listed: list[objects.KubeObject], *, resource_version: str = "") -> None:
        # The dedup id names the relist: a constant one would swallow the deletion of a re-created namesake.
        version = f"resync@{resource_version}" if resource_version else f"resync@{time.time_ns()}"
        if kind in watched.JOB_KINDS:
            await self.jobs.resynced(kind, listed, version=version)
        elif kind in watched.INPUT_KINDS:
            self.inputs.replace(kind, listed)
            await self.jobs.reconvert(trigger=version)
            if kind in ("LimitRange", "RuntimeClass"):  # Workloads made by hand read them too
                await self.standalone.inputs_changed(None, trigger=version)
        elif kind == watched.WORKLOAD_KIND:
            prebuilt = self.jobs.prebuilt
            await prebuilt.workloads_listed(listed, version=version)
            await self.standalone.resynced(listed, version=version, claimed=prebuilt.claims)
            await self.jobs.workloads_listed(listed, version=version)
            for obj in listed:
                if not self.standalone.stands_alone(obj) and not prebuilt.claims(obj):
                    if objects.meta(obj).get("deletionTimestamp"):
                        # marked for deletion while no watcher ran (held by Kueue's finalizer): seen now
                        await self.jobs.workload_object_deleted(obj)
                        continue
                    if workloads.is_orphaned(obj):
                        await self.jobs.workload_object_orphaned(obj)
                        continue
                    await self.jobs.workload_object_changed(obj)
                    await self.reporter.workload_object_changed(cast(objects.WorkloadObject, obj))
        elif kind in watched.TAS_KINDS:
            await self.topology.resynced(kind, listed, version=version)
        elif kind in watched.DRA_KINDS:
            await self.devices.resynced(kind, listed, version=version)
        else:
            await self.kueue.resynced(kind, listed, version=version)

    async def _changed(self, kind: str, change: str, obj: objects.KubeObject) -> None:
        if kind == watched.WORKLOAD_KIND:
            if self.jobs.prebuilt.claims(obj):  # a job's prebuilt Workload: the job plays the job's part
                await self.jobs.prebuilt.workload_changed(change, obj)
                return
            self.jobs.prebuilt.remember(change, obj)  # a job may name it later
            if self.standalone.stands_alone(obj):  # a job's Workload made without its owner too
                await self.standalone.changed(change, obj)
                if change == "DELETED":
                    await self.jobs.workload_name_freed(obj)
            elif change == "DELETED" or objects.meta(obj).get("deletionTimestamp"):
                # marked for deletion (Kueue's finalizer holds it until its job is stopped) or gone: a terminating
                # object's status is not the workload's any more
                await self.jobs.workload_object_deleted(obj)
            elif workloads.is_orphaned(obj):
                # its job deleted with propagationPolicy Orphan: finished OwnerNotFound, the object kept
                await self.jobs.workload_object_orphaned(obj)
            else:
                await self.jobs.workload_object_changed(obj)
                await self.reporter.workload_object_changed(cast(objects.WorkloadObject, obj))
        elif kind in watched.JOB_KINDS:
            await self.jobs.changed(kind, change, obj)
        elif kind in watched.INPUT_KINDS:
            # Workloads already published keep their PriorityClass value (``previous``), and
            # started ones are not converted again (JobTracker): only pending ones change.
            self.inputs.change(kind, change, obj)
            trigger = f"{kind}@{objects.meta(obj).get('resourceVersion', '')}"
            await self.jobs.reconvert(trigger=trigger)
            if kind in ("LimitRange", "RuntimeClass"):  # Workloads made by hand read them too
                namespace = objects.namespace_of(obj) if kind == "LimitRange" else None
                await self.standalone.inputs_changed(namespace, trigger=trigger)
        elif kind in watched.TAS_KINDS:
            await self.topology.changed(kind, change, obj)
        elif kind in watched.DRA_KINDS:
            await self.devices.changed(kind, change, obj)
        else:
            await self.kueue.changed(kind, change, obj)


def watched_kinds(config: manager_config.ManagerConfig | None) -> tuple[str, ...]:
    """What the watcher watches: every kind, but of the job kinds only those of the integrations a
    configuration file lists (``integrations.frameworks``; without a file every integration kueue-es has),
    and of the kinds integrations read (TrainingRuntimes) only those a listed integration reads."""
    if config is None:
        return watched.WATCHED_KINDS
    # the kinds whose webhooks are not no-ops, by the same rule (Pod with the kinds run through pods)
    jobs = webhooks.enabled_kinds(config.frameworks) or frozenset()
    reads = {kind for job in jobs for kind in watched.READS.get(job, ())}  # a TrainJob's runtimes only with it
    return tuple(
        kind
        for kind in watched.WATCHED_KINDS
        if (kind not in watched.JOB_KINDS or kind in jobs) and (kind not in watched.INTEGRATION_INPUTS or kind in reads)
    )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def serve_watcher(
    *,
    nats_url: str,
    api: ApiClient | KubeReader,
    stop: asyncio.Event,
    manage_jobs_without_queue_name: bool = False,
    connect: Callable[[str], Awaitable[Bus]] = nats_bus.connect,
    config_path: Path | None = None,
    config: manager_config.ManagerConfig | None = None,
    feature_gates: str = "",
    start: StartPoint | None = None,
) -> None:
    """Run the watcher until ``stop`` is set (``connect``: how to get the bus; ``start``: a snapshot
    of the log to learn on from, :meth:`Watcher.learn_from_log`).

    ``config_path`` and ``config``: Kueue's manager configuration file and its settings as read
    at start-up (its manageJobsWithoutQueueName adds to ``manage_jobs_without_queue_name``; its
    integrations.frameworks choose the job kinds watched); ``feature_gates``: ``--feature-gates``.
    """
    manage = manage_jobs_without_queue_name or (config is not None and config.manage_jobs_without_queue_name)
    kinds = watched_kinds(config if config_path is not None else None)
    bus = await connect(nats_url)
    watcher = Watcher(
        bus=bus,
        api=api,
        manage_jobs_without_queue_name=manage,
        config_path=config_path,
        config=config,
        feature_gates=feature_gates,
        batch_facts=True,  # a burst of workloads as few FactBatch messages (Publisher.emit)
    )
    await watcher.learn_from_log(start)
    log.info(
        "service_started",
        kinds=list(kinds),
        manage_jobs_without_queue_name=manage,
        managed_jobs_namespace_selector=msgspec.to_builtins(watcher.inputs.managed_jobs_namespace_selector),
        config=str(config_path or "<defaults>"),
        unsupported_integrations=[f for f in config.frameworks if f not in watched.FRAMEWORK_KINDS]
        if config_path is not None and config
        else [],
    )
    try:
        await run_until_stopped(stop, watcher.run(kinds))
    finally:
        try:  # what the last reads queued is on the log before the bus closes
            async with asyncio.timeout(10):
                await watcher.publisher.close()
        except (BusError, TimeoutError) as err:
            log.warning("facts_not_published", facts=watcher.publisher.unpublished, error=str(err))
        await bus.close()
        log.info("service_stopped", published=watcher.published)
