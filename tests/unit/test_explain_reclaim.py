"""``explain``'s reclaim lines follow the preemption rule that applies to the waiting workload.

Cohort ``fs`` of four ClusterQueues, 10 CPU in all, every CPU in use: team-a (nominal 2) holds 3, so it
borrows 1; team-b (nominal 2) holds 5, borrowing 3; team-d (nominal 1) holds 2, borrowing 1; team-c
(nominal 5) holds nothing. ``waiting`` (team-a, priority 10) asks 1 CPU more, so team-a would borrow 2.

Classical preemption (preemption.go classicalPreemptions, classical/): team-a would borrow to fit, so it
reclaims only the candidates ``borrowWithinCohort`` allows (ReclaimWhileBorrowing) — none under the
default ``Never``. Fair sharing (preemption.go fairPreemptions, fairsharing/): team-a's share with the
request is 200 (2 CPU borrowed of 10 lendable); team-b's 300 drops to 200 without one of its 1-CPU
workloads (LessThanOrEqualToFinalShare passes) and is above 200 (LessThanInitialShare passes); team-d's
100 is below team-a's, so no strategy takes from it.
"""

from __future__ import annotations

from typing import Any

from kueue_es.events import models, types
from kueue_es.scheduling import explain as core
from tests.builders import flavor, local_queue, workload
from tests.unit.test_explain import Recorder


def _cq(name: str, cpu: int, *, borrow: dict[str, Any] | None = None) -> dict[str, Any]:
    preemption: dict[str, Any] = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    if borrow is not None:
        preemption["borrowWithinCohort"] = borrow
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "cohortName": "fs",
            "preemption": preemption,
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ],
        },
    }


def _cohort(*, fair: bool = False, borrow: dict[str, Any] | None = None) -> tuple[str, core.ResourceNeed]:
    """``waiting``'s explain text and its need of cpu."""
    log = Recorder()
    if fair:
        log.fact(
            types.ConfigurationObserved(configuration=models.Configuration(fair_sharing=models.FairSharingConfig()))
        )
    log.manifest(flavor("default-flavor"))
    for name, nominal, holds in (("team-a", 2, 3), ("team-b", 2, 5), ("team-c", 5, 0), ("team-d", 1, 2)):
        log.manifest(_cq(name, nominal, borrow=borrow if name == "team-a" else None))
        log.manifest(local_queue(name, name))
        for i in range(holds):
            log.manifest(workload(f"{name}-{i}", queue=name, cpu="1", priority=0, created=1 + i))
    log.settle()
    assert [log.state.usage_of(cq, "default-flavor", "cpu") for cq in ("team-a", "team-b", "team-d")] == [
        3000,
        5000,
        2000,
    ]
    log.manifest(workload("waiting", queue="team-a", cpu="1", priority=10, created=50))
    needed = core.needs(log.state, "default/waiting", now_ms=log.clock)
    assert needed.status == "pending" and needed.cohort == "fs"
    [[default]] = needed.groups
    [cpu] = default.resources
    assert (cpu.asks, cpu.nominal, cpu.used, cpu.short) == (1000, 2000, 3000, 1000)
    # its own ClusterQueue's workloads have a lower priority: preemption within it is told as before
    assert [h.key for h in cpu.preemptible] == ["default/team-a-0", "default/team-a-1", "default/team-a-2"]
    return "\n".join(needed.summary()), cpu


def test_a_borrowing_cluster_queue_is_not_told_that_classical_reclaim_could_take_from_borrowers() -> None:
    """borrowWithinCohort Never (the default): team-a would borrow, so Kueue's classical search makes
    one attempt with borrowing in which no ReclaimWithoutBorrowing candidate is valid: no reclaim."""
    text, cpu = _cohort()
    assert "that reclaim could take" not in text
    assert cpu.reclaimable == () and cpu.reclaim_amount == 0
    assert cpu.borrows_to_fit and cpu.borrowers_hold == 4000  # team-b over by 3, team-d by 1
    assert (
        "reclaim: borrowers in cohort fs hold 4 cpu, but team-a would borrow to fit (3 in use, asks 1, 2 nominal):"
        " classical preemption reclaims for it only what borrowWithinCohort allows (borrowWithinCohort: Never),"
        " none of theirs"
    ) in text


def test_borrow_within_cohort_lets_a_borrowing_cluster_queue_reclaim_lower_priority_workloads() -> None:
    """borrowWithinCohort LowerPriority: team-b's and team-d's priority-0 workloads are
    ReclaimWhileBorrowing candidates of the priority-10 preemptor."""
    text, cpu = _cohort(borrow={"policy": "LowerPriority"})
    assert len(cpu.reclaimable) == 7 and cpu.reclaim_amount == 4000
    assert {h.reason for h in cpu.reclaimable} == {"InCohortReclaimWhileBorrowing"}
    assert (
        "reclaim: borrowers in cohort fs hold 4 cpu that reclaim could take (Any, borrowWithinCohort:"
        " LowerPriority, priority below 10): default/team-b-0 in team-b (1),"
    ) in text


def test_under_fair_sharing_reclaim_is_told_by_dominant_resource_shares_and_strategies() -> None:
    text, cpu = _cohort(fair=True)
    assert "that reclaim could take" not in text
    assert cpu.fair is not None and not cpu.fair.within_nominal
    assert cpu.fair.share.weighted == 200.0
    assert [(q.cluster_queue, q.share.weighted) for q in cpu.fair.queues] == [("team-b", 300.0), ("team-d", 100.0)]
    assert [h.key for h in cpu.reclaimable] == [f"default/team-b-{i}" for i in range(5)]
    assert cpu.reclaim_amount == 3000  # what team-b borrows; team-d's workloads no strategy takes
    assert (
        "reclaim (fair sharing, LessThanOrEqualToFinalShare, LessThanInitialShare):"
        " team-a's dominant resource share with it would be 200 (cpu)"
    ) in text
    assert (
        "team-b (share 300 (cpu)): fair sharing could take default/team-b-4 (1), default/team-b-3 (1),"
        " default/team-b-2 (1), default/team-b-1 (1), default/team-b-0 (1)"
        " (LessThanOrEqualToFinalShare, LessThanInitialShare)"
    ) in text
    assert "team-d (share 100 (cpu)): no strategy lets team-a (share 200 (cpu)) take its 2 workloads" in text


def _cohort_object(name: str, parent: str | None = None) -> dict[str, Any]:
    spec = {"parentName": parent} if parent else {}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def test_in_a_cohort_tree_each_share_is_told_with_the_node_it_belongs_to() -> None:
    """Hierarchical cohorts: Cohort org, its children org-a (cq-a, nominal 4, holds 3) and org-b (cq-b, nominal 1,
    holds 3; cq-c, nominal 1, idle). ``waiting`` asks 2 CPU in cq-a. Kueue's fair preemption compares the two
    nodes just below the lowest cohort both ClusterQueues descend from (fairsharing/target.go ComputeShares):
    org-a, with the request 1 CPU over its 4 of 6 lendable (166.667), against org-b, 1 over its 2 (166.667), not
    cq-a and cq-b. cq-b's own share, the one its status shows, is 333.333 (2 over its 1). Each share is told
    with the node it is of: cq-b's own, then org-b's as cq-b's cohort at the level compared."""
    log = Recorder()
    log.fact(types.ConfigurationObserved(configuration=models.Configuration(fair_sharing=models.FairSharingConfig())))
    log.manifest(flavor("default-flavor"))
    for cohort, parent in (("org", None), ("org-a", "org"), ("org-b", "org")):
        log.manifest(_cohort_object(cohort, parent))
    for name, cohort, nominal, holds in (("cq-a", "org-a", 4, 3), ("cq-b", "org-b", 1, 3), ("cq-c", "org-b", 1, 0)):
        manifest = _cq(name, nominal)
        manifest["spec"]["cohortName"] = cohort
        log.manifest(manifest)
        log.manifest(local_queue(name, name))
        for i in range(holds):
            log.manifest(workload(f"{name}-{i}", queue=name, cpu="1", priority=0, created=1 + i))
    log.settle()
    assert [log.state.usage_of(cq, "default-flavor", "cpu") for cq in ("cq-a", "cq-b")] == [3000, 3000]
    log.manifest(workload("waiting", queue="cq-a", cpu="2", priority=10, created=50))
    needed = core.needs(log.state, "default/waiting", now_ms=log.clock)
    [[default]] = needed.groups
    [cpu] = default.resources
    assert cpu.fair is not None
    [q] = cpu.fair.queues
    assert (q.cluster_queue, q.side, q.preemptor_side, q.common) == ("cq-b", "org-b", "org-a", "org")
    assert q.own_share is not None and round(q.own_share.weighted, 3) == 333.333
    assert round(q.share.weighted, 3) == round(q.preemptor_share.weighted, 3) == 166.667
    text = "\n".join(needed.summary())
    assert "cq-a's dominant resource share with it would be 166.667 (cpu)" in text
    assert (
        "    cq-b (share 333.333 (cpu)) through org-b (cq-b's cohort at the level compared, below org: share"
        " 166.667 (cpu)): no strategy lets cq-a through org-a (cq-a's cohort at the level compared, below org:"
        " share 166.667 (cpu)) take cq-b's 3 workloads"
    ) in text
