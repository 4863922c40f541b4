"""What a log says happened to each workload, Kueue's perf-style summary, and the what-if tables.

Per workload (:func:`outcomes`): its ClusterQueue, creation, last admission (Kueue's time to
admission is the last admission's time - creationTimestamp), the flavors of that admission,
how often it was preempted (EvictionRequested reason Preempted) and how many victims were
evicted for it, and its finish. Per ClusterQueue the log observes (:func:`summaries`), as
:mod:`kueue_es.perfbench.metrics` defines Kueue's figures: workloads admitted, the average time
to admission (ms, integer mean), usage % per resource = the time integral of the quota its
workloads hold (QuotaReserved to QuotaReleased) x 100 / (nominal quota x the length of its
window), and preemptions. The window runs from the ClusterQueue's creation to the end of the
history, the same end for the two runs a report compares, or to its deletion: not to its last
usage change, as Kueue's performance runner ends it (its runs end when the last workload does),
so a queue that holds its quota to the end reads 100 %, not less.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from kueue_es.events import models, types
from kueue_es.whatif import history


@dataclass(kw_only=True)
class WorkloadOutcome:
    """One workload in one log (times in ms since the epoch; 0: never)."""

    key: str
    cluster_queue: str = ""
    created_ms: int = 0
    admitted_ms: int = 0
    flavors: str = ""
    preempted: int = 0
    preempting: int = 0
    finished_ms: int = 0

    @property
    def time_to_admission_ms(self) -> int | None:
        """Last admission - creation (ms), None when never admitted."""
        return self.admitted_ms - self.created_ms if self.admitted_ms else None


@dataclass(kw_only=True)
class QueueSummary:
    """Kueue's perf figures of one ClusterQueue in one log (see the module)."""

    name: str
    admitted: int = 0
    average_time_to_admission_ms: int = 0
    usage_percent: dict[str, float] = field(default_factory=dict)
    preemptions: int = 0


def with_carried(log: Iterable[tuple[int, types.Event]]) -> Iterator[tuple[int, types.Event]]:
    """``log`` with the finished releases each DecisionRecord carries (admitter logic 15) right after
    it, as the QuotaReleased decisions they stand for, where the fold takes them."""
    for seq, event in log:
        for one in types.with_carried(event):
            yield seq, one


def outcomes(log: Iterable[tuple[int, types.Event]]) -> dict[str, WorkloadOutcome]:
    """Every workload of ``log`` (``(seq, event)`` in order), by ``namespace/name``, in order of submission."""
    found: dict[str, WorkloadOutcome] = {}
    reserved: dict[str, types.QuotaReserved] = {}

    def of(key: str) -> WorkloadOutcome:
        return found.setdefault(key, WorkloadOutcome(key=key))

    for _, event in with_carried(log):
        match event:
            case types.WorkloadObserved(workload=wl):
                out = of(wl.key)
                out.created_ms = wl.metadata.creation_timestamp_ms
            case types.QuotaReserved(workload=ref):
                reserved[ref.key] = event
            case types.WorkloadAdmitted(workload=ref, cluster_queue=cq, at_ms=at):
                if event.pod_set_assignments:  # its own flavors (schema version 2), with or without a QuotaReserved
                    reserved[ref.key] = types.reservation_of(event)
                out = of(ref.key)
                out.cluster_queue, out.admitted_ms = cq, at
                if ref.key in reserved:
                    out.flavors = flavors_of(reserved[ref.key])
            case types.EvictionRequested(workload=ref, reason="Preempted", preemptor=preemptor):
                of(ref.key).preempted += 1
                if preemptor is not None:
                    of(preemptor.key).preempting += 1
            case types.WorkloadFinished(workload=ref, at_ms=at):
                of(ref.key).finished_ms = at
    return found


def flavors_of(reserved: types.QuotaReserved) -> str:
    """The flavors of a reservation: ``f`` when one, else ``podset: f1,f2; ...``."""
    per_set = [(a.name, sorted(set(a.flavors.values()))) for a in reserved.pod_set_assignments]
    every = sorted({f for _, fs in per_set for f in fs})
    if len(every) <= 1:
        return every[0] if every else ""
    return "; ".join(f"{name}: {','.join(fs)}" for name, fs in per_set)


def summaries(
    log: Sequence[tuple[int, types.Event]], *, end_ms: int, times: Sequence[int] = ()
) -> dict[str, QueueSummary]:
    """Per ClusterQueue the log observes (one it deletes too), Kueue's figures over ``log`` (see the module),
    each one's usage over its window: from its creation to its deletion, else to ``end_ms`` (the end of the
    history, the same for the runs compared). ``times``: each message's time (ms, 0 unknown), in log order,
    which times a deletion (it carries no time of its own) with the times the log's events show."""
    queues: dict[str, models.ClusterQueue] = {}
    created: dict[str, int] = {}
    gone: dict[str, int] = {}  # ClusterQueue -> when the log deleted it
    held: dict[str, dict[str, int]] = {}  # workload -> resource -> amount held
    holder: dict[str, str] = {}  # workload -> ClusterQueue
    now_held: dict[str, dict[str, int]] = {}
    integral: dict[str, dict[str, int]] = {}
    since: dict[str, int] = {}

    def shift(cq: str, delta: dict[str, int], at: int, sign: int) -> None:
        start = since.get(cq, at)
        current, area = now_held.setdefault(cq, {}), integral.setdefault(cq, {})
        for resource, amount in current.items():
            area[resource] = area.get(resource, 0) + amount * max(0, at - start)
        for resource, amount in delta.items():
            current[resource] = current.get(resource, 0) + sign * amount
        since[cq] = at

    clock = 0
    for index, (_, recorded) in enumerate(log):
        clock = max(clock, times[index] if index < len(times) else 0, history.times(recorded))
        for event in types.with_carried(recorded):
            if isinstance(event, types.WorkloadAdmitted) and types.reserves(event, event.workload.key in held):
                event = types.reservation_of(event)  # reserved and admitted by one message: its reservation here
            match event:
                case types.ClusterQueueObserved(cluster_queue=cq):
                    name = cq.metadata.name
                    queues[name] = cq
                    born = cq.metadata.creation_timestamp_ms or clock  # unknown: when the log first shows it
                    created[name] = min(created.get(name, born), born)
                    gone.pop(name, None)
                case types.ObjectDeleted(kind="ClusterQueue", name=name) if name in queues:
                    gone[name] = clock
                case types.QuotaReserved(workload=ref, cluster_queue=cq, at_ms=at):
                    amounts: dict[str, int] = {}
                    for assignment in event.pod_set_assignments:
                        for resource, amount in assignment.resource_usage.items():
                            amounts[resource] = amounts.get(resource, 0) + amount
                    held[ref.key], holder[ref.key] = amounts, cq
                    shift(cq, amounts, at, +1)
                case types.QuotaReleased(workload=ref, at_ms=at) if ref.key in held:
                    shift(holder.pop(ref.key), held.pop(ref.key), at, -1)
    result: dict[str, QueueSummary] = {name: QueueSummary(name=name) for name in sorted(queues)}
    for out in outcomes(log).values():
        if out.admitted_ms and out.cluster_queue in result:
            summary = result[out.cluster_queue]
            summary.admitted += 1
            summary.average_time_to_admission_ms += out.admitted_ms - out.created_ms
            summary.preemptions += out.preempted
    for name, summary in result.items():
        window_end = max(gone.get(name, end_ms), since.get(name, 0))
        shift(name, {}, window_end, +1)  # what it holds to the end of its window
        nominal: dict[str, int] = {}
        for group in queues[name].spec.resource_groups:
            for flavor in group.flavors:
                for quota in flavor.resources:
                    nominal[quota.name] = nominal.get(quota.name, 0) + quota.nominal_quota
        span = window_end - created[name]
        summary.usage_percent = {
            resource: (integral.get(name, {}).get(resource, 0) * 100 / (amount * span) if amount and span > 0 else 0.0)
            for resource, amount in sorted(nominal.items())
        }
        if summary.admitted:
            summary.average_time_to_admission_ms //= summary.admitted
    return result


# --- rendering -----------------------------------------------------------------------------------


def seconds(ms: int | None) -> str:
    """``12.3s``, or ``never``."""
    return "never" if ms is None else f"{ms / 1000:.1f}s"


def delta(before: int | None, after: int | None) -> str:
    """``-3.0s`` / ``+1.2s`` / ``+15ms`` (under 0.1 s) / ``=``, or what changed between admitted and never."""
    if before is None and after is None:
        return "="
    if before is None:
        return "now admitted"
    if after is None:
        return "no longer admitted"
    diff = after - before
    if diff == 0:
        return "="
    return f"{diff:+d}ms" if abs(diff) < 100 else f"{diff / 1000:+.1f}s"


def changed(a: WorkloadOutcome, b: WorkloadOutcome) -> bool:
    """Whether the what-if changed anything the table shows of a workload."""
    return (a.time_to_admission_ms, a.flavors, a.preempted, a.preempting, a.cluster_queue) != (
        b.time_to_admission_ms,
        b.flavors,
        b.preempted,
        b.preempting,
        b.cluster_queue,
    )


def workload_table(
    before: dict[str, WorkloadOutcome], after: dict[str, WorkloadOutcome], *, show_all: bool
) -> tuple[Table, int, int, int]:
    """The per-workload table (changed ones, or all), and how many were admitted earlier, later, changed."""
    table = Table(title="Workloads (time to admission: last admission - creation)", title_justify="left")
    for column in ("workload", "ClusterQueue", "baseline", "what-if", "change", "flavor", "preempted", "preempting"):
        table.add_column(column, justify="right" if column in ("baseline", "what-if", "change") else "left")
    earlier = later = differ = 0
    for key in sorted(set(before) | set(after), key=lambda k: ((before.get(k) or after[k]).created_ms, k)):
        a, b = before.get(key, WorkloadOutcome(key=key)), after.get(key, WorkloadOutcome(key=key))
        ta, tb = a.time_to_admission_ms, b.time_to_admission_ms
        if ta is not None and tb is not None:
            earlier += tb < ta
            later += tb > ta
        elif tb is not None:
            earlier += 1
        elif ta is not None:
            later += 1
        if changed(a, b):
            differ += 1
        elif not show_all:
            continue
        table.add_row(
            key,
            b.cluster_queue or a.cluster_queue or "-",
            seconds(ta),
            seconds(tb),
            delta(ta, tb),
            _pair(a.flavors or "-", b.flavors or "-"),
            _pair(str(a.preempted), str(b.preempted)),
            _pair(str(a.preempting), str(b.preempting)),
        )
    return table, earlier, later, differ


def summary_table(before: dict[str, QueueSummary], after: dict[str, QueueSummary]) -> Table:
    """Kueue's perf-style summary per ClusterQueue, baseline -> what-if."""
    table = Table(title="ClusterQueues (Kueue's performance figures)", title_justify="left")
    for column in ("ClusterQueue", "admitted", "avg time to admission", "usage %", "preemptions"):
        table.add_column(column)
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name, QueueSummary(name=name)), after.get(name, QueueSummary(name=name))
        resources = sorted(set(a.usage_percent) | set(b.usage_percent))
        usage = ", ".join(
            f"{r} {a.usage_percent.get(r, 0.0):.1f} -> {b.usage_percent.get(r, 0.0):.1f}" for r in resources
        )
        table.add_row(
            name,
            _pair(str(a.admitted), str(b.admitted)),
            _pair(seconds(a.average_time_to_admission_ms), seconds(b.average_time_to_admission_ms)),
            usage or "-",
            _pair(str(a.preemptions), str(b.preemptions)),
        )
    return table


def _pair(a: str, b: str) -> str:
    return a if a == b else f"{a} -> {b}"


def console(*, width: int = 160) -> Console:
    """The console reports print on: a fixed width and no colour codes unless a terminal, so two
    runs print the same bytes."""
    return Console(width=width, soft_wrap=False, highlight=False)
