"""Per-partition decisions are the whole-state decisions restricted to the partition (issue 18).

Hypothesis draws a cluster of disjoint cohort trees (a lone ClusterQueue, or a cohort of 1-3
ClusterQueues, sometimes under a Cohort object with a parent), one LocalQueue per ClusterQueue,
workloads of random size, priority and creation time (a few naming a LocalQueue that does not
exist: the unrouted partition), and a random history: cycles committed as ``p0`` records or as
per-partition records (each partition's admitter, then preemptor), workloads finishing, workloads
of a higher priority arriving (preemptions), LocalQueues re-pointed and ClusterQueues joining
another tree (hand-overs). At every step, for every partition ``p`` of the fold,
``decide(state, partition=p)`` must equal the ``p0`` decision over the whole state restricted to
the workloads of ``p``, in order, for the admitter and the preemptor; but while ``p`` is blocked
by a hand-over (an object in transit into it) it decides nothing, by design: its workloads wait
for the source partition's fence record (that the fence comes is the runtime's part: here the
per-partition steps commit it).

One field may differ, and is compared without it: a flavor bookmark's ``cycle``. The bookmark's
clock is the partition's own admitter cycles (``ClusterState.partition_cycles``, a partition's
scheduling cycles), while ``p0``'s is every admitter cycle of the log; so are the cycles a
bookmark stands for. Every ClusterQueue here has one flavor per resource, so a bookmark never
decides where a scan resumes and the decisions are otherwise the same. The other exception,
by design, is waitForPodsReady.blockAdmission (off by default, off here): Kueue blocks every
admission of the cycle after one, which per partition blocks only that partition's cycle.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kueue_es import deciders
from kueue_es.events import subjects, types
from kueue_es.projections.partitions import LEGACY
from kueue_es.services.runtime import Decider, build_batch
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import FoldedLog, cluster_queue, flavor, local_queue, workload

NOW = 1_796_000_000_000
ROLES = (deciders.ADMITTER, deciders.PREEMPTOR)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    """Manifests of a cluster of disjoint trees, and the LocalQueue names."""
    docs: list[dict[str, Any]] = [flavor("f")]
    queues: list[str] = []
    for t in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 3))
        lone = size == 1 and draw(st.booleans())
        root = f"co{t}"
        if not lone and draw(st.booleans()):
            docs.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Cohort",
                    "metadata": {"name": f"{root}-sub"},
                    "spec": {"parentName": root},
                }
            )
        for i in range(size):
            name = f"cq{t}-{i}"
            doc = cluster_queue(name, flavors={"f": {"cpu": draw(st.integers(4, 6))}})
            if not lone:
                doc["spec"]["cohortName"] = f"{root}-sub" if i and draw(st.booleans()) else root
            doc["spec"]["preemption"] = {
                "withinClusterQueue": draw(st.sampled_from(["Never", "LowerPriority"])),
                "reclaimWithinCohort": draw(st.sampled_from(["Never", "Any"])),
            }
            docs.append(doc)
            docs.append(local_queue(f"lq-{name}", name))
            queues.append(f"lq-{name}")
    return docs, queues


class _Log(FoldedLog):
    def commit(self, decider: Decider, outputs: list[types.Output], partition: str) -> None:
        head, rest = build_batch(
            decider,
            outputs=outputs,
            basis_seq=self.state.last_seq,
            head_seq=self.state.heads.get(partition, 0),
            now_ms=NOW,
            partition=partition,
        )
        self.append(head, *rest)


def _plain(output: types.Output) -> Any:
    """An output as compared: a bookmark without its cycle (see the module)."""
    bookmark = getattr(output, "bookmark", None)
    if bookmark is not None:
        output = msgspec.structs.replace(output, bookmark=msgspec.structs.replace(bookmark, cycle=0))  # type: ignore[type-var]
    return output


def _check(log: _Log, now_ms: int) -> None:
    state = log.state
    parts = state.partitions
    for decider in ROLES:
        whole = [_plain(o) for o in decider.decide(state, now_ms=now_ms, partition=LEGACY)]
        seen = 0
        for partition in parts.all():
            mine = [_plain(o) for o in decider.decide(state, now_ms=now_ms, partition=partition)]
            restricted = [o for o in whole if parts.of_workload(o.workload.key) == partition]
            if parts.blocked(partition):
                assert mine == [], f"{decider.role} {partition} decided while blocked"
                seen += len(restricted)
                continue
            assert mine == restricted, f"{decider.role} {partition}"
            seen += len(mine)
        assert seen == len(whole)  # every whole-state decision is some partition's


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_per_partition_decisions_are_the_whole_decisions_restricted(data: st.DataObject) -> None:
    docs, queues = data.draw(clusters())
    count = data.draw(st.integers(1, 10))
    for i in range(count):
        queue = data.draw(st.sampled_from([*queues, "lq-missing"]))
        docs.append(
            workload(
                f"w{i}",
                queue=queue,
                cpu=str(data.draw(st.integers(1, 3))),
                priority=data.draw(st.integers(0, 2)),
                created=data.draw(st.integers(0, 5)),
            )
        )
    note(repr(docs))
    log = _Log()
    log.append(*(subjects.fact_message(kueue_fact(doc)) for doc in docs))
    kinds = ["p0", "partitions", "partitions", "finish", "arrive", "repoint", "merge"]
    steps = data.draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=10))
    cqs = [d for d in docs if d["kind"] == "ClusterQueue"]
    for n, step in enumerate(steps):
        now_ms = NOW + n * 1000
        _check(log, now_ms)
        if step == "arrive":
            queue = data.draw(st.sampled_from(queues))
            doc = workload(f"late{n}", queue=queue, cpu=str(data.draw(st.integers(1, 4))), priority=3, created=10 + n)
            log.append(subjects.fact_message(kueue_fact(doc)))
            continue
        if step == "repoint":
            queue = data.draw(st.sampled_from(queues))
            target = data.draw(st.sampled_from(cqs))["metadata"]["name"]
            log.append(subjects.fact_message(kueue_fact(local_queue(queue, target))))
            continue
        if step == "merge":
            moved = dict(data.draw(st.sampled_from(cqs)))
            moved["spec"] = {**moved["spec"], "cohortName": data.draw(st.sampled_from(["co0", "co1", "co9"]))}
            log.append(subjects.fact_message(kueue_fact(moved)))
            continue
        if step == "finish":
            held = sorted(k for k, wl in log.state.workloads.items() if wl.reservation is not None and not wl.gone)
            if held:
                key = data.draw(st.sampled_from(held))
                wl = log.state.workloads[key]
                log.append(subjects.fact_message(types.WorkloadFinished(workload=wl.ref, at_ms=now_ms)))
            continue
        for decider in ROLES:
            _check(log, now_ms)  # the preemptor's turn too: the admitter's nominations are open now
            if step == "p0":
                outputs = list(decider.decide(log.state, now_ms=now_ms, partition=LEGACY))
                if outputs:
                    log.commit(decider, outputs, LEGACY)
                continue
            for partition in log.state.partitions.all():
                outputs = list(decider.decide(log.state, now_ms=now_ms, partition=partition))
                if outputs or log.state.partitions.fence_needed(partition) is not None:
                    log.commit(decider, outputs, partition)
    _check(log, NOW + len(steps) * 1000)
    assert log.orphans == []


def test_preemptions_in_two_trees_are_decided_per_partition_as_over_the_whole() -> None:
    """Both trees nominate a preemption in one cycle: each partition's preemptor answers its own."""
    docs: list[dict[str, Any]] = [flavor("f")]
    for tree in ("a", "b"):
        doc = cluster_queue(f"cq-{tree}", flavors={"f": {"cpu": 2}})
        doc["spec"]["cohortName"] = f"co-{tree}"
        doc["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        docs += [doc, local_queue(f"lq-{tree}", f"cq-{tree}"), workload(f"low-{tree}", queue=f"lq-{tree}", cpu="2")]
    log = _Log()
    log.append(*(subjects.fact_message(kueue_fact(doc)) for doc in docs))
    for partition in log.state.partitions.all():
        log.commit(deciders.ADMITTER, deciders.ADMITTER.decide(log.state, now_ms=NOW, partition=partition), partition)
    for tree in ("a", "b"):
        doc = workload(f"high-{tree}", queue=f"lq-{tree}", cpu="2", priority=5, created=30)
        log.append(subjects.fact_message(kueue_fact(doc)))
    for partition in log.state.partitions.all():
        log.commit(deciders.ADMITTER, deciders.ADMITTER.decide(log.state, now_ms=NOW, partition=partition), partition)
    assert sorted(log.state.nominations) == ["default/high-a", "default/high-b"]
    _check(log, NOW)
    issued = deciders.PREEMPTOR.decide(log.state, now_ms=NOW, partition="c-co-a")
    assert [type(o).__name__ for o in issued] == ["PreemptionIssued", "EvictionRequested"]
    assert issued[1].workload.key == "default/low-a"
    assert log.orphans == []
