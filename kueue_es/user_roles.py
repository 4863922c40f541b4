"""The ClusterRoles Kueue's installation creates for its users, as kueue-es installs them.

Kueue's "Setup RBAC" page (site/content/en/docs/tasks/manage/rbac.md) has a batch administrator bind
``kueue-batch-admin-role`` cluster-wide and a team's users bind ``kueue-batch-user-role`` in their
namespace; both are aggregated ClusterRoles (config/components/rbac/batch_admin_role.yaml,
batch_user_role.yaml) whose rules the control plane gathers from the per-kind editor and viewer roles
labelled ``rbac.kueue.x-k8s.io/batch-admin`` / ``batch-user`` (config/components/rbac/*_editor_role.yaml,
*_viewer_role.yaml, pending_workloads_*_viewer_role.yaml; kustomize prefixes every name with
``kueue-``). Each per-kind role carries ``rbac.kueue.x-k8s.io/role: <kind>-<editor|viewer>`` for custom
aggregation, and some Kubernetes' ``aggregate-to-admin|edit|view`` labels, so the default ``admin``,
``edit`` and ``view`` roles include them.

The same list goes to a cluster (``deploy/base/user-roles.yaml``, :func:`render`; a test keeps the
file in step) and to the emulated API server of ``kueue-es demo`` and ``up --emulator``
(:func:`cluster_roles`), where the emulator's RBAC (``kueue_es.sim.rbac``) enforces them on
impersonated requests (``kubectl --as``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PREFIX = "kueue-"
ROLE_LABEL = "rbac.kueue.x-k8s.io/role"
BATCH_ADMIN = "rbac.kueue.x-k8s.io/batch-admin"
BATCH_USER = "rbac.kueue.x-k8s.io/batch-user"
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-{}"
EDIT_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
VIEW_VERBS = ("get", "list", "watch")
FILE = Path(__file__).resolve().parents[1] / "deploy" / "base" / "user-roles.yaml"


@dataclass(frozen=True)
class KindRoles:
    """The editor and viewer roles of one kind: its API group and plural, whether its ``status`` is
    readable (``<plural>/status`` get), whether batch users get its editor, its viewer, and which of
    Kubernetes' default roles aggregate its viewer."""

    name: str
    group: str
    plural: str
    status: bool = True
    user_edits: bool = True
    user_views: bool = True
    viewer_aggregates_to: tuple[str, ...] = ("admin", "edit", "view")


_KUEUE = "kueue.x-k8s.io"
_CLUSTER_SCOPED = ("admin",)

#: Kueue's per-kind roles (config/components/rbac/<name>_editor_role.yaml, <name>_viewer_role.yaml).
KINDS = (
    KindRoles(
        "clusterqueue",
        _KUEUE,
        "clusterqueues",
        user_edits=False,
        user_views=False,
        viewer_aggregates_to=_CLUSTER_SCOPED,
    ),
    KindRoles(
        "cohort",
        _KUEUE,
        "cohorts",
        status=False,
        user_edits=False,
        user_views=False,
        viewer_aggregates_to=_CLUSTER_SCOPED,
    ),
    KindRoles(
        "resourceflavor",
        _KUEUE,
        "resourceflavors",
        status=False,
        user_edits=False,
        user_views=False,
        viewer_aggregates_to=_CLUSTER_SCOPED,
    ),
    KindRoles(
        "topology",
        _KUEUE,
        "topologies",
        status=False,
        user_edits=False,
        user_views=False,
        viewer_aggregates_to=_CLUSTER_SCOPED,
    ),
    KindRoles("localqueue", _KUEUE, "localqueues", user_edits=False),
    KindRoles("workload", _KUEUE, "workloads", user_edits=False),
    KindRoles("job", "batch", "jobs"),
    KindRoles("jobset", "jobset.x-k8s.io", "jobsets"),
    KindRoles("leaderworkerset", "leaderworkerset.x-k8s.io", "leaderworkersets"),
    KindRoles("mpijob", "kubeflow.org", "mpijobs"),
    KindRoles("paddlejob", "kubeflow.org", "paddlejobs"),
    KindRoles("pytorchjob", "kubeflow.org", "pytorchjobs"),
    KindRoles("tfjob", "kubeflow.org", "tfjobs"),
    KindRoles("xgboostjob", "kubeflow.org", "xgboostjobs"),
    KindRoles("jaxjob", "kubeflow.org", "jaxjobs"),
    KindRoles("trainjob", "trainer.kubeflow.org", "trainjobs"),
    KindRoles("raycluster", "ray.io", "rayclusters", user_views=False),
    KindRoles("rayjob", "ray.io", "rayjobs"),
    KindRoles("rayservice", "ray.io", "rayservices", user_views=False),
    KindRoles("sparkapplication", "sparkoperator.k8s.io", "sparkapplications"),
)


def _role(name: str, labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": PREFIX + name + "-role", "labels": labels},
        "rules": rules,
    }


def _rule(group: str, resource: str, verbs: tuple[str, ...]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}


def _labels(role: str, *, admin: bool, user: bool, aggregates_to: tuple[str, ...] = ()) -> dict[str, str]:
    labels = {ROLE_LABEL: role}
    if admin:
        labels[BATCH_ADMIN] = "true"
    if user:
        labels[BATCH_USER] = "true"
    for default_role in aggregates_to:
        labels[AGGREGATE_TO.format(default_role)] = "true"
    return labels


def _kind_roles(kind: KindRoles) -> list[dict[str, Any]]:
    status = [_rule(kind.group, f"{kind.plural}/status", ("get",))] if kind.status else []
    return [
        _role(
            f"{kind.name}-editor",
            _labels(f"{kind.name}-editor", admin=True, user=kind.user_edits),
            [_rule(kind.group, kind.plural, EDIT_VERBS), *status],
        ),
        _role(
            f"{kind.name}-viewer",
            _labels(f"{kind.name}-viewer", admin=True, user=kind.user_views, aggregates_to=kind.viewer_aggregates_to),
            [_rule(kind.group, kind.plural, VIEW_VERBS), *status],
        ),
    ]


def _pending_viewer(scope: str, plural: str, *, user: bool) -> dict[str, Any]:
    """pending_workloads_<cq|lq>_viewer_role.yaml: the visibility API's pendingworkloads of one scope."""
    role = f"pending-workloads-{scope}-viewer"
    return _role(
        role,
        _labels(role, admin=True, user=user, aggregates_to=("admin", "edit", "view")),
        [_rule("visibility.kueue.x-k8s.io", f"{plural}/pendingworkloads", VIEW_VERBS)],
    )


def _aggregated(name: str, label: str) -> dict[str, Any]:
    """batch_admin_role.yaml / batch_user_role.yaml: no rules of their own, those of the labelled roles."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": PREFIX + name},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
        "rules": [],
    }


def cluster_roles() -> list[dict[str, Any]]:
    """Every user-facing ClusterRole of Kueue's installation (``kueue-batch-admin-role``,
    ``kueue-batch-user-role``, ``kueue-<kind>-<editor|viewer>-role``, ``kueue-pending-workloads-<cq|lq>-viewer-role``),
    as ``rbac.authorization.k8s.io/v1`` objects; the two aggregated ones with empty ``rules`` (the control
    plane fills them in)."""
    roles = [_aggregated("batch-admin-role", BATCH_ADMIN), _aggregated("batch-user-role", BATCH_USER)]
    for kind in KINDS:
        roles += _kind_roles(kind)
    roles += [
        _pending_viewer("cq", "clusterqueues", user=False),
        _pending_viewer("lq", "localqueues", user=True),
    ]
    return roles


def render() -> str:
    """``deploy/base/user-roles.yaml``: :func:`cluster_roles` as one YAML stream."""
    header = (
        "# Generated by `kueue-es deploy roles` (kueue_es/user_roles.py): the ClusterRoles Kueue's installation\n"
        "# creates for batch administrators and users (Kueue docs, tasks/manage/rbac.md). Do not edit.\n"
    )
    return header + yaml.safe_dump_all(cluster_roles(), sort_keys=False, explicit_start=True)
