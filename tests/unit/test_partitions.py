"""Decision partitions by cohort tree (issue 18): ids, moves, the fence, the fold's partition rule.

Every log here is folded as a service folds it (``runtime.fold_message``: the batch verifier with
the fold's partition rule), and decided by the production deciders per partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from kueue_es import checkpoints, deciders
from kueue_es.events import codec, subjects, types
from kueue_es.projections.partitions import LEGACY, UNROUTED, Partitions
from kueue_es.replay import check_log, summary
from kueue_es.services.runtime import Decider, build_batch
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import FoldedLog, cluster_queue, flavor, local_queue, reservations, workload

NOW = 1_796_000_000_000


def cq(name: str, cohort: str | None = None, *, flavors: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    doc = cluster_queue(name, flavors=flavors or {"f": {"cpu": 4}})
    if cohort:
        doc["spec"]["cohortName"] = cohort
    return doc


def cohort(name: str, parent: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": {"parentName": parent} if parent else {},
    }


def tas_flavor(name: str) -> dict[str, Any]:
    doc = flavor(name)
    doc["spec"]["topologyName"] = "topo"
    return doc


def ref(name: str) -> types.WorkloadRef:
    return types.WorkloadRef(namespace="default", name=name, uid=f"uid-{name}")


class PLog(FoldedLog):
    """An in-memory log folded as every service folds it, with per-partition commits."""

    def __init__(self, *docs: dict[str, Any], schema_version: int = types.SCHEMA_VERSION) -> None:
        super().__init__()
        self.schema_version = schema_version  # the event schema its batches are written in (16: one message each)
        self.facts(*docs)

    def facts(self, *docs: dict[str, Any]) -> int:
        """Log each manifest's fact; the sequence of the last."""
        return self.append(*(subjects.fact_message(kueue_fact(doc)) for doc in docs))

    def delete(self, kind: str, name: str, namespace: str = "") -> int:
        return self.append(subjects.fact_message(types.ObjectDeleted(kind=kind, namespace=namespace, name=name)))

    def commit(
        self,
        outputs: Sequence[types.Output],
        partition: str,
        *,
        decider: Decider = deciders.ADMITTER,
        basis_seq: int | None = None,
    ) -> int:
        """Commit ``outputs`` as ``partition``'s batch (basis: the fold now, unless given); the record's seq."""
        head, rest = build_batch(
            decider,
            outputs=list(outputs),
            basis_seq=self.state.last_seq if basis_seq is None else basis_seq,
            head_seq=self.state.heads.get(partition, 0),
            now_ms=NOW,
            partition=partition,
            schema_version=self.schema_version,
        )
        seq = len(self.messages) + 1
        self.append(head, *rest)
        return seq

    def decide(self, partition: str, decider: Decider = deciders.ADMITTER) -> list[types.Output]:
        return list(decider.decide(self.state, now_ms=NOW, partition=partition))

    def cycle(self, partition: str, decider: Decider = deciders.ADMITTER) -> list[types.Output]:
        """Decide ``partition`` and commit it (an empty record too when it owes a fence)."""
        outputs = self.decide(partition, decider)
        if outputs or self.state.partitions.fence_needed(partition) is not None:
            self.commit(outputs, partition, decider=decider)
        return outputs


def reserved_keys(outputs: Sequence[types.Output]) -> set[str]:
    return {o.workload.key for o in reservations(outputs)}


# --- partition ids ------------------------------------------------------------------------------


def test_a_partition_is_a_cohort_tree_with_implicit_cohorts_and_lone_queues() -> None:
    log = PLog(
        flavor("f"),
        cohort("y", parent="x"),  # x has no Cohort object: an implicit root
        cq("a", "x"),
        cq("b", "y"),
        cq("c"),
        cq("d", "z"),  # an implicit cohort of its own
        cq("e", "my.team"),
    )
    parts = log.state.partitions
    assert [parts.of_cluster_queue(n) for n in "abcde"] == ["c-x", "c-x", "q-c", "c-z", "c-my%2Eteam"]
    assert parts.members("c-x") == {"a", "b"}
    assert parts.of_cohort(log.state, "y") == "c-x"
    assert parts.all() == ["c-my%2Eteam", "c-x", "c-z", "q-c"]
    assert parts.of_cluster_queue("nope") is None


def test_trees_sharing_the_tas_node_pool_are_one_partition() -> None:
    log = PLog(
        flavor("plain"),
        tas_flavor("tas"),
        cq("p", "m", flavors={"tas": {"cpu": 4}}),
        cq("s", "m"),  # not TAS itself, but in a TAS ClusterQueue's tree
        cq("q", "k", flavors={"tas": {"cpu": 4}}),
        cq("r", flavors={"plain": {"cpu": 4}}),
        cq("t", flavors={"tas": {"cpu": 1}}),
    )
    parts = log.state.partitions
    assert {n: parts.of_cluster_queue(n) for n in "pqrst"} == {
        "p": "c-k",
        "q": "c-k",
        "r": "q-r",
        "s": "c-k",
        "t": "c-k",  # "c-k" < "c-m" < "q-t": the smallest tree id names the component
    }
    # the flavor loses its topology: the trees part
    doc = flavor("tas")
    seq = log.facts(doc)
    assert {n: parts.of_cluster_queue(n) for n in "pqst"} == {"p": "c-m", "q": "c-k", "s": "c-m", "t": "q-t"}
    assert seq > 0


def test_a_workload_goes_where_its_queue_or_its_quota_is_else_unrouted() -> None:
    log = PLog(
        flavor("f"),
        cq("a"),
        local_queue("la", "a"),
        local_queue("lnowhere", "missing"),
        workload("w1", queue="la", cpu="1"),
        workload("w3", queue="nope", cpu="1"),
        workload("w4", queue="lnowhere", cpu="1"),
    )
    parts = log.state.partitions
    assert parts.of_workload("default/w1") == "q-a"
    assert [parts.of_workload(f"default/w{i}") for i in (3, 4)] == [UNROUTED] * 2
    assert parts.of_workload("default/ghost") is None
    # the unrouted workloads still get their reasons, decided in the unrouted partition
    unrouted = log.cycle(UNROUTED)
    assert {o.workload.key for o in unrouted} == {"default/w3", "default/w4"}
    assert all(isinstance(o, types.WorkloadInadmissible) for o in unrouted)
    assert reserved_keys(log.cycle("q-a")) == {"default/w1"}
    assert log.orphans == []


# --- moves, transit and fence ----------------------------------------------------------------------


def test_a_merge_hands_the_moved_workloads_over_behind_a_fence() -> None:
    log = PLog(flavor("f"), cq("a", "x"), cq("b"), local_queue("lb", "b"), workload("w", queue="lb", cpu="1"))
    parts = log.state.partitions
    assert parts.of_workload("default/w") == "q-b"
    log.cycle("q-b")  # parked? no: it fits; admit it, then finish nothing: w holds quota in b
    assert log.state.workloads["default/w"].reservation is not None
    log.facts(workload("v", queue="lb", cpu="100"))  # never fits: stays pending in q-b
    assert parts.of_workload("default/v") == "q-b"
    moved_at = log.facts(cq("b", "x"))  # b joins x's tree: the trees merge
    assert parts.of_cluster_queue("b") == "c-x"
    assert parts.of_workload("default/v") == "c-x" and parts.of_workload("default/w") == "c-x"
    assert parts.fence_needed("q-b") == moved_at
    assert parts.blocked("c-x") and not parts.blocked("q-b")
    assert "q-b" in parts.all()  # it has no ClusterQueue left, but owes a fence
    assert parts.fencing() == ["q-b"]
    # B (c-x) decides nothing while the hand-over waits; A (q-b) no longer holds the workloads
    assert log.decide("c-x") == []
    assert log.decide("q-b") == []
    log.cycle("q-b")  # the fence: an empty record of q-b with a basis after the move
    assert parts.fence_needed("q-b") is None and not parts.blocked("c-x")
    assert "q-b" not in parts.all()
    assert parts.fencing() == []
    decided = log.decide("c-x")
    assert {o.workload.key for o in decided} == {"default/v"}  # B now decides the moved workload
    assert log.orphans == []


def test_a_split_fences_the_old_tree_and_blocks_the_new_one() -> None:
    log = PLog(
        flavor("f"),
        cohort("y", parent="x"),
        cq("a", "x"),
        cq("b", "y"),
        local_queue("lb", "b"),
        workload("w", queue="lb", cpu="100"),
    )
    parts = log.state.partitions
    assert parts.of_workload("default/w") == "c-x"
    log.cycle("c-x")
    moved_at = log.facts(cohort("y"))  # y leaves x: a tree of its own
    assert parts.of_cluster_queue("b") == "c-y" and parts.of_cluster_queue("a") == "c-x"
    assert parts.of_workload("default/w") == "c-y"
    assert parts.fence_needed("c-x") == moved_at and parts.blocked("c-y")
    assert set(log.state.transits) == {"cq:b", "cohort:y", "wl:default/w"}
    assert log.decide("c-y") == []
    log.cycle("c-x")
    assert not parts.blocked("c-y")
    assert [o.workload.key for o in log.decide("c-y")] == ["default/w"]


def test_a_re_pointed_local_queue_moves_its_pending_workloads_not_those_holding_quota() -> None:
    log = PLog(
        flavor("f"),
        cq("a"),
        cq("b"),
        local_queue("l", "a"),
        workload("held", queue="l", cpu="1"),
    )
    parts = log.state.partitions
    log.cycle("q-a")
    log.facts(workload("waiting", queue="l", cpu="100"))
    moved_at = log.facts(local_queue("l", "b"))
    assert parts.of_workload("default/waiting") == "q-b"
    assert parts.of_workload("default/held") == "q-a"  # its quota is in a
    assert parts.fence_needed("q-a") == moved_at and parts.blocked("q-b")
    assert log.state.transits == {"wl:default/waiting": ("q-a", moved_at, "q-b")}


def test_a_workload_moved_back_before_the_fence_needs_no_hand_over() -> None:
    log = PLog(flavor("f"), cq("a"), cq("b"), local_queue("l", "a"), workload("w", queue="l", cpu="100"))
    parts = log.state.partitions
    log.facts(local_queue("l", "b"))
    assert parts.blocked("q-b")
    log.facts(local_queue("l", "a"))
    assert not parts.blocked("q-b") and parts.fence_needed("q-a") is None
    assert log.state.transits == {}


def test_a_new_queue_routes_unrouted_workloads_through_a_fence() -> None:
    log = PLog(flavor("f"), workload("w", queue="l", cpu="1"))
    parts = log.state.partitions
    assert parts.of_workload("default/w") == UNROUTED
    log.cycle(UNROUTED)  # its reason: no such LocalQueue
    log.facts(cq("a"))
    moved_at = log.facts(local_queue("l", "a"))
    assert parts.of_workload("default/w") == "q-a" and parts.fence_needed(UNROUTED) == moved_at
    assert log.decide("q-a") == []
    log.cycle(UNROUTED)
    assert reserved_keys(log.cycle("q-a")) == {"default/w"}
    assert log.orphans == []


def test_a_p0_record_releases_every_transit() -> None:
    log = PLog(flavor("f"), cq("a"), cq("b"), local_queue("l", "a"), workload("w", queue="l", cpu="100"))
    log.facts(local_queue("l", "b"))
    assert log.state.partitions.blocked("q-b")
    log.commit(log.decide(LEGACY), LEGACY)
    assert not log.state.partitions.blocked("q-b")


# --- the fold's partition rule ---------------------------------------------------------------------


@pytest.mark.parametrize("schema", [16, types.SCHEMA_VERSION])
def test_a_batch_deciding_another_partitions_workload_is_an_orphan(schema: int) -> None:
    """Schema 16: the record and its output message are orphans each; since 17 the record carries the
    forged decision and is one orphan, refused by the same rule."""
    log = PLog(
        flavor("f"),
        cq("a"),
        cq("b"),
        local_queue("la", "a"),
        local_queue("lb", "b"),
        workload("w", queue="lb", cpu="1"),
        schema_version=schema,
    )
    forged = types.QuotaReserved(
        workload=ref("w"),
        cluster_queue="b",
        pod_set_assignments=[
            types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage={"cpu": 1000}, count=1)
        ],
        at_ms=NOW,
    )
    # on q-a's own subjects, so the batch is well formed: only the partition rule refuses it
    record_seq = log.commit([forged], "q-a")
    forged_seqs = [record_seq] if schema >= 17 else [record_seq, record_seq + 1]  # its output message before 17
    assert [(o.seq, o.reason) for o in log.orphans] == [(seq, "wrong_partition") for seq in forged_seqs]
    assert "default/w is in partition q-b" in log.orphans[0].detail
    assert log.state.workloads["default/w"].reservation is None
    assert "q-a" not in log.state.heads
    # the same decision in its own partition is folded
    log.commit([forged], "q-b")
    assert log.state.workloads["default/w"].reservation is not None
    # replay reports the forged batch as orphans, never as a mismatch
    report = check_log(log.messages, deciders.BY_ROLE)
    assert {o.seq for o in report.orphans} == set(forged_seqs)


@pytest.mark.parametrize("schema", [16, types.SCHEMA_VERSION])
def test_the_source_may_decide_a_moved_workload_only_on_a_basis_before_the_move(schema: int) -> None:
    docs = (flavor("f"), cq("a"), cq("b"), local_queue("l", "a"), workload("w", queue="l", cpu="1"))
    log = PLog(*docs, schema_version=schema)
    before = log.state.last_seq
    decided = log.decide("q-a")  # A's cycle on the view before the move ...
    moved_at = log.facts(local_queue("l", "b"))
    assert log.state.partitions.fence_needed("q-a") == moved_at
    log.commit(decided, "q-a", basis_seq=before)  # ... committed after it: still A's to decide
    assert log.orphans == [] and log.state.workloads["default/w"].reservation is not None
    # holding quota in a, it is a's again: nothing left to hand over
    assert log.state.partitions.of_workload("default/w") == "q-a"
    assert log.state.partitions.fence_needed("q-a") is None and log.state.transits == {}

    log2 = PLog(*docs, schema_version=schema)
    decided = log2.decide("q-a")
    log2.facts(local_queue("l", "b"))
    log2.commit(decided, "q-a")  # a basis after the move: A may no longer decide it
    assert {o.reason for o in log2.orphans} == {"wrong_partition"}
    log2.commit(decided, "q-b")  # nor may B while it is in transit (A's fence not folded)
    # both batches whole: since schema 17 a record carrying its decisions, before that record and outputs
    assert len(log2.orphans) == 2 * (1 if schema >= 17 else 1 + len(decided))
    assert all(".head." in o.subject for o in log2.orphans) == (schema >= 17)
    assert {o.reason for o in log2.orphans} == {"wrong_partition"}
    assert "in transit into q-b" in log2.orphans[-1].detail
    assert log2.state.workloads["default/w"].reservation is None


def test_partitioned_records_must_follow_the_last_p0_record_and_p0_must_follow_them() -> None:
    log = PLog(flavor("f"), cq("a"), local_queue("l", "a"), workload("w", queue="l", cpu="100"))
    early = log.state.last_seq
    log.commit(log.decide(LEGACY), LEGACY)
    log.commit([], "q-a", basis_seq=early)
    assert [o.reason for o in log.orphans] == ["wrong_partition"]
    assert "before the last p0 record" in log.orphans[0].detail
    log.commit([], "q-a")
    assert log.state.heads["q-a"] > 0
    log.commit([], LEGACY, basis_seq=early + 1)
    assert [o.reason for o in log.orphans] == ["wrong_partition"] * 2


# --- replay, checkpoints --------------------------------------------------------------------------


def test_a_partitioned_log_replays_every_record_and_checks_each_chain() -> None:
    log = PLog(
        flavor("f"),
        cq("a", "x"),
        cq("b"),
        cq("c"),
        local_queue("la", "a"),
        local_queue("lb", "b"),
        local_queue("lc", "c"),
        *(workload(f"w{i}", queue=f"l{'abc'[i % 3]}", cpu="2", created=i) for i in range(9)),
    )
    for _ in range(2):
        for partition in log.state.partitions.all():
            log.cycle(partition)
    log.facts(cq("b", "x"))  # a merge: q-b fences, c-x waits
    for _ in range(3):
        for partition in log.state.partitions.all():
            log.cycle(partition)
    records = [m for m in log.messages if subjects.head_token(m.subject) is not None]
    assert {codec.decode(m.data).partition for m in records} >= {"c-x", "q-b", "q-c"}  # type: ignore[union-attr]
    assert log.orphans == []
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.mismatches == [] and report.orphans == [] and report.matched == len(records)
    by_partition: dict[str, int] = {}
    for m in records:
        p = codec.decode(m.data).partition  # type: ignore[union-attr]
        by_partition[p] = by_partition.get(p, 0) + 1
    assert report.partition_records == by_partition == report.partition_matched
    printed = [line for line, _ in summary(report)]
    for p, count in by_partition.items():  # the summary says per partition: records, decisions matched
        assert f"  partition {p}: {count} record{'' if count == 1 else 's'}, {count} matched" in printed
    # a record that does not name its partition's last record breaks the chain
    at = next(n for n, m in enumerate(log.messages) if m.seq == records[-1].seq)
    record = codec.decode(log.messages[at].data)
    assert isinstance(record, types.DecisionRecord) and record.expected_head_seq > 0
    forged = msgspec.structs.replace(record, expected_head_seq=record.expected_head_seq - 1)
    messages = list(log.messages)
    messages[at] = msgspec.structs.replace(messages[at], data=codec.encode(forged))
    report = check_log(messages, deciders.BY_ROLE)
    assert [m.head_seq for m in report.mismatches] == [records[-1].seq]
    assert "is not the last record of partition" in report.mismatches[0].reason
    p = record.partition
    plural = "" if by_partition[p] == 1 else "s"
    assert f"  partition {p}: {by_partition[p]} record{plural}, {by_partition[p] - 1} matched" in [
        line for line, _ in summary(report)
    ]


def test_a_checkpoint_keeps_the_transits_and_rebuilds_the_partitions() -> None:
    log = PLog(flavor("f"), cq("a"), cq("b"), local_queue("l", "a"), workload("w", queue="l", cpu="100"))
    moved_at = log.facts(local_queue("l", "b"))
    loaded = checkpoints.loads(checkpoints.dumps(log.state))
    parts: Partitions = loaded.partitions
    assert parts.fence_needed("q-a") == moved_at and parts.blocked("q-b")
    assert parts.of_workload("default/w") == "q-b" and parts.members("q-b") == {"b"}
    assert checkpoints.state_digest(loaded) == checkpoints.state_digest(log.state)
    assert loaded.batches.judge is not None


def test_a_partitions_view_holds_only_what_its_cycle_walks() -> None:
    docs: list[dict[str, Any]] = [flavor("f")]
    for i in range(30):
        docs += [cq(f"q{i}"), local_queue(f"l{i}", f"q{i}")]
        docs += [workload(f"w{i}-{j}", queue=f"l{i}", cpu="100") for j in range(2)]
    log = PLog(*docs)
    log.cycle("q-q7")  # parks both: a cycle's caches are made
    view = log.state.partitions.view(log.state, "q-q7")
    assert list(view.cluster_queues) == ["q7"] and list(view.local_queues) == [("default", "l7")]
    assert list(view.queued) == [("default", "l7")]
    assert sorted(view.workloads) == ["default/w7-0", "default/w7-1"]
    assert list(view.quota_tree.cluster_queues) == ["q7"]  # type: ignore[union-attr]
    assert view.quota_tree.tree is log.state.quota_tree  # type: ignore[union-attr]  # usage is shared
    assert len(log.state.workloads) == 60 and len(log.state.queued) == 30
