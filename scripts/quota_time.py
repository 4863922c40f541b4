"""Where a stopped `kueue-es bench --config` run's quota-time went, in CPU-seconds (issue 18).

    .venv/bin/python scripts/quota_time.py RUN_DIR/nats NOMINAL_CPU

Folds the run's log from #1 (as every service folds it, so a record's finished releases count) and
splits the ClusterQueues' capacity over the run (``NOMINAL_CPU`` CPUs, the sum of their nominal
quotas, times first reservation to last release) into: the work of runs that finished (their
``runtimeMs``), the rest of those runs' hold (quota held - runtime: admission to start, finish to
release), the whole hold of runs that were evicted (their work is lost and runs again), and what
no workload held. The bench's ideal bound assumes the first part alone.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

from kueue_es.events import types
from kueue_es.logsource import Source, fold_source
from kueue_es.perfbench.generator import CLASS_LABEL, RUNTIME_LABEL
from kueue_es.projections.cluster import ClusterState


def main(store: Path, nominal_cpu: float) -> None:
    """Print the split for the stopped store at ``store``."""
    held: dict[str, tuple[int, int]] = {}  # workload -> (millicores, reserved at ms)
    runtime_ms: dict[str, int] = {}
    class_of: dict[str, str] = {}
    spent: collections.Counter[str] = collections.Counter()  # millicore-ms
    evictions: collections.Counter[str] = collections.Counter()
    span = [0, 0]

    def observe(seq: int, event: types.Event, state: ClusterState) -> None:
        if isinstance(event, types.WorkloadAdmitted) and types.reserves(event, event.workload.key in held):
            event = types.reservation_of(event)
        match event:
            case types.WorkloadObserved(workload=wl):
                labels = wl.metadata.labels
                runtime = labels.get(RUNTIME_LABEL, "")
                runtime_ms[wl.key] = int(runtime) if runtime.isdigit() else 0
                class_of[wl.key] = labels.get(CLASS_LABEL, "?")
            case types.QuotaReserved(workload=ref, at_ms=at):
                cpu = sum(a.resource_usage.get("cpu", 0) for a in event.pod_set_assignments)
                held[ref.key] = (cpu, at)
                span[0] = span[0] or at
            case types.QuotaReleased(workload=ref, at_ms=at, reason=reason):
                found = held.pop(ref.key, None)
                if found is None:
                    return
                cpu, since = found
                name = class_of.get(ref.key, "?")
                if reason == "Finished":
                    work = runtime_ms.get(ref.key, 0)
                    spent["work of finished runs"] += cpu * work
                    spent[f"held - runtime, {name}"] += cpu * max(0, at - since - work)
                else:
                    spent[f"held by evicted runs, {name}"] += cpu * (at - since)
                    evictions[name] += 1
                span[1] = max(span[1], at)

    fold_source(Source(store=store), observer=observe, from_start=True, progress=False)
    seconds = (span[1] - span[0]) / 1000
    capacity = nominal_cpu * seconds
    print(f"first reservation to last release: {seconds:.1f} s; capacity {capacity:,.0f} CPU-s")
    total = 0.0
    for what, value in sorted(spent.items()):
        cpu_s = value / 1e6
        total += cpu_s
        print(f"{what:<36} {cpu_s:>10,.0f} CPU-s {100 * cpu_s / capacity:5.1f} %")
    print(f"{'held by no workload':<36} {capacity - total:>10,.0f} CPU-s {100 * (capacity - total) / capacity:5.1f} %")
    print("evictions by class:", dict(sorted(evictions.items())))


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]))
