"""Admitter logic 39, with 38 kept for replay.

Kueue's workload controller evicts every workload whose ``spec.active`` is false (workload_controller.go
Reconcile: Evicted ``Deactivated`` "The workload is deactivated", the Event ``EvictedDueToDeactivated`` and
``evicted_workloads_total`` through workload/evict/evict.go Evict). A Workload of no job has no job
reconciler to clear its reservation once it is evicted: it keeps its quota until whoever plays its job
clears QuotaReserved (Kueue's tests: util.FinishEvictionForWorkloads; kueue-es's watcher: a WorkloadStopped).
Logic 38 released such a workload's quota at once with no eviction, so the log had no Evicted step and the
eviction went uncounted.
"""

from __future__ import annotations

from kueue_es.events import types
from kueue_es.services.admitter import core as admitter
from tests.builders import Log, cluster_queue, flavor, local_queue, workload


def _admitted_then_deactivated() -> tuple[Log, types.WorkloadRef]:
    log = Log()
    log.apply_manifests(
        flavor("default"), cluster_queue("cq", flavors={"default": {"cpu": "4"}}), local_queue("lq", "cq")
    )
    log.apply_manifests(workload("handmade", cpu="2"))
    admitted = log.settle(1_000)
    assert any(isinstance(d, types.WorkloadAdmitted) for d in admitted)
    inactive = workload("handmade", cpu="2")
    inactive["spec"]["active"] = False
    log.apply_manifests(inactive)
    return log, log.state.workloads["default/handmade"].ref


def test_admitter_39_evicts_a_jobless_workload_first_and_38_released_it() -> None:
    log, ref = _admitted_then_deactivated()
    assert log.state.workloads[ref.key].workload.owner is None
    earlier = admitter.decide_as(38)(log.state, now_ms=2_000)
    assert [(type(o).__name__, getattr(o, "reason", "")) for o in earlier] == [("QuotaReleased", "Deactivated")]
    now = log.cycle(2_000)
    assert len(now) == 1 and isinstance(now[0], types.EvictionRequested)
    assert (now[0].reason, now[0].message) == ("Deactivated", "The workload is deactivated")
    assert log.state.workloads[ref.key].reservation is not None  # the quota stays held while it is not stopped
    assert log.cycle(3_000) == []  # evicted once
    log.add(types.WorkloadStopped(workload=ref, reason="Deactivated", at_ms=4_000))  # QuotaReserved cleared
    released = log.cycle(5_000)
    assert [(type(o).__name__, getattr(o, "reason", "")) for o in released] == [("QuotaReleased", "Deactivated")]
    assert log.state.workloads[ref.key].reservation is None
    assert admitter.LOGIC_VERSION >= 39 and 38 in admitter.EARLIER_LOGIC_VERSIONS


def test_the_eviction_is_counted_as_kueue_counts_it() -> None:
    log, _ = _admitted_then_deactivated()
    log.cycle(2_000)
    counted = log.state.metrics.counters.get("kueue_evicted_workloads_total", {})
    assert any(key[0] == "cq" and key[1] == "Deactivated" and value == 1 for key, value in counted.items())
