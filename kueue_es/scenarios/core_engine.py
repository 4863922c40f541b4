"""The core engine: a scenario folded in-process through the production deciders.

No bus, no services, no clock: a list of log messages, encoded exactly as
production encodes them (:func:`kueue_es.events.subjects.fact_message`,
:func:`kueue_es.services.runtime.build_batch`), each decoded and folded into a
:class:`~kueue_es.projections.cluster.ClusterState` with its sequence, so the state a
decider sees is the one a service would have folded from the same log, and
``kueue_es.replay.check_log`` can re-check every decision of a run.

A run, in order:

1. the facts of ``objects`` (ignored kinds left out);
2. for each pre-admitted workload: WorkloadObserved, then a batch headed by a
   DecisionRecord of role ``seed`` (replay skips unknown roles) with its
   QuotaReserved and WorkloadAdmitted, and its EvictionRequested when it is being evicted
   (an ``Evicted`` condition: nothing completes that eviction, so it keeps its quota);
3. WorkloadObserved for each pending workload;
4. a run phase; then each scenario event's fact, each followed by a run phase.

A run phase is ``run.cycles`` cycles, or settles: cycles until one changes
nothing, at most :data:`MAX_SETTLE_CYCLES` (more is a RunError). A cycle asks
the admitter, then the preemptor, then the TAS placer (then any other role of
``kueue_es.deciders.BY_ROLE``), each deciding on the state its predecessors'
batches were folded into, as the services do against one token (every head of the partition).
Each decider decides per partition (issue 18: ``state.partitions``, those owing a fence first, then
in id order), each
partition's batch on its own chain; a partition that owes a fence (an object handed over to
another partition) commits its record even when it decides nothing, and a blocked one (waiting
for such a fence) decides nothing until the fence is folded. Seed batches are in their
workload's partition.

The clock is deterministic: cycle ``i`` (counted over the whole run) reads
``base + 60 s + i s``, ``base`` being the latest workload creationTimestamp, or
2026-01-01T00:00:00Z when none has one. A finish event is stamped with the time of
the cycle that follows it; a ``wait`` event moves the clock on, and a settle sits out
backoffs by moving the clock to when the next one ends. Evictions complete at the end of
the cycle that requested them, and (``podsReady: auto``, the default) workloads admitted
in a cycle report PodsReady at its end (:func:`job_reports`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import msgspec
import structlog

from kueue_es import deciders
from kueue_es.events import codec, manifests, subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.projections.cluster import ClusterState
from kueue_es.projections.partitions import LEGACY, UNROUTED
from kueue_es.scenarios.engines import RunError, deletion_fact
from kueue_es.scenarios.outcome import Outcome, build_outcome
from kueue_es.scenarios.specs import (
    ApplyEvent,
    CheckEvent,
    DecideEvent,
    DeleteEvent,
    FinishEvent,
    PodsReadyEvent,
    RemoteEvent,
    Scenario,
    ScenarioEvent,
    WaitEvent,
    WorkerEvent,
)
from kueue_es.scheduling import lifecycle
from kueue_es.services.runtime import Decider, build_batch, fold_message

log = structlog.get_logger(__name__)

MAX_SETTLE_CYCLES = 1000
DEFAULT_BASE_MS = manifests.parse_time_ms("2026-01-01T00:00:00Z")
START_OFFSET_MS = 60_000
CYCLE_MS = 1_000
SEED = Decider(role="seed", logic_version=1, decide=lambda state, *, now_ms: [])
"""The pseudo-decider of pre-admitted workloads' decisions (no decider replays it)."""


@dataclass(kw_only=True)
class CoreRun:
    """A finished core run: the log (``messages``, seq 1..n), its decoded ``events``, the fold.

    ``cycles`` counts every decision cycle run (empty ones included).
    """

    scenario: Scenario
    messages: list[LogMessage] = field(default_factory=list)
    events: list[types.Event] = field(default_factory=list)
    state: ClusterState = field(default_factory=ClusterState)
    cycles: int = 0

    @property
    def log(self) -> list[tuple[int, types.Event]]:
        """``(seq, event)`` of the whole log, in order, a DecisionRecord followed by the decisions it carries
        (event schema 17) at its sequence, as their own messages followed it before: the decisions a test looks
        for are in the log whatever the layout. (Its finished releases and pending outcomes are not, as they
        were not when they were first carried; a fold takes those from the record.)"""
        out: list[tuple[int, types.Event]] = []
        for message, event in zip(self.messages, self.events, strict=True):
            out.append((message.seq, event))
            if isinstance(event, types.DecisionRecord) and event.decisions:
                out.extend((message.seq, decision) for decision in event.decisions)
        return out

    def outcome(self) -> Outcome:
        """The run's :class:`Outcome`."""
        return build_outcome(submitted=self.scenario.submitted, log=self.log, state=self.state)


class CoreEngine:
    """The ``core`` :class:`~kueue_es.scenarios.engines.Engine`: :func:`run_scenario`, then its outcome."""

    name = "core"

    def run(self, scenario: Scenario) -> Outcome:
        """Run ``scenario``; raises RunError when a phase does not settle."""
        return run_scenario(scenario).outcome()

    def close(self) -> None:
        """Nothing to release."""


def run_scenario(scenario: Scenario) -> CoreRun:
    """Run ``scenario`` in-process (module doc) and return the whole run.

    Raises RunError when a settle phase exceeds MAX_SETTLE_CYCLES.
    """
    runner = _Runner(scenario)
    runner.seed()
    runner.run_phase()
    for event in scenario.events:
        runner.apply_event(event)
        runner.run_phase()
    log.debug("scenario_run", scenario=scenario.name, cycles=runner.run.cycles, events=len(runner.run.events))
    return runner.run


def event_log(scenario: Scenario) -> list[tuple[int, types.Event]]:
    """The ``(seq, event)`` log of a core run of ``scenario`` (for tests and replay)."""
    return run_scenario(scenario).log


def clock_base_ms(scenario: Scenario) -> int:
    """The latest creationTimestamp among the scenario's workloads (ms), else 2026-01-01."""
    return max((w.metadata.creation_timestamp_ms for w in scenario.workloads), default=0) or DEFAULT_BASE_MS


class _Runner:
    """Appends messages to the run's log and folds them; runs cycles and phases."""

    def __init__(self, scenario: Scenario) -> None:
        self.run = CoreRun(scenario=scenario)
        self.base_ms = clock_base_ms(scenario)
        self.waited_ms = 0  # time passed by wait events and sat-out backoffs

    def now_ms(self) -> int:
        """The clock of the next cycle."""
        return self.base_ms + START_OFFSET_MS + self.run.cycles * CYCLE_MS + self.waited_ms

    def append(self, message: OutgoingMessage) -> None:
        """Store ``message`` at the next sequence and fold what a reader would decode from it."""
        seq = len(self.run.messages) + 1
        headers = {**message.headers, "Nats-Msg-Id": message.msg_id}
        stored = LogMessage(seq=seq, subject=message.subject, data=message.data, headers=headers)
        self.run.messages.append(stored)
        self.run.events.append(codec.decode(message.data))
        fold_message(self.run.state, stored)  # as a service folds it: a batch once verified whole

    def publish_fact(self, fact: types.Fact) -> None:
        """Log one fact on its production subject."""
        self.append(subjects.fact_message(fact))

    def commit(
        self, decider: Decider, outputs: Sequence[types.Output], *, now_ms: int, partition: str = LEGACY
    ) -> None:
        """Log one decision batch (DecisionRecord first) of ``partition``, built as the services build it."""
        state = self.run.state
        head, rest = build_batch(
            decider,
            outputs=outputs,
            basis_seq=state.last_seq,
            head_seq=state.heads.get(partition, 0),
            now_ms=now_ms,
            partition=partition,
        )
        for message in (head, *rest):
            self.append(message)

    def seed(self) -> None:
        """Objects, pre-admitted workloads with their seed decisions, pending workloads."""
        scenario = self.run.scenario
        for obj in scenario.objects:
            if obj.fact is not None:
                self.publish_fact(obj.fact)
        for admitted in scenario.admitted:
            assert isinstance(admitted.workload.fact, types.WorkloadObserved)
            self.publish_fact(admitted.workload.fact)
            meta = admitted.workload.fact.workload.metadata
            ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
            reserved = types.QuotaReserved(
                workload=ref,
                cluster_queue=admitted.cluster_queue,
                pod_set_assignments=list(admitted.pod_set_assignments),
                at_ms=admitted.reserved_at_ms,
            )
            accepted = types.admitted(reserved, at_ms=admitted.reserved_at_ms)
            partition = self.run.state.partitions.of_workload(ref.key) or UNROUTED
            outputs: list[types.Output] = [reserved, accepted]
            if admitted.eviction is not None:  # being evicted: its job stops after the run, if ever
                reason, message, at_ms = admitted.eviction
                outputs.append(
                    types.EvictionRequested(
                        workload=ref, cluster_queue=admitted.cluster_queue, reason=reason, message=message, at_ms=at_ms
                    )
                )
            self.commit(SEED, outputs, now_ms=self.now_ms(), partition=partition)
            for fact in job_reports([accepted], pods_ready=scenario.pods_ready, now_ms=admitted.reserved_at_ms):
                self.publish_fact(fact)
        # A pre-admitted workload whose queue is not its ClusterQueue's (none, as Kueue's tests often write them)
        # moved partition with its seed reservation; the partition it left fences at once, as the seed stands
        # for decisions made before the run, so the first cycle's partitions are not blocked.
        for partition in self.run.state.partitions.fencing() if scenario.admitted else ():
            self.commit(SEED, [], now_ms=self.now_ms(), partition=partition)
        for pending in scenario.pending:
            assert pending.fact is not None
            self.publish_fact(pending.fact)

    def apply_event(self, event: ScenarioEvent) -> None:
        """Log the fact of one scenario event (none for an object kind not modelled yet)."""
        match event:
            case FinishEvent(workload=key):
                self.publish_fact(types.WorkloadFinished(workload=self._ref(key), at_ms=self.now_ms()))
            case DeleteEvent(modelled=True):
                uid = self._ref(event.key).uid if event.kind == "Workload" else ""
                self.publish_fact(deletion_fact(event, self.run.state, uid=uid, at_ms=self.now_ms()))
            case DeleteEvent(refreshed=refreshed) if refreshed:
                for fact in refreshed:
                    self.publish_fact(fact)
            case ApplyEvent(object=obj, refreshed=refreshed) if obj.fact is not None or refreshed:
                for fact in (obj.fact, *refreshed) if obj.fact is not None else refreshed:
                    self.publish_fact(fact)
            case CheckEvent() | PodsReadyEvent():
                self.publish_fact(status_fact(event, self._ref(event.workload), self.run.state, at_ms=self.now_ms()))
            case WaitEvent(ms=ms):
                self.waited_ms += ms
            case DecideEvent(role=role):
                self.cycle(only=role)
            case RemoteEvent() | WorkerEvent():
                self.publish_fact(multikueue_fact(event, self._ref, at_ms=self.now_ms()))
            case _:
                log.debug("scenario_event_not_modelled", scenario=self.run.scenario.name, scenario_event=repr(event))

    def _ref(self, key: str) -> types.WorkloadRef:
        namespace, name = key.split("/")
        known = self.run.state.workloads.get(key)
        uid = known.workload.metadata.uid if known is not None else ""
        return types.WorkloadRef(namespace=namespace, name=name, uid=uid)

    def cycle(self, *, only: str = "") -> bool:
        """One scheduling cycle (``only``: of that decider role alone, a ``decide`` event);
        True when some decider committed something.

        After the deciders, every eviction requested in the cycle completes: the
        runner stands in for the dispatcher, the job and the watcher and logs a
        WorkloadStopped, so the victim's quota is released from the next cycle on.
        """
        now_ms, changed = self.now_ms(), False
        outputs_of_cycle: list[types.Output] = []
        state = self.run.state
        for decider in cycle_deciders():
            if only and decider.role != only:
                continue
            # A partition that owes a fence decides first: the services' deciders run side by side, so an
            # object handed over (a workload reserved in another partition's ClusterQueue, a queue moved)
            # never waits a whole cycle behind the partition it goes to.
            fencing = state.partitions.fencing()
            for partition in [*fencing, *(p for p in state.partitions.all() if p not in fencing)]:
                outputs = list(decider.decide(state, now_ms=now_ms, partition=partition))
                if outputs or state.partitions.fence_needed(partition) is not None:
                    self.commit(decider, outputs, now_ms=now_ms, partition=partition)
                    changed = True
                    outputs_of_cycle.extend(outputs)
                log.debug(
                    "decided", cycle=self.run.cycles, role=decider.role, partition=partition, outputs=len(outputs)
                )
        for fact in job_reports(outputs_of_cycle, pods_ready=self.run.scenario.pods_ready, now_ms=now_ms):
            self.publish_fact(fact)
        self.run.cycles += 1
        return changed

    def run_phase(self) -> None:
        """``run.cycles`` cycles, or settle (cycles until one changes nothing)."""
        scenario = self.run.scenario
        if scenario.run.cycles is not None:
            for _ in range(scenario.run.cycles):
                self.cycle()
            return
        for _ in range(MAX_SETTLE_CYCLES):
            if self.cycle():
                continue
            backoff_end = lifecycle.backoff_wakeup_ms(self.run.state)
            if backoff_end is None:
                return
            # Settle sits out backoffs: the clock jumps to when the next one ends.
            self.waited_ms += max(0, backoff_end - self.now_ms())
        raise RunError(
            scenario.path,
            f"the run does not settle: decisions still change after {MAX_SETTLE_CYCLES} cycles "
            f"(last decision: {type(self.run.events[-1]).__name__})",
        )


def job_reports(outputs: Sequence[types.Output], *, pods_ready: str, now_ms: int) -> list[types.Fact]:
    """What the jobs report after a cycle's decisions, the runner standing in for the
    dispatcher, the jobs and the watcher: every eviction completes (WorkloadStopped) and,
    with ``pods_ready`` "auto", every workload admitted gets its pods ready (WorkloadPodsReady)."""
    facts: list[types.Fact] = []
    for output in outputs:
        if isinstance(output, types.EvictionRequested):
            facts.append(types.WorkloadStopped(workload=output.workload, reason=output.reason, at_ms=now_ms))
        elif isinstance(output, types.WorkloadAdmitted) and pods_ready == "auto":
            facts.append(types.WorkloadPodsReady(workload=output.workload, ready=True, reason="Started", at_ms=now_ms))
    return facts


def status_fact(
    event: CheckEvent | PodsReadyEvent, ref: types.WorkloadRef, state: ClusterState, *, at_ms: int
) -> types.Fact:
    """The fact of a scenario's ``check`` or ``podsReady`` event."""
    if isinstance(event, CheckEvent):
        return types.AdmissionCheckStateChanged(
            workload=ref,
            check=event.check,
            state=event.state,  # type: ignore[arg-type]  # validated by the loader
            message=event.message,
            requeue_after_seconds=event.requeue_after_seconds,
            pod_set_updates=list(event.pod_set_updates),
            at_ms=at_ms,
        )
    known = state.workloads.get(ref.key)
    was_ready = known is not None and known.pods_ready is not None and known.pods_ready.ready
    if event.ready:
        before = known.pods_ready.reason if known is not None and known.pods_ready is not None else ""
        reason = "Recovered" if before in ("WaitForRecovery", "Recovered") else "Started"
    else:
        reason = "WaitForRecovery" if was_ready else "WaitForStart"
    return types.WorkloadPodsReady(workload=ref, ready=event.ready, reason=reason, at_ms=at_ms)


def multikueue_fact(
    event: RemoteEvent | WorkerEvent, ref_of: Callable[[str], types.WorkloadRef], *, at_ms: int
) -> types.Fact:
    """The fact of a scenario's ``remote`` or ``worker`` event, as the MultiKueue edge would report it at
    ``at_ms`` (``ref_of``: a workload key's reference)."""
    if isinstance(event, WorkerEvent):
        return types.WorkerClusterConnectivity(
            cluster=event.cluster, active=event.active, reason=event.reason, message=event.message, at_ms=at_ms
        )
    ref = ref_of(event.workload)
    if event.state == "Gone":
        return types.RemoteWorkloadObserved(workload=ref, cluster=event.cluster, present=False, at_ms=at_ms)
    admitted = event.state == "Admitted"
    return types.RemoteWorkloadObserved(
        workload=ref,
        cluster=event.cluster,
        quota_reserved=event.state in ("QuotaReserved", "Admitted"),
        admitted=admitted,
        admitted_at_ms=at_ms - event.admitted_ago_ms if admitted else 0,
        evicted=event.state == "Evicted",
        eviction_reason=event.reason if event.state == "Evicted" else "",
        finished=event.state == "Finished",
        finish_reason=event.reason if event.state == "Finished" else "",
        finish_message=event.message if event.state == "Finished" else "",
        at_ms=at_ms,
        topology_assigned=list(event.topology_assigned) or msgspec.UNSET,
    )


def cycle_deciders() -> list[Decider]:
    """The deciders of a cycle: admitter, preemptor, placer, then any other role (sorted), never ``seed``."""
    first = [deciders.ADMITTER.role, deciders.PREEMPTOR.role, deciders.PLACER.role]
    roles = [r for r in first if r in deciders.BY_ROLE] + sorted(r for r in deciders.BY_ROLE if r not in first)
    return [deciders.BY_ROLE[r] for r in roles if r != SEED.role]
