"""The ideal bound of a configuration: a greedy scheduler with instant admission.

What the best scheduler could do with the same workloads and quotas, to put our
figures beside (shared/PERFORMANCE.md "The physical limit", research/kueue-perf.md
§7): every workload is created at its nominal time ((k+1) x creationIntervalMs
after its stream starts, creating takes no time), admission takes no time, a
workload runs exactly ``runtimeMs`` from its admission and nothing is ever
evicted. Whenever a workload is created or finishes, the cohort it belongs to
admits its pending workloads greedily, highest priority first then oldest first
(the order Kueue's heaps use, cohort-wide), skipping a workload that does not fit
(BestEffortFIFO) in either the cohort's quota (the sum of its ClusterQueues'
nominal quotas) or its ClusterQueue's (nominal + borrowingLimit). CPU is
fungible inside a cohort, so there is no fragmentation.

Greedy is not optimal in general, but here it is within a second of the fluid
lower bound (research §7.1: 67.0 s vs 66.8 s for baseline).
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass, field

from kueue_es.perfbench.generator import Generated, PlannedWorkload, QueueSpec


@dataclass(kw_only=True)
class IdealClass:
    """Per workload class in the ideal run: averages in ms from creation."""

    count: int = 0
    total_admission_ms: int = 0
    total_finish_ms: int = 0

    @property
    def average_time_to_admission_ms(self) -> int:
        """Mean creation-to-admission, ms (integer division, as Kueue's recorder)."""
        return self.total_admission_ms // self.count if self.count else 0

    @property
    def average_time_to_finish_ms(self) -> int:
        """Mean creation-to-finish, ms."""
        return self.total_finish_ms // self.count if self.count else 0


@dataclass(kw_only=True)
class IdealResult:
    """The greedy ideal run: makespan and Kueue's figures, times in ms from the streams' start.

    ``work_bound_ms`` is total CPU work over total nominal quota (a lower bound no
    scheduler beats); ``usage_percent[cq class]`` is Kueue's usage definition over
    [0, makespan].
    """

    makespan_ms: int
    work_bound_ms: int
    workloads: int
    classes: dict[str, IdealClass] = field(default_factory=dict)
    usage_percent: dict[str, float] = field(default_factory=dict)


def ideal_bound(generated: Generated, planned: list[PlannedWorkload] | None = None) -> IdealResult:
    """Run the greedy ideal scheduler over ``generated``'s workloads (pure; a few seconds for 50,000).

    ``planned``: ``generated.planned()`` when the caller has it already (the bench driver), so the
    50,000 workloads of a large configuration are not made a second time.
    """
    if planned is None:
        planned = generated.planned()
    queues = {q.name: q for q in generated.queues}
    cohort_capacity: dict[str, int] = defaultdict(int)
    for q in generated.queues:
        cohort_capacity[q.cohort] += q.nominal_m
    cq_cap = {
        q.name: cohort_capacity[q.cohort] if q.borrowing_limit_m is None else q.nominal_m + q.borrowing_limit_m
        for q in generated.queues
    }
    cohort_used: dict[str, int] = defaultdict(int)
    cq_used: dict[str, int] = defaultdict(int)
    pending: dict[str, list[tuple[int, int, int]]] = defaultdict(list)  # cohort -> sorted (-prio, created, index)
    min_cpu = min((wl.cpu_m for wl in planned), default=0)
    # event heap: (time, kind 0=finish 1=arrival, index); finishes first at the same instant
    events: list[tuple[int, int, int]] = [(wl.offset_ms, 1, i) for i, wl in enumerate(planned)]
    heapq.heapify(events)
    classes: dict[str, IdealClass] = defaultdict(IdealClass)
    class_work: dict[str, int] = defaultdict(int)  # cq class -> mCPU x ms held
    makespan = 0
    while events:
        now = events[0][0]
        touched: dict[str, None] = {}
        while events and events[0][0] == now:
            _, kind, i = heapq.heappop(events)
            wl = planned[i]
            touched[wl.cohort] = None
            if kind == 0:
                cohort_used[wl.cohort] -= wl.cpu_m
                cq_used[wl.cluster_queue] -= wl.cpu_m
            else:
                bisect.insort(pending[wl.cohort], (-wl.priority, wl.offset_ms, i))
        for cohort in touched:
            _admit(
                cohort,
                now=now,
                planned=planned,
                pending=pending,
                free=cohort_capacity[cohort] - cohort_used[cohort],
                cohort_used=cohort_used,
                cq_used=cq_used,
                cq_cap=cq_cap,
                min_cpu=min_cpu,
                events=events,
                classes=classes,
                class_work=class_work,
                queues=queues,
            )
        makespan = max(makespan, now)
    total_work = sum(wl.cpu_m * wl.runtime_ms for wl in planned)
    total_quota = sum(cohort_capacity.values())
    nominal_by_class: dict[str, int] = defaultdict(int)
    for q in generated.queues:
        nominal_by_class[q.class_name] += q.nominal_m
    usage = {
        name: (class_work.get(name, 0) * 100 / (nominal * makespan) if nominal and makespan else 0.0)
        for name, nominal in nominal_by_class.items()
    }
    return IdealResult(
        makespan_ms=makespan,
        work_bound_ms=-(-total_work // total_quota) if total_quota else 0,
        workloads=len(planned),
        classes=dict(classes),
        usage_percent=usage,
    )


def _admit(
    cohort: str,
    *,
    now: int,
    planned: list[PlannedWorkload],
    pending: dict[str, list[tuple[int, int, int]]],
    free: int,
    cohort_used: dict[str, int],
    cq_used: dict[str, int],
    cq_cap: dict[str, int],
    min_cpu: int,
    events: list[tuple[int, int, int]],
    classes: dict[str, IdealClass],
    class_work: dict[str, int],
    queues: dict[str, QueueSpec],
) -> None:
    """Admit what fits in ``cohort`` at ``now``, in (priority desc, creation, index) order."""
    waiting = pending[cohort]
    if not waiting or free < min_cpu:
        return
    kept: list[tuple[int, int, int]] = []
    for pos, entry in enumerate(waiting):
        if free < min_cpu:
            kept.extend(waiting[pos:])
            break
        wl = planned[entry[2]]
        cpu = wl.cpu_m
        if cpu > free or cq_used[wl.cluster_queue] + cpu > cq_cap[wl.cluster_queue]:
            kept.append(entry)
            continue
        free -= cpu
        cohort_used[cohort] += cpu
        cq_used[wl.cluster_queue] += cpu
        finish = now + wl.runtime_ms
        heapq.heappush(events, (finish, 0, entry[2]))
        stats = classes[wl.class_name]
        stats.count += 1
        stats.total_admission_ms += now - wl.offset_ms
        stats.total_finish_ms += finish - wl.offset_ms
        queue = queues[wl.cluster_queue]
        class_work[queue.class_name] += cpu * wl.runtime_ms
    pending[cohort] = kept
