"""Quota math on the cohort tree: Kueue's worked examples (SEMANTICS §6.5, cluster_queue.md)."""

from pathlib import Path

from kueue_es.projections import quota
from tests.builders import Log, cluster_queue

FR = ("f", "cpu")


def tree_of(
    *queues: tuple[str, int, dict], cohorts: tuple[dict, ...] = (), usage: dict | None = None
) -> quota.QuotaTree:
    log = Log()
    for doc in cohorts:
        log.apply_manifests(doc)
    for name, nominal, extra in queues:
        cq = cluster_queue(name, flavors={"f": {"cpu": nominal}})
        cq["spec"]["cohortName"] = extra.pop("cohort", "co")
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(extra)
        log.apply_manifests(cq)
    return quota.build(log.state, usage=usage or {})


def test_no_limits_a_queue_can_use_the_whole_cohort() -> None:
    """A (9) and B (12) in one cohort: A may take all 21 while B is idle."""
    tree = tree_of(("a", 9, {}), ("b", 12, {}))
    assert tree.available("a", FR) == 21_000
    assert tree.potential_available("a", FR) == 21_000


def test_borrowing_limit_caps_what_a_queue_borrows() -> None:
    """A.borrowingLimit=1: A can reach 10 at most."""
    tree = tree_of(("a", 9, {"borrowingLimit": 1}), ("b", 12, {}))
    assert tree.available("a", FR) == 10_000
    assert tree.potential_available("a", FR) == 10_000


def test_lending_limit_keeps_quota_for_the_lender() -> None:
    """B.lendingLimit=1: B keeps 11 for itself; A reaches 10; B reaches 21."""
    tree = tree_of(("a", 9, {}), ("b", 12, {"lendingLimit": 1}))
    assert tree.available("a", FR) == 10_000
    assert tree.available("b", FR) == 21_000


def test_lending_limit_with_usage_one_more_needed() -> None:
    """lend-a (3, lends 2) and lend-b (2, lends 2), lend-b using 2: the cohort holds 2 + 2 = 4, so a
    3-CPU request in lend-b (5 in all) is 1 short (Kueue scheduler_test 'workload exceeds lending limit')."""
    usage = {"lend-b": {"f": {"cpu": 2000}}}
    tree = tree_of(("lend-a", 3, {"lendingLimit": 2}), ("lend-b", 2, {"lendingLimit": 2}), usage=usage)
    assert tree.available("lend-b", FR) == 2_000  # 3 wanted: 1 more needed
    assert tree.available("lend-a", FR) == 3_000  # 1 kept locally + 2 left in the cohort
    assert tree.potential_available("lend-b", FR) == 4_000


def test_usage_pushes_up_and_comes_back() -> None:
    """Adding then removing usage restores every node's numbers."""
    tree = tree_of(("a", 9, {"lendingLimit": 4}), ("b", 12, {}))
    before = tree.available("b", FR)
    tree.add_usage("a", {FR: 7_000})
    assert tree.available("b", FR) == before - 2_000  # a's first 5 are local, only 2 came from the cohort
    tree.remove_usage("a", {FR: 7_000})
    assert tree.available("b", FR) == before


def test_cohort_objects_add_quota_and_cycles_disable() -> None:
    """A Cohort's own nominal quota adds to the subtree; a parent cycle makes its queues unusable."""
    parent = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "co"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 5}]}],
                }
            ]
        },
    }
    tree = tree_of(("a", 1, {}), cohorts=(parent,))
    assert tree.available("a", FR) == 6_000
    loop = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": n}, "spec": {"parentName": p}}
        for n, p in (("x", "y"), ("y", "x"))
    ]
    tree = tree_of(("a", 1, {"cohort": "x"}), cohorts=tuple(loop))
    assert tree.cluster_queues["a"].in_cycle


def test_tree_kept_by_the_fold_equals_a_fresh_build() -> None:
    """The cached tree, updated by every QuotaReserved/QuotaReleased, matches one built from scratch."""
    from kueue_es.scenarios import core_engine, load_scenario

    examples = Path(__file__).resolve().parents[2] / "tests" / "scenarios" / "quota"
    checked = 0
    for path in sorted(examples.glob("*.yaml")):
        run = core_engine.run_scenario(load_scenario(path))
        cached, fresh = quota.cached(run.state), quota.build(run.state)
        for name, node in [*fresh.cluster_queues.items(), *fresh.cohorts.items()]:
            kept = cached.cluster_queues.get(name) or cached.cohorts[name]
            for fr in set(node.usage) | set(kept.usage):
                assert kept.usage.get(fr, 0) == node.usage.get(fr, 0), (path.name, name, fr)
        checked += 1
    assert checked >= 5


def test_rollback_puts_back_every_usage_and_stamp_as_begin_found_them() -> None:
    """A cycle's what-ifs (adds, removals, capacity reserved, a lending limit in the way, an FR
    first used inside them) undone by rollback: every node's usage values, their key order and
    its stamp as begin() found them (an FR first held in the what-ifs stays, at 0), twice in a row;
    changes outside a recording are not undone (the fold's own, between cycles)."""
    tree = tree_of(("a", 9, {"lendingLimit": 2}), ("b", 12, {}), ("c", 5, {"borrowingLimit": 1}))
    other = ("g", "cpu")  # an FR no node declares
    tree.add_usage("a", {FR: 4_000})  # outside a recording: stays
    for round_ in range(2):
        before = {
            name: (dict(node.usage), node.stamp) for name, node in [*tree.cluster_queues.items(), *tree.cohorts.items()]
        }
        tree.begin()
        tree.add_usage("a", {FR: 9_000})
        tree.remove_usage("a", {FR: 1_000})
        tree.reserve_capacity("c", {FR: 3_000, other: 1_000}, borrowing=True)
        tree.add_usage("b", {FR: 2_000})
        tree.shift_reservation("b", {FR: 500}, sign=-1)
        assert any(node.usage != before[name][0] for name, node in tree.cluster_queues.items())
        tree.rollback()
        for name, node in [*tree.cluster_queues.items(), *tree.cohorts.items()]:
            usage, stamp = before[name]
            expected = {**usage, **{fr: 0 for fr in node.usage if fr not in usage}}
            assert list(node.usage.items()) == list(expected.items()), (round_, name)
            assert node.stamp == stamp, (round_, name)
    assert tree.usage("a", FR) == 4_000
