"""Recording the Kubernetes Events Kueue records on Workloads and jobs.

Why this module exists: ``kubectl describe workload`` shows the story of a workload
as Events (QuotaReserved, Admitted, Pending with its reason, Preempted, and the
jobs' CreatedWorkload, Started, Stopped, FinishedWorkload, UpdatedWorkload,
UpdatedAdmissionCheck). Which Events a decision makes is pure
(:mod:`kueue_es.services.dispatcher.kube_events`); this module writes them, for the
workloads whose Workload object the dispatcher writes: a batch's decisions' Events once their Workload
objects are written and before their jobs are (``Dispatcher._dispatch_batch``), made from the fold as it
stands then, as Kueue's scheduler records them as it decides (a preempted pod's delete, which takes its
Workload with it, must not come first); the Events of the job writes (Started, Stopped) after them.

Best effort, as Kueue's event recorder: a failed write is logged and dropped. Across a crash, at
least once: the dispatcher acks a batch's decisions only after all their Events,
so a dispatcher that dies between its Job writes and their Events leaves them to the next one, which
carries the decisions out again and writes their Events under the same deterministic names (one that
was written is AlreadyExists: nothing twice; a series cache starts empty after a restart). The
Events of decisions about a Workload fold as Kueue's recorder folds them
(:mod:`~kueue_es.services.dispatcher.event_series`): an Event isomorphic to one
written before (same type, reason, action, recorder and Workload object at the same
resourceVersion, whatever its message) makes that one a series (count 2, its first
message kept), later ones are counted and their count written when the series ends
or is refreshed. The resourceVersion a decision's Event is about is the one Kueue's
scheduler decided on: the object as the decisions and facts before it left it. The
dispatcher coalesces writes (a batch writes a workload's status once, whatever number of
its decisions it carries; a change may be written apart from the batches, before its
decision comes), so the server's resourceVersion does not tell it: the fold counts each
change of what the Workload object shows (``DispatchState.object_versions``) and each
decision's Events are keyed by the count it was folded on (:meth:`Recording.decided`).
Two pending Events with another message in between are then two Events, as on a real
cluster, where the status write between them gave the object a new resourceVersion. The cache is this dispatcher's memory, as Kueue's is its recorder's:
a restart starts over. An Event's name comes from the decision's sequence, so a
redelivered decision writes nothing new (AlreadyExists). Events have their own write
budget, as Kueue's event broadcaster has its own client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import structlog

from kueue_es.events import codec, types
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.dispatcher import core, event_series, kube_events, status
from kueue_es.services.dispatcher.kube_api import KubeApi, WriteLimiter
from kueue_es.services.dispatcher.object_sync import API_ERRORS, StoredObjects
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources

log = structlog.get_logger(__name__)

DECIDED_KEPT = 100_000
"""The most decisions whose object version :meth:`Recording.decided` keeps (the oldest dropped): a fold from the
start of a long log notes every decision, most of them answered long ago."""


def workload_key(decision: types.Event) -> str:
    """``namespace/name`` of the workload a decision is about ("" if none)."""
    ref = getattr(decision, "workload", None)
    return ref.key if isinstance(ref, types.WorkloadRef) else ""


def decision_ms(decision: types.Event) -> int:
    """When a decision was taken (0 if it does not say)."""
    at_ms = getattr(decision, "at_ms", 0)
    return at_ms if isinstance(at_ms, int) else 0


class Recording:
    """Writes the Events of a batch's decisions and of its job writes, through its own ``limiter``."""

    def __init__(self, *, api: KubeApi, limiter: WriteLimiter, view: core.DispatchState, stored: StoredObjects) -> None:
        self.api, self.limiter, self.view, self.stored = api, limiter, view, stored
        self.written = 0
        self._series = event_series.SeriesCache()  # Kueue's recorder's cache of the Events it wrote
        # workload -> its Workload object's resourceVersion before the batch's writes: Kueue records a
        # decision's Events on the object it decided on, before its own status patch
        self._versions: dict[str, str] = {}
        # (workload key, log sequence, decision type) -> the version of the Workload object the decision was folded
        # on (DispatchState.object_versions): the object Kueue's scheduler decided on, for its Events' keys
        self._decided: dict[tuple[str, int, str], int] = {}
        # a batch's job Events, written after it: (the Event, the end of its object's name)
        self._job_events: list[tuple[kube_events.KubeEvent, str]] = []
        self._rejections_seen = 0  # the fold's rejection mark (ClusterState.rejections_changed) last looked at

    def workload_created(self, key: str, item: kube_events.KubeEvent | None, uid: str) -> None:
        """The Workload object of ``key`` was created (``uid``; ``item`` its job's CreatedWorkload Event, if any):
        a new object, whose first pending Event is news even if the one it replaces had the same (a job's
        Workload deleted by hand is made anew under the same name: its UID differs)."""
        if item is not None:
            self.add_job_event(0, item, created_uid=uid)

    def add_job_event(self, seq: int, item: kube_events.KubeEvent, *, created_uid: str = "") -> None:
        """Record ``item`` (a job's own Event; ``seq`` that of its decision, 0 for a created Workload, then
        ``created_uid`` the new object's UID: a job whose Workload was deleted gets another) with the batch's
        Events."""
        suffix = f"{seq:x}.job" if seq else f"created.{created_uid}" if created_uid else "created"
        self._job_events.append((item, suffix))

    def workload_finished(self, item: kube_events.KubeEvent, uid: str) -> None:
        """The Workload object ``uid`` was just written Finished: ``item``, its job's FinishedWorkload Event, is
        recorded with the batch's Events, named after that object (a Workload finishes once)."""
        self.job_event(item, suffix=f"finished.{uid}")

    def workload_updated(self, item: kube_events.KubeEvent, seq: int) -> None:
        """The Workload object was just rewritten for the change logged at ``seq``: ``item``, its job's
        UpdatedWorkload Event, is recorded with the batch's Events, named after that sequence."""
        self.job_event(item, suffix=f"{seq:x}.updated")

    def job_event(self, item: kube_events.KubeEvent, *, suffix: str) -> None:
        """Record ``item`` (a job's or a pod's own Event) with the batch's Events, as Event
        ``<its object's name>.<suffix>``: a suffix that names what happened once (an object's UID) keeps a
        repeat from writing it twice."""
        self._job_events.append((item, suffix))

    def workload_deleted(self, item: kube_events.KubeEvent, uid: str) -> None:
        """The old Workload object (``uid``) of a job it no longer matched was deleted: ``item``, its job's
        DeletedWorkload Event, is recorded with the batch's Events."""
        self._job_events.append((item, f"deleted.{uid}"))

    def job_write(
        self, action: core.Action, *, seq: int, decision: types.Event, pods: Sequence[tuple[str, str]] = ()
    ) -> None:
        """A job was started or stopped for ``decision``: its Started or Stopped Event, if Kueue records one;
        for Pods, one on each of ``pods`` (``(name, uid)``: those the write ungated or deleted)."""
        if isinstance(action, core.StartPods | core.StopPods):
            for name, uid in pods:
                pod_event = kube_events.for_job_write(
                    "Pod",
                    name,
                    uid,
                    started=isinstance(action, core.StartPods),
                    decision=decision,
                    at_ms=decision_ms(decision),
                )
                if pod_event is not None:
                    self.add_job_event(seq, pod_event)
        elif isinstance(action, core.StartJob | core.StartIntegration | core.StopJob | core.StopIntegration):
            kind = action.kind if isinstance(action, core.StartIntegration | core.StopIntegration) else "Job"
            started = isinstance(action, core.StartJob | core.StartIntegration)
            job_event = kube_events.for_job_write(
                kind,
                action.name,
                action.uid,
                started=started,
                decision=decision,
                at_ms=decision_ms(decision),
                not_matching=workload_key(decision) in self.view.not_matching,
                variant=bool(getattr(action, "evicted_workload", "")),
            )
            if job_event is not None:
                self.add_job_event(seq, job_event)

    def decided(self, decision: types.Event, seq: int) -> None:
        """``decision``, stored at ``seq``, is about to be folded: note the version of its workload's Workload
        object it was decided on (the changes folded before it), the object its Events are about."""
        if not isinstance(decision, types.DECISION_TYPES):
            return
        ref = getattr(decision, "workload", None)
        if not isinstance(ref, types.WorkloadRef):
            return
        decided = self._decided
        decided.setdefault((ref.key, seq, type(decision).__name__), self.view.object_versions.get(ref.key, 0))
        if len(decided) > DECIDED_KEPT:
            del decided[next(iter(decided))]

    def before_writes(self, keys: Sequence[str]) -> None:
        """The batch about the workloads ``keys`` (``namespace/name``) is about to write them: note their
        Workload objects' resourceVersions, those Kueue's scheduler would have decided on."""
        self._versions = {}
        for key in keys:
            namespace, _, name = key.partition("/")
            if version := self.stored.resource_version(namespace, name):
                self._versions[key] = version

    def discard_job_events(self) -> None:
        """Forget the job Events collected so far (nothing is written before the fold caught up)."""
        self._job_events = []

    async def record(self, decisions: list[tuple[int, types.Event]], *, places: Sequence[int] = ()) -> None:
        """Write the job Events collected, then those of ``decisions`` (``(log sequence, decision)``); ``places``:
        each decision's 1-based place among the decisions its DecisionRecord carries (event schema 17: several
        at one sequence), 0 (or none given) for a decision of its own message. An Event's name is the
        workload's, the decision's sequence (and place), and the Event's index."""
        job_events, self._job_events = self._job_events, []
        for item, suffix in job_events:  # the jobs' own: CreatedWorkload, Started, Stopped, ... (jobframework)
            await self._write(item, name=f"{item.workload.name}.{suffix}")
        state = self.view.cluster
        reserved_here: set[tuple[str | None, int]] = set()  # a QuotaReserved of these at this sequence came first
        for position, (seq, decision) in enumerate(decisions):
            key = workload_key(decision)
            if isinstance(decision, types.QuotaReserved):
                reserved_here.add((key, seq))
            if isinstance(decision, types.QuotaReserved | types.WorkloadAdmitted) and _finished_before(state, key, seq):
                continue  # landed after its workload finished: the status shows no admission (status.py), no Event
            # one WorkloadAdmitted reserving too (no QuotaReserved of its record before it, as a TAS one has)
            reserved = (
                isinstance(decision, types.WorkloadAdmitted)
                and self.view.reserved_seq.get(key) == seq
                and (key, seq) not in reserved_here
            )
            place = places[position] if places else 0
            stem = f"{seq:x}-{place}" if place else f"{seq:x}"
            records = kube_events.for_decision(state, decision, self.view.records.get(key), reserved=reserved)
            basis = self._decided.get((key, seq, type(decision).__name__))
            for index, item in enumerate(records):
                wl = state.workloads.get(item.workload.key)
                if wl is None or not (status.is_job_workload(wl) or wl.workload.owner is None):
                    continue  # a workload of a kind the dispatcher writes nothing for (an unknown owner's)
                await self._record(
                    item,
                    name=f"{item.workload.name}.{stem}.{index}",
                    seq=seq,
                    place=place,
                    basis=basis if item.workload.key == key else None,
                )
        if decisions:
            await self.expire(max(decision_ms(d) for _, d in decisions))

    async def expire(self, now_ms: int) -> None:
        """Run the recorder's series timers up to ``now_ms`` (the latest decision's time: the windows follow the
        decisions, so a replayed log folds its Events the same way): write the counts of the series refreshed
        or finished (:meth:`~kueue_es.services.dispatcher.event_series.SeriesCache.expire`)."""
        for write in self._series.expire(now_ms):
            await self._write_series(write)

    async def _record(
        self, item: kube_events.KubeEvent, *, name: str, seq: int, place: int = 0, basis: int | None = None
    ) -> None:
        """Write ``item``, the Event of the decision at ``seq`` (``place``: its place among the decisions its
        record carries, 0 for one of its own message), as Kueue's recorder would: created, folded into the
        series of an isomorphic one, or only counted. ``basis``: the version of the Workload object the decision
        was folded on (:meth:`decided`); without it, the resourceVersion the server gave the object before the
        batch's writes. One about an object whose resourceVersion is unknown is written as it is (every write
        Kueue makes changes it, so no two such Events would be isomorphic)."""
        if basis is not None:
            version = f"folded-{basis}"  # never a server's resourceVersion: the two kinds of key never meet
        else:
            version = self._versions.get(item.workload.key) or self.stored.resource_version(
                item.workload.namespace, item.workload.name
            )
        body = self._body(item, name=name)
        if item.job is not None or not version:
            await self._create(item, body)
            return
        involved = body["involvedObject"]
        regarding = event_series.Reference(
            api_version=str(involved.get("apiVersion", "")),
            kind=str(involved.get("kind", "")),
            namespace=str(involved.get("namespace", "")),
            name=str(involved.get("name", "")),
            uid=str(involved.get("uid", "")),
            resource_version=version,
        )
        key = event_series.IsomorphicKey(
            type=item.type,
            action=str(body["action"]),
            reason=item.reason,
            reporting_controller=str(body["reportingComponent"]),
            reporting_instance=str(body["reportingInstance"]),
            regarding=regarding,
        )
        namespace = item.workload.namespace
        match self._series.observe(
            key, namespace=namespace, name=name, body=body, at_ms=item.at_ms, seq=seq, place=place
        ):
            case event_series.Create():
                await self._create(item, body)
            case event_series.WriteSeries() as write:
                await self._write_series(write)

    async def _write_series(self, write: event_series.WriteSeries) -> None:
        """Patch a series' count onto its Event; create it with the series when it is gone (client-go
        recordEvent)."""
        series = {"count": write.count, "lastObservedTime": kube_events.micro_time(write.last_observed_ms)}
        await self.limiter.acquire()
        try:
            await self.api.patch_object(
                resources.EVENTS, namespace=write.namespace, name=write.name, patch={"series": series}
            )
        except kube_errors.NotFoundError:
            body = {**write.body, "series": series}
            body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
            await self._post(body, about=f"{write.namespace}/{write.name}")
        except API_ERRORS as err:
            log.warning("event_write_failed", about=f"{write.namespace}/{write.name}", error=str(err))
        else:
            self.written += 1

    async def run(self, *, ready: Callable[[], bool], clock: Callable[[], int], every: float = 60.0) -> None:
        """Run the series timers on ``clock`` (ms since the epoch) every ``every`` seconds, while ``ready``
        (cancel to stop): the final count of a series no later decision follows is written, as Kueue's
        recorder's timers write it. The runner's own clock, as Kueue's recorder's; the decisions' times drive
        them in between (:meth:`record`)."""
        while True:
            await asyncio.sleep(every)
            if ready():
                await self.expire(clock())

    async def rejections(self) -> None:
        """A Warning Event on each object the watcher refused to read (the fold's ObjectRejected facts, as
        they stand), once per distinct problem: bad input shows in ``kubectl describe``/``kubectl events``,
        not only as a log line. Only the rejections the fold changed since the last call are looked at: they
        are the newest ``rejections`` with a mark above the last one seen (the fold keeps them in that order,
        and gives a rejection seen again with the same problem no new mark), so a batch costs what it
        changed, not every object ever refused. The Event's name comes from the problem, so a restarted
        dispatcher, which folds the same rejections again, writes nothing new (AlreadyExists)."""
        cluster = self.view.cluster
        if cluster.rejections_changed < self._rejections_seen:
            self._rejections_seen = 0  # another fold than the one last looked at (started over): all are new
        if cluster.rejections_changed == self._rejections_seen:
            return
        new: list[types.ObjectRejected] = []
        marks = cluster.rejection_marks
        for key in reversed(cluster.rejections):
            if marks.get(key, 0) <= self._rejections_seen:
                break
            new.append(cluster.rejections[key])
        self._rejections_seen = cluster.rejections_changed
        for fact in reversed(new):  # in the order the fold took them
            rejection = kube_events.for_rejection(fact)
            if rejection is not None:
                digest = hashlib.sha256(codec.encode(msgspec.structs.replace(fact, at_ms=0))).hexdigest()[:10]
                await self._write(await self._with_uid(rejection), name=f"{fact.name}.{digest}.rejected")

    async def _with_uid(self, item: kube_events.KubeEvent) -> kube_events.KubeEvent:
        """``item``, about a refused object, with that object's UID as the server has it now, so that ``kubectl
        describe`` (which lists the Events naming the object's UID) shows it; as it is when the object is gone
        or cannot be read (best effort)."""
        if item.job is None or item.job[2] or not item.namespaced:
            return item
        api_version, kind, _ = item.job
        try:
            ref = resources.ref_for(api_version, kind)
            obj = await self.api.get_object(ref, namespace=item.workload.namespace, name=item.workload.name)
        except (*API_ERRORS, kube_errors.UnknownKindError):
            return item
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        return dataclasses.replace(item, job=(api_version, kind, uid)) if uid else item

    async def write_now(self, item: kube_events.KubeEvent, *, name: str, uid: str = "") -> None:
        """Write ``item`` at once, as Event ``name`` (best effort, through the Events' limiter); ``uid``: the
        Workload object's, for one about a Workload the dispatcher no longer keeps (it deleted it)."""
        await self._write(item, name=name, uid=uid)

    async def _write(self, item: kube_events.KubeEvent, *, name: str, uid: str = "") -> None:
        await self._create(item, self._body(item, name=name, uid=uid))

    def _body(self, item: kube_events.KubeEvent, *, name: str, uid: str = "") -> dict[str, Any]:
        """``item`` as the Event object ``name`` to write (:func:`~kueue_es.services.dispatcher.kube_events.
        event_object`), about the Workload object's UID when ``uid`` is not given."""
        if item.job is None:
            # about the Workload object: the UID the server gave it, and not dated before the object was made (the
            # log may decide before the dispatcher makes it; Kueue records on an object that exists)
            created_ms = self.stored.workload_created_ms(item.workload.namespace, item.workload.name)
            if item.at_ms < created_ms:
                item = dataclasses.replace(item, at_ms=created_ms)
            uid = uid or self.stored.workload_uid(item.workload.namespace, item.workload.name)
        body = kube_events.event_object(item, name=name, uid=uid)
        # the workloads it names by their Workload object UIDs, as Kueue does
        body["message"] = kube_events.truncate(status.with_object_uid(item.message, self.stored.object_uid))
        return body

    async def _create(self, item: kube_events.KubeEvent, body: dict[str, Any]) -> None:
        await self._post(body, about=f"{item.workload.key} {item.reason}")

    async def _post(self, body: dict[str, Any], *, about: str) -> None:
        await self.limiter.acquire()
        try:
            await self.api.create_object(resources.EVENTS, namespace=body["metadata"]["namespace"], body=body)
        except kube_errors.ConflictError:
            pass  # written before: a redelivered decision
        except API_ERRORS as err:
            log.warning("event_write_failed", about=about, error=str(err))
        else:
            self.written += 1


def _finished_before(state: ClusterState, key: str | None, seq: int) -> bool:
    """Whether workload ``key`` had finished before the decision stored at ``seq`` (one decided on a basis before
    the finish, folded after it)."""
    wl = state.workloads.get(key) if key is not None else None
    return wl is not None and wl.finished is not None and 0 < wl.finished_seq < seq
