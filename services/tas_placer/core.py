"""The TAS placer's pure core.

In this version the placer folds the log and decides nothing: topology-aware
placement (SEMANTICS-ADVANCED §A) arrives with the TAS issue.
"""

from __future__ import annotations

from events import types
from projections.cluster import ClusterState

LOGIC_VERSION = 1
ROLE = "place"


def decide(state: ClusterState, *, now_ms: int) -> list[types.Decision]:
    """No placements yet: always an empty list (``state`` and ``now_ms`` unused)."""
    del state, now_ms
    return []
