"""The LeaderWorkerSet controller's rolling update, pure: the leader StatefulSet's replicas and partition.

Why this module exists: Kueue admits a LeaderWorkerSet group by group (one Workload per group, its pods gated),
so how LWS replaces groups on a new template decides what Kueue sees: LWS (sigs.k8s.io/lws
pkg/controllers/leaderworkerset_controller.go rollingUpdateParameters) grows the leader StatefulSet by up to
``maxSurge`` groups (new groups at the new revision, each a Workload Kueue must admit) and lowers its
``rollingUpdate.partition`` as the groups above it become ready and updated, ``maxUnavailable`` at a time; the
StatefulSet controller replaces the leader pods above the partition and each new leader gets a new worker
StatefulSet. Once every group is updated and ready the surge groups go (and their Workloads with them).
:class:`kueue_es.sim.controllers.SimulatedControllers` reads the groups' states and writes what
:func:`rolling_update` returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kueue_es.sim import deployments

#: LWS's label with the revision of the templates a leader StatefulSet, a worker StatefulSet or a pod was made from.
REVISION_LABEL = "leaderworkerset.sigs.k8s.io/template-revision-hash"
#: LWS's annotation on the leader StatefulSet: ``spec.replicas`` of the LeaderWorkerSet it was last written for.
REPLICAS_ANNOTATION = "leaderworkerset.sigs.k8s.io/replicas"


@dataclass(frozen=True)
class GroupState:
    """One group (leader StatefulSet ordinal) as LWS's getReplicaStates sees it: ``ready`` its leader running and
    Ready and its worker StatefulSet's pods all Ready; ``updated`` its leader and worker StatefulSet at the
    LeaderWorkerSet's current revision. A group whose leader or workers are missing is neither."""

    ready: bool
    updated: bool


def surge_and_unavailable(lws: Mapping[str, Any]) -> tuple[int, int]:
    """``(maxSurge, maxUnavailable)`` in groups of ``spec.rolloutStrategy.rollingUpdateConfiguration`` (defaults 0
    and 1, LWS's API defaults): percentages of ``spec.replicas``, surge rounded up and at most ``replicas``,
    unavailable rounded down. ValueError names the LeaderWorkerSet and the field of a bad value."""
    config = _config(lws)
    replicas = _replicas(lws)
    name = f"LeaderWorkerSet {(lws.get('metadata') or {}).get('name')}: spec.rolloutStrategy.rollingUpdateConfiguration"
    surge = deployments.scaled(config.get("maxSurge", 0), replicas, round_up=True, field=f"{name}.maxSurge")
    unavailable = deployments.scaled(
        config.get("maxUnavailable", 1), replicas, round_up=False, field=f"{name}.maxUnavailable"
    )
    return min(surge, replicas), unavailable


def lws_partition(lws: Mapping[str, Any]) -> int:
    """``rollingUpdateConfiguration.partition`` (default 0): groups below it keep their revision."""
    value = _config(lws).get("partition", 0)
    return value if isinstance(value, int) and value >= 0 else 0


def rolling_update(
    lws: Mapping[str, Any], leader: Mapping[str, Any] | None, states: Sequence[GroupState], *, updated: bool
) -> tuple[int, int]:
    """``(partition, replicas)`` for the leader StatefulSet (rollingUpdateParameters): ``leader`` the StatefulSet as
    it is (None: not made yet), ``states`` its groups by ordinal (``spec.replicas`` of them), ``updated`` whether the
    LeaderWorkerSet's template changed since ``leader`` was written (a new rolling update starts).

    A new update keeps every group (partition at the smaller of the two replica counts) and bursts to
    ``replicas + maxSurge`` while more groups than ``maxSurge`` are not ready and updated; during an update the
    partition drops past the ready and updated groups at the top, by ``maxUnavailable`` (plus the surge not used)
    at a time, never past a group below that is not ready, and never goes up; the surge shrinks as the groups
    become ready and updated. The partition is never below the LeaderWorkerSet's own. ValueError as
    :func:`surge_and_unavailable`."""
    partition, replicas = _parameters(lws, leader, states, updated=updated)
    return max(partition, lws_partition(lws)), replicas


def _parameters(
    lws: Mapping[str, Any], leader: Mapping[str, Any] | None, states: Sequence[GroupState], *, updated: bool
) -> tuple[int, int]:
    desired = _replicas(lws)
    if leader is None:
        return 0, desired
    current = _replicas(leader)
    surge, unavailable = surge_and_unavailable(lws)

    def wanted(unready: int) -> int:
        # calculateRollingUpdateReplicas: keep the surge while it covers more unready groups than maxUnavailable
        if unready <= surge:
            return desired + max(0, unready - unavailable)
        return desired + surge

    if updated:
        partition = min(desired, current)
        return (partition, desired) if current < desired else (partition, wanted(desired))
    partition = _int(((leader.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate"), "partition")
    if partition == 0 and current == desired:
        return 0, desired
    if current < desired:
        return partition, desired
    unready = sum(1 for i in range(desired) if i >= len(states) or not (states[i].ready and states[i].updated))
    annotations = (leader.get("metadata") or {}).get("annotations") or {}
    if str(annotations.get(REPLICAS_ANNOTATION, desired)) != str(desired):  # replicas changed during the update
        return min(partition, desired + surge), wanted(unready)
    step = unavailable + surge - (desired + surge - current)
    return _partition(states, current, step, partition), wanted(unready)


def _partition(states: Sequence[GroupState], replicas: int, step: int, current: int) -> int:
    """rollingUpdatePartition: below the ready-and-updated groups at the top by ``step``, raised by the groups below
    that are not ready (maxUnavailable holds), lowered again over groups not ready or already updated; never up."""
    tail = 0
    for state in reversed(states[:replicas]):
        if not (state.ready and state.updated):
            break
        tail += 1
    floor = max(0, replicas - tail - step)
    partition = floor + sum(1 for i in range(floor) if i < len(states) and not states[i].ready)
    for index in range(min(partition, replicas - 1), floor - 1, -1):
        state = states[index] if index < len(states) else GroupState(False, False)
        if not state.ready or state.updated:
            partition = index
        else:
            break
    return min(partition, current)


def _int(node: Any, key: str) -> int:
    """``node[key]`` as a non-negative int, 0 when absent or not one."""
    value = node.get(key) if isinstance(node, dict) else None
    return value if isinstance(value, int) and value >= 0 else 0


def _config(lws: Mapping[str, Any]) -> Mapping[str, Any]:
    strategy = (lws.get("spec") or {}).get("rolloutStrategy") or {}
    config = strategy.get("rollingUpdateConfiguration") if isinstance(strategy, dict) else None
    return config if isinstance(config, dict) else {}


def _replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and value >= 0 else 1
