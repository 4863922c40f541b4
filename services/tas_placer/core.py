"""The TAS placer's pure core: node failures after admission (SEMANTICS-ADVANCED A.13).

The first placement of a workload is part of the admission decision (the admitter's cycle,
:mod:`kueue_es.scheduling.tas.cycle`). This decider watches the workloads already admitted with
a topology assignment whose lowest level is the hostname, and acts when a node of their
assignment fails: it re-places the pods of one failed node or evicts, by Kueue's rules in
:mod:`kueue_es.scheduling.tas.replacement` (Kueue pkg/controller/tas/node_controller.go,
tas_flavor_snapshot.go findReplacementAssignment, scheduler.go handleFailedTASReplacement).
Here: the feature gates (TASFailedNodeReplacement, TASFailedNodeReplacementFailFast), the quick
skip when every node holding TAS usage is healthy, and the walk in workload key order sharing
one cycle's usage between replacements.

Pure: state in, decisions out. Not done: ``status.unhealthyNodes`` and the second-pass backoff.
Delayed topology requests (A.9) are the admitter's second pass
(:func:`kueue_es.scheduling.tas.cycle.second_pass`).
"""

from __future__ import annotations

from collections.abc import Callable

from kueue_es.events import types
from kueue_es.projections import partitions
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling.tas import replacement

LOGIC_VERSION = 11
"""11: a NotReady or tainted node fails for a workload only once none of its pods still runs there
(``Node.progressing_workloads``, gate TASReplaceNodeOnPodTermination, on), and a taint tolerated only for
``tolerationSeconds`` fails it then too; gate TASReplaceNodeOnNodeTaints off ignores taints. 10 and earlier
failed a NotReady or untolerated-tainted node at once.
10: a Ready node's untolerated taint fails it for an admitted workload only if the node's taints or
Ready status changed after the workload's topology was assigned, as Kueue's node controller looks again
only on such a change (a flavor's tolerations removed do not evict what they admitted); 9 and earlier
checked the taints against the current tolerations every cycle.
9: under the alpha gate TASRespectNodeAffinityPreferred a replacement orders TAS domains by the pod set's
preferred node affinity scores first (A.3.4), as the admission does; 8 and earlier ignored the gate.
8: a replacement counts the usage of every flavor whose topology ends at the hostname on a
node (flavors selecting the same nodes share their capacity, A.2.4, as at admission); 7 and 6 counted
only its own flavor's. 7: balanced placement sizes the domains above the slice level in slices."""
ROLE = "place"
EARLIER_LOGIC_VERSIONS = (6, 7, 8, 9, 10)
"""Logic versions :func:`decide_as` still re-runs, so replay re-checks their logs too: 10 and earlier failed
a NotReady or tainted node at once, whatever pods still ran there (11 waits for them); 9 and earlier
checked a node's taints against the workload's current tolerations every cycle (10 only after the node
changed); 8 and earlier ignored
the gate TASRespectNodeAffinityPreferred (9 honours it); 6 chose balanced
placement's domains above the slice level (gate TASBalancedPlacement) counting single pods when it placed
a failed node's pods (7 counts whole slices, as Kueue's applyBalancedPlacementAlgorithm); 6 and 7 placed a
replacement counting only its own flavor's TAS usage (8 counts every hostname-level flavor's)."""


def decide(state: ClusterState, *, now_ms: int, partition: str = partitions.LEGACY) -> list[types.Decision]:
    """Replace or evict for every admitted workload with a failed node in its topology
    assignment (in workload key order), those of ``partition`` only (issue 18: every TAS
    ClusterQueue is in one partition, so one partition holds every such workload; nothing while
    it is blocked by a hand-over; ``p0``, the default: every workload). Empty when no assignment
    names a failed node."""
    return _decide(
        state,
        now_ms=now_ms,
        partition=partition,
        balanced_slice_size=True,
        shared_hostnames=True,
        preferred_affinity=True,
        taints_on_change=True,
        pods_on_node=True,
    )


def decide_as(version: int) -> Callable[..., list[types.Decision]]:
    """The ``decide`` of logic ``version`` (one of :data:`EARLIER_LOGIC_VERSIONS`), for replay: 6
    chose balanced placement's domains above the slice level in single pods; 6 and 7 counted only a
    replacement's own flavor's usage; 8 and earlier ignored preferred node affinity; 9 and earlier checked
    node taints every cycle; all of them failed a node whatever pods ran there. Raises ValueError for any
    other version."""
    if version not in EARLIER_LOGIC_VERSIONS:
        raise ValueError(f"placer logic version {version} is not one this kueue-es re-runs: {EARLIER_LOGIC_VERSIONS}")

    def decide_earlier(state: ClusterState, *, now_ms: int, partition: str = partitions.LEGACY) -> list[types.Decision]:
        """:func:`decide` as logic ``version`` decided."""
        return _decide(
            state,
            now_ms=now_ms,
            partition=partition,
            balanced_slice_size=version >= 7,
            shared_hostnames=version >= 8,
            preferred_affinity=version >= 9,
            taints_on_change=version >= 10,
            pods_on_node=False,
        )

    return decide_earlier


def _decide(
    state: ClusterState,
    *,
    now_ms: int,
    partition: str,
    balanced_slice_size: bool,
    shared_hostnames: bool,
    preferred_affinity: bool,
    taints_on_change: bool,
    pods_on_node: bool,
) -> list[types.Decision]:
    if not state.tas_usage:
        return []
    if partition != partitions.LEGACY:
        if state.partitions.blocked(partition):
            return []
        state = state.partitions.view(state, partition)
    gates = state.configuration.feature_gates
    fail_fast = gates.get("TASFailedNodeReplacementFailFast", True)
    if not gates.get("TASFailedNodeReplacement", True):
        return []
    if not replacement.any_suspect_node(state):
        return []  # the common case: every node holding TAS usage is healthy, no workload to walk
    out: list[types.Decision] = []
    # per flavor (logic 7: one entry for every hostname-level flavor): the TAS usage with this cycle's replacements
    usage: dict[str, dict[str, dict[str, int]]] = {}
    for key in sorted(k for k, wl in state.workloads.items() if wl.topology):
        wl = state.workloads[key]
        if not wl.admitted or wl.gone or wl.eviction is not None or wl.reservation is None:
            continue
        out.extend(
            replacement.check(
                state,
                wl,
                usage,
                fail_fast=fail_fast,
                now_ms=now_ms,
                balanced_slice_size=balanced_slice_size,
                shared_hostnames=shared_hostnames,
                preferred_affinity=preferred_affinity,
                taints_on_change=taints_on_change,
                pods_on_node=pods_on_node,
            )
        )
    return out
