"""A long settle with many preemptions ends (issue 4: no preemption loops).

Three ClusterQueues share a cohort; every one may preempt lower priorities in its
queue and reclaim anything lent. Waves of workloads of mixed priorities and sizes
arrive, some finish; after each wave the run must settle, the evictions stay
bounded, and once settled the deciders have nothing more to do.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
import yaml

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.scheduling import preemption as targets
from tests.builders import cluster_queue, flavor, local_queue, workload

#: Kueue's v1beta2 Configuration requires the strategies beside fair sharing (these are the v1beta1 default).
FAIR = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


def _scenario(*, fair_sharing: bool, seed: int) -> dict:
    rng = random.Random(seed)  # test data only: the cores never see randomness
    objects: list[dict] = [flavor("default")]
    if fair_sharing:
        objects.insert(0, {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": FAIR})
    for name, nominal, weight in (("a", 6, "1"), ("b", 4, "2"), ("c", 2, "500m")):
        cq = cluster_queue(name, flavors={"default": {"cpu": nominal}})
        cq["spec"]["cohortName"] = "all"
        cq["spec"]["preemption"] = {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        }
        cq["spec"]["fairSharing"] = {"weight": weight}
        objects += [cq, local_queue(f"lq-{name}", name)]
    waves = []
    for wave in range(4):
        docs = [
            workload(
                f"w{wave}-{i:02d}",
                queue=f"lq-{rng.choice('abc')}",
                count=rng.randint(1, 3),
                created=wave * 60 + i,
                priority=rng.randint(0, 3),
                cpu="1",
            )
            for i in range(15)
        ]
        waves.append(docs)
    events = [{"apply": doc} for wave in waves[1:] for doc in wave]
    events += [{"finish": f"default/w0-{i:02d}"} for i in range(0, 15, 3)]
    return {"name": "long-settle", "source": "issue 4", "objects": objects, "pending": waves[0], "events": events}


@pytest.mark.parametrize("fair_sharing", [False, True], ids=["classical", "fair-sharing"])
@pytest.mark.parametrize("seed", [3, 6, 12, 59])  # seeds whose policy mix makes Kueue evict in circles
def test_many_preemptions_settle(fair_sharing: bool, seed: int) -> None:
    doc = _scenario(fair_sharing=fair_sharing, seed=seed)
    scenario = parse_scenario(yaml.safe_dump(doc, sort_keys=False), path="<long-settle>")
    run = core_engine.run_scenario(scenario)  # raises RunError if a phase does not settle
    evictions = Counter(e.workload.key for _, e in run.log if isinstance(e, types.EvictionRequested))
    assert sum(evictions.values()) > 0, "the scenario must preempt to test anything"
    assert max(evictions.values()) <= targets.PREEMPTION_BUDGET, evictions.most_common(3)
    assert sum(evictions.values()) <= len(scenario.submitted)
    later = run.log[-1][0] and core_engine.clock_base_ms(scenario) + 10**9
    for decider in deciders.BY_ROLE.values():
        assert decider.decide(run.state, now_ms=later) == [], decider.role
    outcome = run.outcome()
    assert set(outcome.admitted) | set(outcome.pending) | set(outcome.finished) == set(scenario.submitted)
