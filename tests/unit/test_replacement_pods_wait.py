"""A pod group waiting for replacement pods is not queued (admitter logic 57, Kueue #12656 / PR #12768).

Kueue's IsAdmissible (pkg/workload/workload.go) refuses a Workload whose WaitingForReplacementPods condition is
True, so its queue manager never holds it: not admitted, not pending, not counted, until its group has its pods
again. The watcher says so on the log (``Workload.waiting_for_replacement_pods``); from the first admitter record
of logic 57 the fold keeps such a workload out of ``pending`` and its queue. A log whose admitter is logic 56 or
older folds it as it did (queued, so admitted again with no pods), so it replays as decided.
"""

from __future__ import annotations

import msgspec
import pytest

from kueue_es.events import types
from kueue_es.jobframework import jobs
from kueue_es.projections.cluster import REPLACEMENT_PODS_LOGIC
from kueue_es.services.admitter import core as admitter_core
from kueue_es.services.watcher import convert
from tests.integration.harness import cluster_queue, flavor, job, local_queue
from tests.integration.test_kueue_status import Log, at, released, reserved
from tests.unit.test_late_retry_reset import decision_record


def folded(logic: int, *, waiting: bool = True) -> tuple[Log, types.WorkloadRef, types.WorkloadObserved]:
    """A workload (2 x 1 CPU) that held quota (admitter logic ``logic``), was evicted and released, and is
    observed again, its pods lacking (``waiting``) or back."""
    manifest = job("sample", parallelism=2)
    manifest["metadata"] |= {"uid": "uid-sample", "creationTimestamp": "2026-01-01T00:00:00Z"}
    observed = jobs.job_facts(manifest)
    assert isinstance(observed, types.WorkloadObserved)
    meta = observed.workload.metadata
    ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
    lacking = types.WorkloadObserved(
        workload=msgspec.structs.replace(observed.workload, waiting_for_replacement_pods=waiting)
    )
    log = Log(
        convert.kueue_fact(flavor("default-flavor")),
        convert.kueue_fact(cluster_queue("cluster-queue")),
        convert.kueue_fact(local_queue("user-queue", "cluster-queue")),
        observed,
        decision_record(logic, 4),
        reserved(ref, 10),
        released(ref, "Preempted", 12),
        lacking,
    )
    return log, ref, observed


def reserves(decisions: list[types.Output], ref: types.WorkloadRef) -> bool:
    """Whether ``decisions`` reserve quota for (or admit) ``ref``."""
    every = [d for out in decisions for d in (out.all_decisions if isinstance(out, types.DecisionRecord) else [out])]
    return any(isinstance(d, types.QuotaReserved | types.WorkloadAdmitted) and d.workload == ref for d in every)


def test_a_group_waiting_for_replacement_pods_is_not_queued() -> None:
    """Logic 57: not pending, not in its LocalQueue, not reserved by a cycle."""
    log, ref, _ = folded(REPLACEMENT_PODS_LOGIC)
    state = log.view.cluster
    assert ref.key not in state.pending
    assert not state.queued.get(("default", "user-queue"))
    assert not reserves(admitter_core.decide(state, now_ms=at(20)), ref)


def test_it_is_queued_again_once_its_pods_are_back() -> None:
    """The next WorkloadObserved without the flag (replacement pods count) queues it, and a cycle admits it."""
    log, ref, observed = folded(REPLACEMENT_PODS_LOGIC)
    log.add(observed)
    state = log.view.cluster
    assert ref.key in state.pending
    assert reserves(admitter_core.decide(state, now_ms=at(20)), ref)


@pytest.mark.parametrize("logic", [56, 39])
def test_a_log_of_an_older_admitter_queues_it_as_it_did(logic: int) -> None:
    """A log whose admitter is logic 56 or older keeps it queued: that admitter admitted it again, pods or not."""
    assert logic in admitter_core.EARLIER_LOGIC_VERSIONS
    assert admitter_core.LOGIC_VERSION >= REPLACEMENT_PODS_LOGIC
    log, ref, _ = folded(logic)
    state = log.view.cluster
    assert ref.key in state.pending
    assert reserves(admitter_core.decide_as(logic)(state, now_ms=at(20)), ref)


def test_the_first_record_of_logic_57_takes_a_waiting_group_out_of_its_queue() -> None:
    """A workload flagged while the log's admitter was older leaves its queue with the first record of logic 57."""
    log, ref, _ = folded(56)
    assert ref.key in log.view.cluster.pending
    log.add(decision_record(REPLACEMENT_PODS_LOGIC, 20))
    assert ref.key not in log.view.cluster.pending
    assert not log.view.cluster.queued.get(("default", "user-queue"))
