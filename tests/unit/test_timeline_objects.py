"""The demo's timeline line for a Kueue object: applied, or deleted and held by Kueue's finalizer."""

from __future__ import annotations

from kueue_es import timeline
from kueue_es.events import models, types
from kueue_es.projections.cluster import ClusterState
from tests.builders import cluster_queue, parse


def test_a_cluster_queue_applied_then_deleted_while_in_use() -> None:
    doc = cluster_queue("cq", flavors={"f": {"cpu": 4}})
    applied = types.ClusterQueueObserved(cluster_queue=parse(doc))
    assert timeline.describe(applied, ClusterState()) == ("applied", "ClusterQueue cq")
    doc["metadata"]["annotations"] = {models.TERMINATING_ANNOTATION: "2026-12-06T18:00:00Z"}
    deleting = types.ClusterQueueObserved(cluster_queue=parse(doc))
    assert timeline.describe(deleting, ClusterState()) == (
        "deleting",
        "ClusterQueue cq (held by its finalizer while in use)",
    )
