"""The admitter's pure core: one Kueue scheduling cycle over the folded state.

``decide(state, now_ms=...)`` has no I/O, no clock and no randomness, so replay can re-run
it at any recorded basis and get the same bytes. The cycle itself, in Kueue's phases, is
:func:`kueue_es.scheduling.cycle.run`; this module gives it the cycle's quota tree as a
what-if (Kueue's per-cycle snapshot) and names the role and logic version the log records.

Outputs: QuotaReleased, QuotaReserved (+ TopologyAssigned) + WorkloadAdmitted, WorkloadInadmissible,
PreemptionRequired, and the lifecycle's decisions (admission checks, PodsReady, backoff).
"""

from __future__ import annotations

import gc

from kueue_es.events import types
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import cycle

LOGIC_VERSION = 9
ROLE = "admit"


def decide(state: ClusterState, *, now_ms: int) -> list[types.Decision]:
    """One scheduling cycle over ``state`` at ``now_ms`` (ms since the epoch).

    Returns decisions in a deterministic order; empty when nothing changes.
    """
    tree = quota.cached(state)
    tree.begin()  # the cycle's releases and admissions are what-ifs until they come back through the log
    # A cycle's records are short-lived and make no reference cycles: the collector would only walk
    # the folded state, again and again (a fifth of the cycle's time in ``kueue-es bench core``).
    # It runs as usual once the cycle is over. Nothing a decision holds depends on it.
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        return cycle.run(state, tree=tree, now_ms=now_ms)
    finally:
        tree.rollback()
        if collecting:
            gc.enable()
