"""The admitter's caches never change a decision.

The admission cycle keeps derived state between cycles (``state.caches``: flavor pickers and
their memo of assignments per quota-usage stamp, shared request lists, the queue plan's layout
and grouping, stop policies; per workload: requests and plan checks; the quota tree kept by the
fold with its usage stamps). Here a seeded random history (cohorts, borrowing and lending limits,
preemption policies, both queueing strategies, one- and two-pod-set workloads asking one or two
resources, finishes, deletions, new workloads and changed ClusterQueues) is decided twice per
cycle: on the state as the fold keeps it, and on a copy of it with every cache dropped and the
quota tree rebuilt from the ledger. A stale cache shows as a difference.
"""

from __future__ import annotations

import random

import pytest

from kueue_es.events import models, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scheduling import flavors
from kueue_es.services.admitter.core import decide

FLAVORS = ("on-demand", "spot")


def _cluster_queue(rng: random.Random, name: str, cohort: str | None, *, generation: int) -> models.ClusterQueue:
    groups = []
    resources = ["cpu", "memory"] if rng.random() < 0.5 else ["cpu"]
    flavor_names = list(FLAVORS[: rng.choice((1, 2))])
    quotas = []
    for flavor in flavor_names:
        quotas.append(
            models.FlavorQuotas(
                name=flavor,
                resources=[
                    models.ResourceQuota(
                        name=resource,
                        nominal_quota=rng.choice((0, 2, 4, 6)) * (1000 if resource == "cpu" else 1 << 30),
                        borrowing_limit=rng.choice((None, 0, 2000 if resource == "cpu" else 2 << 30)),
                        lending_limit=rng.choice((None, None, 1000 if resource == "cpu" else 1 << 30)),
                    )
                    for resource in resources
                ],
            )
        )
    groups.append(models.ResourceGroup(covered_resources=resources, flavors=quotas))
    preemption = models.ClusterQueuePreemption(
        reclaim_within_cohort=rng.choice(("Never", "Never", "LowerPriority", "Any")),
        within_cluster_queue=rng.choice(("Never", "Never", "LowerPriority")),
    )
    spec = models.ClusterQueueSpec(
        cohort_name=cohort,
        namespace_selector=models.LabelSelector(),
        resource_groups=groups,
        queueing_strategy=rng.choice(("BestEffortFIFO", "StrictFIFO")),
        preemption=preemption,
        stop_policy="Hold" if generation and rng.random() < 0.1 else "None",
    )
    return models.ClusterQueue(metadata=models.ObjectMeta(name=name, generation=generation + 1), spec=spec)


def _workload(rng: random.Random, n: int, queue: str, created: int) -> models.Workload:
    shape = rng.choice(((1000,), (1000,), (2000,), (1000, 1 << 30), (3000, 2 << 30)))
    pod_sets = [
        models.PodSet(
            name="main",
            count=rng.choice((1, 1, 2)),
            requests={"cpu": shape[0], **({"memory": shape[1]} if len(shape) > 1 else {})},
        )
    ]
    if rng.random() < 0.15:
        pod_sets.append(models.PodSet(name="workers", count=2, requests={"cpu": 500}))
    return models.Workload(
        metadata=models.ObjectMeta(
            name=f"wl-{n}", namespace=queue, uid=f"uid-{n}", creation_timestamp_ms=1_000_000 + created
        ),
        spec=models.WorkloadSpec(queue_name=queue, priority=rng.choice((0, 0, 10, 100)), pod_sets=pod_sets),
    )


def _from_scratch(state: ClusterState) -> None:
    """Drop every derived cache of ``state``: what a decision must never depend on."""
    state.caches.clear()
    state.quota_tree = None
    for wl in state.workloads.values():
        wl.requests_memo = wl.requests_memo_workload = wl.requests_memo_cq = wl.requests_memo_config = None


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_cached_cycles_decide_as_from_scratch(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    kept, fresh = ClusterState(), ClusterState()
    seq = 0

    def fold(event: types.Event) -> None:
        nonlocal seq
        seq += 1
        apply(kept, event, seq=seq)
        apply(fresh, event, seq=seq)

    for flavor in FLAVORS:
        fold(types.ResourceFlavorObserved(flavor=models.ResourceFlavor(metadata=models.ObjectMeta(name=flavor))))
    fold(types.CohortObserved(cohort=models.Cohort(metadata=models.ObjectMeta(name="root"))))
    fold(
        types.CohortObserved(
            cohort=models.Cohort(metadata=models.ObjectMeta(name="team"), spec=models.CohortSpec(parent_name="root"))
        )
    )
    queues = [f"cq-{i}" for i in range(6)]
    cohorts = {name: rng.choice((None, "root", "team", "team")) for name in queues}
    for name in queues:
        fold(types.ClusterQueueObserved(cluster_queue=_cluster_queue(rng, name, cohorts[name], generation=0)))
        fold(
            types.LocalQueueObserved(
                local_queue=models.LocalQueue(
                    metadata=models.ObjectMeta(name=name, namespace=name),
                    spec=models.LocalQueueSpec(cluster_queue=name),
                )
            )
        )
    created = 0
    for _ in range(60):
        created += 1
        fold(types.WorkloadObserved(workload=_workload(rng, created, rng.choice(queues), created)))

    counts = {"asked": 0, "computed": 0}
    counting = False
    real_assign, real_compute = flavors.Picker.assign, flavors.Picker._assign

    def asked(self: flavors.Picker, *args: object, **kwargs: object) -> flavors.Assignment:
        counts["asked"] += counting
        return real_assign(self, *args, **kwargs)  # type: ignore[arg-type]

    def computed(self: flavors.Picker, *args: object, **kwargs: object) -> flavors.Assignment:
        counts["computed"] += counting
        return real_compute(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(flavors.Picker, "assign", asked)
    monkeypatch.setattr(flavors.Picker, "_assign", computed)
    now = 2_000_000
    decided = 0
    for cycle in range(80):
        counting = True
        out = decide(kept, now_ms=now)
        counting = False
        _from_scratch(fresh)
        again = decide(fresh, now_ms=now)
        assert out == again, f"seed {seed}, cycle {cycle}: the caches changed a decision"
        decided += len(out)
        for event in out:
            fold(event)
        now += 1_000
        # What happens between cycles: finishes, deletions, arrivals, a changed ClusterQueue.
        running = sorted(key for key, wl in kept.workloads.items() if wl.reservation is not None and not wl.gone)
        for key in running:
            if rng.random() < 0.3:
                namespace, name = key.split("/")
                fold(types.WorkloadFinished(workload=types.WorkloadRef(namespace=namespace, name=name), at_ms=now))
        if rng.random() < 0.1:
            pending = sorted(kept.pending)
            if pending:
                namespace, name = rng.choice(pending).split("/")
                fold(types.ObjectDeleted(kind="Workload", namespace=namespace, name=name))
        for _ in range(rng.choice((0, 0, 1, 3))):
            created += 1
            fold(types.WorkloadObserved(workload=_workload(rng, created, rng.choice(queues), created)))
        if rng.random() < 0.08:
            name = rng.choice(queues)
            fold(types.ClusterQueueObserved(cluster_queue=_cluster_queue(rng, name, cohorts[name], generation=cycle)))
    assert decided > 100  # the history decided things
    assert counts["computed"] < counts["asked"]  # and some assignments came from the pickers' memo
