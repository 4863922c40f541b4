"""The MultiKueue decider's core: workers nominated, the winning copy, Retry and Rejected.

The rules are Kueue's MultiKueue manager's, in :mod:`kueue_es.scheduling.multikueue`; this core
runs them over the workloads of one partition, like the other deciders (``kueue-es service
multikueue``, NATS user ``multikueue``, DecisionRecords on ``kq.dec.<p>.head.multikueue``).
Pure: state in, decisions out.
"""

from __future__ import annotations

from kueue_es.events import types
from kueue_es.projections import partitions
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import multikueue

LOGIC_VERSION = 1
ROLE = "multikueue"


def decide(state: ClusterState, *, now_ms: int, partition: str = partitions.LEGACY) -> list[types.Decision]:
    """The MultiKueue decisions of this cycle for the workloads of ``partition`` (``p0``, the default:
    every workload; nothing while the partition is blocked by a hand-over), in workload key order.
    Empty when no AdmissionCheck is MultiKueue's."""
    if not state.multikueue.checks:
        return []
    if partition != partitions.LEGACY:
        if state.partitions.blocked(partition):
            return []
        state = state.partitions.view(state, partition)
    return multikueue.decide(state, now_ms=now_ms)
