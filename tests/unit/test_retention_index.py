"""What the dispatcher keeps for the retention policies (services/dispatcher/retention.py ``Retention``), from its fold.

The Workloads a rule in force will delete, with the time their period counts from (the Finished or Evicted
condition's lastTransitionTime as the dispatcher writes it), nothing while no rule is on, everything looked
at again when the Configuration turns a rule on or off, and the due ones in the order their period ends.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kueue_es.events import models, types
from kueue_es.jobframework import jobs
from kueue_es.scheduling.retention import Rule
from kueue_es.services.dispatcher import core, status
from kueue_es.services.dispatcher.retention import STALE_ENTRIES, Retention
from tests.integration.harness import job

T0 = 1_767_225_600_000
MINUTE = 60_000


class Fold:
    """A dispatcher's fold and its Retention, told of every event as the Dispatcher tells it."""

    def __init__(self) -> None:
        self.view = core.DispatchState()
        self.seq = 0
        fake: Any = SimpleNamespace(retired={})
        self.retention = Retention(
            view=self.view, stored=fake, workloads=fake, jobs=fake, recording=fake, bus=fake, clock=lambda: T0
        )

    def add(self, *events: types.Event) -> None:
        for event in events:
            self.seq += 1
            core.fold(self.view, event, seq=self.seq)
            if isinstance(event, types.ConfigurationObserved):
                self.retention.configured()
            elif (key := status.workload_key(event)) is not None:
                self.retention.touched(key)

    def configure(self, after_finished: str | None = None, after_deactivated: str | None = None) -> None:
        policy = models.WorkloadRetentionPolicy(
            after_finished=after_finished, after_deactivated_by_kueue=after_deactivated
        )
        self.add(
            types.ConfigurationObserved(
                configuration=models.Configuration(
                    object_retention_policies=models.ObjectRetentionPolicies(workloads=policy)
                )
            )
        )


def observed(name: str) -> types.WorkloadObserved:
    manifest = job(name)
    manifest["metadata"] |= {"uid": f"uid-{name}", "creationTimestamp": "2026-01-01T00:00:00Z"}
    fact = jobs.job_facts(manifest)
    assert isinstance(fact, types.WorkloadObserved)
    return fact


def ref_of(fact: types.WorkloadObserved) -> types.WorkloadRef:
    meta = fact.workload.metadata
    return types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)


def finished(ref: types.WorkloadRef, at_ms: int) -> types.WorkloadFinished:
    return types.WorkloadFinished(workload=ref, message="Job finished successfully", at_ms=at_ms)


def test_nothing_is_kept_while_no_rule_is_on_and_all_once_one_is() -> None:
    fold = Fold()
    a, b = observed("a"), observed("b")
    fold.add(a, b, finished(ref_of(a), T0 + MINUTE), finished(ref_of(b), T0))
    assert fold.retention.kept == {}

    fold.configure(after_finished="1m")  # turned on: every workload of the fold looked at
    assert fold.retention.kept == {
        ref_of(a).key: (Rule.FINISHED, T0 + MINUTE, "uid-a"),
        ref_of(b).key: (Rule.FINISHED, T0, "uid-b"),
    }
    policy = fold.retention.policy
    assert fold.retention.next_due_ms(policy) == T0 + MINUTE
    assert fold.retention.due(policy, now_ms=T0 + MINUTE - 1) == []
    due = fold.retention.due(policy, now_ms=T0 + 2 * MINUTE)
    assert [key for key, _ in due] == [ref_of(b).key, ref_of(a).key]  # the longest due first

    fold.configure(after_deactivated="1m")  # afterFinished off: nothing finished is kept
    assert fold.retention.kept == {}


def test_a_workload_deactivated_by_kueue_counts_from_its_eviction_and_goes_when_deleted() -> None:
    fold = Fold()
    fold.configure(after_deactivated="30s")
    c = observed("c")
    ref = ref_of(c)
    fold.add(c)
    assert fold.retention.kept == {}
    fold.add(types.WorkloadDeactivated(workload=ref, reason="AdmissionCheck", message="rejected", at_ms=T0 + 5_000))
    assert fold.retention.kept == {ref.key: (Rule.DEACTIVATED, T0 + 5_000, "uid-c")}
    fold.add(types.ObjectDeleted(kind="Workload", namespace=ref.namespace, name=ref.name, uid=ref.uid))
    assert fold.retention.kept == {}
    assert fold.retention.due(fold.retention.policy, now_ms=T0 + MINUTE) == []  # its entry is skipped


def test_a_heap_of_entries_no_longer_kept_is_rebuilt() -> None:
    fold = Fold()
    fold.configure(after_finished="1h")
    refs = []
    for index in range(STALE_ENTRIES + 10):
        fact = observed(f"w{index}")
        refs.append(ref_of(fact))
        fold.add(fact, finished(refs[-1], T0 + index))
    for ref in refs[:-1]:  # all but one deleted before their period ended
        fold.add(types.ObjectDeleted(kind="Workload", namespace=ref.namespace, name=ref.name, uid=ref.uid))
    last = observed("last")
    fold.add(last, finished(ref_of(last), T0))
    heap = fold.retention._heaps[Rule.FINISHED]
    assert len(fold.retention.kept) == 2
    assert len(heap) <= 2 * len(fold.retention.kept) + STALE_ENTRIES
