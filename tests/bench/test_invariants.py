"""The chaos bench's invariant checker on hand-made logs: a clean one passes, and each invariant
broken on its own is caught (kueue_es/perfbench/invariants.py)."""

from __future__ import annotations

import yaml

from kueue_es import deciders
from kueue_es.events import subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.perfbench import generator, invariants
from kueue_es.projections import quota
from kueue_es.replay import Mismatch, Orphan, ReplayReport
from kueue_es.services.runtime import build_batch, workload_subject
from tests.bench.configs import TINY

ADMIT = deciders.BY_ROLE["admit"]


class HandLog:
    """TINY's objects (one ClusterQueue of 2 CPUs in cohort co-0, borrowingLimit 0) and its four
    workloads (three of 1 CPU, one of 2) as facts, then whatever a test appends."""

    def __init__(self) -> None:
        generated = generator.generate(generator.parse_config(yaml.safe_load(TINY)))
        self.flavor = generated.flavor.name
        self.planned = generated.planned()
        self.messages: list[LogMessage] = []
        self.head = 0
        for fact in generator.object_facts(generated, now_ms=1_000):
            self.fact(fact)
        for i, planned in enumerate(self.planned):
            self.fact(generator.workload_fact(planned, uid=f"wl-{i}", now_ms=2_000))

    @property
    def keys(self) -> list[str]:
        return [f"{p.namespace}/{p.name}" for p in self.planned]

    def ref(self, i: int) -> types.WorkloadRef:
        planned = self.planned[i]
        return types.WorkloadRef(namespace=planned.namespace, name=planned.name, uid=f"wl-{i}")

    def _append(self, message: OutgoingMessage) -> None:
        headers = {**message.headers, "Nats-Msg-Id": message.msg_id}
        seq = len(self.messages) + 1
        self.messages.append(LogMessage(seq=seq, subject=message.subject, data=message.data, headers=headers))

    def fact(self, fact: types.Fact) -> None:
        self._append(subjects.fact_message(fact, version=str(len(self.messages))))

    def batch(self, *outputs: types.Decision) -> None:
        """One admitter batch at the end of the log (complete, digest right)."""
        head, rest = build_batch(
            ADMIT, outputs=list(outputs), basis_seq=len(self.messages), head_seq=self.head, now_ms=3_000
        )
        self.head = len(self.messages) + 1
        for message in (head, *rest):
            self._append(message)

    def reserve(self, i: int, *, cpu_m: int | None = None) -> types.QuotaReserved:
        planned = self.planned[i]
        return types.QuotaReserved(
            workload=self.ref(i),
            cluster_queue=planned.cluster_queue,
            pod_set_assignments=[
                types.PodSetAssignment(
                    name="main",
                    flavors={"cpu": self.flavor},
                    resource_usage={"cpu": planned.request_m if cpu_m is None else cpu_m},
                    count=1,
                )
            ],
            at_ms=3_000,
        )

    def admit(self, i: int) -> types.WorkloadAdmitted:
        return types.admitted(self.reserve(i), at_ms=3_000)

    def release(self, i: int) -> types.QuotaReleased:
        cq = self.planned[i].cluster_queue
        return types.QuotaReleased(workload=self.ref(i), cluster_queue=cq, reason="Finished", cause_seq=1, at_ms=4_000)

    def run(self, i: int) -> None:
        """Workload ``i`` reserved and admitted, finished, released: all clean."""
        self.batch(self.reserve(i), self.admit(i))
        self.finish(i)
        self.batch(self.release(i))

    def finish(self, i: int) -> None:
        self.fact(types.WorkloadFinished(workload=self.ref(i), at_ms=3_500))

    def check(self, *, expected: list[str] | None = None) -> list[invariants.Violation]:
        checker = invariants.InvariantChecker(expected=self.keys if expected is None else expected)
        for message in self.messages:
            checker.feed(message)
        return checker.finish(last_seq=len(self.messages))


def kinds(violations: list[invariants.Violation]) -> list[str]:
    return [v.kind for v in violations]


def test_a_clean_log_has_no_violation() -> None:
    log = HandLog()
    log.batch(log.reserve(0), log.admit(0), log.reserve(1), log.admit(1))  # 2 of 2 CPUs: full, not over
    log.finish(0)
    log.finish(1)
    log.batch(log.release(0), log.release(1))
    log.run(2)
    log.run(3)
    checker = invariants.InvariantChecker(expected=log.keys)
    for message in log.messages:
        checker.feed(message)
    assert checker.finish() == []
    assert checker.batches_folded == 6  # two, then two for each run()


def test_a_workload_that_never_finished_and_one_never_observed_are_caught() -> None:
    log = HandLog()
    log.run(0)
    log.run(1)
    log.run(2)  # the big one, 3, never runs
    violations = log.check(expected=[*log.keys, "q-0-0-co-0/ghost"])
    assert kinds(violations) == ["unfinished", "unfinished"]
    assert f"workload {log.keys[3]} (observed #" in violations[0].detail and "never finished" in violations[0].detail
    assert violations[1].detail == "workload q-0-0-co-0/ghost was never observed on the log"


def test_without_expected_keys_every_observed_workload_must_finish() -> None:
    log = HandLog()
    for i in range(3):
        log.run(i)
    assert kinds(log.check(expected=[])) == ["unfinished"]


def test_a_reservation_while_holding_quota_is_caught_even_though_the_fold_ignores_it() -> None:
    log = HandLog()
    log.batch(log.reserve(0))
    log.batch(log.reserve(0))  # again, no QuotaReleased between
    second = len(log.messages)
    log.batch(log.admit(0))
    log.finish(0)
    log.batch(log.release(0))
    for i in (1, 2, 3):
        log.run(i)
    [violation] = log.check()
    assert violation.kind == "double_reservation"
    assert violation.seq == second
    assert "while holding the quota of q-0-0-co-0 reserved at #" in violation.detail


def test_a_reservation_after_a_release_is_no_double_reservation() -> None:
    log = HandLog()
    log.batch(log.reserve(0))
    log.batch(log.release(0))  # evicted and released
    log.run(0)  # reserved again
    for i in (1, 2, 3):
        log.run(i)
    assert log.check() == []


def test_quota_over_used_at_a_batch_end_is_caught_on_the_cluster_queue_and_its_cohort() -> None:
    log = HandLog()
    log.batch(log.reserve(0), log.reserve(1), log.reserve(2))  # 3 CPUs in a queue of 2, borrowingLimit 0
    end = len(log.messages)
    for i in (0, 1, 2):
        log.finish(i)
    log.batch(log.release(0), log.release(1), log.release(2))
    log.run(3)
    violations = log.check()
    assert kinds(violations) == ["quota_overused", "quota_overused"]
    assert {v.seq for v in violations} == {end}
    cq, cohort = sorted(v.detail for v in violations)
    assert cq == "ClusterQueue q-0-0-co-0 holds 3000 of rf/cpu, more than its quota 2000 + borrowingLimit 0 (2000)"
    assert cohort == "cohort co-0 holds 3000 of rf/cpu, more than its subtree quota (2000)"


def test_a_usage_within_the_quota_only_at_the_batch_end_is_not_over_used() -> None:
    """Quota is checked at batch ends: a batch that releases before it reserves stays within it."""
    log = HandLog()
    log.batch(log.reserve(0), log.reserve(1))
    log.finish(0)
    log.batch(log.release(0), log.reserve(2))
    for i in (1, 2):
        log.finish(i)
    log.batch(log.release(1), log.release(2))
    log.run(3)
    assert log.check() == []


def test_a_decision_outside_any_batch_and_a_batch_the_log_ends_inside_are_orphans() -> None:
    log = HandLog()
    for i in range(4):
        log.run(i)
    stray = types.WorkloadAdmitted(workload=log.ref(0), cluster_queue=log.planned[0].cluster_queue, at_ms=5_000)
    log._append(subjects.message(stray, subject=workload_subject(stray, "p0"), msg_id="rogue:1"))
    stray_seq = len(log.messages)
    head, rest = build_batch(  # the layout before event schema 17, whose outputs follow their record
        ADMIT, outputs=[log.admit(1), log.admit(2)], basis_seq=stray_seq, head_seq=0, now_ms=1, schema_version=16
    )
    log._append(head)
    log._append(rest[0])  # the second output never comes
    violations = log.check()
    assert kinds(violations) == ["orphan_decision"] * 3  # the stray, then the incomplete batch whole
    assert [v.seq for v in violations] == [stray_seq, stray_seq + 1, stray_seq + 2]
    assert "outside_batch" in violations[0].detail
    assert all("batch_incomplete" in v.detail for v in violations[1:])


def test_quota_still_held_at_the_end_is_caught() -> None:
    log = HandLog()
    for i in range(3):
        log.run(i)
    log.batch(log.reserve(3), log.admit(3))
    log.finish(3)  # finished, but its quota is never released
    [violation] = log.check()
    assert violation.kind == "quota_held_at_end"
    assert violation.detail.startswith(f"workload {log.keys[3]} still holds the quota of q-0-0-co-0")


def test_every_replay_finding_is_a_violation() -> None:
    report = ReplayReport(
        decisions=3,
        matched=1,
        mismatches=[Mismatch(decision_id="admit:p0:5", head_seq=6, basis_seq=5, index=1, stored="a", replayed="b")],
        gaps=[(10, 12)],
        orphans=[Orphan(seq=20, subject="kq.dec.p0.wl.ns.x", type="QuotaReserved", why="no DecisionRecord covers it")],
    )
    violations = invariants.replay_violations(report)
    assert kinds(violations) == ["replay"] * 3
    assert [v.seq for v in violations] == [7, 10, 20]
    assert invariants.replay_violations(ReplayReport()) == []


def test_overuse_leaves_a_node_with_a_parent_and_no_borrowing_limit_to_its_root() -> None:
    root = quota.Node(name="co", is_cohort=True, subtree={("f", "cpu"): 4_000}, usage={("f", "cpu"): 3_000})
    cq = quota.Node(
        name="cq",
        is_cohort=False,
        quotas={("f", "cpu"): quota.Quota(nominal=1_000)},
        parent=root,
        subtree={("f", "cpu"): 1_000},
        usage={("f", "cpu"): 3_000},  # borrows 2 CPUs: no limit but the cohort's
    )
    assert invariants.overuse(cq) == [] and invariants.overuse(root) == []
    root.usage[("f", "cpu")] = 4_001
    assert invariants.overuse(root) == ["cohort co holds 4001 of f/cpu, more than its subtree quota (4000)"]


def test_summary_lists_the_first_of_each_kind_and_counts_the_rest() -> None:
    violations = [invariants.Violation(kind="unfinished", seq=0, detail=f"w{i}") for i in range(12)]
    lines = invariants.summary(violations, shown=2)
    assert lines == ["unfinished at the end: w0", "unfinished at the end: w1", "unfinished: ... and 10 more"]
