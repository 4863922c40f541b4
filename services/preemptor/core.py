"""The preemptor's pure core.

In this version the preemptor folds the log like every decider and decides
nothing: Kueue's preemption (SEMANTICS §7) arrives with the preemption issue.
Keeping it a running service now fixes the protocol: it commits under the same
partition head as the admitter, so no two deciders can double-book quota.
"""

from __future__ import annotations

from events import types
from projections.cluster import ClusterState

LOGIC_VERSION = 1
ROLE = "preempt"


def decide(state: ClusterState, *, now_ms: int) -> list[types.Decision]:
    """No preemptions yet: always an empty list (``state`` and ``now_ms`` unused)."""
    del state, now_ms
    return []
