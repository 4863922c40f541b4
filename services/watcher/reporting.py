"""How far the jobs got: evicted jobs stopped, PodsReady, and what admission check controllers say.

Why this module exists: besides converting jobs, the watcher reports what Kueue's
job reconciler and workload controller would write (SEMANTICS-ADVANCED B.5, C.2):
WorkloadStopped once a job the dispatcher stopped for an eviction no longer runs
(once per eviction, also across restarts), WorkloadPodsReady when a job's
PodsReady (status, reason) changes, and, from the Workload objects read back,
AdmissionCheckStateChanged when a check controller changes an entry of
``status.admissionChecks``, a WorkloadObserved when ``spec.active`` is flipped, and a
WorkloadEvictionObserved when someone other than the dispatcher writes ``Evicted=True``
on a Workload holding quota (once per condition; Kueue acts on it whoever wrote it).
What "ready", "started" and "stopped" mean per integration is pure
(:mod:`kueue_es.services.watcher.progress`); :class:`ProgressReporter` remembers
what it last reported and publishes the changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import msgspec
import structlog

from kueue_es.events import codec, manifests, models, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.jobframework import integrations, jobs, workloads
from kueue_es.jobframework.annotations import (
    DISPATCHER_FIELD_MANAGER,
    EVICTED_WORKLOAD_ANNOTATION,
    RUNNING_VARIANT_ANNOTATION,
)
from kueue_es.services.kube import objects
from kueue_es.services.watcher import progress
from kueue_es.services.watcher.kinds import Key
from kueue_es.services.watcher.publishing import Publisher

log = structlog.get_logger(__name__)

#: Admission check entries the dispatcher writes itself, not news from a check controller.
_OWN_CHECK_MESSAGE = "Reset to Pending after eviction."


class ProgressReporter:
    """Reports stops, PodsReady and admission check states through ``publisher``, each once per change.

    ``clock``: the time now in ms since the epoch (the ``at_ms`` of what has no time of its own).
    ``reclaimable_pods``: Kueue's feature gate ReclaimablePods (on by default); off, no reclaimable pods
    are reported, so none frees quota.
    """

    def __init__(self, *, publisher: Publisher, clock: Callable[[], int], reclaimable_pods: bool = True) -> None:
        self.publisher, self.clock, self.reclaimable_pods = publisher, clock, reclaimable_pods
        self.stopped: dict[Key, str] = {}  # workload (namespace, name) -> last stop version reported
        self.pods_ready: dict[Key, progress.ReadyState] = {}  # workload -> PodsReady last reported
        self.check_states: dict[tuple[str, str, str], tuple[Any, ...]] = {}  # (ns, workload, check) -> last seen
        # workload -> (its Workload object's UID, the names of the check entries its status last listed)
        self.check_names: dict[Key, tuple[str, frozenset[str]]] = {}
        self.reclaimable: dict[Key, dict[str, int]] = {}  # workload -> reclaimable pods last reported
        self.evicted: dict[Key, str] = {}  # workload -> Msg-Id version of the WorkloadEvictionObserved last reported

    # -- what the log already says ----------------------------------------------------------------

    def learn(self, message: LogMessage) -> None:
        """Remember a WorkloadStopped, a PodsReady or an admission check state already on the log."""
        kind = message.headers.get("Kq-Type")
        if kind not in (
            "WorkloadStopped",
            "WorkloadPodsReady",
            "AdmissionCheckStateChanged",
            "WorkloadReclaimablePods",
            "WorkloadEvictionObserved",
        ):
            return
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            return
        if isinstance(event, types.WorkloadStopped):
            version = message.headers.get("Nats-Msg-Id", "").rsplit(":", 1)[-1]  # the last part of its Msg-Id
            self.stopped[(event.workload.namespace, event.workload.name)] = version
        elif isinstance(event, types.WorkloadEvictionObserved):
            version = message.headers.get("Nats-Msg-Id", "").rsplit(":", 1)[-1]
            self.evicted[(event.workload.namespace, event.workload.name)] = version
        # What this watcher publishes comes back here later: a state it already holds is newer
        # than the log's echo of an earlier one, so the log only fills in what it does not know.
        elif isinstance(event, types.WorkloadPodsReady):
            self.pods_ready.setdefault((event.workload.namespace, event.workload.name), (event.ready, event.reason))
        elif isinstance(event, types.AdmissionCheckStateChanged):
            key = (event.workload.namespace, event.workload.name, event.check)
            self.check_states.setdefault(key, check_view(event))
        elif isinstance(event, types.WorkloadReclaimablePods):
            self.reclaimable.setdefault((event.workload.namespace, event.workload.name), event.counts())

    # -- Jobs and JobSets -------------------------------------------------------------------------

    async def job_progress(
        self,
        kind: str,
        obj: objects.KubeObject,
        wl_key: Key,
        *,
        version: str,
        now_ms: int,
        context: workloads.Context | None = None,
    ) -> None:
        """WorkloadStopped of an evicted Job or JobSet that no longer runs, and its PodsReady (``context``: what
        the job's conversion reads, for a kind whose PodsReady needs it: a TrainJob's runtime)."""
        raw: Mapping[str, Any] = obj
        if kind == "Job":
            await self.report_stopped(raw, now_ms=now_ms, workload=wl_key)
        integration = integrations.by_kind(kind) if kind not in ("Job", "Pod") else None
        if integration is not None:
            running = integration.active(raw) or not integrations.suspended(integration, raw)
            await self.report_mark_stopped(wl_key, [obj], running=running, now_ms=now_ms)
        # Kueue's job reconciler writes nothing more once the job has finished (reconciler.go: step 3, "handle
        # job is finished", returns before step 5 writes PodsReady), so a failed Job's Workload keeps its last
        # PodsReady rather than turning WaitForRecovery as its pods go
        finished = (
            jobs.finished_condition(raw) is not None
            if kind == "Job"
            else (integration is not None and integration.finished(raw) is not None)
        )
        if kind != "Pod" and wl_key in self.publisher.known["Workload"] and not finished:
            ready = (
                integrations.pods_ready(integration, raw, context=context)
                if integration is not None
                else progress.job_ready(raw)
            )
            started = progress.started(kind, [raw])
            await self.report_pods_ready(wl_key, started=started, ready=ready, version=version)
            variant = str(((raw.get("metadata") or {}).get("annotations") or {}).get(RUNNING_VARIANT_ANNOTATION) or "")
            if variant and (wl_key[0], variant) in self.publisher.known["Workload"]:
                # a ConcurrentAdmission parent's job runs for this variant: its PodsReady is the variant's too
                await self.report_pods_ready((wl_key[0], variant), started=started, ready=ready, version=version)

    async def report_reclaimable(
        self,
        kind: str,
        obj: objects.KubeObject,
        wl_key: Key,
        *,
        version: str,
        context: workloads.Context | None = None,
    ) -> None:
        """WorkloadReclaimablePods when the job's reclaimable pods change (Kueue jobframework/reconciler.go
        step 4): the kind's (:func:`progress.reclaimable_pods`; none: nothing to report; ``context`` for a
        kind that needs its inputs, a TrainJob's runtime), each
        count cut to its pod set's size (LimitReclaimablePodsToPodSetSizes); nothing before the log knows
        the workload. Kueue updates them whatever the workload's state (pending too), not once finished."""
        known = self.publisher.workloads.get(wl_key)
        if known is None or wl_key not in self.publisher.known["Workload"]:
            return
        counts = progress.reclaimable_pods(kind, cast(Mapping[str, Any], obj), context=context)
        if counts is None:
            return
        await self.reclaimable_changed(self.publisher.workload_ref(wl_key), known, counts, version=version)

    async def reclaimable_changed(
        self, ref: types.WorkloadRef, workload: models.Workload, reported: Mapping[str, int], *, version: str
    ) -> None:
        """WorkloadReclaimablePods of ``workload`` when ``reported`` (pod set -> count), each count cut to its
        pod set's size and zeros left out, differs from what was last reported. Nothing with the gate
        ReclaimablePods off: Kueue's job reconciler then writes no reclaimable pods (jobframework/reconciler.go)
        and its quota counting ignores those a Workload's status has (pkg/workload/workload.go
        podSetsCountsAfterReclaim)."""
        if not self.reclaimable_pods:
            return
        sizes = {ps.name: ps.count for ps in workload.spec.pod_sets}
        counts = {name: min(count, sizes.get(name, count)) for name, count in sorted(reported.items()) if count > 0}
        wl_key = (ref.namespace, ref.name)
        if self.reclaimable.get(wl_key, {}) == counts:
            return
        pods = [types.ReclaimablePod(name=name, count=count) for name, count in counts.items()]
        fact = types.WorkloadReclaimablePods(workload=ref, reclaimable_pods=pods, at_ms=self.clock())
        await self.publisher.emit(fact, version=f"{version}.reclaim")
        self.reclaimable[wl_key] = counts
        log.info("reclaimable_pods", workload=ref.key, reclaimable=counts)

    async def report_stopped(self, job: Mapping[str, Any], *, now_ms: int, workload: Key | None = None) -> None:
        """WorkloadStopped for an evicted Job that no longer runs, once per eviction (jobs.stop_version);
        ``workload``: the workload it stops when not the Job's own name (an elastic Job's newest slice, the
        prebuilt Workload it adopted: with that one's UID as the log has it)."""
        stopped = jobs.stopped_fact(job, now_ms=now_ms)
        if stopped is None:
            return
        if variant := _evicted_variant([job]):
            workload = (stopped.workload.namespace, variant)  # a ConcurrentAdmission variant's eviction stopped it
        if workload is not None:
            known = self.publisher.workloads.get(workload)
            uid = known.metadata.uid if known is not None else stopped.workload.uid
            ref = types.WorkloadRef(namespace=workload[0], name=workload[1], uid=uid)
            stopped = msgspec.structs.replace(stopped, workload=ref)
        key, version = (stopped.workload.namespace, stopped.workload.name), jobs.stop_version(job)
        if self.stopped.get(key) == version:
            return
        await self.publisher.emit(stopped, version=version)
        self.stopped[key] = version
        log.info("workload_stopped", workload=stopped.workload.key, reason=stopped.reason, version=version)

    async def report_mark_stopped(
        self, wl_key: Key, objs: Sequence[objects.KubeObject], *, running: bool, now_ms: int
    ) -> None:
        """WorkloadStopped for a JobSet or Pod workload the dispatcher marked evicted, once nothing of it
        runs; once per eviction (the mark's sequence is the Msg-Id version, as for a Job)."""
        mark = progress.eviction_mark(objs)
        if mark is None or running:
            return
        reason, seq = mark
        if variant := _evicted_variant(objs):
            wl_key = (wl_key[0], variant)  # a ConcurrentAdmission variant's eviction stopped it
        version = f"evict-{seq}"
        if self.stopped.get(wl_key) == version:
            return
        ref = self.publisher.workload_ref(wl_key)
        stopped = types.WorkloadStopped(workload=ref, reason=reason, at_ms=now_ms)
        await self.publisher.emit(stopped, version=version)
        self.stopped[wl_key] = version
        log.info("workload_stopped", workload=ref.key, reason=reason, version=version)

    async def report_pods_ready(self, wl_key: Key, *, started: bool, ready: bool, version: str) -> None:
        """WorkloadPodsReady when the workload's PodsReady (status, reason) changes; nothing before it started once."""
        previous = self.pods_ready.get(wl_key)
        if previous is None and not started:
            return  # not admitted yet: Kueue's WaitForStart, nothing to report
        current = progress.next_pods_ready(previous, started=started, ready=ready)
        if current == previous:
            return
        ref = self.publisher.workload_ref(wl_key)
        fact = types.WorkloadPodsReady(workload=ref, ready=current[0], reason=current[1], at_ms=self.clock())
        await self.publisher.emit(fact, version=f"{version}.{current[1]}")
        self.pods_ready[wl_key] = current

    # -- Workload objects -------------------------------------------------------------------------

    async def workload_object_changed(self, obj: objects.WorkloadObject) -> None:
        """A Workload object of a job's workload: report its admission check entries that a check controller
        changed, and a flip of ``spec.active`` (a WorkloadObserved of the job's workload with that value)."""
        key = (str(objects.meta(obj).get("namespace") or "default"), objects.name_of(obj))
        known = self.publisher.workloads.get(key)
        if known is None or known.owner is None:
            return  # not a job's workload the log knows (standalone ones: :mod:`.standalone`)
        version = objects.resource_version(obj)
        ref = types.WorkloadRef(namespace=key[0], name=key[1], uid=known.metadata.uid)
        status = obj.get("status")
        await self.check_entries(ref, status if isinstance(status, dict) else {}, version=version)
        await self.evicted_by_others(ref, obj)
        active = (obj.get("spec") or {}).get("active", True) is not False
        if active != known.spec.active:
            changed = msgspec.structs.replace(known, spec=msgspec.structs.replace(known.spec, active=active))
            await self.publisher.publish(
                types.WorkloadObserved(workload=changed), version=version, source=self.publisher.sources.get(key, "")
            )

    async def evicted_by_others(self, ref: types.WorkloadRef, obj: objects.KubeObject) -> None:
        """WorkloadEvictionObserved when Workload object ``obj`` (of workload ``ref``) holds quota
        (``QuotaReserved=True``) and carries an ``Evicted=True`` condition the dispatcher did not write
        (:func:`evicted_by_another`): once per condition, its ``lastTransitionTime`` and reason making the
        Msg-Id version (also across restarts: :meth:`learn`), whatever else of the object changes. Kueue acts on
        that condition whoever wrote it (jobframework/reconciler.go "6. handle eviction"; Kueue's tests write
        it so: test/util SetEvictedCondition); the admitter carries it out (logic 45). A condition with no
        parsable ``lastTransitionTime`` is reported at the watcher's clock."""
        raw = cast(Mapping[str, Any], obj)
        status = raw.get("status")
        conditions = status.get("conditions") if isinstance(status, dict) else None
        by_type = {c.get("type"): c for c in conditions or [] if isinstance(c, dict)}
        evicted, reserved = by_type.get("Evicted"), by_type.get("QuotaReserved")
        if evicted is None or evicted.get("status") != "True" or reserved is None or reserved.get("status") != "True":
            return
        if not evicted_by_another(raw):
            return
        labels = (raw.get("metadata") or {}).get("labels") or {}
        if labels.get(workloads.CONCURRENT_ADMISSION_PARENT_LABEL) == "true":
            return  # a ConcurrentAdmission parent holds quota only as its variant's copy: its variant's eviction counts
        reason = str(evicted.get("reason") or "")
        since = str(evicted.get("lastTransitionTime") or "")
        # once per condition; no ":" in a Msg-Id version (learn splits on the last one)
        version = f"evicted-by-{since.replace(':', '')}.{reason}"
        key = (ref.namespace, ref.name)
        if self.evicted.get(key) == version:
            return
        try:
            at_ms = manifests.parse_time_ms(since) or self.clock()
        except manifests.ManifestError:
            at_ms = self.clock()
        fact = types.WorkloadEvictionObserved(
            workload=ref, reason=reason, message=str(evicted.get("message") or ""), at_ms=at_ms
        )
        await self.publisher.emit(fact, version=version)
        self.evicted[key] = version
        log.info("workload_evicted_by_others", workload=ref.key, reason=reason, version=version)

    async def check_entries(self, ref: types.WorkloadRef, status: Mapping[str, Any], *, version: str) -> None:
        """AdmissionCheckStateChanged for each ``status.admissionChecks[]`` entry a check controller changed, the
        changes of one object version published together (:meth:`Publisher.emit_together`): Kueue's workload
        controller sees one status write whole, so two checks a write sets to Retry make one eviction naming
        both, never an eviction of the first decided before the second is on the log."""
        changed: list[tuple[types.Fact, str]] = []
        entries = [entry for entry in status.get("admissionChecks") or [] if isinstance(entry, dict)]
        reports = [self._check_entry(ref, cast(objects.AdmissionCheckEntry, entry)) for entry in entries]
        reports += self._checks_gone(ref, {str(entry.get("name") or "") for entry in entries})
        for report in reports:
            if report is not None:
                changed.append((report, f"{version}.{report.check}"))
                log.info("admission_check_state", workload=ref.key, check=report.check, state=report.state)
        await self.publisher.emit_together(changed)

    def _checks_gone(self, ref: types.WorkloadRef, names: set[str]) -> list[types.AdmissionCheckStateChanged]:
        """A Pending report (no message) for each check entry the Workload object of ``ref`` listed last time and no
        longer does (its list written by hand without it): Kueue's workload controller adds it back Pending at its
        next reconcile (syncAdmissionCheckConditions), which the check's state on the log then is, and the
        dispatcher, told so, writes it back (a check its ClusterQueue does not name is left out there)."""
        key = (ref.namespace, ref.name)
        before = self.check_names.get(key)
        self.check_names[key] = (ref.uid, frozenset(names))
        if before is None or before[0] != ref.uid:
            return []
        gone: list[types.AdmissionCheckStateChanged] = []
        for name in sorted(before[1] - names):
            if name in self.publisher.own_checks:
                continue  # a MultiKueue check: the dispatcher writes it as the log has it
            self.check_states.pop((ref.namespace, ref.name, name), None)
            gone.append(types.AdmissionCheckStateChanged(workload=ref, check=name, state="Pending", at_ms=self.clock()))
        return gone

    def _check_entry(
        self, ref: types.WorkloadRef, entry: objects.AdmissionCheckEntry
    ) -> types.AdmissionCheckStateChanged | None:
        """The AdmissionCheckStateChanged of one ``status.admissionChecks[]`` entry that differs from what was
        last seen (then remembered as seen), None when it does not or it is a Pending entry the dispatcher wrote
        itself (added, or reset after eviction)."""
        try:
            fact = types.AdmissionCheckStateChanged(
                workload=ref,
                check=str(entry.get("name") or ""),
                state=entry.get("state") or "Pending",  # type: ignore[arg-type]  # checked just below
                message=str(entry.get("message") or ""),
                requeue_after_seconds=workloads.parse_int(entry.get("requeueAfterSeconds")),
                pod_set_updates=msgspec.convert(
                    entry.get("podSetUpdates") or [], list[models.PodSetUpdate], str_keys=True
                ),
                at_ms=manifests.parse_time_ms(entry.get("lastTransitionTime")) or self.clock(),
            )
            msgspec.convert(msgspec.to_builtins(fact), types.AdmissionCheckStateChanged)  # the state is one of four
        except (msgspec.ValidationError, manifests.ManifestError, TypeError) as err:
            log.warning("admission_check_entry_invalid", workload=ref.key, entry=entry, error=str(err))
            return None
        if fact.check in self.publisher.own_checks:
            return None  # a MultiKueue check: its states are the multikueue decider's, on the log already
        key = (ref.namespace, ref.name, fact.check)
        view = check_view(fact)
        if self.check_states.get(key) == view:
            return None
        self.check_states[key] = view
        if fact.state == "Pending" and (not fact.message or fact.message.startswith(_OWN_CHECK_MESSAGE)):
            return None
        return fact


_EVICTED_KEY = 'k:{"type":"Evicted"}'


def evicted_by_another(obj: Mapping[str, Any]) -> bool:
    """Whether the ``Evicted`` condition of Workload object ``obj`` was written by someone other than the
    dispatcher, as its ``metadata.managedFields`` say: an entry that owns that condition (``f:status`` ->
    ``f:conditions`` -> ``k:{"type":"Evicted"}``, or the whole ``f:conditions`` list where a server owns lists
    whole) and is not the dispatcher's server-side apply (manager
    :data:`~kueue_es.jobframework.annotations.DISPATCHER_FIELD_MANAGER`, operation ``Apply``): a user's or a
    test's update, even one sent by a kueue-es client. An object without managedFields tells nothing: True (the
    fold drops a report about a workload the log evicts already)."""
    entries = (obj.get("metadata") or {}).get("managedFields")
    if not isinstance(entries, list) or not entries:
        return True
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if entry.get("manager") == DISPATCHER_FIELD_MANAGER and entry.get("operation") == "Apply":
            continue
        fields = (entry.get("fieldsV1") or {}).get("f:status")
        owned = fields.get("f:conditions") if isinstance(fields, dict) else None
        if isinstance(owned, dict) and (not owned or _EVICTED_KEY in owned):
            return True
    return False


def check_view(fact: types.AdmissionCheckStateChanged) -> tuple[Any, ...]:
    """What of a check entry counts as a change: state, message, requeueAfterSeconds, podSetUpdates."""
    return (fact.state, fact.message, fact.requeue_after_seconds, tuple(fact.pod_set_updates))


def _evicted_variant(objs: Sequence[Mapping[str, Any]]) -> str:
    """The ConcurrentAdmission variant whose eviction the dispatcher marked on ``objs`` (a job), "" when the eviction
    was of the job's own workload (:data:`~kueue_es.jobframework.annotations.EVICTED_WORKLOAD_ANNOTATION`)."""
    for obj in objs:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if name := annotations.get(EVICTED_WORKLOAD_ANNOTATION):
            return str(name)
    return ""
