"""Dominant resource shares (SEMANTICS §7.9; Kueue pkg/cache/scheduler/fair_sharing_test.go)."""

from __future__ import annotations

import math

from kueue_es.projections import quota
from kueue_es.scheduling import fairsharing as fair
from tests.builders import Log, cluster_queue


def _tree(usage: dict, *, weights: dict[str, str] | None = None) -> tuple[quota.QuotaTree, fair.Weights]:
    log = Log()
    for name, nominal in (("cq", {"cpu": 2, "gpu": 5}), ("sibling", {"cpu": 8, "gpu": 5})):
        doc = cluster_queue(name, flavors={"default": nominal})
        doc["spec"]["cohortName"] = "co"
        if weights and name in weights:
            doc["spec"]["fairSharing"] = {"weight": weights[name]}
        log.apply_manifests(doc)
    return quota.build(log.state, usage=usage), fair.Weights(log.state)


def test_usage_above_nominal_gives_the_share_of_the_dominant_resource() -> None:
    """Kueue's "usage above nominal": cpu 3/2 and gpu 7/5 borrowed over lendable 10 each:
    cpu 1000/10 = 100, gpu 2 x 1000 / 10 = 200 => 200 on gpu."""
    tree, weights = _tree({"cq": {"default": {"cpu": 3000, "gpu": 7}}})
    share = fair.share(tree.cluster_queues["cq"], weights)
    assert share.borrowing
    assert (share.ratio, share.dominant) == (200.0, "gpu")
    assert share.weighted == 200.0


def test_within_nominal_is_zero_and_not_borrowing() -> None:
    tree, weights = _tree({"cq": {"default": {"cpu": 2000, "gpu": 5}}})
    share = fair.share(tree.cluster_queues["cq"], weights)
    assert not share.borrowing
    assert share.weighted == 0.0


def test_weight_divides_the_share_and_zero_weight_is_infinite() -> None:
    usage = {"cq": {"default": {"cpu": 3000, "gpu": 7}}}
    tree, weights = _tree(usage, weights={"cq": "2"})
    assert fair.share(tree.cluster_queues["cq"], weights).weighted == 100.0
    tree, weights = _tree(usage, weights={"cq": "0"})
    zero = fair.share(tree.cluster_queues["cq"], weights)
    assert math.isinf(zero.weighted)
    big = fair.Share(weight=1.0, ratio=10**9)
    assert fair.compare(zero, big) == 1  # a zero-weight borrower is above everything else
    assert fair.compare(big, zero) == -1


def test_extra_request_counts_as_usage() -> None:
    """The share "after admission": a request is added to the node's usage."""
    tree, weights = _tree({})
    share = fair.share(tree.cluster_queues["cq"], weights, extra={("default", "cpu"): 4000})
    assert (share.ratio, share.dominant) == (200.0, "cpu")  # 2 cpu borrowed of 10 lendable


def test_ties_pick_the_alphabetically_smaller_resource() -> None:
    """Equal ratios: the dominant resource is the smaller name."""
    tree, weights = _tree({"cq": {"default": {"cpu": 3000, "gpu": 6}}})
    share = fair.share(tree.cluster_queues["cq"], weights)
    assert (share.ratio, share.dominant) == (100.0, "cpu")
