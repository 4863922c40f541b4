"""The dispatcher's pure core: a logged decision in, the Kubernetes write it calls for out.

Kueue's job reconciler starts an admitted Job by unsuspending it and injecting the
assigned flavors' ``nodeLabels`` into the pod template's ``nodeSelector`` and the
flavors' ``tolerations`` into its tolerations (SEMANTICS §1.2, §2.1; Kueue
pkg/controller/jobframework/reconciler.go startJob, podset.go Merge). This module
decides that write from the folded state; the runner (``services.dispatcher.service``)
performs it and records the result on the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from events import models, types
from projections.cluster import ClusterState


@dataclass(frozen=True, kw_only=True)
class StartJob:
    """Unsuspend Job ``namespace/name`` with the flavors' node labels and tolerations added."""

    workload: types.WorkloadRef
    namespace: str
    name: str
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)

    def patch(self, *, current_tolerations: list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON merge patch for the Job: keeps the template's own tolerations, adds ours once."""
        merged = list(current_tolerations) + [t for t in self.tolerations if t not in current_tolerations]
        template_spec: dict[str, Any] = {"nodeSelector": self.node_selector}
        if merged != list(current_tolerations):
            template_spec["tolerations"] = merged
        return {"spec": {"suspend": False, "template": {"spec": template_spec}}}


Action = StartJob


def plan(state: ClusterState, event: types.Event) -> Action | None:
    """The write ``event`` calls for, given ``state`` folded up to just before it; None if none.

    Only WorkloadAdmitted of a workload made for a batch/v1 Job starts something in
    this version; every other event is ignored by the dispatcher.
    """
    if not isinstance(event, types.WorkloadAdmitted):
        return None
    current = state.workloads.get(event.workload.key)
    if current is None or current.reservation is None or current.gone:
        return None
    owner = current.workload.owner
    if owner is None or owner.kind != "Job":
        return None
    node_selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    for flavor_name in _assigned_flavors(current.reservation):
        flavor = state.flavors.get(flavor_name)
        if flavor is None:
            continue
        node_selector.update(flavor.spec.node_labels)
        tolerations.extend(_toleration_dict(t) for t in flavor.spec.tolerations)
    return StartJob(
        workload=event.workload,
        namespace=current.workload.metadata.namespace,
        name=owner.name,
        node_selector=dict(sorted(node_selector.items())),
        tolerations=tolerations,
    )


def _assigned_flavors(reservation: types.QuotaReserved) -> list[str]:
    names: list[str] = []
    for assignment in reservation.pod_set_assignments:
        for flavor in assignment.flavors.values():
            if flavor not in names:
                names.append(flavor)
    return names


def _toleration_dict(toleration: models.Toleration) -> dict[str, Any]:
    out: dict[str, Any] = {"key": toleration.key, "operator": toleration.operator}
    if toleration.value:
        out["value"] = toleration.value
    if toleration.effect:
        out["effect"] = toleration.effect
    if toleration.toleration_seconds is not None:
        out["tolerationSeconds"] = toleration.toleration_seconds
    return out
