"""The LeaderWorkerSet controller's rolling-update parameters (kueue_es.sim.leaderworkersets), as LWS's
leaderworkerset_controller.go rollingUpdateParameters computes them."""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.sim.leaderworkersets import REPLICAS_ANNOTATION, GroupState, rolling_update, surge_and_unavailable

READY_OLD, READY_NEW, UNREADY_NEW = GroupState(True, False), GroupState(True, True), GroupState(False, True)


def lws(replicas: int = 4, **config: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "lws"},
        "spec": {"replicas": replicas, "rolloutStrategy": {"rollingUpdateConfiguration": config}},
    }


def leader(replicas: int, partition: int, lws_replicas: int = 4) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {REPLICAS_ANNOTATION: str(lws_replicas)}},
        "spec": {"replicas": replicas, "updateStrategy": {"rollingUpdate": {"partition": partition}}},
    }


def test_defaults_no_surge_one_unavailable_and_surge_capped_at_replicas() -> None:
    assert surge_and_unavailable(lws()) == (0, 1)
    assert surge_and_unavailable(lws(2, maxSurge="100%", maxUnavailable="50%")) == (2, 1)
    assert surge_and_unavailable(lws(2, maxSurge=5)) == (2, 1)


def test_bad_value_names_the_leaderworkerset_and_field() -> None:
    with pytest.raises(ValueError, match=r"LeaderWorkerSet lws: .*rollingUpdateConfiguration.maxUnavailable"):
        rolling_update(lws(maxUnavailable="half"), leader(4, 0), [READY_OLD] * 4, updated=False)


def test_not_made_yet_and_steady_state() -> None:
    assert rolling_update(lws(), None, [], updated=False) == (0, 4)
    assert rolling_update(lws(), leader(4, 0), [READY_NEW] * 4, updated=False) == (0, 4)


def test_a_new_update_keeps_every_group_and_bursts_by_max_surge() -> None:
    assert rolling_update(lws(maxSurge=2, maxUnavailable=2), leader(4, 0), [READY_OLD] * 4, updated=True) == (4, 6)
    assert rolling_update(lws(), leader(4, 0), [READY_OLD] * 4, updated=True) == (4, 4)


def test_partition_drops_by_unavailable_plus_surge_and_surge_goes_when_groups_are_updated() -> None:
    config = {"maxSurge": 2, "maxUnavailable": 2}
    states = [READY_OLD] * 4 + [UNREADY_NEW] * 2
    assert rolling_update(lws(**config), leader(6, 4), states, updated=False) == (2, 6)
    # groups 2..5 updated and ready: the partition goes to 0; the two old groups fit in maxUnavailable: no surge
    states = [READY_OLD] * 2 + [READY_NEW] * 4
    assert rolling_update(lws(**config), leader(6, 2), states, updated=False) == (0, 4)
    # with maxUnavailable 1 the same two old groups keep one surge group
    assert rolling_update(lws(maxSurge=2, maxUnavailable=1), leader(6, 2), states, updated=False)[1] == 5
    # every group below replicas updated and ready: the surge goes
    assert rolling_update(lws(**config), leader(6, 0), [READY_NEW] * 6, updated=False) == (0, 4)


def test_one_at_a_time_without_surge_and_never_below_the_lws_partition() -> None:
    states = [READY_OLD] * 3 + [READY_NEW]
    assert rolling_update(lws(), leader(4, 3), states, updated=False) == (2, 4)
    assert rolling_update(lws(partition=3), leader(4, 3), states, updated=False) == (3, 4)
