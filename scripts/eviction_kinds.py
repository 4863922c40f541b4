"""The evictions of a `kueue-es bench --config` run, by kind (docs/benchmarks.md, "Baseline evictions").

    .venv/bin/python scripts/eviction_kinds.py RUN_DIR/nats

Folds a stopped run's log from #1 and prints, per (preemptor class, victim class, Kueue's preemption
reason), how many EvictionRequested the preemptor wrote (a class is the workload name's first part,
as the generator names them: ``medium-1-11-0``), and how many of those evictions went to a preemptor
that already fitted on the state the preemptor decided on (its DecisionRecord's basis: quota as
Kueue's cache holds it, the workloads that finished or stopped at or before the basis holding none,
SEMANTICS §6.4). Kueue evicts nobody for a workload that fits; preemptor logic 5 neither (issue 18).
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

from kueue_es.events import types
from kueue_es.logsource import Source, fold_source
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import nominations


def _class(key: str) -> str:
    return key.split("/", 1)[1].split("-", 1)[0]


def main(store: Path) -> None:
    """Print the table for the stopped store at ``store``."""
    kinds: collections.Counter[tuple[str, str, str]] = collections.Counter()
    already_fit = collections.Counter[str]()
    basis = 0

    def observe(seq: int, event: types.Event, state: ClusterState) -> None:
        nonlocal basis
        match event:
            case types.DecisionRecord(basis_seq=seq_of_basis):
                basis = seq_of_basis
            case types.EvictionRequested(workload=victim, preemptor=preemptor, preemption_reason=reason) if preemptor:
                kinds[(_class(preemptor.key), _class(victim.key), reason)] += 1
            case types.PreemptionIssued(workload=ref, targets=targets) if targets and ref.key in state.nominations:
                nomination = state.nominations[ref.key][1]
                tree = quota.build(state)
                for key in state.releasable:
                    wl = state.workloads[key]
                    if wl.reservation is not None and 0 < max(wl.finished_seq, wl.stopped_seq, wl.deleted_seq) <= basis:
                        tree.remove_usage(
                            wl.reservation.cluster_queue, quota.reservation_usage(wl.held or wl.reservation)
                        )
                if tree.fits(nomination.cluster_queue, nominations.usage_of(nomination)):
                    fresh = [t for t in targets if state.workloads[t.workload.key].eviction is None]
                    already_fit[_class(ref.key)] += len(fresh)

    fold_source(Source(store=store), observer=observe, from_start=True, progress=False)
    print(f"{'preemptor':<10} {'victim':<8} {'reason':<32} {'evictions':>9}")
    for (preemptor, victim, reason), count in sorted(kinds.items()):
        print(f"{preemptor:<10} {victim:<8} {reason:<32} {count:>9}")
    print(f"total {sum(kinds.values())}; for a preemptor that already fitted at the basis: {sum(already_fit.values())}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
