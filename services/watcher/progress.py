"""How far a started job has got: its pods ready (PodsReady), or stopped after an eviction.

Why this module exists: Kueue's job reconciler writes the Workload's PodsReady
condition from each integration's ``PodsReady()`` (SEMANTICS-ADVANCED C.2; Kueue
jobframework/reconciler.go generatePodsReadyCondition), and releases an evicted
workload's quota once its job is no longer active (reconciler.go step 6). The
watcher sees the jobs, so it reports both as facts (WorkloadPodsReady,
WorkloadStopped); this module is the pure part: what "ready", "started" and
"stopped" mean for a batch/v1 Job, a JobSet, a plain Pod and a pod group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kueue_es.jobframework import integrations, jobs, pods, workloads
from kueue_es.jobframework.annotations import EVICTED_ANNOTATION, EVICTION_SEQ_ANNOTATION

ReadyState = tuple[bool, str]


def reclaimable_pods(
    kind: str, job: Mapping[str, Any], *, context: workloads.Context | None = None
) -> dict[str, int] | None:
    """A job's reclaimable pods by pod set (Kueue's optional JobWithReclaimablePods): a batch/v1 Job's, or a
    registered integration's (:func:`kueue_es.jobframework.integrations.reclaimable_pods`, with ``context``
    for a kind that reads inputs). None: the kind reports none (an integration that does not implement it)."""
    if kind == "Job":
        return jobs.reclaimable_pods(job)
    integration = integrations.by_kind(kind)
    return integrations.reclaimable_pods(integration, job, context=context) if integration is not None else None


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _count(value: Any, default: int) -> int:
    number = workloads.parse_int(value)
    return default if number is None else number


def job_ready(job: Mapping[str, Any]) -> bool:
    """batch/v1 Job PodsReady (jobs/job/job_controller.go PodsReady): ``ready + succeeded +
    uncountedTerminatedPods.succeeded >= min(parallelism, completions)`` (parallelism 1 when
    absent, completions = parallelism when absent)."""
    spec, status = _spec(job), _status(job)
    parallelism = _count(spec.get("parallelism"), 1)
    completions = _count(spec.get("completions"), parallelism)
    uncounted = status.get("uncountedTerminatedPods")
    uncounted_succeeded = len(uncounted.get("succeeded") or []) if isinstance(uncounted, dict) else 0
    done = _count(status.get("ready"), 0) + _count(status.get("succeeded"), 0) + uncounted_succeeded
    return done >= min(parallelism, completions)


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """A pod's PodReady condition is True (pod_controller.go hasPodReadyTrue)."""
    for condition in _status(pod).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def group_ready(members: Sequence[Mapping[str, Any]], *, total: int) -> bool:
    """A pod group is ready when at least ``total`` pods exist and every one is PodReady (pod_controller.go)."""
    return len(members) >= total and all(pod_ready(p) for p in members)


def started(kind: str, objs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the job was started by Kueue: a Job or JobSet not suspended, a pod no longer gated.

    A pod the dispatcher marked evicted (:func:`eviction_mark`) was stopped, not started: a start takes the mark
    off, so a Pod workload or pod group whose pods all carry it is evicted and not admitted again, and Kueue's
    generatePodsReadyCondition writes ``WaitForStart`` for it whatever its pods still report."""
    if kind == "Pod":
        live = [p for p in objs if eviction_mark([p]) is None]
        return bool(live) and not any(pods.is_gated(p) for p in live)
    integration = integrations.by_kind(kind) if kind != "Job" else None
    if integration is not None:
        return bool(objs) and not any(integrations.suspended(integration, o) for o in objs)
    return bool(objs) and not any(_spec(o).get("suspend") is True for o in objs)


def next_pods_ready(previous: ReadyState | None, *, started: bool, ready: bool) -> ReadyState:
    """The PodsReady (status, reason) Kueue writes next (generatePodsReadyCondition).

    Not started (not admitted, or evicted and stopped): False ``WaitForStart``. Ready:
    True ``Started``, or ``Recovered`` after ``WaitForRecovery``/``Recovered``. Not ready:
    False ``WaitForRecovery`` after True or while recovering, else ``WaitForStart``.
    """
    if not started:
        return False, "WaitForStart"
    if ready:
        recovering = previous is not None and previous[1] in ("WaitForRecovery", "Recovered")
        return True, "Recovered" if recovering else "Started"
    if previous is not None and (previous[0] or previous[1] == "WaitForRecovery"):
        return False, "WaitForRecovery"
    return False, "WaitForStart"


def eviction_mark(objs: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """(reason, eviction sequence) of the dispatcher's eviction marks on any of ``objs`` (the newest
    sequence when several differ), or None when none is marked."""
    found: list[tuple[int, str, str]] = []
    for obj in objs:
        meta = workloads.as_mapping(obj.get("metadata"))
        annotations = workloads.as_mapping(meta.get("annotations"))
        reason, seq = annotations.get(EVICTED_ANNOTATION), annotations.get(EVICTION_SEQ_ANNOTATION)
        if reason and seq:
            found.append((_count(seq, 0), str(reason), str(seq)))
    if not found:
        return None
    _, reason, seq = max(found)
    return reason, seq
