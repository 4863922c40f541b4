"""The workload lifecycle after quota reservation: admission checks, PodsReady timeouts,
maximum execution time and the backoff after an eviction (SEMANTICS §3.7, §9.2-§9.6,
SEMANTICS-ADVANCED B.2, C.3).

In Kueue this is the workload controller's work (pkg/controller/core/workload_controller.go,
pkg/workload/admissionchecks.go); here the admitter decides it in its cycle, from the folded
log and the cycle's ``now_ms``, so it replays like every other decision. Pure: no I/O, no clock.

Decisions, per workload:

- holding quota, not admitted, every admission check required for its flavors Ready:
  WorkloadAdmitted; while a pod set's delayed topology request is Pending (SEMANTICS-ADVANCED
  A.9, Kueue's Admitted=False reason PendingDelayedTopologyRequests) only after the second pass
  placed it: TopologyAssigned + WorkloadAdmitted, or nothing (tried again next cycle);
- a check Rejected: WorkloadDeactivated (reason AdmissionCheck) and, when it holds quota, an
  EvictionRequested ``DeactivatedDueToAdmissionCheck`` (Rejected is looked at before Retry);
- a check in Retry while holding quota: EvictionRequested ``AdmissionCheck`` with requeueAt
  from the checks' requeueAfterSeconds;
- admitted and not PodsReady past waitForPodsReady's timeout: EvictionRequested
  ``PodsReadyTimeout`` with the requeue backoff, or, past backoffLimitCount, deactivation
  (``RequeuingLimitExceeded``);
- admitted past spec.maximumExecutionTimeSeconds: deactivation (``MaximumExecutionTimeExceeded``);
- evicted and waiting out its backoff, once requeueAt has passed: WorkloadRequeued.

:func:`backoff_wakeup_ms` says when the next backoff ends with nothing else happening (the
scenario runner's settle jumps its clock there; the services run a cycle every second anyway).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterable

from kueue_es.events import models, types
from kueue_es.projections import afs, partitions
from kueue_es.projections.cluster import ClusterState, WorkloadState, pods_ready_enabled
from kueue_es.scheduling.tas import cycle as topology

FAILED_CHECKS_MESSAGE = "The workload has failed admission checks"
PENDING_DELAYED_TOPOLOGY = "PendingDelayedTopologyRequests"  # Kueue's Admitted=False reason (A.9)

SecondPass = Callable[[WorkloadState], "types.TopologyAssigned | None"]


def required_checks(cq: models.ClusterQueue, flavors: Iterable[str] | None = None) -> list[str]:
    """Names of the admission checks ``cq`` requires, sorted (SEMANTICS-ADVANCED B.1).

    ``flavors`` None: before admission, the checks that apply to every flavor of the
    ClusterQueue; otherwise the checks whose ``onFlavors`` meet the assigned flavors (an
    empty ``onFlavors`` means all). Source: pkg/workload/workload.go AdmissionChecksForWorkload.
    """
    strategy = cq.spec.admission_checks_strategy
    if strategy is None:
        return []
    cq_flavors = {f.name for group in cq.spec.resource_groups for f in group.flavors}
    assigned = set(flavors) if flavors is not None else None
    out = set()
    for rule in strategy.admission_checks:
        on = set(rule.on_flavors) or cq_flavors
        if (assigned is None and on >= cq_flavors) or (assigned is not None and on & assigned):
            out.add(rule.name)
    return sorted(out)


def assigned_flavors(reservation: types.QuotaReserved | types.PreemptionRequired) -> set[str]:
    """The flavors a reservation's pod set assignments use."""
    return {f for ps in reservation.pod_set_assignments for f in ps.flavors.values()}


def checks_ready(wl: WorkloadState, required: list[str]) -> bool:
    """Whether every required check is Ready for ``wl`` (vacuously true without checks)."""
    checks = wl.checks
    for name in required:
        check = checks.get(name)
        if check is None or check.state != "Ready":
            return False
    return True


def failed_checks(wl: WorkloadState, cq: models.ClusterQueue | None) -> bool:
    """Whether a check of ``wl`` that ``cq`` names is in Retry or Rejected: a pending
    workload is then not nominated (SEMANTICS §4.3 step 2)."""
    named = _named_checks(cq)
    return any(c.state in ("Retry", "Rejected") and n in named for n, c in wl.checks.items())


def _named_checks(cq: models.ClusterQueue | None) -> set[str]:
    """Every check ``cq`` names: the only ones a workload's status lists (Kueue's workload
    controller drops the others), so states of other checks are ignored."""
    strategy = cq.spec.admission_checks_strategy if cq is not None else None
    return {rule.name for rule in strategy.admission_checks} if strategy else set()


def _cluster_queue_of(state: ClusterState, wl: WorkloadState) -> models.ClusterQueue | None:
    if wl.reservation is not None:
        return state.cluster_queues.get(wl.reservation.cluster_queue)
    lq = state.local_queues.get((wl.workload.metadata.namespace, wl.workload.spec.queue_name))
    return state.cluster_queues.get(lq.spec.cluster_queue) if lq is not None else None


def decide(
    state: ClusterState,
    *,
    now_ms: int,
    second_pass: SecondPass | None = None,
    inactive_clears_requeue: bool = True,
    multikueue_delays_topology: bool = False,
    multikueue_placed_topology: bool = False,
) -> list[types.Decision]:
    """The lifecycle decisions due at ``now_ms`` (ms), in workload key order.

    ``second_pass(wl)`` places a workload's delayed topology requests once its checks are Ready
    (SEMANTICS-ADVANCED A.9): the TopologyAssigned, or None when it does not fit (the admitter
    passes one bound to its cycle's TAS view). Without it such a workload is not admitted.

    ``inactive_clears_requeue`` (admitter logic 22; False: 21 and earlier, for replay): a workload set
    inactive by hand since its last requeue count (``WorkloadState.requeue_cleared``) has no requeue
    state, as Kueue's workload controller clears it (PR #7734): its backoff ends and its next PodsReady
    timeout is the first one again.

    ``multikueue_delays_topology`` (admitter logic 35): in a ClusterQueue with a MultiKueue check the
    delayed topology requests are the worker's to place; the MultiKueue check turning Ready marks them
    Ready (multikueue/workload.go updateDelayedTopologyRequest), so the workload is admitted with no
    second pass.

    ``multikueue_placed_topology`` (admitter logic 40; False: 35 to 39, which admitted once the check was
    Ready): the check marks Ready only the pod sets the admitting worker's copy placed (its
    ``RemoteWorkloadObserved.topology_assigned``: updateDelayedTopologyRequest skips a pod set with no
    ``topologyAssignment`` there), so a workload with a delayed request the worker left unplaced is not
    admitted: Kueue's HasTopologyAssignmentsPending keeps it Admitted=False ``PendingDelayedTopologyRequests``,
    and the manager's second pass delays it again (tas_flavorassigner.go). It is admitted once a later
    observation of that copy names them all."""
    out: list[types.Decision] = []
    keys = sorted({*state.checks_due, *state.backoffs, *_timed_due(state, now_ms)})
    for key in keys:
        wl = state.workloads.get(key)
        if wl is None or wl.gone or key in state.releasable:
            continue
        cleared = inactive_clears_requeue and wl.requeue_cleared
        if wl.backoff:
            if wl.reservation is None and (wl.requeue_at_ms <= now_ms or cleared):
                out.append(types.WorkloadRequeued(workload=wl.ref, at_ms=now_ms))
            continue
        decided = _check_decisions(
            state,
            wl,
            now_ms=now_ms,
            second_pass=second_pass,
            multikueue_delays_topology=multikueue_delays_topology,
            multikueue_placed_topology=multikueue_placed_topology,
        )
        if not decided and wl.admitted and wl.eviction is None and wl.active:
            decided = _timeout_decisions(state, wl, now_ms=now_ms, requeue_count=0 if cleared else wl.requeue_count)
        out.extend(decided)
    return out


def _check_decisions(
    state: ClusterState,
    wl: WorkloadState,
    *,
    now_ms: int,
    second_pass: SecondPass | None = None,
    multikueue_delays_topology: bool = False,
    multikueue_placed_topology: bool = False,
) -> list[types.Decision]:
    cq = _cluster_queue_of(state, wl)
    named = _named_checks(cq)
    rejected = sorted(n for n, c in wl.checks.items() if c.state == "Rejected" and n in named)
    held = wl.reservation is not None and wl.eviction is None
    if rejected and wl.active:
        return _deactivate(wl, "AdmissionCheck", _checks_message(wl, rejected, "Rejected"), now_ms=now_ms)
    if not held:
        return []
    assert wl.reservation is not None
    retry = sorted(n for n, c in wl.checks.items() if c.state == "Retry" and n in named)
    if retry:
        requeue_at = 0
        for name in retry:  # pkg/workload/admissionchecks.go GetMaxRetryTime
            check = wl.checks[name]
            if check.requeue_after_seconds is not None:
                requeue_at = max(requeue_at, check.at_ms + check.requeue_after_seconds * 1000)
        message = f"Evicted due to {_checks_message(wl, retry, 'Retry')}"
        return [_eviction(wl, "AdmissionCheck", message, now_ms=now_ms, requeue_at_ms=requeue_at)]
    if wl.admitted:
        return []
    required = required_checks(cq, assigned_flavors(wl.reservation)) if cq is not None else []
    if not checks_ready(wl, required):
        return []
    admitted = types.admitted(wl.reservation, at_ms=now_ms)
    pending = topology.pending_delayed(wl)
    if not pending:
        return [admitted]
    if multikueue_delays_topology and cq is not None and topology.multikueue_delays(state, cq):
        if not multikueue_placed_topology:
            return [admitted]  # 35 to 39: the MultiKueue check Ready marked them all Ready
        # the MultiKueue check Ready marks Ready the pod sets its admitting worker placed; one left Pending
        # keeps the workload from admission (HasTopologyAssignmentsPending)
        on_worker = worker_placed(state, wl)
        return [admitted] if all(psa.name in on_worker for psa in pending) else []
    placed = second_pass(wl) if second_pass is not None else None
    return [placed, admitted] if placed is not None else []


def worker_placed(state: ClusterState, wl: WorkloadState) -> frozenset[str]:
    """The pod sets of ``wl`` its admitting MultiKueue worker placed: the ``topology_assigned`` of the copy on
    the worker its status.clusterName names (RemoteAdmissionChosen), as the edge last saw it; empty with no
    admitting worker or no copy there (multikueue/workload.go syncAdmittingRemoteState reads only that one)."""
    mk = state.multikueue
    copy = mk.remotes.get(wl.key, {}).get(mk.cluster_names.get(wl.key, ""))
    if copy is None or not copy.topology_assigned:
        return frozenset()
    return frozenset(copy.topology_assigned)


def _checks_message(wl: WorkloadState, names: list[str], state: str) -> str:
    """Kueue's buildAdmissionChecksMessage: ``AdmissionCheck(s) in <state> state: "a" (msg); "b"``."""
    parts = [f'"{n}" ({wl.checks[n].message})' if wl.checks[n].message else f'"{n}"' for n in names]
    noun = "AdmissionChecks" if len(names) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def _eviction(
    wl: WorkloadState, reason: str, message: str, *, now_ms: int, requeue_at_ms: int = 0, requeue_count: int = 0
) -> types.EvictionRequested:
    assert wl.reservation is not None
    return types.EvictionRequested(
        workload=wl.ref,
        cluster_queue=wl.reservation.cluster_queue,
        reason=reason,
        message=message,
        at_ms=now_ms,
        requeue_at_ms=requeue_at_ms,
        requeue_count=requeue_count,
    )


def _timeout_decisions(
    state: ClusterState, wl: WorkloadState, *, now_ms: int, requeue_count: int
) -> list[types.Decision]:
    """PodsReady timeout (SEMANTICS-ADVANCED C.3), then maximum execution time (SEMANTICS §9.6).
    ``requeue_count``: the timeouts counted so far (Kueue's requeueState.count)."""
    config = state.configuration
    deadline = _pods_ready_deadline(wl, config)
    if deadline is not None and now_ms >= deadline:
        wait = config.wait_for_pods_ready or models.WaitForPodsReadyConfig()
        strategy = wait.requeuing_strategy
        count = requeue_count + 1
        if strategy.backoff_limit_count is not None and count > strategy.backoff_limit_count:
            return _deactivate(
                wl, "RequeuingLimitExceeded", "exceeding the maximum number of re-queuing retries", now_ms=now_ms
            )
        # requeueAt = now + min(base * 2^(count-1), max) seconds; Kueue adds a tiny random
        # jitter, left out here so that replay is exact.
        backoff_s = min(strategy.backoff_base_seconds * 2 ** (count - 1), strategy.backoff_max_seconds)
        message = f"Exceeded the PodsReady timeout {wl.key}"
        return [
            _eviction(
                wl,
                "PodsReadyTimeout",
                message,
                now_ms=now_ms,
                requeue_at_ms=now_ms + backoff_s * 1000,
                requeue_count=count,
            )
        ]
    limit = _execution_deadline(wl)
    if limit is not None and now_ms >= limit:
        return _deactivate(wl, "MaximumExecutionTimeExceeded", "exceeding the maximum execution time", now_ms=now_ms)
    return []


def _deactivate(wl: WorkloadState, cause: str, message: str, *, now_ms: int) -> list[types.Decision]:
    """Kueue's DeactivationTarget: spec.active=false and, while the workload holds quota (and is
    not being evicted already), an eviction ``DeactivatedDueTo<cause>`` (evict/evict.go)."""
    out: list[types.Decision] = [
        types.WorkloadDeactivated(workload=wl.ref, reason=cause, message=message, at_ms=now_ms)
    ]
    if wl.reservation is not None and wl.eviction is None:
        out.append(
            _eviction(wl, f"DeactivatedDueTo{cause}", f"The workload is deactivated due to {message}", now_ms=now_ms)
        )
    return out


def _pods_ready_deadline(wl: WorkloadState, config: models.Configuration) -> int | None:
    """When an admitted workload that is not PodsReady times out (ms), or None."""
    if not pods_ready_enabled(config) or (wl.pods_ready is not None and wl.pods_ready.ready):
        return None
    wait = config.wait_for_pods_ready or models.WaitForPodsReadyConfig()
    if wl.pods_ready is not None and wl.pods_ready.reason == "WaitForRecovery":
        text = wait.recovery_timeout if wait.recovery_timeout is not None else wait.timeout
        ms = _duration_ms(text)
        return None if ms is None else wl.pods_ready.at_ms + ms
    ms = _duration_ms(wait.timeout)
    return None if ms is None else wl.admitted_at_ms + ms


def _execution_deadline(wl: WorkloadState) -> int | None:
    limit = wl.workload.spec.maximum_execution_time_seconds
    if not limit:
        return None
    return wl.admitted_at_ms + limit * 1000 - wl.accumulated_ms


def _timed_due(state: ClusterState, now_ms: int) -> list[str]:
    """The ``timed`` workloads with a deadline at or before ``now_ms``, from the fold's
    deadline heaps (so a cycle looks only at the ones due, however many run)."""
    due: set[str] = set()
    for kind, (heap, offset) in enumerate(zip(state.timer_heaps, _offsets(state.configuration), strict=True)):
        if offset is None:
            continue
        valid: list[tuple[int, str]] = []
        while heap and heap[0][0] + offset <= now_ms:
            entry = heapq.heappop(heap)
            if _current(state, entry, kind):
                due.add(entry[1])
                valid.append(entry)
        for entry in valid:  # still theirs until a decision about them is folded
            heapq.heappush(heap, entry)
    return sorted(due)


def _current(state: ClusterState, entry: tuple[int, str], kind: int) -> bool:
    wl = state.workloads.get(entry[1])
    return wl is not None and wl.timer_basis is not None and wl.timer_basis[kind] == entry[0]


def _offsets(config: models.Configuration) -> tuple[int | None, int | None, int | None]:
    """Per TIMER_KINDS, what is added to a heap's basis to get its deadline (ms); None: off."""
    if not pods_ready_enabled(config):
        return None, None, 0
    wait = config.wait_for_pods_ready or models.WaitForPodsReadyConfig()
    timeout = _duration_ms(wait.timeout)
    recovery = _duration_ms(wait.recovery_timeout) if wait.recovery_timeout is not None else timeout
    return timeout, recovery, 0


@functools.lru_cache(maxsize=64)
def _duration_ms(text: str) -> int | None:
    """A Go duration in ms; None for ``0s`` (turned off)."""
    seconds = afs.go_duration_seconds(text)
    return int(seconds * 1000) if seconds > 0 else None


def next_timer_ms(state: ClusterState, *, partition: str, after_ms: int) -> int | None:
    """When the lifecycle of ``partition`` next has something to decide with no new fact, later than
    ``after_ms`` (ms), or None: the end of its next backoff, or its next PodsReady, recovery or
    maximum-execution-time deadline. A decider's loop wakes then (``runtime.Decider.wakes_at``), as
    Kueue's workload controller requeues its reconcile for the time left (workload_controller.go).

    ``partition``: what a cycle of it decides over: that partition's share of the fold
    (``state.partitions.parts``), or the whole state for the legacy ``p0``. Entries no longer current
    at the front of its deadline heaps are dropped (the cycle would drop them when due, deciding
    nothing: :func:`_timed_due`); a current one due by ``after_ms`` hides the heap's later ones, as its
    decision, once folded, brings another cycle, which asks again. Mutates those heaps only so."""
    part = state.partitions.parts.get(partition) if partition != partitions.LEGACY else None
    heaps, backoffs = (part.timer_heaps, part.backoffs) if part is not None else (state.timer_heaps, state.backoffs)
    found: int | None = None
    for kind, (heap, offset) in enumerate(zip(heaps, _offsets(state.configuration), strict=True)):
        if offset is None:
            continue
        while heap and not _current(state, heap[0], kind):
            heapq.heappop(heap)
        if heap and (due := heap[0][0] + offset) > after_ms and (found is None or due < found):
            found = due
    workloads = state.workloads
    for key in backoffs:
        wl = workloads.get(key)
        if wl is not None and (due := wl.requeue_at_ms) > after_ms and (found is None or due < found):
            found = due
    return found


def backoff_wakeup_ms(state: ClusterState) -> int | None:
    """When the next backoff ends (ms), or None: the only waits a scenario's settle sits out
    by itself (timeouts need the scenario's explicit ``wait`` event)."""
    return min((state.workloads[k].requeue_at_ms for k in state.backoffs if k in state.workloads), default=None)


def next_wakeup_ms(state: ClusterState) -> int | None:
    """When the lifecycle next has something to decide without any new fact (ms), or None: the
    end of the next backoff, or the next PodsReady or maximum-execution-time deadline (from the
    fold's deadline heaps; an entry no longer current still counts, so this may be early, never
    late). For a simulated clock (``kueue-es what-if``), which must wake the deciders then."""
    found = backoff_wakeup_ms(state)
    for heap, offset in zip(state.timer_heaps, _offsets(state.configuration), strict=True):
        if offset is not None and heap:
            due = heap[0][0] + offset
            found = due if found is None else min(found, due)
    return found
