"""The recorded history a what-if simulation replays: exogenous facts with their times, and run times.

From a log (in sequence order):

- the exogenous facts: every fact but the job side's (WorkloadPodsReady, WorkloadFinished,
  WorkloadStopped, which the simulation makes itself, and WorkloadReclaimablePods, which it does not) and SchedulingRequested (an operator's
  nudge to a decider): objects observed and deleted, workloads submitted, changed and deleted,
  admission check states, Configurations; each with its recorded time. A FactBatch (the watcher's
  burst of workloads created or finished, ``kq.in.batch.watcher``) counts as its facts, each as if
  alone at the batch's sequence, as every fold takes it. Facts of objects carry
  no time of their own, so a fact's time is one cycle (:func:`cycle_length`) before the deciders
  had it (the ``now_ms`` of the first DecisionRecord whose basis includes it: it arrived while the
  cycle before that one ran), never earlier than the latest time the log has shown up to it
  (creation timestamps, ``at_ms`` of facts, ``now_ms`` of DecisionRecords); a fact no record saw
  gets that latest time.
- per workload, its recorded run time (ms): from its recorded start (the first
  WorkloadPodsReady ready after its last admission, else that admission) to its recorded
  finish (WorkloadFinished, timed as a fact is: a Job's completionTime has 1 s resolution, the
  deciders' first sight of it is closer), of the last run that finished, and how it finished. A workload that never
  finished in the log has no run time: once admitted in a simulation it runs to the end.
- with ``--from`` (:func:`split`), the recorded prefix kept as it is, up to the end of the batch
  the cut falls in, and the runs going on at the cut.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from kueue_es.events import codec, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.whatif import source

DEFAULT_CYCLE_MS = 10
MAX_CYCLE_MS = 1_000
# WorkloadReclaimablePods is the job side too, and the simulation does not make it: a simulated
# run holds its whole reservation until it finishes (docs/what-if.md).
JOB_SIDE = (types.WorkloadPodsReady, types.WorkloadFinished, types.WorkloadStopped, types.WorkloadReclaimablePods)
IGNORED = (types.SchedulingRequested,)


@dataclass(frozen=True, kw_only=True)
class TimedFact:
    """One exogenous fact at its recorded sequence and time (ms)."""

    seq: int
    at_ms: int
    fact: types.Fact


@dataclass(frozen=True, kw_only=True)
class Finish:
    """How a workload's recorded run ended: its run time (ms) and WorkloadFinished's outcome."""

    run_ms: int
    succeeded: bool
    reason: str
    message: str


@dataclass(kw_only=True)
class History:
    """What a simulation replays: the recorded ``prefix`` (kept as it is; empty without --from),
    the exogenous ``facts`` after it, run times by workload key, at the cut the runs going on
    (key -> start ms) and the evictions not yet completed (keys), and the end of the recording."""

    prefix: list[LogMessage] = field(default_factory=list)
    facts: list[TimedFact] = field(default_factory=list)
    finishes: dict[str, Finish] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)
    stopping: list[str] = field(default_factory=list)
    cut_ms: int = 0
    end_ms: int = 0  # the latest time the recorded log shows (its events' times, its messages' stored times)
    last_seq: int = 0  # the recorded log's last sequence
    cycle_ms: int = DEFAULT_CYCLE_MS  # how long a deciding cycle takes (:func:`cycle_length`)

    @property
    def start_ms(self) -> int:
        """The time the simulation starts at: the cut, else the first fact's."""
        if self.prefix:
            return self.cut_ms
        return self.facts[0].at_ms if self.facts else 0


def times(event: types.Event) -> int:
    """The latest time (ms) ``event`` shows: at_ms, now_ms, an object's creation time (a FactBatch: the
    latest of its facts'); 0 for none."""
    if isinstance(event, types.FactBatch):
        return max((times(fact) for fact in event.facts), default=0)
    found = int(getattr(event, "at_ms", 0) or 0)
    if isinstance(event, types.DecisionRecord):
        found = max(found, event.now_ms)
    for name in ("workload", "cluster_queue", "cohort", "flavor", "local_queue", "priority_class"):
        obj = getattr(event, name, None)
        meta = getattr(obj, "metadata", None)
        if meta is not None:
            found = max(found, int(getattr(meta, "creation_timestamp_ms", 0) or 0))
    return found


def extract(messages: Sequence[LogMessage], *, cut_seq: int = 0) -> History:
    """The history of ``messages`` (a whole log, in order). ``cut_seq`` > 0 keeps the log up to
    there as the prefix (extended to the end of the batch it falls in)."""
    seen_by, gaps = _seen_by(messages)
    history = History(last_seq=messages[-1].seq if messages else 0, cycle_ms=cycle_length(gaps))

    def observed_at(seq: int, clock: int) -> int:
        position = bisect.bisect_left(seen_by[0], seq)
        return max(clock, seen_by[1][position] - history.cycle_ms) if position < len(seen_by[0]) else clock

    clock = 0
    started: dict[str, int] = {}  # key -> start of the current run
    admitted: dict[str, int] = {}  # key -> last admission
    stopping: dict[str, None] = {}
    limit = cut_seq  # the prefix's last sequence, pushed to the end of a batch the cut falls in
    in_prefix = cut_seq > 0
    for message in messages:
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            continue
        clock = max(clock, times(event))
        history.end_ms = max(history.end_ms, clock, message.time_ms)
        if in_prefix and isinstance(event, types.DecisionRecord) and message.seq <= limit:
            limit = max(limit, message.seq + event.output_count)
        if in_prefix and message.seq > limit:
            in_prefix = False
            history.running = {k: started.get(k, at) for k, at in admitted.items() if k not in stopping}
            history.stopping = list(stopping)
        if isinstance(event, types.DecisionRecord):  # the decisions it carries (event schema 17), in order
            for decision in event.carried:
                match decision:
                    case types.WorkloadAdmitted(workload=ref, at_ms=at):
                        admitted[ref.key] = at
                        started.pop(ref.key, None)
                    case types.EvictionRequested(workload=ref):
                        stopping[ref.key] = None
        for one in types.unbatched(event):  # a FactBatch (the watcher's bursts, schema 16): its facts, in order
            match one:
                case types.WorkloadAdmitted(workload=ref, at_ms=at):
                    admitted[ref.key] = at
                    started.pop(ref.key, None)
                case types.WorkloadPodsReady(workload=ref, ready=True, at_ms=at) if ref.key not in started:
                    if ref.key in admitted:
                        started[ref.key] = at
                case types.EvictionRequested(workload=ref):
                    stopping[ref.key] = None
                case types.WorkloadStopped(workload=ref):
                    stopping.pop(ref.key, None)
                    admitted.pop(ref.key, None)
                    started.pop(ref.key, None)
                case types.WorkloadFinished(workload=ref, at_ms=at):
                    at = max(at, observed_at(message.seq, clock))  # completionTime has 1 s resolution
                    start = started.pop(ref.key, admitted.pop(ref.key, at))
                    admitted.pop(ref.key, None)
                    history.finishes[ref.key] = Finish(
                        run_ms=max(0, at - start), succeeded=one.succeeded, reason=one.reason, message=one.message
                    )
        if in_prefix:
            history.prefix.append(message)
            history.cut_ms = clock
            continue
        for one in types.unbatched(event):
            if isinstance(one, JOB_SIDE + IGNORED) or not isinstance(one, types.Fact):
                continue
            history.facts.append(TimedFact(seq=message.seq, at_ms=observed_at(message.seq, clock), fact=one))
    if in_prefix:  # the log ends inside the prefix
        history.running = {k: started.get(k, at) for k, at in admitted.items() if k not in stopping}
        history.stopping = list(stopping)
    return history


def cycle_length(gaps: list[int]) -> int:
    """How long a deciding cycle takes (ms): the median time between two DecisionRecords of one
    decider and partition in a row, the second decided on the first's batch and nothing else
    (back-to-back cycles of one partition's chain), at least 1 and at most :data:`MAX_CYCLE_MS`;
    :data:`DEFAULT_CYCLE_MS` when the log has none."""
    if not gaps:
        return DEFAULT_CYCLE_MS
    ordered = sorted(gaps)
    return max(1, min(MAX_CYCLE_MS, ordered[len(ordered) // 2]))


def _seen_by(messages: Sequence[LogMessage]) -> tuple[tuple[list[int], list[int]], list[int]]:
    """(basis sequences ascending, for each the earliest ``now_ms`` of a DecisionRecord with that
    basis or a later one): a fact at seq s was seen by ``now_ms[bisect_left(basis, s)]``; and the
    gaps (ms) between back-to-back cycles of one decider and partition (:func:`cycle_length`)."""
    records: list[tuple[int, int]] = []
    gaps: list[int] = []
    last: dict[tuple[str, str], tuple[int, int]] = {}  # (role, partition) -> (last seq of its batch, now_ms)
    for message, event in source.decision_records(messages):
        records.append((event.basis_seq, event.now_ms))
        chain = (event.role, event.partition)
        before = last.get(chain)
        if before is not None and before[0] == event.basis_seq and event.now_ms > before[1]:
            gaps.append(event.now_ms - before[1])
        last[chain] = (message.seq + event.output_count, event.now_ms)
    records.sort()
    basis = [b for b, _ in records]
    earliest = [now for _, now in records]
    for i in range(len(earliest) - 2, -1, -1):
        earliest[i] = min(earliest[i], earliest[i + 1])
    return (basis, earliest), gaps
