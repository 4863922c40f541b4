"""Kueue's rules in virtual time: what the deciders' cores give on a configuration when every hop
between the parts of the system takes a set time (issue 18, ``kueue-es bench rules``).

The ideal bound (:mod:`kueue_es.perfbench.ideal`) admits greedily and never evicts: no scheduler
following Kueue's rules reaches it when the rules preempt. This runs the real admitter, preemptor
and TAS placer cores (``kueue_es.deciders``, the code the services run and replay re-runs) over the
configuration's workloads on a virtual clock, with no bus and no processes, and each hop of the
running system replaced by a fixed delay:

- ``admitter_ms`` / ``preemptor_ms`` (the TAS placer takes the preemptor's): a cycle starts on the
  state folded so far and its decisions are on the log (folded by every reader) this long after; the
  decider runs no other cycle meanwhile, as a runner waits for its commit;
- ``dispatch_ms``: a decision on the log to its job started (an admission) or stopped (an eviction),
  the dispatcher's write and the kubelet together;
- ``report_ms``: a job's end to its ``WorkloadFinished`` on the log (the watcher's fact).

With a :class:`WriteBudget` (``--api-qps``) the dispatcher's writes also wait for client-go's limiter,
one at a time in log order, as the bench's simulated API does; ``pace`` then tries a rule Kueue does
not have, the admitter holding its cycles while admitted workloads wait for their starts' writes.

The admitter holds its cycles while a nomination is open, for at most ``runtime.YIELD_SECONDS``,
as its runner does; it wakes for its lifecycle timers (``Decider.wakes_at``). A run's figures are
Kueue's, as the bench computes them: wall from the streams' start to the last release, average time
to (the last) admission per workload class, evictions per class.

Pure and deterministic: the same configuration and hops give the same figures; 15-25 s for the
baseline's 15,000 workloads. ``kueue-es what-if`` (:mod:`kueue_es.whatif.simulate`) re-runs a recorded
log with changed objects; this runs a generator configuration, with no log and no message built, and
its delays are the point.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.perfbench.generator import Generated, PlannedWorkload, object_facts, workload_fact
from kueue_es.projections import partitions
from kueue_es.projections.cluster import ClusterState, apply, apply_outputs
from kueue_es.services.runtime import RECORD_CARRIED, YIELD_SECONDS, Decider, slow_down_seconds

START_MS = 1_000_000_000_000
"""The virtual clock's start (ms since the epoch): the streams start here."""
MAX_STEPS_AT_ONE_INSTANT = 10_000
"""Decider cycles at one virtual instant before the run is called a livelock (zero hops only)."""


@dataclass(frozen=True, kw_only=True)
class Hops:
    """The delays standing for the running system's hops, ms (see the module docstring)."""

    admitter_ms: int
    preemptor_ms: int
    dispatch_ms: int
    report_ms: int

    @classmethod
    def every(cls, ms: int) -> Hops:
        """The same delay for every hop."""
        return cls(admitter_ms=ms, preemptor_ms=ms, dispatch_ms=ms, report_ms=ms)


@dataclass(frozen=True, kw_only=True)
class WriteBudget:
    """The dispatcher's write limiter (``--api-qps``; client-go's token bucket: ``qps`` a second, ``burst``
    at most banked) and its order: the dispatcher takes the decisions one at a time in log order, each Job
    write waiting for its slot, so a decision waits for every write before it. A start whose eviction is on
    the log when the dispatcher takes it up is skipped (no write); every stop takes a slot (one write each,
    as the simulated API counts them: docs/benchmarks.md, "What the dispatcher writes").

    ``pace``: the admitter holds its cycles while this many admitted workloads wait for their start's write
    (None: never)."""

    qps: float
    burst: int = 100
    pace: int | None = None


@dataclass(kw_only=True)
class RulesResult:
    """One virtual run: ``wall_ms`` from the streams' start to the last release; per workload class,
    ``evictions`` and ``average_time_to_admission_ms`` (creation to the last admission, as Kueue's
    figure); ``decisions`` (outputs other than pending outcomes) and ``cycles`` (decider runs)."""

    hops: Hops
    wall_ms: int = 0
    evictions: Counter[str] = field(default_factory=Counter)
    average_time_to_admission_ms: dict[str, int] = field(default_factory=dict)
    admitted: int = 0
    decisions: int = 0
    cycles: int = 0
    writes: int = 0
    """Job writes (starts and stops) under a WriteBudget; 0 without one."""
    unwritten_starts: int = 0
    """Starts skipped under a WriteBudget: the workload's eviction was on the log before its start's turn."""
    nominations: int = 0
    answers_evicting_nothing_new: int = 0
    """Answers with targets that were all being evicted already, so they evict nothing new: a workload
    waiting for evictions in flight (Kueue's "Pending the preemption of N workload(s)"), or before
    preemptor logic 22 the preemptor's search not taking the admitter's nominated targets (docs/benchmarks.md,
    "Kueue's rules in virtual time")."""


def parse_hops(text: str) -> Hops:
    """``"N"`` (every hop N ms) or ``"A,P,D,R"`` (admitter, preemptor, dispatch, report ms) as Hops.
    Raises ValueError naming the text."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--hop-ms {text!r}: whole ms, N or A,P,D,R") from None
    if len(values) not in (1, 4) or min(values) < 0:
        raise ValueError(f"--hop-ms {text!r}: one or four whole ms, none negative")
    if len(values) == 1:
        return Hops.every(values[0])
    return Hops(admitter_ms=values[0], preemptor_ms=values[1], dispatch_ms=values[2], report_ms=values[3])


class LivelockError(RuntimeError):
    """The deciders kept deciding at one virtual instant: only possible with zero admitter and preemptor
    hops, when their answers to each other go round without time passing (preemptor logic 21 answered some
    nominations with victims already being evicted, and the admitter nominated them again: docs/benchmarks.md,
    "Kueue's rules in virtual time"); a hop of 1 ms or more lets the stops land."""


def check_budget(writes: WriteBudget) -> None:
    """Raise ValueError unless ``writes`` has qps > 0, burst >= 1 and pace None or >= 1."""
    if writes.qps <= 0 or writes.burst < 1 or (writes.pace is not None and writes.pace < 1):
        raise ValueError(f"a write budget needs --api-qps > 0, burst >= 1 and --pace >= 1 (or none): {writes}")


def simulate(
    generated: Generated,
    hops: Hops,
    planned: list[PlannedWorkload] | None = None,
    *,
    preemptor: Decider = deciders.PREEMPTOR,
    writes: WriteBudget | None = None,
    max_steps_at_one_instant: int = MAX_STEPS_AT_ONE_INSTANT,
) -> RulesResult:
    """Run ``generated``'s workloads through the deciders' cores on a virtual clock with ``hops``.

    ``planned``: ``generated.planned()`` if the caller has it. ``preemptor``: the preemptor to run
    (an earlier logic version of ``deciders.EARLIER`` shows how it decided). ``writes``: the dispatcher's
    write budget (None: every write lands ``dispatch_ms`` after its decision). ``max_steps_at_one_instant``:
    the decider cycles at one virtual instant after which the run is a livelock (the whole baseline at hops
    0 / 0 / 5 / 5 takes between 300 and 10,000 at one instant without looping). Raises LivelockError (see its
    docstring) and ValueError for negative hops or a budget under one write a second."""
    if min(hops.admitter_ms, hops.preemptor_ms, hops.dispatch_ms, hops.report_ms) < 0:
        raise ValueError(f"hops must not be negative: {hops}")
    if writes is not None:
        check_budget(writes)
    planned = generated.planned() if planned is None else planned
    return _Run(generated, hops, planned, preemptor=preemptor, writes=writes).run(max_steps_at_one_instant)


class _Run:
    """The state of one virtual run (see :func:`simulate`)."""

    def __init__(
        self,
        generated: Generated,
        hops: Hops,
        planned: list[PlannedWorkload],
        *,
        preemptor: Decider,
        writes: WriteBudget | None,
    ) -> None:
        self.hops = hops
        self.writes = writes
        # under a write budget: the dispatcher's queue of (seen at ms, "start" | "stop", workload ref, token,
        # reason), when it is free to take the next, the bucket's tokens at ``bucket_ms``, and the admitted
        # runs (token by workload) whose start has not landed, or was skipped (evicted first)
        self.dispatch_queue: deque[tuple[int, str, Any, int, str]] = deque()
        self.dispatcher_free_ms = START_MS
        self.bucket = float(writes.burst) if writes else 0.0
        self.bucket_ms = START_MS
        self.unstarted: dict[str, int] = {}
        self.evicted_token: dict[str, tuple[int, int]] = {}  # the run evicted, when the dispatcher sees it
        self.planned = planned
        self.state = ClusterState()
        self.seq = 0
        self.heap: list[tuple[int, int, str, Any]] = []
        self.order = 0
        self.result = RulesResult(hops=hops)
        self.runtime_ms: dict[str, int] = {}
        self.class_of: dict[str, str] = {}
        self.created_ms: dict[str, int] = {}
        self.admitted_ms: dict[str, int] = {}
        self.running: dict[str, int] = {}  # workload -> the token of its current run
        self.tokens = 0
        self.last_release_ms = START_MS
        roles: list[tuple[Decider, int]] = [
            (deciders.ADMITTER, hops.admitter_ms),
            (preemptor, hops.preemptor_ms),
            (deciders.PLACER, hops.preemptor_ms),
        ]
        self.roles = roles
        self.busy_until = {decider.role: START_MS for decider, _ in roles}
        self.slow_steps = {decider.role: 0 for decider, _ in roles}
        self.open_since: dict[str, int] = {}
        for fact in object_facts(generated, now_ms=START_MS):
            self._fold(fact)
        for index, wl in enumerate(planned):
            self._at(START_MS + wl.offset_ms, "create", index)

    def _at(self, at_ms: int, kind: str, payload: Any) -> None:
        self.order += 1
        heapq.heappush(self.heap, (at_ms, self.order, kind, payload))

    def _fold(self, event: types.Event | types.PendingOutcome | types.FinishedRelease) -> None:
        self.seq += 1
        apply(self.state, event, seq=self.seq)

    def run(self, max_steps_at_one_instant: int = MAX_STEPS_AT_ONE_INSTANT) -> RulesResult:
        steps_now, last_now = 0, -1
        while self.heap:
            now = self.heap[0][0]
            steps_now = steps_now + 1 if now == last_now else 0
            if steps_now > max_steps_at_one_instant:
                raise LivelockError(
                    f"the deciders kept deciding at virtual ms {now - START_MS} without time passing"
                    " (zero admitter and preemptor hops: give them 1 ms or more)"
                )
            last_now = now
            while self.heap and self.heap[0][0] <= now:
                _, _, kind, payload = heapq.heappop(self.heap)
                self._happen(now, kind, payload)
            self._cycles(now)
        by_class: dict[str, list[int]] = defaultdict(list)
        for key, at in self.admitted_ms.items():
            by_class[self.class_of[key]].append(at - self.created_ms[key])
        self.result.average_time_to_admission_ms = {name: sum(v) // len(v) for name, v in sorted(by_class.items())}
        self.result.admitted = len(self.admitted_ms)
        self.result.wall_ms = self.last_release_ms - START_MS
        return self.result

    def _happen(self, now: int, kind: str, payload: Any) -> None:
        if kind == "create":
            wl = self.planned[payload]
            fact = workload_fact(wl, uid=f"wl-{payload:07d}", now_ms=now)
            key = fact.workload.key
            self.runtime_ms[key], self.class_of[key], self.created_ms[key] = wl.runtime_ms, wl.class_name, now
            self._fold(fact)
        elif kind == "commit":
            self._commit(now, payload)
        elif kind == "end":
            key, token, ref = payload
            if self.running.get(key) == token:
                del self.running[key]
                self._at(now + self.hops.report_ms, "finished", ref)
        elif kind == "finished":
            self._fold(types.WorkloadFinished(workload=payload, at_ms=now))
        elif kind == "dispatch":
            self._dispatch(now)
        elif kind == "started":
            key, token, ref = payload
            if self.unstarted.get(key) == token:  # its write went out: the job runs
                del self.unstarted[key]
                self.running[key] = token
                self._at(now + self.runtime_ms.get(key, 0), "end", payload)
        elif kind == "stop":
            ref, reason = payload
            if self.running.pop(ref.key, None) is not None:
                self._fold(types.WorkloadStopped(workload=ref, reason=reason, at_ms=now))
        elif kind == "stopped":
            ref, reason = payload
            self._fold(types.WorkloadStopped(workload=ref, reason=reason, at_ms=now))
        # "wake": a decider free again, or a timer due: the cycles below run

    def _commit(self, now: int, outputs: list[types.Output]) -> None:
        """A cycle's decisions on the log: folded as every reader folds a record (its outputs, then its
        pending outcomes), and acted on by the dispatcher after ``dispatch_ms``."""
        self.seq = apply_outputs(self.state, outputs, seq=self.seq)
        evicted_now = {e.workload.key for e in outputs if isinstance(e, types.EvictionRequested)}
        for event in outputs:
            if isinstance(event, types.PreemptionRequired):
                self.result.nominations += 1
            elif isinstance(event, types.PreemptionIssued) and event.targets:
                if not any(t.workload.key in evicted_now for t in event.targets):
                    self.result.answers_evicting_nothing_new += 1
            elif isinstance(event, types.WorkloadAdmitted):
                key = event.workload.key
                if key in self.created_ms:
                    self.admitted_ms[key] = event.at_ms  # the cycle's time, as the bench's figure
                self.tokens += 1
                if self.writes is not None:
                    self.unstarted[key] = self.tokens
                    self._queue(now, "start", event.workload, self.tokens, "")
                    continue
                self.running[key] = self.tokens
                runtime = self.runtime_ms.get(key, 0)
                self._at(now + self.hops.dispatch_ms + runtime, "end", (key, self.tokens, event.workload))
            elif isinstance(event, types.EvictionRequested):
                self.result.evictions[self.class_of.get(event.workload.key, "?")] += 1
                if self.writes is not None:
                    key = event.workload.key
                    token = self.running.get(key, self.unstarted.get(key, 0))
                    self.evicted_token[key] = (token, now + self.hops.dispatch_ms)
                    self._queue(now, "stop", event.workload, token, event.reason)
                    continue
                self._at(now + self.hops.dispatch_ms, "stop", (event.workload, event.reason))
            elif isinstance(event, types.QuotaReleased | types.FinishedRelease):
                self.last_release_ms = max(self.last_release_ms, event.at_ms)

    def _queue(self, now: int, kind: str, ref: Any, token: int, reason: str) -> None:
        """A decision reaches the dispatcher's queue ``dispatch_ms`` after its commit."""
        seen = now + self.hops.dispatch_ms
        self.dispatch_queue.append((seen, kind, ref, token, reason))
        self._at(max(seen, self.dispatcher_free_ms), "dispatch", None)

    def _slot(self, now: int) -> int:
        """The ms a write asked for at ``now`` goes out: client-go's token bucket (a reservation each, in
        order, as ``rate.Limiter.Wait``)."""
        assert self.writes is not None
        self.bucket = min(float(self.writes.burst), self.bucket + (now - self.bucket_ms) * self.writes.qps / 1000)
        self.bucket_ms = now
        self.bucket -= 1
        self.result.writes += 1
        return now if self.bucket >= 0 else now + math.ceil(-self.bucket * 1000 / self.writes.qps)

    def _dispatch(self, now: int) -> None:
        """The dispatcher takes the decisions it has seen, one write at a time."""
        while self.dispatch_queue and self.dispatch_queue[0][0] <= now and self.dispatcher_free_ms <= now:
            _, kind, ref, token, reason = self.dispatch_queue.popleft()
            key = ref.key
            if kind == "start":
                if self.unstarted.get(key) != token:
                    continue
                evicted = self.evicted_token.get(key)
                if evicted is not None and evicted[0] == token and evicted[1] <= now:
                    # its eviction is in the dispatcher's view already: Kueue's reconciler does not start it
                    self.result.unwritten_starts += 1
                    continue
                at = self._slot(now)
                self._at(at, "started", (key, token, ref))
            else:
                at = self._slot(now)
                if self.running.get(key) == token or self.unstarted.get(key) == token:
                    self.running.pop(key, None)
                    self.unstarted.pop(key, None)
                    self._at(at, "stopped", (ref, reason))
            self.dispatcher_free_ms = at
            if at > now:
                self._at(at, "dispatch", None)
                return

    def _cycles(self, now: int) -> None:
        for decider, hop in self.roles:
            if self.busy_until[decider.role] > now or self._held(decider, now):
                continue
            outputs = list(decider.decide(self.state, now_ms=now))
            self.result.cycles += 1
            if not outputs:
                self._timer(decider, now)
                continue
            decided = sum(type(e) is not types.PendingOutcome for e in outputs)
            self.result.decisions += decided
            # a record of pending outcomes and finished releases only is committed too, and the next cycle slows
            # down after it as the runner's does (Kueue's backoff after a cycle that admits nothing, the release
            # being its workload controller's: runtime.slow_down_seconds, runtime.RECORD_CARRIED)
            acted = any(not isinstance(e, RECORD_CARRIED) for e in outputs)
            step = self.slow_steps[decider.role] = 0 if acted else self.slow_steps[decider.role] + 1
            slow_ms = round(slow_down_seconds(step - 1) * 1000) if step else 0
            self.busy_until[decider.role] = now + hop + slow_ms
            self._at(now + hop, "commit", outputs)
            if slow_ms:
                self._at(now + hop + slow_ms, "wake", None)

    def _held(self, decider: Decider, now: int) -> bool:
        """The runner's hold while another role's request is open (``Decider.yields_to``), and the
        admitter's while ``WriteBudget.pace`` admitted workloads wait for their start's write."""
        if (
            decider is deciders.ADMITTER
            and self.writes is not None
            and self.writes.pace is not None
            and len(self.unstarted) >= self.writes.pace
        ):
            return True  # a start landing wakes it ("dispatch")
        if decider.yields_to is None:
            return False
        keys = decider.yields_to(self.state)
        self.open_since = {key: self.open_since.get(key, now) for key in keys}
        if not keys:
            return False
        ends = max(self.open_since.values()) + int(YIELD_SECONDS * 1000)
        if now < ends:
            self._at(ends, "wake", None)
            return True
        return False

    def _timer(self, decider: Decider, now: int) -> None:
        if decider.wakes_at is None:
            return
        due = decider.wakes_at(self.state, partition=partitions.LEGACY, after_ms=now)
        if due is not None and due > now:
            self._at(due, "wake", None)
