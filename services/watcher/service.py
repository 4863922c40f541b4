"""The watcher service: list+watch the cluster and put facts on the log.

One watch loop per kind (Kueue's v1beta2 objects and batch/v1 Jobs that carry
the ``kueue.x-k8s.io/queue-name`` label), through kubernetes-asyncio. The
conversion is the pure :mod:`services.watcher.convert`; this runner publishes
its facts with ``Nats-Msg-Id`` = kind, object and resourceVersion, so a
re-delivered watch event is deduplicated. After a relist (start-up, or 410 Gone)
every object the log knows but the cluster no longer has gets an ObjectDeleted
fact, so deletions during a gap are not lost. A Job the dispatcher stopped for an
eviction gives one WorkloadStopped per eviction once its pods are gone, however
often it is seen (Msg-Id and memory keyed by the eviction, also across restarts).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from events import codec, subjects, types
from events.bus import nats as nats_bus
from events.bus.base import Bus, LogMessage
from projections.cluster import ClusterState
from services.kube import client as kube
from services.runtime import fold_message, run_until_stopped
from services.watcher import convert

log = structlog.get_logger(__name__)

KUEUE_KINDS = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")


class Watcher:
    """Turns watch events into facts on ``bus``; knows which objects the log holds."""

    def __init__(self, *, bus: Bus, api: Any) -> None:
        self.bus, self.api = bus, api
        self.known: dict[str, set[tuple[str, str]]] = {kind: set() for kind in (*KUEUE_KINDS, "Workload")}
        self.last_published: dict[tuple[str, str, str], bytes] = {}
        self.stopped: dict[tuple[str, str], str] = {}  # workload (namespace, name) -> last stop version reported
        self.published = 0

    async def learn_from_log(self) -> None:
        """Fold the log once so deletions that happened while no watcher ran can be detected."""
        last = await self.bus.last_seq()
        state = ClusterState()
        if last:
            async for message in self.bus.read(subjects=(subjects.FACTS,), start_seq=1):
                fold_message(state, message)
                self._learn_stop(message)
                if message.seq >= last or message.pending == 0:
                    break
        self.known["ResourceFlavor"] = {("", n) for n in state.flavors}
        self.known["Cohort"] = {("", n) for n in state.cohorts}
        self.known["ClusterQueue"] = {("", n) for n in state.cluster_queues}
        self.known["LocalQueue"] = set(state.local_queues)
        self.known["WorkloadPriorityClass"] = {("", n) for n in state.priority_classes}
        self.known["Workload"] = {
            (w.workload.metadata.namespace, w.workload.metadata.name)
            for w in state.workloads.values()
            if w.workload.owner and not w.deleted_seq
        }

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

    async def watch(self, kind: str) -> None:
        """Watch one kind forever (cancel to stop)."""
        api_version = "batch/v1" if kind == "Job" else "kueue.x-k8s.io/v1beta2"
        ref = kube.ref_for(api_version, kind)
        selector = convert.QUEUE_LABEL if kind == "Job" else None
        async for item in kube.watch_objects(self.api, ref, label_selector=selector):
            try:
                if isinstance(item, kube.Resynced):
                    await self._resynced(kind, item.objects, resource_version=item.resource_version)
                else:
                    await self._changed(kind, item.type, item.object)
            except Exception:  # a bad object never stops the watch
                log.exception("watch_event_failed", kind=kind)

    async def _resynced(self, kind: str, objects: list[dict[str, Any]], *, resource_version: str = "") -> None:
        fact_kind = "Workload" if kind == "Job" else kind
        live = {self._key(kind, obj) for obj in objects}
        # The dedup id names the relist: a constant one would swallow the deletion of a re-created namesake.
        version = f"resync@{resource_version}" if resource_version else f"resync@{time.time_ns()}"
        for namespace, name in sorted(self.known[fact_kind] - live):
            await self._publish(types.ObjectDeleted(kind=fact_kind, namespace=namespace, name=name), version=version)
        for obj in objects:
            await self._changed(kind, "ADDED", obj)

    async def _changed(self, kind: str, change: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        namespace, name = self._key(kind, obj)
        fact_kind = "Workload" if kind == "Job" else kind
        version = str(meta.get("resourceVersion") or "")
        if change == "DELETED":
            await self._publish(
                types.ObjectDeleted(kind=fact_kind, namespace=namespace, name=name, uid=meta.get("uid", "")),
                version=version,
            )
            return
        now_ms = time.time_ns() // 1_000_000
        fact = convert.job_facts(obj, now_ms=now_ms) if kind == "Job" else convert.kueue_fact(obj, now_ms=now_ms)
        if fact is None:
            return
        if isinstance(fact, types.WorkloadObserved) and self._running_and_known(obj, fact):
            return  # pod sets are immutable while quota is reserved (SEMANTICS §1.6): ignore our own injections
        if isinstance(fact, types.ObjectRejected):
            log.warning(
                "object_rejected",
                kind=fact.kind,
                name=fact.name,
                namespace=fact.namespace,
                field=fact.field,
                problem=fact.problem,
            )
        await self._publish(fact, version=version)
        if kind == "Job":
            await self._report_stopped(obj, now_ms=now_ms)

    async def _report_stopped(self, job: dict[str, Any], *, now_ms: int) -> None:
        """WorkloadStopped for an evicted Job that no longer runs, once per eviction (convert.stop_version)."""
        stopped = convert.stopped_fact(job, now_ms=now_ms)
        if stopped is None:
            return
        key, version = (stopped.workload.namespace, stopped.workload.name), convert.stop_version(job)
        if self.stopped.get(key) == version:
            return
        await self.bus.publish(subjects.fact_message(stopped, version=version))
        self.stopped[key] = version
        self.published += 1
        log.info("workload_stopped", workload=stopped.workload.key, reason=stopped.reason, version=version)

    def _running_and_known(self, job: dict[str, Any], fact: types.WorkloadObserved) -> bool:
        """True for a started Job whose workload the log already has (its template now
        carries the flavor's node selector and tolerations, which the dispatcher put there).

        Known from this watcher's own facts or, after a restart, from the log
        (``learn_from_log``): a restarted watcher must not report the injected
        template as the workload's, or an eviction could not restore the original.
        """
        suspended = (job.get("spec") or {}).get("suspend", False)
        meta = fact.workload.metadata
        return not suspended and (meta.namespace, meta.name) in self.known["Workload"]

    def _key(self, kind: str, obj: dict[str, Any]) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        if kind == "Job":
            return meta.get("namespace", "default"), convert.workload_name_for_job(
                meta.get("name", ""), meta.get("uid", "")
            )
        return meta.get("namespace", "") if kind == "LocalQueue" else "", meta.get("name", "")

    async def _publish(self, fact: types.Fact, *, version: str) -> None:
        kind, namespace, name = subjects.fact_identity(fact)
        data = codec.encode(fact)
        identity = (kind, namespace, name)
        if isinstance(fact, types.ObjectDeleted):
            if (namespace, name) not in self.known.get(kind, set()):
                return
            self.known[kind].discard((namespace, name))
            self.last_published.pop(identity, None)
        elif self.last_published.get(identity) == data:
            return  # nothing that matters changed (a status write, a resync)
        else:
            self.last_published[identity] = data
            if not isinstance(fact, types.ObjectRejected):
                self.known.setdefault(kind, set()).add((namespace, name))
        await self.bus.publish(subjects.fact_message(fact, version=version))
        self.published += 1


async def serve_watcher(*, nats_url: str, api: Any, stop: asyncio.Event) -> None:
    """Run the watcher until ``stop`` is set."""
    bus = await nats_bus.connect(nats_url)
    watcher = Watcher(bus=bus, api=api)
    await watcher.learn_from_log()
    log.info("service_started", kinds=[*KUEUE_KINDS, "Job"])
    try:
        await run_until_stopped(stop, *(watcher.watch(kind) for kind in (*KUEUE_KINDS, "Job")))
    finally:
        await bus.close()
        log.info("service_stopped", published=watcher.published)
