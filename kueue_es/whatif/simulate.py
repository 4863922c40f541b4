"""A recorded history re-run through the real deciders, with a simulated job side and clock.

The deciders are the services' pure cores (:data:`kueue_es.deciders.BY_ROLE`: admitter,
preemptor, TAS placer, in that order each cycle, as :mod:`kueue_es.scenarios.core_engine` runs
them), folding with :func:`kueue_es.services.runtime.fold_message` a log built as production
builds it (facts by :func:`kueue_es.events.subjects.fact_message`, batches by
:func:`kueue_es.services.runtime.build_batch`, one chain of DecisionRecords per partition), so
``kueue-es replay --file`` re-checks a simulated log like a recorded one.

The clock is simulated, in ms. Instants come from the history's facts (their recorded times),
the jobs' finishes, the lifecycle's wakeups (:func:`kueue_es.scheduling.lifecycle.next_wakeup_ms`:
backoffs, timeouts) and the partitions' cycles. At the start (the cut of ``--from``) and at each
instant, in order: the finishes due, the facts due, then a cycle of every partition
(:mod:`kueue_es.projections.partitions`: a cohort tree, or a ClusterQueue without a cohort) that
something touched since its last cycle (a fact of one of its workloads, a decision of it; an
object's fact, a wakeup or a change of waitForPodsReady's admission block touches every one, as a
service's fold marks them) and is not busy, a partition owing a hand-over's fence first; one that
nothing touched would decide what it decided before. A partition's cycle that decided something
takes the recorded log's cycle length (:func:`kueue_es.whatif.history.cycle_length`): it is busy
until then and decides again then, seeing what arrived meanwhile, as a service's partition waits for
its own commit before it decides it again; the other partitions decide whenever something arrives,
so a cohort tree's timing never depends on another's. The job side, standing in for the dispatcher,
the jobs and the watcher (as Kueue's performance runner does): an admitted workload starts at once
(WorkloadPodsReady) and finishes (WorkloadFinished, as recorded) its recorded run time later; an
evicted one stops at once (WorkloadStopped) and a readmitted one runs its whole run time again; a
workload with no recorded finish runs to the end.

Deletions the history records of what Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer holds
while in use (:data:`kueue_es.events.models.FINALIZED_KINDS`) follow that finalizer in the simulated
history, as the dispatcher does in a live one: a ClusterQueue some workload reserves quota in, or a
ResourceFlavor or AdmissionCheck a ClusterQueue names, or a Topology a ResourceFlavor names, is
marked terminating instead (a terminating ClusterQueue admits nothing more and its usage stays in its
cohort) and goes once nothing uses it; one the log records terminating goes then too, and the
recorded deletion of an object already gone is passed over. A recorded re-creation of the name waits
for the old object to go.

Pure and deterministic: the same history and changes give the same log, byte for byte.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from kueue_es.events import codec, manifests, models, subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.projections.cluster import ClusterState, pods_ready_enabled
from kueue_es.scenarios.core_engine import cycle_deciders, job_reports
from kueue_es.scheduling import lifecycle
from kueue_es.services.dispatcher import status
from kueue_es.services.runtime import Decider, build_batch, fold_message, workload_key_of
from kueue_es.whatif.changes import Changes, identity_of
from kueue_es.whatif.history import History, TimedFact

MAX_SETTLE_CYCLES = 1000
SETTLE_CYCLES_PER_WORKLOAD = 10
"""The simulation runs at most MAX_SETTLE_CYCLES + this many per workload known deciding partition cycles in a row
with nothing new delivered (no fact, finish or wakeup): Kueue admits one workload per ClusterQueue a cycle, so a
backlog takes about a cycle per workload; far more is a livelock."""
_FINISH, _WAKE, _CYCLE = 0, 1, 2

Progress = Callable[[int], None]


class SimulationError(RuntimeError):
    """The simulation does not settle (decisions keep changing with nothing new delivered)."""


@dataclass(kw_only=True)
class Run:
    """A finished simulation: its whole log (the recorded prefix, then the simulated part) and its
    end (ms): the later of the last message it wrote and the end of the recorded history (a wakeup
    that decided nothing ends nothing)."""

    messages: list[LogMessage] = field(default_factory=list)
    events: list[types.Event] = field(default_factory=list)
    state: ClusterState = field(default_factory=ClusterState)
    cycles: int = 0
    end_ms: int = 0

    @property
    def log(self) -> list[tuple[int, types.Event]]:
        """``(seq, event)`` of the whole log."""
        return [(m.seq, e) for m, e in zip(self.messages, self.events, strict=True)]

    @property
    def times(self) -> list[int]:
        """Each message's time (ms): when the simulation wrote it, or when the recording stored it (0:
        not known), in log order."""
        return [m.time_ms for m in self.messages]


def simulate(history: History, *, changes: Changes | None = None, progress: Progress | None = None) -> Run:
    """Run ``history`` with ``changes`` (None: unchanged, the baseline); see the module.
    ``progress`` is called with 1 per fact handled. Raises SimulationError when the simulation
    does not settle."""
    sim = _Simulation(history, changes or Changes())
    sim.run(progress)
    return sim.out


Identity = tuple[str, str]
"""(kind, name) of a cluster-scoped object of :data:`kueue_es.events.models.FINALIZED_KINDS`."""


class _Simulation:
    def __init__(self, history: History, changes: Changes) -> None:
        self.history, self.changes = history, changes
        self.out = Run()
        self.timers: list[tuple[int, int, int, str, int]] = []  # (ms, kind, order, key, generation)
        self.order = 0
        self.generation: dict[str, int] = {}
        self.wakeups: set[int] = set()
        self.busy: dict[str, int] = {}  # partition -> when its next cycle may run
        self.dirty: set[str] = set()  # partitions something touched since their last cycle
        self.everything = True  # something any partition may care about (an object, a wakeup) since the last cycles
        self.idle_cycles = 0  # partition cycles that decided, in a row, with nothing delivered in between
        self.now = history.start_ms
        self.seen_overrides: set[str] = set()
        self.facts: list[TimedFact] = []
        self.index = 0
        self.progress: Progress | None = None
        self.terminating: dict[Identity, None] = {}  # marked for deletion on the log, not gone yet
        self.held: dict[Identity, list[types.Fact]] = {}  # its recorded deletion, then its later facts
        self.gone: dict[Identity, str] = {}  # deleted here before the recording deleted it: its uid

    # --- the log ------------------------------------------------------------------------------

    def append(self, message: OutgoingMessage | LogMessage) -> None:
        seq = self.out.messages[-1].seq + 1 if self.out.messages else 1
        if isinstance(message, LogMessage):
            stored = msgspec.structs.replace(message, seq=seq, pending=0)
        else:
            headers = {**message.headers, "Nats-Msg-Id": message.msg_id}
            stored = LogMessage(seq=seq, subject=message.subject, data=message.data, headers=headers, time_ms=self.now)
        event = codec.decode(stored.data)
        self.out.messages.append(stored)
        self.out.events.append(event)
        state = self.out.state
        key = workload_key_of(stored.subject)
        before = state.partitions.of_workload(key) if key is not None else None
        blocked = _admission_blocked(state)
        fold_message(state, stored)
        self.touch(event, key, before)
        if blocked != _admission_blocked(state):
            self.everything = True  # waitForPodsReady.blockAdmission: every partition's admissions
        for one in types.unbatched(event):
            self.note_terminating(one)

    def touch(self, event: types.Event, key: str | None, before: str | None) -> None:
        """Note the partitions ``event`` (just folded) may change the decisions of, as a service's fold does
        (:class:`kueue_es.services.runtime.LogFold`): a record's own and those of the workloads it decided; a
        workload's fact, its partition before and after; anything else (an object, a batch), every one."""
        partitions = self.out.state.partitions
        if isinstance(event, types.DecisionRecord):
            self.dirty.add(event.partition)
            self.dirty.update(p for d in event.carried if (p := partitions.of_workload(d.workload.key)))
        elif key is not None:
            self.dirty.update(p for p in (before, partitions.of_workload(key)) if p)
        else:
            self.everything = True

    def publish(self, fact: types.Fact) -> None:
        self.append(subjects.fact_message(fact))

    def commit(self, decider: Decider, outputs: list[types.Output], partition: str) -> None:
        state = self.out.state
        head, rest = build_batch(
            decider,
            outputs=outputs,
            basis_seq=state.last_seq,
            head_seq=state.heads.get(partition, 0),
            now_ms=self.now,
            partition=partition,
        )
        for message in (head, *rest):
            self.append(message)

    # --- the run ------------------------------------------------------------------------------

    def run(self, progress: Progress | None) -> None:
        history = self.history
        for message in history.prefix:
            self.append(message)
        self.inject_at_start()
        for key in history.stopping:
            self.publish(types.WorkloadStopped(workload=self.ref(key), reason="Preempted", at_ms=self.now))
        for key, start in history.running.items():
            self.start(key, start_ms=start)
        self.facts, self.index, self.progress = history.facts, 0, progress
        self.settle()  # what waits at the start (the cut) is decided then, as the deciders do when they start
        while self.index < len(self.facts) or self.timers:
            next_fact = self.facts[self.index].at_ms if self.index < len(self.facts) else None
            next_timer = self.timers[0][0] if self.timers else None
            self.now = max(self.now, min(t for t in (next_fact, next_timer) if t is not None))
            if self.deliver():
                self.idle_cycles = 0
            self.settle()
        self.out.end_ms = max(history.end_ms, max((m.time_ms for m in self.out.messages), default=0))

    def deliver(self) -> int:
        """The finishes, wakeups, partition cycles and facts due by now, in that order; how many
        finishes, wakeups and facts were delivered (a partition's cycle delivers nothing)."""
        delivered = 0
        while self.timers and self.timers[0][0] <= self.now:
            _, kind, _, key, generation = heapq.heappop(self.timers)
            if kind == _FINISH and self.generation.get(key) == generation:
                self.finish(key)
            elif kind == _WAKE:
                self.wakeups.discard(int(key))
                self.everything = True  # a backoff or timeout ended somewhere
            elif kind == _CYCLE:
                self.dirty.add(key)
            if kind != _CYCLE:
                delivered += 1
        while self.index < len(self.facts) and self.facts[self.index].at_ms <= self.now:
            self.fact(self.facts[self.index].fact)
            self.index += 1
            delivered += 1
            if self.progress is not None:
                self.progress(1)
        return delivered

    def inject_at_start(self) -> None:
        """The changed objects the history does not observe before the simulation's start are
        created now; those it already has (a --from cut) are replaced now."""
        state = self.out.state
        known: dict[str, dict[str, object]] = {
            "ClusterQueue": dict(state.cluster_queues),
            "Cohort": dict(state.cohorts),
            "ResourceFlavor": dict(state.flavors),
            "LocalQueue": {f"{ns}/{name}": lq for (ns, name), lq in state.local_queues.items()},
            "WorkloadPriorityClass": dict(state.priority_classes),
        }
        observed_later = {identity_of(f.fact) for f in self.history.facts}
        for identity, fact in self.changes.objects.items():
            kind, namespace, name = identity
            current = known[kind].get(f"{namespace}/{name}" if namespace else name)
            if current is not None:
                self.publish(self.changes.replacement(_observed(kind, current)) or fact)
            elif identity not in observed_later:
                self.publish(fact)
        if self.changes.configuration is not None:
            self.publish(types.ConfigurationObserved(configuration=self.changes.configuration))
        if self.changes.priorities:
            for wl in list(state.workloads.values()):
                changed = self.override(wl.workload)
                if changed is not wl.workload and wl.finished is None:
                    self.publish(types.WorkloadObserved(workload=changed))

    def fact(self, fact: types.Fact) -> None:
        """A recorded fact, as the changes have it, on the log (see :meth:`route` for deletions)."""
        replaced = self.changes.replacement(fact)
        if replaced is not None:
            fact = replaced
        elif isinstance(fact, types.WorkloadObserved) and self.changes.priorities:
            fact = types.WorkloadObserved(workload=self.override(fact.workload))
        elif isinstance(fact, types.ObjectDeleted) and fact.kind == "Workload":
            self.bump(f"{fact.namespace}/{fact.name}")  # a deleted workload's job no longer finishes
        self.route(fact)

    def override(self, workload: models.Workload) -> models.Workload:
        """``workload`` with the priority the changes give it (itself when none)."""
        meta = workload.metadata
        keys = [f"{meta.namespace}/{meta.name}"]
        if workload.owner is not None:
            keys.append(f"{meta.namespace}/{workload.owner.name}")
        for key in keys:
            if key in self.changes.priorities:
                self.seen_overrides.add(key)
                spec = msgspec.structs.replace(
                    workload.spec, priority=self.changes.priorities[key], priority_class_ref=None
                )
                return msgspec.structs.replace(workload, spec=spec)
        return workload

    # --- Kueue's resource-in-use finalizer ------------------------------------------------------

    def route(self, fact: types.Fact) -> None:
        """``fact`` on the log, but for an object of FINALIZED_KINDS: a deletion of one still in use marks
        it terminating and waits (:attr:`held`) until it goes (:meth:`release`), and so does every later
        fact of its kind and name (a re-creation); the recorded facts of one that went here already
        (:attr:`gone`), its deletion included, are passed over."""
        identity = _finalized(fact)
        if identity is None:
            self.publish(fact)
            return
        if identity in self.held:
            self.held[identity].append(fact)
            return
        gone = self.gone.get(identity)
        if gone is not None and _uid(fact) in (gone, ""):
            if isinstance(fact, types.ObjectDeleted):
                del self.gone[identity]
            return
        self.gone.pop(identity, None)
        kind, name = identity
        current = self.held_object(kind, name)
        if isinstance(fact, types.ObjectDeleted) and current is not None and self.in_use(kind, name):
            if not models.is_terminating(current.metadata):
                self.publish(_marked(kind, current, at_ms=self.now))
            self.held[identity] = [fact]
            return
        self.publish(fact)

    def note_terminating(self, event: types.Event) -> None:
        """Keep :attr:`terminating` as a message on the log marks an object, or deletes it."""
        if isinstance(event, types.ObjectDeleted):
            if event.kind in models.FINALIZED_KINDS and not event.namespace:
                self.terminating.pop((event.kind, event.name), None)
            return
        identity = _finalized(event)
        if identity is None:
            return
        obj = getattr(event, _OBSERVED[identity[0]])
        if models.is_terminating(obj.metadata):
            self.terminating[identity] = None
        else:
            self.terminating.pop(identity, None)

    def release(self) -> int:
        """Every terminating object nothing uses any more goes, as the dispatcher takes Kueue's finalizer off
        and the API server deletes it: its recorded deletion (then what was held back behind it), or, when the
        recording deleted it later, a deletion now. How many went."""
        went = 0
        while True:
            free = [identity for identity in sorted(self.terminating) if not self.in_use(*identity)]
            if not free:
                return went
            for identity in free:
                kind, name = identity
                current = self.held_object(kind, name)
                if current is None:
                    self.terminating.pop(identity, None)
                    continue
                waiting = self.held.pop(identity, None)
                went += 1
                if waiting:
                    self.publish(waiting[0])
                    for later in waiting[1:]:
                        self.route(later)
                else:
                    uid = current.metadata.uid
                    self.publish(types.ObjectDeleted(kind=kind, name=name, uid=uid))
                    self.gone[identity] = uid

    def held_object(self, kind: str, name: str) -> _Finalized | None:
        """The object of ``kind`` (one of FINALIZED_KINDS) and ``name`` on the log now, or None."""
        if kind == "ClusterQueue":
            return self.out.state.cluster_queues.get(name)
        return status.held_object(self.out.state, kind, name)

    def in_use(self, kind: str, name: str) -> bool:
        """Whether Kueue's finalizer holds the object: a workload reserves quota in the ClusterQueue, or a
        ClusterQueue names the ResourceFlavor or AdmissionCheck, or a ResourceFlavor the Topology
        (:func:`kueue_es.services.dispatcher.status.in_use_by`, as the dispatcher decides)."""
        state = self.out.state
        if kind == "ClusterQueue":
            return bool(state.reserved.get(name))
        return bool(status.in_use_by(state, kind, name))

    # --- the cycles -----------------------------------------------------------------------------

    def settle(self) -> None:
        """At this instant: a cycle of every partition something touched since its last cycle (:meth:`touch`)
        or that owes a fence, that one first, but for one that is busy; one that decided is busy for
        ``history.cycle_ms`` and decides again then; objects their finalizer no longer holds go
        (:meth:`release`); until no partition is left to decide. Raises SimulationError after too many
        deciding partition cycles in a row with nothing delivered in between (a livelock)."""
        state = self.out.state
        while True:
            self.release()
            if self.everything:
                self.dirty.update(state.partitions.all())
                self.everything = False
            fencing = state.partitions.fencing()
            due = [p for p in [*fencing, *sorted(self.dirty - set(fencing))] if self.busy.get(p, self.now) <= self.now]
            if not due:
                break
            for partition in due:
                self.dirty.discard(partition)
                self.cycle(partition)
        wake = lifecycle.next_wakeup_ms(state)
        if wake is not None and wake > self.now and wake not in self.wakeups:
            self.wakeups.add(wake)
            self.push(wake, _WAKE, str(wake), 0)

    def cycle(self, partition: str) -> None:
        """One cycle of ``partition`` at this instant: each decider in turn, committing what it decides (or
        the fence the partition owes); when it decided, the job side answers and the partition is busy for
        a cycle's length."""
        state = self.out.state
        decided: list[types.Output] = []
        committed = False
        for decider in cycle_deciders():
            outputs = list(decider.decide(state, now_ms=self.now, partition=partition))
            if outputs or state.partitions.fence_needed(partition) is not None:
                self.commit(decider, outputs, partition)
                decided.extend(outputs)
                committed = True
        self.out.cycles += 1
        if not committed:
            return
        self.react(decided)
        self.busy[partition] = self.now + self.history.cycle_ms
        self.push(self.now + self.history.cycle_ms, _CYCLE, partition, 0)
        self.idle_cycles += 1
        limit = MAX_SETTLE_CYCLES + SETTLE_CYCLES_PER_WORKLOAD * len(state.workloads)
        if self.idle_cycles > limit:
            raise SimulationError(
                f"the simulation does not settle at {self.now} ms: decisions still change after {limit} "
                "cycles with nothing new delivered"
            )

    def react(self, outputs: list[types.Output]) -> None:
        """The job side's answer to a cycle's decisions (see the module)."""
        decisions = [o for o in outputs if not isinstance(o, types.PendingOutcome)]
        for output in decisions:
            if isinstance(output, types.EvictionRequested):
                self.bump(output.workload.key)
        for fact in job_reports(decisions, pods_ready="auto", now_ms=self.now):
            self.publish(fact)
        for output in decisions:
            if isinstance(output, types.WorkloadAdmitted):
                self.start(output.workload.key, start_ms=self.now)

    def start(self, key: str, *, start_ms: int) -> None:
        finish = self.history.finishes.get(key)
        generation = self.bump(key)
        if finish is not None:
            self.push(max(self.now, start_ms + finish.run_ms), _FINISH, key, generation)

    def finish(self, key: str) -> None:
        wl = self.out.state.workloads.get(key)
        done = self.history.finishes[key]
        if wl is None or wl.finished is not None:
            return
        self.publish(
            types.WorkloadFinished(
                workload=self.ref(key),
                succeeded=done.succeeded,
                reason=done.reason,
                message=done.message,
                at_ms=self.now,
            )
        )

    def bump(self, key: str) -> int:
        self.generation[key] = self.generation.get(key, 0) + 1
        return self.generation[key]

    def push(self, at_ms: int, kind: int, key: str, generation: int) -> None:
        self.order += 1
        heapq.heappush(self.timers, (at_ms, kind, self.order, key, generation))

    def ref(self, key: str) -> types.WorkloadRef:
        namespace, name = key.split("/", 1)
        wl = self.out.state.workloads.get(key)
        return types.WorkloadRef(namespace=namespace, name=name, uid=wl.workload.metadata.uid if wl else "")


def _observed(kind: str, obj: object) -> types.Fact:
    match kind:
        case "ClusterQueue":
            assert isinstance(obj, models.ClusterQueue)
            return types.ClusterQueueObserved(cluster_queue=obj)
        case "Cohort":
            assert isinstance(obj, models.Cohort)
            return types.CohortObserved(cohort=obj)
        case "ResourceFlavor":
            assert isinstance(obj, models.ResourceFlavor)
            return types.ResourceFlavorObserved(flavor=obj)
        case "LocalQueue":
            assert isinstance(obj, models.LocalQueue)
            return types.LocalQueueObserved(local_queue=obj)
    assert isinstance(obj, models.WorkloadPriorityClass)
    return types.WorkloadPriorityClassObserved(priority_class=obj)


_Finalized = models.ClusterQueue | models.ResourceFlavor | models.AdmissionCheck | models.Topology

_OBSERVED: dict[str, str] = {
    "ClusterQueue": "cluster_queue",
    "ResourceFlavor": "flavor",
    "AdmissionCheck": "admission_check",
    "Topology": "topology",
}
"""Per kind of FINALIZED_KINDS, the field of its Observed fact holding the object."""

_KIND_OF: dict[type, str] = {
    types.ClusterQueueObserved: "ClusterQueue",
    types.ResourceFlavorObserved: "ResourceFlavor",
    types.AdmissionCheckObserved: "AdmissionCheck",
    types.TopologyObserved: "Topology",
}


def _admission_blocked(state: ClusterState) -> bool:
    """Whether waitForPodsReady.blockAdmission holds every admission back now (a workload holding quota is
    not ready): a change of it concerns every partition, as one cluster-wide gate."""
    config = state.configuration
    wait = config.wait_for_pods_ready
    return bool(wait is not None and wait.block_admission and state.not_ready and pods_ready_enabled(config))


def _finalized(event: types.Event) -> Identity | None:
    """(kind, name) of an object of FINALIZED_KINDS that ``event`` observes or deletes, else None."""
    if isinstance(event, types.ObjectDeleted):
        return (event.kind, event.name) if event.kind in models.FINALIZED_KINDS and not event.namespace else None
    kind = _KIND_OF.get(type(event))
    if kind is None:
        return None
    return kind, getattr(event, _OBSERVED[kind]).metadata.name


def _uid(fact: types.Fact) -> str:
    """The uid of the object an ObjectDeleted or an Observed fact of FINALIZED_KINDS names ("" unknown)."""
    if isinstance(fact, types.ObjectDeleted):
        return fact.uid
    kind = _KIND_OF[type(fact)]
    return str(getattr(fact, _OBSERVED[kind]).metadata.uid or "")


def _marked(kind: str, obj: _Finalized, *, at_ms: int) -> types.Fact:
    """The fact the watcher publishes of ``obj`` marked for deletion at ``at_ms`` while Kueue's finalizer holds
    it: its Observed fact with :data:`kueue_es.events.models.TERMINATING_ANNOTATION`."""
    annotations = {**obj.metadata.annotations, models.TERMINATING_ANNOTATION: manifests.format_time_ms(at_ms)}
    marked = msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, annotations=annotations))
    fact_type = next(t for t, k in _KIND_OF.items() if k == kind)
    fact: types.Fact = fact_type(**{_OBSERVED[kind]: marked})
    return fact
