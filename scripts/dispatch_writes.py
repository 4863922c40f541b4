"""The dispatcher's Job writes of a `kueue-es bench --config` run, by kind and by second (issue 18).

    .venv/bin/python scripts/dispatch_writes.py RUN_DIR/nats

Folds a stopped run's log from #1 and sorts every DispatchApplied (one simulated API write each) by
what it was for: a start, a start written after the workload's eviction was already on the log
(wasted: Kueue's job reconciler does not start an evicted workload's job), a stop of a job that was
started, a stop of one never started (its start not written yet: only the reservation to give back).
Then the write rate over the run: per second of the run (the harness's ``at_ms`` of WorkloadPodsReady
and WorkloadStopped, when each write landed), how many seconds the dispatcher wrote fewer than
``QPS - 5`` while no admitted workload waited for its start (the budget idle for want of
admissions) and while some did (the budget idle for another reason).
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

from kueue_es.events import types
from kueue_es.logsource import Source, fold_source
from kueue_es.projections.cluster import ClusterState


def main(store: Path, qps: float = 50.0) -> None:
    """Print the tables for the stopped store at ``store`` (``qps``: the run's ``--api-qps``)."""
    kinds: collections.Counter[str] = collections.Counter()
    evicted_at: dict[str, int] = {}  # workload -> seq of its open EvictionRequested
    started: set[str] = set()  # workloads whose current admission's start was written
    admitted_ms: dict[str, int] = {}  # workload -> at_ms of its admission not yet started
    landed: list[tuple[int, str]] = []  # (at_ms, kind) of each write's landing
    waiting: list[tuple[int, int]] = []  # (at_ms, +1 / -1): admitted workloads waiting for their start

    def observe(seq: int, event: types.Event, state: ClusterState) -> None:
        match event:
            case types.WorkloadAdmitted(workload=ref, at_ms=at):
                evicted_at.pop(ref.key, None)
                started.discard(ref.key)
                admitted_ms[ref.key] = at
                waiting.append((at, 1))
            case types.EvictionRequested(workload=ref):
                evicted_at.setdefault(ref.key, seq)
            case types.DispatchApplied(workload=ref, action="StartJob"):
                kinds["start after its eviction was logged" if ref.key in evicted_at else "start"] += 1
                started.add(ref.key)
            case types.DispatchApplied(workload=ref, action="Evict"):
                kinds["stop of a started job" if ref.key in started else "stop of a job never started"] += 1
            case types.WorkloadPodsReady(workload=ref, at_ms=at):
                landed.append((at, "start"))
                if admitted_ms.pop(ref.key, None) is not None:
                    waiting.append((at, -1))
            case types.WorkloadStopped(workload=ref, at_ms=at):
                landed.append((at, "stop"))
                if admitted_ms.pop(ref.key, None) is not None:
                    waiting.append((at, -1))
            case types.QuotaReleased(workload=ref, at_ms=at):
                if admitted_ms.pop(ref.key, None) is not None:
                    waiting.append((at, -1))

    fold_source(Source(store=store), observer=observe, from_start=True, progress=False)
    print(f"{'write':<40} {'count':>7}")
    for kind, count in sorted(kinds.items()):
        print(f"{kind:<40} {count:>7}")
    print(f"{'all':<40} {sum(kinds.values()):>7}")
    if not landed:
        return
    first = min(at for at, _ in landed) // 1000
    per_second = collections.Counter(at // 1000 - first for at, _ in landed)
    last = max(per_second)
    backlog_at: dict[int, int] = {}
    depth = 0
    events = sorted(waiting)
    i = 0
    for second in range(last + 1):
        end = (first + second + 1) * 1000
        low = depth
        while i < len(events) and events[i][0] < end:
            depth += events[i][1]
            low = min(low, depth)
            i += 1
        backlog_at[second] = low  # the fewest admitted workloads waiting at any point of the second
    idle_no_work = sum(1 for s in range(last + 1) if per_second[s] < qps - 5 and backlog_at[s] <= 0)
    idle_with_work = sum(1 for s in range(last + 1) if per_second[s] < qps - 5 and backlog_at[s] > 0)
    print(f"writes landed over {last + 1} s (first write to last): {len(landed)}, {len(landed) / (last + 1):.1f}/s")
    print(f"seconds under {qps - 5:.0f} writes with no admitted workload waiting at some point: {idle_no_work}")
    print(f"seconds under {qps - 5:.0f} writes with admitted workloads waiting throughout: {idle_with_work}")
    lost = sum(max(0.0, qps - per_second[s]) for s in range(last + 1))
    print(f"write slots unused (sum over seconds of QPS - writes): {lost:.0f} = {lost / qps:.1f} s at {qps:.0f}/s")
    for s in range(0, last + 1, 10):
        row = " ".join(f"{per_second[t]:3d}/{backlog_at[t]:<4d}" for t in range(s, min(s + 10, last + 1)))
        print(f"{s:4d}s {row}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 50.0)
