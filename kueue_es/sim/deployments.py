"""The Deployment controller's rollout rules, pure: how many pods each ReplicaSet of a Deployment should want.

Why this module exists: Kueue admits a Deployment's pods one by one (the pod integration gates each new pod), so
how a rollout replaces them decides what Kueue sees -- with the ``RollingUpdate`` strategy (the default)
kube-controller-manager makes at most ``maxSurge`` pods above ``spec.replicas`` and keeps at least ``replicas -
maxUnavailable`` available, so a new pod Kueue does not admit stalls the rollout with the old pods still running;
``Recreate`` removes every old pod first. :class:`kueue_es.sim.controllers.SimulatedControllers` reads the
ReplicaSets and their pods, asks :func:`rollout` what each ReplicaSet should want and writes that. The rules are
kube-controller-manager's pkg/controller/deployment (rolling.go, recreate.go, util/deployment_util.go), one step
per call, as the controller's syncs go: scale the new ReplicaSet up, or else the old ones down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The annotation on a Deployment and its ReplicaSets that numbers the templates it rolled out (kubectl rollout
#: history and undo read it from the ReplicaSets).
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
DEFAULT_SURGE_AND_UNAVAILABLE = "25%"


@dataclass(frozen=True)
class ReplicaSetState:
    """One ReplicaSet of a Deployment as the controller sees it: ``replicas`` its ``spec.replicas``, ``available``
    its pods Ready (no minReadySeconds here), ``active`` its pods not terminated nor being deleted."""

    name: str
    replicas: int
    available: int
    active: int


def scaled(value: Any, total: int, *, round_up: bool, field: str) -> int:
    """An int-or-percent field (intstr.GetScaledValueFromIntOrPercent) against ``total``: an int as is, ``"N%"``
    as N percent of ``total`` rounded up (``round_up``) or down. ValueError naming ``field`` for anything else or
    a negative value."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: {value!r} is neither an integer nor a percentage")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        share = int(value[:-1]) * total
        result = -(-share // 100) if round_up else share // 100
    elif isinstance(value, str) and value.isdigit():
        result = int(value)
    else:
        raise ValueError(f"{field}: {value!r} is neither an integer nor a percentage")
    if result < 0:
        raise ValueError(f"{field}: {value!r} must not be negative")
    return result


def surge_and_unavailable(deployment: Mapping[str, Any]) -> tuple[int, int]:
    """``(maxSurge, maxUnavailable)`` of a RollingUpdate Deployment in pods (deployment_util.go ResolveFenceposts):
    each 25% by default, surge rounded up and unavailable down, against ``spec.replicas``; both 0 makes
    unavailable 1, else no rollout could progress. ValueError names the Deployment and the field when one is not
    an integer or a percentage."""
    spec = deployment.get("spec") or {}
    desired = _desired(deployment)
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    name = f"Deployment {(deployment.get('metadata') or {}).get('name')}"
    field = "spec.strategy.rollingUpdate"
    surge = scaled(
        rolling.get("maxSurge", DEFAULT_SURGE_AND_UNAVAILABLE),
        desired,
        round_up=True,
        field=f"{name}: {field}.maxSurge",
    )
    unavailable = scaled(
        rolling.get("maxUnavailable", DEFAULT_SURGE_AND_UNAVAILABLE),
        desired,
        round_up=False,
        field=f"{name}: {field}.maxUnavailable",
    )
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def rollout(
    deployment: Mapping[str, Any], new: ReplicaSetState | None, old: Sequence[ReplicaSetState]
) -> dict[str, int]:
    """One step of a Deployment's rollout: ``{ReplicaSet name: spec.replicas wanted}`` for the ReplicaSets whose
    count changes. ``new``: the ReplicaSet of the current template (None: not made yet -- its key in the result is then
    ``""``, the ReplicaSet to create with that count);
    ``old``: the Deployment's other ReplicaSets, oldest first (the order the controller scales them down in).

    ``Recreate`` (recreate.go): every old ReplicaSet to 0; the new one to ``replicas`` only once no old pod is
    active. ``RollingUpdate`` (rolling.go): with no old pod wanted, the new ReplicaSet follows ``replicas``;
    else the new one grows while all ReplicaSets together want fewer than ``replicas + maxSurge``
    (NewRSNewReplicas), and only when it does not grow the old ones shrink: first their unavailable pods, then
    available ones, never below ``replicas - maxUnavailable`` available counting the new ReplicaSet's
    unavailable pods as missing (reconcileOldReplicaSets, cleanupUnhealthyReplicas, scaleDownOldReplicaSetsForRollingUpdate).
    ValueError names the Deployment and the field of a bad strategy."""
    desired = _desired(deployment)
    new_replicas = new.replicas if new is not None else 0
    changes: dict[str, int] = {}
    key = new.name if new is not None else ""
    strategy = ((deployment.get("spec") or {}).get("strategy") or {}).get("type") or "RollingUpdate"
    if strategy == "Recreate":
        for rs in old:
            if rs.replicas:
                changes[rs.name] = 0
        if not changes and not any(rs.active for rs in old) and (new is None or new_replicas != desired):
            changes[key] = desired
        return changes
    if strategy != "RollingUpdate":
        name = (deployment.get("metadata") or {}).get("name")
        raise ValueError(f"Deployment {name}: spec.strategy.type {strategy!r} is neither RollingUpdate nor Recreate")
    if not any(rs.replicas for rs in old):
        if new is None or new_replicas != desired:
            changes[key] = desired
        return changes
    surge, unavailable = surge_and_unavailable(deployment)
    total = new_replicas + sum(rs.replicas for rs in old)
    if new_replicas < desired and total < desired + surge:
        changes[key] = min(desired, new_replicas + desired + surge - total)
        return changes
    if new_replicas > desired:
        changes[key] = desired
        return changes
    if new is None:
        changes[key] = new_replicas
    min_available = desired - unavailable
    new_unavailable = max(0, new_replicas - (new.available if new is not None else 0))
    budget = total - min_available - new_unavailable
    if budget <= 0:
        return changes
    wanted = {rs.name: rs.replicas for rs in old}
    for rs in old:  # their unavailable pods first: removing them costs no availability
        if budget <= 0:
            break
        cut = min(budget, max(0, rs.replicas - rs.available))
        wanted[rs.name] -= cut
        budget -= cut
    available = sum(rs.available for rs in old) + (new.available if new is not None else 0)
    room = available - min_available
    for rs in old:
        if room <= 0:
            break
        cut = min(room, wanted[rs.name])
        wanted[rs.name] -= cut
        room -= cut
    changes.update({rs.name: wanted[rs.name] for rs in old if wanted[rs.name] != rs.replicas})
    return changes


def next_revision(revisions: Sequence[str]) -> str:
    """The revision a Deployment's new (or re-used) ReplicaSet gets: one above the highest of the others'
    ``deployment.kubernetes.io/revision`` annotations (deployment_util.go MaxRevision + 1); ones that are not
    numbers count as 0."""
    numbers = [int(r) for r in revisions if r.isdigit()]
    return str(max(numbers, default=0) + 1)


def _desired(deployment: Mapping[str, Any]) -> int:
    value = (deployment.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and value >= 0 else 1


__all__ = ["REVISION_ANNOTATION", "ReplicaSetState", "next_revision", "rollout", "scaled", "surge_and_unavailable"]
