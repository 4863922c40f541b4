"""The MultiKueue manager's choices: which workers get a copy, which copy wins, when to try again.

Why this module exists: a workload that reserves quota in a ClusterQueue with a MultiKueue
admission check (controllerName ``kueue.x-k8s.io/multikueue``) runs on a worker cluster, not on
the manager. Kueue's MultiKueue controllers decide, per workload (SEMANTICS-ADVANCED E.2, E.3;
Kueue pkg/controller/admissionchecks/multikueue/workload.go reconcileGroup,
pkg/controller/workloaddispatcher, pkg/workload ShouldSkipClusterNomination):

1. an owner kind without a MultiKueue adapter: the check is Rejected (the admitter deactivates);
2. nomination, once every other check is Ready and while the MultiKueue check is Pending with no
   clusterName: AllAtOnce nominates every configured, connected worker (sorted); Incremental the
   first ``stepSize`` workers in the MultiKueueConfig's order, then the next ``stepSize`` each time
   5 minutes pass without an admission (none left: "no more workers", nothing is decided);
3. the winner: the nominated copy admitted first (earliest Admitted time, ties by cluster name):
   the check is Ready "The workload was admitted on "<c>"" and status.clusterName is ``c``;
4. while Ready: the winner's copy evicted on the worker, or finished ``OutOfSync``, or gone while
   the worker is reachable: Retry at once; the worker unreachable: Retry once ``workerLostTimeout``
   has passed since the WorkerClusterConnectivity that reported the loss.

The edge (services/multikueue_edge, the NATS user ``multikueue-edge``) acts on these decisions
(copies made and deleted, the job created on the winner) and reports what the workers hold
(RemoteWorkloadObserved, WorkerClusterConnectivity). The admitter's check rules do the rest:
admitted when every check is Ready, evicted (AdmissionCheck) on Retry, deactivated on Rejected.

Pure: the folded state and the cycle's ``now_ms`` in, decisions out; no I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kueue_es.events import models, types
from kueue_es.projections import multikueue
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.scheduling import lifecycle
from kueue_es.scheduling.tas import cycle as topology

INCREMENTAL_ROUND_MS = 5 * 60 * 1000
"""How long an Incremental nomination round waits for an admission before the next step (Kueue's
incrementalDispatcherRoundTimeout)."""
DEFAULT_WORKER_LOST_TIMEOUT_MS = 15 * 60 * 1000
NO_MORE_WORKERS = "no more workers to nominate"
EVICTED_ON_WORKER = "Workload evicted on worker cluster: "
"""How a Retry for a copy evicted on its worker begins (workload.go reconcileGroup)."""
OUT_OF_SYNC_ON_WORKER = "is out of sync with its user job, resetting for re-dispatch"
"""What a Retry for a copy finished ``OutOfSync`` on its worker says (workload.go reconcileGroup)."""

#: The job kinds with a MultiKueue adapter, as ``(API group, kind)`` (Kueue pkg/controller/jobs/*
#: *_multikueue_adapter.go); a workload of another owner kind has its check Rejected.
ADAPTER_KINDS = frozenset(
    {
        ("batch", "Job"),
        ("jobset.x-k8s.io", "JobSet"),
        ("kubeflow.org", "JAXJob"),
        ("kubeflow.org", "PaddleJob"),
        ("kubeflow.org", "PyTorchJob"),
        ("kubeflow.org", "TFJob"),
        ("kubeflow.org", "XGBoostJob"),
        ("kubeflow.org", "MPIJob"),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
        ("", "Pod"),
        ("ray.io", "RayJob"),
        ("ray.io", "RayCluster"),
        ("ray.io", "RayService"),
        ("apps", "StatefulSet"),
        ("trainer.kubeflow.org", "TrainJob"),
        ("workload.codeflare.dev", "AppWrapper"),
    }
)


@dataclass(frozen=True)
class Why:
    """What the decider sees for one workload, for ``explain``: its MultiKueue ``check`` and state,
    the nominated workers, each copy's state by worker, the winner (``cluster_name``) and ``waiting``,
    why nothing is decided now ("" once decided)."""

    check: str
    state: str
    nominated: tuple[str, ...]
    copies: dict[str, str]
    cluster_name: str
    waiting: str


def decide(state: ClusterState, *, now_ms: int) -> list[types.Decision]:
    """The MultiKueue decisions of this cycle, in workload key order (see the module docstring).

    ``now_ms``: the cycle's clock (ms since the epoch), for the Incremental rounds and
    workerLostTimeout. Empty when no AdmissionCheck is MultiKueue's."""
    mk = state.multikueue
    if not mk.checks:
        return []
    out: list[types.Decision] = []
    keys = {*state.checks_due, *mk.cluster_names, *mk.nominations}
    for key in sorted(keys):
        wl = state.workloads.get(key)
        if wl is None:
            continue
        decision = decide_workload(state, wl, now_ms=now_ms)
        if decision is not None:
            out.append(decision)
    return out


def decide_workload(state: ClusterState, wl: WorkloadState, *, now_ms: int) -> types.Decision | None:
    """The one MultiKueue decision about ``wl`` now, or None (see :func:`explain` for why not)."""
    return _judge(state, wl, now_ms=now_ms)[0]


def explain(state: ClusterState, wl: WorkloadState, *, now_ms: int) -> Why | None:
    """What the decider sees of ``wl`` (None: no MultiKueue check applies to it now)."""
    return _judge(state, wl, now_ms=now_ms)[1]


def _judge(state: ClusterState, wl: WorkloadState, *, now_ms: int) -> tuple[types.Decision | None, Why | None]:
    if wl.gone or wl.reservation is None or wl.eviction is not None or not wl.active:
        return None, None
    mk = state.multikueue
    cq = state.cluster_queues.get(wl.reservation.cluster_queue)
    name = multikueue.multikueue_check_of(cq, state.admission_checks)
    if name is None or cq is None:
        return None, None
    entry = wl.checks.get(name)
    check_state = entry.state if entry is not None else "Pending"
    nomination = mk.nominations.get(wl.key)
    nominated = tuple(nomination.clusters) if nomination is not None else ()
    copies = {
        c: _copy_state(r) + ("" if mk.connected(c) else " (worker unreachable)")
        for c, r in sorted(mk.remotes.get(wl.key, {}).items())
    }
    cluster_name = mk.cluster_names.get(wl.key, "")

    def why(waiting: str) -> Why:
        return Why(name, check_state, nominated, copies, cluster_name, waiting)

    if check_state in ("Rejected", "Retry"):
        return None, why(f"the check is {check_state}: the admitter acts on it")
    ref = wl.ref
    owner = wl.workload.owner
    if owner is None or (_group(owner.api_version), owner.kind) not in ADAPTER_KINDS:
        return _rejected(wl, name, check_state, now_ms, owner), why("")
    if check_state == "Ready":
        retry = _while_ready(state, wl, name, cluster_name, now_ms=now_ms)
        unplaced = _unplaced(state, wl) if retry is None and not wl.admitted else []
        if unplaced:
            # updateDelayedTopologyRequest marked Ready only what the worker placed (admitter logic 40)
            return None, why(
                f'waiting for "{cluster_name}" to place the delayed topology of pod sets {", ".join(unplaced)}'
                " (PendingDelayedTopologyRequests)"
            )
        return retry, why("")
    if cluster_name:
        return None, why(f'status.clusterName is "{cluster_name}": nomination is over')
    others = [c for c in lifecycle.required_checks(cq, lifecycle.assigned_flavors(wl.reservation)) if c != name]
    not_ready = [c for c in others if (e := wl.checks.get(c)) is None or e.state != "Ready"]
    if not_ready:
        return None, why(f"waiting for the other admission checks to be Ready: {', '.join(not_ready)}")
    winner = _winner(mk, wl, nominated)
    if winner is not None:
        decision = types.RemoteAdmissionChosen(
            workload=ref, check=name, cluster=winner, message=f'The workload was admitted on "{winner}"', at_ms=now_ms
        )
        return decision, why("")
    check = state.admission_checks[name]
    config, problem = multikueue.config_of(mk, check)
    if config is None:
        return None, why(f"the check's MultiKueueConfig cannot be read: {problem}")
    settings = state.configuration.multi_kueue or models.MultiKueueConfiguration()
    if settings.dispatcher_name == models.DISPATCHER_ALL_AT_ONCE:
        clusters = sorted(c for c in config.spec.clusters if mk.connected(c))
        if not clusters:
            return None, why("no configured worker is connected")
        if list(nominated) == clusters:
            return None, why("waiting for a nominated worker to admit its copy")
        return types.WorkersNominated(workload=ref, check=name, clusters=clusters, step=0, at_ms=now_ms), why("")
    if settings.dispatcher_name == models.DISPATCHER_INCREMENTAL:
        step_size = (settings.incremental_dispatcher_config or models.IncrementalDispatcherConfig()).step_size
        if nomination is not None and now_ms - nomination.at_ms <= INCREMENTAL_ROUND_MS:
            return None, why("waiting for a nominated worker to admit its copy (this round)")
        rest = [c for c in config.spec.clusters if c not in nominated]
        if not rest:
            return None, why(NO_MORE_WORKERS)
        step = nomination.step + 1 if nomination is not None else 0
        clusters = [*nominated, *rest[:step_size]]
        return types.WorkersNominated(workload=ref, check=name, clusters=clusters, step=step, at_ms=now_ms), why("")
    return None, why(f"dispatcher {settings.dispatcher_name!r} is another controller's: it nominates the workers")


def _unplaced(state: ClusterState, wl: WorkloadState) -> list[str]:
    """The pod sets of ``wl`` whose delayed topology request is Pending and which its admitting worker has not
    placed (:func:`lifecycle.worker_placed`), sorted."""
    placed = lifecycle.worker_placed(state, wl)
    return sorted(psa.name for psa in topology.pending_delayed(wl) if psa.name not in placed)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _rejected(
    wl: WorkloadState, check: str, previous: str, now_ms: int, owner: models.OwnerReference | None
) -> types.MultiKueueCheckRejected:
    """No MultiKueue adapter for the owner's kind (workload.go Reconcile), Kueue's message."""
    if owner is None:
        message = "No multikueue adapter found"
    else:
        group, _, version = owner.api_version.rpartition("/")
        message = f'No multikueue adapter found for owner kind "{group}/{version}, Kind={owner.kind}"'
    return types.MultiKueueCheckRejected(
        workload=wl.ref, check=check, message=f'{message}, Previously: "{previous}"', at_ms=now_ms
    )


def _winner(mk: multikueue.MultiKueueState, wl: WorkloadState, nominated: tuple[str, ...]) -> str | None:
    """The nominated worker whose copy was admitted first (earliest Admitted time, then name), if any
    (workload.go bestMatchByCondition). Only copies the edge reported since this reservation count: one
    left from before an eviction (not removed by the edge yet) is not this reservation's."""
    since = wl.reservation.at_ms if wl.reservation is not None else 0
    admitted = [
        (copy.admitted_at_ms, cluster)
        for cluster, copy in mk.remotes.get(wl.key, {}).items()
        if copy.admitted and not copy.evicted and cluster in nominated and copy.at_ms >= since and mk.connected(cluster)
    ]
    return min(admitted)[1] if admitted else None


def _while_ready(
    state: ClusterState, wl: WorkloadState, check: str, cluster: str, *, now_ms: int
) -> types.MultiKueueCheckRetry | None:
    """Retry when the admitting copy was evicted on its worker, finished OutOfSync, is gone from a
    reachable worker, or its worker stayed unreachable past workerLostTimeout (E.3)."""
    mk = state.multikueue
    # an unreachable worker's copies are not seen (Kueue reads only the connected workers' workloads)
    copy = mk.remotes.get(wl.key, {}).get(cluster) if cluster and mk.connected(cluster) else None

    def retry(message: str) -> types.MultiKueueCheckRetry:
        return types.MultiKueueCheckRetry(workload=wl.ref, check=check, message=message, at_ms=now_ms)

    if copy is not None and copy.evicted:
        return retry(f'{EVICTED_ON_WORKER}"{cluster}", resetting for re-admission. Previously: "Ready"')
    if copy is not None and copy.finished and copy.finish_reason == "OutOfSync":
        return retry(f'Remote workload on worker cluster "{cluster}" {OUT_OF_SYNC_ON_WORKER}, Previously: "Ready"')
    if copy is not None and (copy.admitted or copy.finished):
        return None
    if not cluster:
        return retry(
            "Admission check is Ready but no admitting cluster is recorded; this is unexpected, please report it"
            ', Previously: "Ready"'
        )
    lost = mk.lost_since_ms(cluster)
    if lost is None:
        return retry('Admitting remote no longer exists, Previously: "Ready"')
    if now_ms - lost < worker_lost_timeout_ms(state.configuration):
        return None
    return retry('Admitting remote lost, Previously: "Ready"')


def worker_lost_timeout_ms(configuration: models.Configuration) -> int:
    """``multiKueue.workerLostTimeout`` in ms (Kueue's default 15m)."""
    settings = configuration.multi_kueue
    if settings is None:
        return DEFAULT_WORKER_LOST_TIMEOUT_MS
    return duration_ms(settings.worker_lost_timeout)


_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}


def duration_ms(text: str) -> int:
    """A Go duration (``15m``, ``1h30m``, ``90s``, ``0``) in ms; ValueError when it is not one."""
    text = text.strip()
    if text in ("0", ""):
        return 0
    sign = -1 if text.startswith("-") else 1
    parts = re.findall(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)", text.lstrip("+-"))
    if not parts or "".join(n + u for n, u in parts) != text.lstrip("+-"):
        raise ValueError(f"{text!r} is not a Go duration")
    return sign * round(sum(float(n) * _UNITS_MS[u] for n, u in parts))


def _copy_state(copy: types.RemoteWorkloadObserved) -> str:
    """One word for a remote copy, for ``explain``."""
    if copy.finished:
        return f"Finished ({copy.finish_reason})" if copy.finish_reason else "Finished"
    if copy.evicted:
        return f"Evicted ({copy.eviction_reason})" if copy.eviction_reason else "Evicted"
    if copy.admitted:
        return "Admitted"
    if copy.quota_reserved:
        return "QuotaReserved"
    return "Pending"
