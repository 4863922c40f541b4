"""The Deployment controller's rollout steps (kueue_es.sim.deployments), as kube-controller-manager's rolling.go
and recreate.go take them."""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.sim.deployments import ReplicaSetState, next_revision, rollout, surge_and_unavailable


def deployment(replicas: int = 4, **strategy: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web"}, "spec": {"replicas": replicas, "strategy": strategy}}


def test_defaults_are_a_quarter_surge_rounded_up_unavailable_down() -> None:
    assert surge_and_unavailable(deployment(3)) == (1, 0)
    assert surge_and_unavailable(deployment(8)) == (2, 2)
    zero = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}
    assert surge_and_unavailable(deployment(3, **zero)) == (0, 1)


def test_bad_surge_names_the_deployment_and_field() -> None:
    bad = {"rollingUpdate": {"maxSurge": "many"}}
    with pytest.raises(ValueError, match=r"Deployment web: spec.strategy.rollingUpdate.maxSurge"):
        rollout(deployment(3, **bad), None, [ReplicaSetState("old", 3, 3, 3)])


def test_new_replica_set_surges_then_old_shrinks_only_by_available_new_pods() -> None:
    d = deployment(4)  # surge 1, unavailable 1
    old = [ReplicaSetState("old", 4, 4, 4)]
    assert rollout(d, None, old) == {"": 1}
    # the new pod not available (gated by Kueue): the old ones may lose only maxUnavailable
    assert rollout(d, ReplicaSetState("new", 1, 0, 1), old) == {"old": 3}
    assert rollout(d, ReplicaSetState("new", 1, 0, 1), [ReplicaSetState("old", 3, 3, 3)]) == {"new": 2}
    assert rollout(d, ReplicaSetState("new", 2, 0, 2), [ReplicaSetState("old", 3, 3, 3)]) == {}
    assert rollout(d, ReplicaSetState("new", 2, 2, 2), [ReplicaSetState("old", 3, 3, 3)]) == {"old": 1}


def test_unavailable_old_pods_go_first() -> None:
    d = deployment(4, rollingUpdate={"maxSurge": 1, "maxUnavailable": 0})
    old = [ReplicaSetState("older", 1, 0, 1), ReplicaSetState("old", 4, 4, 4)]
    assert rollout(d, ReplicaSetState("new", 0, 0, 0), old) == {"older": 0}


def test_recreate_waits_for_old_pods_to_go() -> None:
    d = deployment(2, type="Recreate")
    assert rollout(d, None, [ReplicaSetState("old", 2, 2, 2)]) == {"old": 0}
    assert rollout(d, None, [ReplicaSetState("old", 0, 0, 1)]) == {}
    assert rollout(d, None, [ReplicaSetState("old", 0, 0, 0)]) == {"": 2}


def test_next_revision_is_one_above_the_highest() -> None:
    assert next_revision(["1", "3", "", "x"]) == "4"
    assert next_revision([]) == "1"
