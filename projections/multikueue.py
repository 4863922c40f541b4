"""MultiKueue on the log: the workers, their connectivity, the remote copies and the manager's choices.

Why this module exists: the MultiKueue decider (:mod:`kueue_es.scheduling.multikueue`), the
admitter (through the workloads' admission check states), the dispatcher (status.clusterName,
the AdmissionChecks' Active condition) and ``explain`` all read the same MultiKueue state; the
cluster fold (:mod:`kueue_es.projections.cluster`) keeps it here, in :class:`MultiKueueState`,
from these events (SEMANTICS-ADVANCED E; Kueue pkg/controller/admissionchecks/multikueue):

- MultiKueueClusterObserved, MultiKueueConfigObserved and their ObjectDeleted: the objects;
- WorkerClusterConnectivity: whether the manager reaches a worker, and since when (the MultiKueue
  edge); without one, a MultiKueueCluster's own ``Active`` condition says it;
- RemoteWorkloadObserved: each workload's copy on each worker;
- the multikueue decider's WorkersNominated (``status.nominatedClusterNames``) and
  RemoteAdmissionChosen (``status.clusterName``); with MultiKueueCheckRetry and
  MultiKueueCheckRejected they set the workload's MultiKueue check exactly as an
  AdmissionCheckStateChanged would (:func:`check_outcome`), so the admitter's check rules apply
  unchanged.

An AdmissionCheck with controllerName ``kueue.x-k8s.io/multikueue`` is kept as observed in
:attr:`MultiKueueState.checks`; the one the deciders see (``ClusterState.admission_checks``) has
``active`` computed here from its MultiKueueConfig and the workers (:func:`check_condition`,
Kueue admissioncheck.go ACReconciler), which the dispatcher writes to the object's status.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from kueue_es.events import models, types

if TYPE_CHECKING:  # the cluster fold holds this state: no import at run time
    from kueue_es.projections.cluster import WorkloadState

CONFIG_GROUP_KIND = ("kueue.x-k8s.io", "MultiKueueConfig")


class Nomination(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The workers nominated for a workload (WorkersNominated): ``clusters`` sorted, the Incremental
    ``step`` they came with and when (``at_ms``, ms since the epoch: the next step is due 5 minutes on)."""

    check: str
    clusters: list[str]
    step: int
    at_ms: int


class MultiKueueState(msgspec.Struct, kw_only=True):
    """What the log says about MultiKueue (see the module docstring); keys are object names, and
    workload keys (``namespace/name``) for ``remotes``, ``nominations`` and ``cluster_names``.
    ``version`` counts the changes, for the deciders' caches."""

    clusters: dict[str, models.MultiKueueCluster] = {}
    configs: dict[str, models.MultiKueueConfig] = {}
    connectivity: dict[str, types.WorkerClusterConnectivity] = {}
    checks: dict[str, models.AdmissionCheck] = {}
    remotes: dict[str, dict[str, types.RemoteWorkloadObserved]] = {}
    nominations: dict[str, Nomination] = {}
    cluster_names: dict[str, str] = {}
    version: int = 0

    def connected(self, cluster: str) -> bool:
        """Whether worker ``cluster`` is usable: its MultiKueueCluster exists and the edge's latest
        WorkerClusterConnectivity says active (without one, the object's ``Active`` condition)."""
        obj = self.clusters.get(cluster)
        if obj is None:
            return False
        seen = self.connectivity.get(cluster)
        return seen.active if seen is not None else obj.active

    def lost_since_ms(self, cluster: str) -> int | None:
        """When the manager lost worker ``cluster`` (the WorkerClusterConnectivity's ``at_ms``), None
        while it is connected; 0 when it was never seen connected nor lost (no fact of the edge)."""
        if self.connected(cluster):
            return None
        seen = self.connectivity.get(cluster)
        return seen.at_ms if seen is not None and not seen.active else 0


def is_multikueue(check: models.AdmissionCheck | None) -> bool:
    """Whether ``check`` is MultiKueue's (controllerName ``kueue.x-k8s.io/multikueue``)."""
    return check is not None and check.spec.controller_name == models.MULTIKUEUE_CONTROLLER


def config_of(mk: MultiKueueState, check: models.AdmissionCheck) -> tuple[models.MultiKueueConfig | None, str]:
    """The MultiKueueConfig ``check``'s parameters name, or None and why not, as Kueue's ConfigHelper
    words it (pkg/util/admissioncheck ConfigFromRef). A missing config is named by its Kind, as the
    manager's cached client words a NotFound (test/integration/multikueue/setup_test.go)."""
    ref = check.spec.parameters
    if ref is None:
        return None, "missing parameters reference"
    if not ref.name:
        return None, "empty name: bad parameters reference"
    group, kind = CONFIG_GROUP_KIND
    if ref.api_group != group:
        return None, f'wrong group "{ref.api_group}", expecting "{group}": bad parameters reference'
    if ref.kind != kind:
        return None, f'wrong kind "{ref.kind}", expecting "{kind}": bad parameters reference'
    config = mk.configs.get(ref.name)
    if config is None:
        return None, f'MultiKueueConfig.kueue.x-k8s.io "{ref.name}" not found'
    return config, ""


def check_condition(mk: MultiKueueState, check: models.AdmissionCheck) -> tuple[bool, str, str]:
    """The ``Active`` condition of MultiKueue AdmissionCheck ``check`` as ``(status, reason, message)``
    (SEMANTICS-ADVANCED E.1; Kueue admissioncheck.go ACReconciler.Reconcile): True ``Active`` when every
    configured worker is connected, True ``SomeActiveClusters`` when some are missing or inactive, False
    ``NoUsableClusters`` when none is usable, False ``BadConfig`` when its MultiKueueConfig cannot be read."""
    config, problem = config_of(mk, check)
    if config is None:
        return False, "BadConfig", f"Cannot load the AdmissionChecks parameters: {problem}"
    missing = [c for c in config.spec.clusters if c not in mk.clusters]
    inactive = [c for c in config.spec.clusters if c in mk.clusters and not mk.connected(c)]
    if not missing and not inactive:
        return True, "Active", "The admission check is active"
    parts = []
    if missing:
        parts.append(f"Missing clusters: [{' '.join(missing)}]")
    if inactive:
        parts.append(f"Inactive clusters: [{' '.join(inactive)}]")
    usable = len(missing) + len(inactive) < len(config.spec.clusters)
    return usable, "SomeActiveClusters" if usable else "NoUsableClusters", ", ".join(parts)


def effective_check(mk: MultiKueueState, observed: models.AdmissionCheck) -> models.AdmissionCheck:
    """``observed`` with ``active`` as MultiKueue computes it (a check of another controller as it is)."""
    if not is_multikueue(observed):
        return observed
    active = check_condition(mk, observed)[0]
    return observed if observed.active == active else msgspec.structs.replace(observed, active=active)


def refresh_checks(mk: MultiKueueState, admission_checks: dict[str, models.AdmissionCheck]) -> bool:
    """Recompute every MultiKueue AdmissionCheck's ``active`` into ``admission_checks`` (the deciders' view);
    True when one changed (a ClusterQueue may have turned active or inactive)."""
    changed = False
    for name, observed in mk.checks.items():
        now = effective_check(mk, observed)
        old = admission_checks.get(name)
        if old is None or old.active != now.active:
            changed = True
        admission_checks[name] = now
    return changed


def has_multikueue_check(wl: WorkloadState, admission_checks: Mapping[str, models.AdmissionCheck]) -> bool:
    """Whether one of ``wl``'s admission check states (``status.admissionChecks``) is a MultiKueue check's
    (Kueue admissioncheck.go GetMultiKueueAdmissionCheck: its states filtered by controller name)."""
    return any(is_multikueue(admission_checks.get(name)) for name in wl.checks)


def multikueue_check_of(
    cq: models.ClusterQueue | None, admission_checks: dict[str, models.AdmissionCheck]
) -> str | None:
    """The name of the MultiKueue AdmissionCheck ``cq`` requires (the first by name: a ClusterQueue with
    more than one is inactive, Kueue MultipleMultiKueueAdmissionChecks), None when it has none."""
    strategy = cq.spec.admission_checks_strategy if cq is not None else None
    if strategy is None:
        return None
    names = sorted(r.name for r in strategy.admission_checks if is_multikueue(admission_checks.get(r.name)))
    return names[0] if names else None


def fold_fact(
    mk: MultiKueueState,
    event: types.MultiKueueClusterObserved
    | types.MultiKueueConfigObserved
    | types.WorkerClusterConnectivity
    | types.RemoteWorkloadObserved,
) -> None:
    """Take one MultiKueue fact (a full snapshot: folding it twice is harmless)."""
    mk.version += 1
    match event:
        case types.MultiKueueClusterObserved(cluster=obj):
            mk.clusters[obj.metadata.name] = obj
        case types.MultiKueueConfigObserved(config=obj):
            mk.configs[obj.metadata.name] = obj
        case types.WorkerClusterConnectivity():
            old = mk.connectivity.get(event.cluster)
            if old is not None and old.active == event.active and old.at_ms <= event.at_ms:
                # the same state seen again: the loss (or the connection) dates from the first sight
                event = msgspec.structs.replace(event, at_ms=old.at_ms)
            mk.connectivity[event.cluster] = event
        case types.RemoteWorkloadObserved():
            copies = mk.remotes.setdefault(event.workload.key, {})
            if event.present:
                copies[event.cluster] = event
            else:
                copies.pop(event.cluster, None)
                if not copies:
                    mk.remotes.pop(event.workload.key, None)


def fold_deleted(mk: MultiKueueState, kind: str, name: str) -> bool:
    """An ObjectDeleted of a MultiKueue kind (or an AdmissionCheck); True when it was one of them."""
    match kind:
        case "MultiKueueCluster":
            mk.clusters.pop(name, None)
        case "MultiKueueConfig":
            mk.configs.pop(name, None)
        case "AdmissionCheck":
            if mk.checks.pop(name, None) is None:
                return False
        case _:
            return False
    mk.version += 1
    return True


def check_outcome(
    event: types.WorkersNominated
    | types.RemoteAdmissionChosen
    | types.MultiKueueCheckRetry
    | types.MultiKueueCheckRejected,
) -> types.AdmissionCheckStateChanged | None:
    """The check state a MultiKueue decision sets, as the AdmissionCheckStateChanged a check controller
    would report (None: a nomination leaves the check Pending as it is)."""
    match event:
        case types.RemoteAdmissionChosen():
            state: types.CheckState = "Ready"
        case types.MultiKueueCheckRetry():
            state = "Retry"
        case types.MultiKueueCheckRejected():
            state = "Rejected"
        case _:
            return None
    return types.AdmissionCheckStateChanged(
        workload=event.workload, check=event.check, state=state, message=event.message, at_ms=event.at_ms
    )


def fold_decision(
    mk: MultiKueueState,
    event: types.WorkersNominated
    | types.RemoteAdmissionChosen
    | types.MultiKueueCheckRetry
    | types.MultiKueueCheckRejected,
) -> None:
    """The nomination and clusterName a MultiKueue decision sets (the check state: :func:`check_outcome`)."""
    mk.version += 1
    key = event.workload.key
    match event:
        case types.WorkersNominated():
            mk.nominations[key] = Nomination(
                check=event.check, clusters=list(event.clusters), step=event.step, at_ms=event.at_ms
            )
        case types.RemoteAdmissionChosen():
            mk.cluster_names[key] = event.cluster  # Kueue's status.clusterName; nominatedClusterNames cleared
            mk.nominations.pop(key, None)
        case types.MultiKueueCheckRetry() | types.MultiKueueCheckRejected():
            mk.nominations.pop(key, None)


def forget_reservation(mk: MultiKueueState, key: str) -> None:
    """The workload gave its quota back without finishing: the next reservation starts the nomination
    over (its clusterName and nominated clusters go; the copies' facts stay until the edge removes them)."""
    nominated = mk.nominations.pop(key, None)
    named = mk.cluster_names.pop(key, None)
    if nominated is not None or named is not None:
        mk.version += 1


def forget_workload(mk: MultiKueueState, key: str) -> None:
    """A deleted workload: nothing of it is kept."""
    mk.nominations.pop(key, None)
    mk.cluster_names.pop(key, None)
    mk.remotes.pop(key, None)
    mk.version += 1
