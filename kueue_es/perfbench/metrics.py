"""Kueue's scheduler-performance figures, computed from what the log recorded.

Definitions (Kueue test/performance/scheduler/runner/recorder/recorder.go,
checker/checker_test.go; shared/research/kueue-perf.md §4), with the kueue-es event
that stands for each Kubernetes observation:

- per workload: time to admission = the last admission's time - creationTimestamp
  (Kueue: ``Admitted.lastTransitionTime - metadata.creationTimestamp``, stamped when
  the scheduler decides; here ``WorkloadAdmitted.at_ms``, the admitter's clock
  reading of the cycle, in ms where Kueue's timestamps have 1 s resolution); time
  to finish = ``WorkloadFinished.at_ms`` - creation; evictions = the number of
  ``EvictionRequested`` (Kueue: rising edges of ``Evicted``);
- per workload class: ``count``, ``totalEvictions``, ``averageTimeToAdmissionMs``
  and ``averageTimeToFinishMs`` (integer means over the class);
- per ClusterQueue class: ``cpuUsed`` = the time integral of the CPU its
  ClusterQueues hold (mCPU x ms; Kueue samples ``status.flavorsUsage``, which
  counts a workload from the scheduler's assume to the processing of its finish:
  here from ``QuotaReserved.at_ms`` to ``QuotaReleased.at_ms``); ``nominalQuota``
  = the sum of their nominal CPU (mCPU); ``firstEventTime`` = the earliest
  creation of one of them, ``lastEventTime`` = the last change of their usage;
  usage % = cpuUsed x 100 / (nominalQuota x (last - first));
- per workload class, ours (issue 18): the median and p99 of quota held - runtime (ms): per finished
  workload, the time its ClusterQueue counted its quota (every ``QuotaReserved`` to its
  ``QuotaReleased``, evicted runs included) less its ``runtimeMs`` (the generator's running-ms
  label). Kueue's usage figure grows with quota held past the work; this says how much of it
  is that (the admission-to-start and finish-to-release latencies) rather than admitting sooner;
- wall time = from the start of the system under test to the last quota release
  (Kueue: minimalkueue's process lifetime, which also holds up to 5 s of
  end detection and its shutdown).

TAS runs add a placement check (:class:`TopologyCheck`, fed by the recorder): every
admission of a workload with a topology request, and every start write the
dispatcher lands for it, must follow a ``TopologyAssigned`` since its last quota release; each assignment places exactly the pod set's pods; a
``required`` level holds them in one domain of that level; a slice request
(Kueue's generator's ``balanced``) puts whole slices in each domain of its level; how
many ``preferred`` placements stayed in one domain is counted.

The recorder is pure: events and their times in, figures out.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kueue_es.events import models, tas, types
from kueue_es.perfbench.generator import CLASS_LABEL, RUNTIME_LABEL
from kueue_es.projections.topology import TopologyState

RATE_WINDOW_MS = 5_000


@dataclass(kw_only=True)
class WorkloadRecord:
    """What the recorder knows of one workload; times in ms since the epoch (0: not yet)."""

    class_name: str
    created_ms: int
    admitted_ms: int = 0
    finished_ms: int = 0
    evictions: int = 0
    runtime_ms: int = 0  # the generator's runtimeMs (its running-ms label; 0 without one)
    held_ms: int = 0  # quota held so far, over every reservation released


@dataclass(kw_only=True)
class QueueRecord:
    """One ClusterQueue: its class, nominal CPU, creation, held CPU now and the integral so far."""

    class_name: str
    nominal_m: int
    created_ms: int
    held_m: int = 0
    since_ms: int = 0
    cpu_used: int = 0  # mCPU x ms
    last_event_ms: int = 0


@dataclass(kw_only=True)
class TopologyCheck:
    """Checks every TopologyAssigned of a run against its pod set's request (see the module doc).

    ``levels``: the Topology's node labels, widest first; ``leaf_values``: per leaf ID of the
    flavor's tree (the hostname when the lowest level is hostname), its value per level, as the
    placer's tree has it (:class:`kueue_es.projections.topology.FlavorTopology`). ``violations`` lists
    what failed, one line each.
    """

    levels: tuple[str, ...]
    leaf_values: dict[str, tuple[str, ...]]
    nodes: int = 0
    requests: dict[str, tuple[str, int, models.PodSetTopologyRequest]] = field(default_factory=dict)
    placements: int = 0
    placed: set[str] = field(default_factory=set)
    admissions: int = 0
    admitted_without: int = 0
    starts: int = 0
    started_without: int = 0
    required: list[int] = field(default_factory=lambda: [0, 0])  # [in one domain, all]
    sliced: list[int] = field(default_factory=lambda: [0, 0])  # [whole slices everywhere, all]
    preferred: list[int] = field(default_factory=lambda: [0, 0])  # [in one domain, all]
    violations: list[str] = field(default_factory=list)
    _assigned: set[str] = field(default_factory=set)

    @classmethod
    def from_facts(cls, facts: list[types.Fact], flavor: str) -> TopologyCheck | None:
        """The check for TAS flavor ``flavor``'s tree, folded from the run's object facts (None when the
        facts make no tree for it: not a TAS run)."""
        state = TopologyState()
        for fact in facts:
            state.apply(fact)
        tree = state.flavor_topology(flavor)
        if tree is None:
            return None
        return cls(
            levels=tree.levels,
            leaf_values={leaf.id: leaf.values for leaf in tree.leaves},
            nodes=sum(isinstance(f, types.NodeObserved) for f in facts),
        )

    def observed(self, wl: models.Workload) -> None:
        """Note a workload's TAS pod set (the first pod set with a topology request), if any."""
        for ps in wl.spec.pod_sets:
            if ps.topology_request is not None and tas.requests_tas(ps.topology_request):
                self.requests[f"{wl.metadata.namespace}/{wl.metadata.name}"] = (ps.name, ps.count, ps.topology_request)
                return

    def assigned(self, event: types.TopologyAssigned) -> None:
        """Check one placement."""
        key = event.workload.key
        self.placements += 1
        self.placed.add(key)
        self._assigned.add(key)
        wanted = self.requests.get(key)
        if wanted is None:
            self.violations.append(f"{key}: placed without a topology request")
            return
        name, count, request = wanted
        ta = event.assignments.get(name)
        if ta is None:
            self.violations.append(f"{key}: no assignment for pod set {name}")
            return
        assignment = tas.decode(ta)
        if assignment.pod_count != count:
            self.violations.append(f"{key}: {assignment.pod_count} pods placed, the pod set has {count}")
        domains = self._full_values(key, assignment)
        if domains is None:
            return
        if request.required is not None:
            self.required[1] += 1
            if self._in_one_domain(domains, request.required):
                self.required[0] += 1
            else:
                self.violations.append(f"{key}: required {request.required} spans several domains")
        elif request.preferred is not None:
            self.preferred[1] += 1
            self.preferred[0] += self._in_one_domain(domains, request.preferred)
        for layer in tas.slice_layers(request):
            self.sliced[1] += 1
            depth = self.levels.index(layer.topology) + 1
            per_domain: dict[tuple[str, ...], int] = defaultdict(int)
            for values, pods in domains:
                per_domain[values[:depth]] += pods
            if layer.size and all(pods % layer.size == 0 for pods in per_domain.values()):
                self.sliced[0] += 1
            else:
                self.violations.append(f"{key}: slices of {layer.size} broken across {layer.topology} domains")

    def _full_values(self, key: str, assignment: tas.Assignment) -> list[tuple[tuple[str, ...], int]] | None:
        """Each assigned domain's value at every Topology level, with its pods."""
        if assignment.levels == self.levels:
            return [(d.values, d.count) for d in assignment.domains]
        if assignment.levels == (self.levels[-1],):
            out = []
            for d in assignment.domains:
                values = self.leaf_values.get(d.values[0])
                if values is None:
                    self.violations.append(f"{key}: placed on {d.values[0]}, not a leaf of the tree")
                    return None
                out.append((values, d.count))
            return out
        self.violations.append(f"{key}: assignment levels {assignment.levels} are not the topology's")
        return None

    def _in_one_domain(self, domains: list[tuple[tuple[str, ...], int]], level: str) -> bool:
        if level not in self.levels:
            return False
        depth = self.levels.index(level) + 1
        return len({values[:depth] for values, _ in domains}) == 1

    def admitted(self, key: str) -> None:
        """A workload was admitted: a TAS one needs a placement since its last release."""
        if key not in self.requests:
            return
        self.admissions += 1
        if key not in self._assigned:
            self.admitted_without += 1
            self.violations.append(f"{key}: admitted without a TopologyAssigned")

    def started(self, key: str) -> None:
        """The dispatcher's start write for a workload landed: a TAS one needs its placement first."""
        if key not in self.requests:
            return
        self.starts += 1
        if key not in self._assigned:
            self.started_without += 1
            self.violations.append(f"{key}: started without a TopologyAssigned")

    def released(self, key: str) -> None:
        """A workload gave its quota back: its placement went with it."""
        self._assigned.discard(key)

    def report(self) -> dict[str, Any]:
        """The check's figures, for the run document."""
        return {
            "nodes": self.nodes,
            "leaves": len(self.leaf_values),
            "tasWorkloads": len(self.requests),
            "placements": self.placements,
            "workloadsPlaced": len(self.placed),
            "tasAdmissions": self.admissions,
            "admittedWithoutTopologyAssigned": self.admitted_without,
            "tasStarts": self.starts,
            "startedWithoutTopologyAssigned": self.started_without,
            "requiredInOneDomain": f"{self.required[0]}/{self.required[1]}",
            "slicesWhole": f"{self.sliced[0]}/{self.sliced[1]}",
            "preferredInOneDomain": f"{self.preferred[0]}/{self.preferred[1]}",
            "violations": len(self.violations),
            "firstViolations": self.violations[:10],
        }


@dataclass(kw_only=True)
class Recorder:
    """Folds the events of a run (each with the time it is about) into Kueue's figures.

    Feed :meth:`record` every decoded event of interest; :meth:`note_log` the log's
    last sequence now and then (for events per second).
    """

    workloads: dict[str, WorkloadRecord] = field(default_factory=dict)
    queues: dict[str, QueueRecord] = field(default_factory=dict)
    held: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # workload -> (cq, mCPU, since ms)
    admission_times: list[int] = field(default_factory=list)
    messages: int = 0
    first_message_ms: int = 0
    last_message_ms: int = 0
    peak_events_per_second: float = 0.0
    released: int = 0
    finished: int = 0
    admitted: int = 0
    last_release_ms: int = 0
    first_seq: int = 0
    topology: TopologyCheck | None = None
    eviction_reasons: dict[str, int] = field(default_factory=dict)
    _recent: deque[tuple[int, int]] = field(default_factory=deque)

    # -- input ---------------------------------------------------------------------------------

    def note_log(self, last_seq: int, observed_ms: int) -> None:
        """Note the log's last sequence at ``observed_ms`` (sampled); keeps the peak rate over 5 s windows."""
        if not self._recent:
            self.first_message_ms = observed_ms
            self.first_seq = last_seq
        self.messages = last_seq
        self.last_message_ms = observed_ms
        recent = self._recent
        recent.append((observed_ms, last_seq))
        while recent[0][0] < observed_ms - RATE_WINDOW_MS:
            recent.popleft()
        start_ms, start_seq = recent[0]
        if observed_ms - start_ms >= RATE_WINDOW_MS * 0.9:
            rate = (last_seq - start_seq) * 1000 / (observed_ms - start_ms)
            self.peak_events_per_second = max(self.peak_events_per_second, rate)

    def record(self, event: types.Event) -> None:
        """Fold one event; events of other types are ignored."""
        # one dict lookup on the event's type, not a match that tries every case in turn: the harness
        # records several events per workload, while the run it measures shares its cores (issue 18)
        fold = _FOLDS.get(type(event))
        if fold is not None:
            fold(self, event)

    def _cluster_queue(self, event: types.ClusterQueueObserved) -> None:
        cq = event.cluster_queue
        meta = cq.metadata
        if meta.name in self.queues:
            return
        nominal = sum(
            r.nominal_quota
            for group in cq.spec.resource_groups
            for flavor in group.flavors
            for r in flavor.resources
            if r.name == "cpu"
        )
        self.queues[meta.name] = QueueRecord(
            class_name=meta.labels.get(CLASS_LABEL, ""),
            nominal_m=nominal,
            created_ms=meta.creation_timestamp_ms,
            last_event_ms=meta.creation_timestamp_ms,
        )

    def _workload(self, event: types.WorkloadObserved) -> None:
        wl = event.workload
        meta = wl.metadata
        key = f"{meta.namespace}/{meta.name}"
        if key in self.workloads:
            return
        runtime = meta.labels.get(RUNTIME_LABEL, "")
        self.workloads[key] = WorkloadRecord(
            class_name=meta.labels.get(CLASS_LABEL, ""),
            created_ms=meta.creation_timestamp_ms,
            runtime_ms=int(runtime) if runtime.isdigit() else 0,
        )
        if self.topology is not None:
            self.topology.observed(wl)

    def _topology_assigned(self, event: types.TopologyAssigned) -> None:
        if self.topology is not None:
            self.topology.assigned(event)

    def _reserved(self, event: types.QuotaReserved) -> None:
        """A reservation: its ClusterQueue holds its CPU from ``event.at_ms`` (a second copy changes nothing)."""
        self._hold(event.workload.key, event.cluster_queue, event.pod_set_assignments, event.at_ms)

    def _hold(self, key: str, cq_name: str, assignments: list[types.PodSetAssignment], at_ms: int) -> None:
        if key not in self.held:
            cpu = sum(a.resource_usage.get("cpu", 0) for a in assignments)
            self.held[key] = (cq_name, cpu, at_ms)
            self._shift(cq_name, cpu, at_ms)

    def _released(self, event: types.QuotaReleased) -> None:
        key, at = event.workload.key, event.at_ms
        held = self.held.pop(key, None)
        if self.topology is not None:
            self.topology.released(key)
        if held is not None:
            self._shift(held[0], -held[1], at)
            self.released += 1
            record = self.workloads.get(key)
            if record is not None:
                record.held_ms += max(0, at - held[2])
            self.last_release_ms = max(self.last_release_ms, at)

    def _admitted(self, event: types.WorkloadAdmitted) -> None:
        key, at = event.workload.key, event.at_ms
        if types.reserves(event, key in self.held):  # reserved and admitted by one message
            # what types.reservation_of(event) stands for, without making that QuotaReserved
            self._hold(key, event.cluster_queue, event.pod_set_assignments, at)  # type: ignore[arg-type]
        record = self.workloads.get(key)
        if record is not None:
            self.admitted += not record.admitted_ms
            record.admitted_ms = at
        self.admission_times.append(at)
        if self.topology is not None:
            self.topology.admitted(key)

    def _dispatched(self, event: types.DispatchApplied) -> None:
        if event.action == "StartJob" and self.topology is not None:
            self.topology.started(event.workload.key)

    def _dispatched_batch(self, event: types.DispatchBatchApplied) -> None:
        """One record's results: each as its own DispatchApplied."""
        for applied in event.applied():
            self._dispatched(applied)

    def _eviction(self, event: types.EvictionRequested) -> None:
        reason = event.reason
        self.eviction_reasons[reason] = self.eviction_reasons.get(reason, 0) + 1
        record = self.workloads.get(event.workload.key)
        if record is not None:
            record.evictions += 1

    def _finished(self, event: types.WorkloadFinished) -> None:
        record = self.workloads.get(event.workload.key)
        if record is not None and not record.finished_ms:
            record.finished_ms = event.at_ms
            self.finished += 1

    def _shift(self, cq_name: str, delta: int, at_ms: int) -> None:
        queue = self.queues.get(cq_name)
        if queue is None:
            return
        if queue.held_m:
            queue.cpu_used += queue.held_m * max(0, at_ms - queue.since_ms)
        queue.held_m += delta
        queue.since_ms = at_ms
        queue.last_event_ms = max(queue.last_event_ms, at_ms)

    # -- output --------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """Kueue's ``summary.yaml`` (recorder.Summary): clusterQueueClasses, workloadClasses, droppedWorkloadEvents."""
        cq_classes: dict[str, dict[str, Any]] = {}
        for queue in self.queues.values():
            group = cq_classes.setdefault(
                queue.class_name,
                {"cpuUsed": 0, "cpuAverageUsage": 0, "nominalQuota": 0, "first": queue.created_ms, "last": 0},
            )
            group["cpuUsed"] += queue.cpu_used
            group["nominalQuota"] += queue.nominal_m
            group["first"] = min(group["first"], queue.created_ms)
            group["last"] = max(group["last"], queue.last_event_ms)
        for group in cq_classes.values():
            first, last = group.pop("first"), group.pop("last")
            monitoring = last - first
            group["cpuAverageUsage"] = group["cpuUsed"] // monitoring if monitoring > 0 else 0
            group["firstEventTime"] = _rfc3339(first)
            group["lastEventTime"] = _rfc3339(last)
        wl_classes: dict[str, dict[str, int]] = {}
        totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for record in self.workloads.values():
            group = wl_classes.setdefault(
                record.class_name,
                {"count": 0, "totalEvictions": 0, "averageTimeToAdmissionMs": 0, "averageTimeToFinishMs": 0},
            )
            group["count"] += 1
            group["totalEvictions"] += record.evictions
            if record.admitted_ms:
                totals[record.class_name][0] += record.admitted_ms - record.created_ms
            if record.finished_ms:
                totals[record.class_name][1] += record.finished_ms - record.created_ms
        for name, group in wl_classes.items():
            group["averageTimeToAdmissionMs"] = totals[name][0] // group["count"]
            group["averageTimeToFinishMs"] = totals[name][1] // group["count"]
        return {"clusterQueueClasses": cq_classes, "workloadClasses": wl_classes, "droppedWorkloadEvents": 0}

    def held_over_runtime(self) -> dict[str, dict[str, int]]:
        """Per workload class, quota held - runtime (ms) over its finished workloads that hold no quota
        now: ``{"count": n, "medianMs": ..., "p99Ms": ...}`` (median of the middle two rounded down for an
        even count; p99 by nearest rank). Classes with no such workload are left out."""
        spans: dict[str, list[int]] = defaultdict(list)
        for key, record in self.workloads.items():
            if record.finished_ms and key not in self.held:
                spans[record.class_name].append(record.held_ms - record.runtime_ms)
        out: dict[str, dict[str, int]] = {}
        for name, values in sorted(spans.items()):
            values.sort()
            out[name] = {
                "count": len(values),
                "medianMs": math.floor(statistics.median(values)),
                "p99Ms": values[max(0, math.ceil(0.99 * len(values)) - 1)],
            }
        return out

    def usage_percent(self) -> dict[str, float]:
        """Per ClusterQueue class, the checker's usage %: cpuUsed x 100 / (nominalQuota x monitoring ms)."""
        out: dict[str, float] = {}
        for name, group in self.summary()["clusterQueueClasses"].items():
            first = _parse_rfc3339(group["firstEventTime"])
            last = _parse_rfc3339(group["lastEventTime"])
            elapsed = last - first
            out[name] = (
                group["cpuUsed"] * 100 / (group["nominalQuota"] * elapsed) if group["nominalQuota"] and elapsed else 0.0
            )
        return out

    def admission_rates(self) -> tuple[float, float]:
        """(mean admissions/s from the first admission to the last, peak over any 5 s window)."""
        times = sorted(self.admission_times)
        if len(times) < 2:
            return 0.0, 0.0
        span = times[-1] - times[0]
        mean = (len(times) - 1) * 1000 / span if span else 0.0
        peak, start = 0, 0
        for end, t in enumerate(times):
            while times[start] <= t - RATE_WINDOW_MS:
                start += 1
            peak = max(peak, end - start + 1)
        window = min(RATE_WINDOW_MS, span) or RATE_WINDOW_MS
        return mean, peak * 1000 / window

    def events_per_second(self) -> float:
        """Mean log messages per second over the span the log was sampled in."""
        span = self.last_message_ms - self.first_message_ms
        return (self.messages - self.first_seq) * 1000 / span if span > 0 else 0.0


_FOLDS: dict[type, Callable[[Recorder, Any], None]] = {
    types.ClusterQueueObserved: Recorder._cluster_queue,
    types.WorkloadObserved: Recorder._workload,
    types.TopologyAssigned: Recorder._topology_assigned,
    types.QuotaReserved: Recorder._reserved,
    types.QuotaReleased: Recorder._released,
    types.WorkloadAdmitted: Recorder._admitted,
    types.DispatchApplied: Recorder._dispatched,
    types.DispatchBatchApplied: Recorder._dispatched_batch,
    types.EvictionRequested: Recorder._eviction,
    types.WorkloadFinished: Recorder._finished,
}
"""What :meth:`Recorder.record` does with each type of event it folds (events are final structs: the
type itself, not a subclass, is what arrives)."""


def _rfc3339(ms: int) -> str:
    """ms since the epoch as RFC 3339 with milliseconds, UTC."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_rfc3339(text: str) -> int:
    return round(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


# -- rangespec --------------------------------------------------------------------------------


def check_rangespec(
    spec: dict[str, Any], *, wall_ms: int, usage: dict[str, float], summary: dict[str, Any]
) -> list[str]:
    """Kueue's checker (checker_test.go) on our figures: the list of violations (empty: in range).

    ``spec`` is a parsed rangespec: ``cmd.maxWallMs``, ``clusterQueueClassesMinUsage``
    (class -> min %), ``wlClassesMaxAvgTimeToAdmissionMs`` (class -> max ms). A class
    of ours the spec does not name is a violation ("Unexpected class"), as in Kueue.
    Raises ValueError for a spec that is not a mapping of those keys.
    """
    if not isinstance(spec, dict):
        raise ValueError(
            "the rangespec must be a mapping with cmd, clusterQueueClassesMinUsage, wlClassesMaxAvgTimeToAdmissionMs"
        )
    unknown = set(spec) - {"cmd", "clusterQueueClassesMinUsage", "wlClassesMaxAvgTimeToAdmissionMs"}
    if unknown:
        raise ValueError(f"the rangespec has unknown keys: {', '.join(sorted(unknown))}")
    problems: list[str] = []
    max_wall = (spec.get("cmd") or {}).get("maxWallMs")
    if max_wall is not None and wall_ms > int(max_wall):
        problems.append(f"wall time {wall_ms}ms is greater than maximum expected {int(max_wall)}ms")
    min_usage = spec.get("clusterQueueClassesMinUsage") or {}
    for name, actual in sorted(usage.items()):
        if name not in min_usage:
            problems.append(f"ClusterQueue class {name!r}: unexpected class")
        elif actual < float(min_usage[name]):
            problems.append(
                f"ClusterQueue class {name!r}: usage {actual:.2f}% is less than expected {float(min_usage[name]):.2f}%"
            )
    max_admit = spec.get("wlClassesMaxAvgTimeToAdmissionMs") or {}
    for name, group in sorted(summary["workloadClasses"].items()):
        if name not in max_admit:
            problems.append(f"workload class {name!r}: unexpected class")
        elif group["averageTimeToAdmissionMs"] > int(max_admit[name]):
            problems.append(
                f"workload class {name!r}: average wait for admission {group['averageTimeToAdmissionMs']}ms "
                f"is more than expected {int(max_admit[name])}ms"
            )
    return problems
