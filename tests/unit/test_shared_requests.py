"""The admitter's shared request lists (``scheduling/queues.py``): a head asking what an earlier
workload asked gets that workload's list, found from its pod sets without building its requests
(issue 18, branch core50k), and exactly when building them and sharing would have found it."""

import random

from kueue_es.events import models
from kueue_es.projections.cluster import WorkloadState
from kueue_es.scheduling import queues

CONFIGS = {
    "plain": models.Configuration(),
    "exclude": models.Configuration(resources=models.ResourcesConfig(exclude_resource_prefixes=["example.com/"])),
    "transform": models.Configuration(
        resources=models.ResourcesConfig(
            transformations=[models.ResourceTransformation(input="cpu", outputs={"credits": "2"})]
        )
    ),
    "ignore": models.Configuration(resources=models.ResourcesConfig(quota_check_strategy="IgnoreUndeclared")),
}


def _cq(covered: list[str]) -> models.ClusterQueue:
    quotas = [models.ResourceQuota(name=r, nominal_quota=10_000) for r in covered]
    group = models.ResourceGroup(covered_resources=covered, flavors=[models.FlavorQuotas(name="rf", resources=quotas)])
    return models.ClusterQueue(
        metadata=models.ObjectMeta(name="cq"), spec=models.ClusterQueueSpec(resource_groups=[group])
    )


def _pod_set(rng: random.Random, name: str) -> models.PodSet:
    requests = {"cpu": rng.choice([-1, 0, 1000])}
    if rng.random() < 0.3:
        requests["memory"] = rng.choice([1, 2])
    if rng.random() < 0.1:
        requests["example.com/gpu"] = 1
    count = rng.choice([1, 2])
    return models.PodSet(
        name=name,
        count=count,
        min_count=rng.choice([None, None, 1, 5]),
        requests=requests,
        node_selector={"zone": "a"} if rng.random() < 0.1 else {},
        tolerations=[models.Toleration(key="k", operator="Exists")] if rng.random() < 0.1 else [],
    )


def _workload(rng: random.Random, i: int) -> WorkloadState:
    pod_sets = [_pod_set(rng, name) for name in ("main", "workers")[: rng.choice([1, 1, 1, 2])]]
    obj = models.Workload(
        metadata=models.ObjectMeta(name=f"w{i}", namespace="ns", uid=f"u{i}"),
        spec=models.WorkloadSpec(queue_name="lq", pod_sets=pod_sets),
    )
    wl = WorkloadState(workload=obj, observed_seq=i + 1)
    if rng.random() < 0.1:
        wl.reclaimable = {"main": 1}
    return wl


def test_a_head_asking_what_an_earlier_one_asked_gets_its_list_and_only_then() -> None:
    """Seeded random workloads (one or two pod sets, negative and excluded requests, minCount,
    node selectors, tolerations, reclaimable pods) under each resources Configuration and with
    ``pods`` covered or not: the list the shortcut finds is the one building the requests and
    sharing them returns, and it finds one whenever that is an earlier workload's list that
    needs no more than a copy of the requests."""
    found = 0
    for seed in range(4):
        rng = random.Random(seed)
        shared: dict[tuple[object, ...], list[queues.PodSetRequest]] = {}  # one for all, as the admitter's
        for _ in range(3):
            for config_name, config in CONFIGS.items():
                for covered in (["cpu", "memory"], ["cpu", "memory", "pods"]):
                    cq = _cq(covered)
                    for i in range(20):
                        wl = _workload(rng, i)
                        shortcut = queues._plain_shared(wl, cq=cq, config=config, shared=shared)
                        built = queues.pod_set_requests(wl.workload, cq=cq, config=config, reclaimable=wl.reclaimable)
                        before = dict(shared)
                        expected = queues._shared(built, shared)
                        if shortcut is not None:
                            found += 1
                            assert shortcut is expected, (seed, config_name, covered, i)
                            continue
                        plain = (
                            config_name == "plain"
                            and "pods" not in covered
                            and not wl.reclaimable
                            and all(not ps.node_selector and not ps.tolerations for ps in wl.workload.spec.pod_sets)
                        )
                        assert not (plain and any(expected is old for old in before.values())), (seed, i)
    assert found > 50  # the shortcut was taken, not only refused
