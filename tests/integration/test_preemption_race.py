"""Admitter and preemptor racing on one partition through a real nats-server (issue 4).

Two admitter replicas and a preemptor run free (not stepped) against the same log,
in one event loop, so they decide on the same basis and commit against the same
partition head: the head check must reject the stale batches (ARCHITECTURE.md §3),
the losers must fold and decide again, and the end must be what the core engine
decides for the same scenario. A small "job side" task stands in for the
dispatcher, the job and the watcher: every EvictionRequested gets a WorkloadStopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
import yaml

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.replay import check_log
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.scenarios.outcome import build_outcome
from kueue_es.scenarios.specs import Scenario
from kueue_es.services.runtime import DeciderLoop, build_batch, cancel_and_wait
from tests.integration.harness import until_steady

API = "kueue.x-k8s.io/v1beta2"


def _cq(name: str, nominal: int) -> dict:
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": "research",
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}],
                }
            ],
        },
    }


def _workload(name: str, cq: str, *, cpus: int, priority: int, second: int) -> dict:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T00:00:{second:02d}Z",
        },
        "spec": {
            "queueName": f"lq-{cq}",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": cpus,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                }
            ],
        },
    }


def race_scenario() -> Scenario:
    """team-a borrows all of team-b's quota with four low-priority workloads; then team-b
    reclaims (b1, b2) and team-a's own high-priority workloads preempt within the queue."""
    objects = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        _cq("team-a", 4),
        _cq("team-b", 4),
        *(
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": f"lq-{cq}", "namespace": "default"},
                "spec": {"clusterQueue": cq},
            }
            for cq in ("team-a", "team-b")
        ),
    ]
    admitted = [
        {
            "workload": _workload(f"a-low{i}", "team-a", cpus=2, priority=0, second=i),
            "admission": {
                "clusterQueue": "team-a",
                "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "count": 2}],
            },
        }
        for i in range(1, 5)
    ]
    pending = [
        _workload("b1", "team-b", cpus=2, priority=1, second=10),
        _workload("b2", "team-b", cpus=2, priority=1, second=11),
        _workload("a-high1", "team-a", cpus=2, priority=5, second=12),
        _workload("a-high2", "team-a", cpus=2, priority=5, second=13),
    ]
    doc = {"name": "race", "source": "issue 4", "objects": objects, "admitted": admitted, "pending": pending}
    return parse_scenario(yaml.safe_dump(doc, sort_keys=False), path="<race>")


async def _seed(bus: Bus, scenario: Scenario) -> None:
    for obj in scenario.objects:
        if obj.fact is not None:
            await bus.publish(subjects.fact_message(obj.fact))
    for admitted in scenario.admitted:
        assert isinstance(admitted.workload.fact, types.WorkloadObserved)
        await bus.publish(subjects.fact_message(admitted.workload.fact))
        meta = admitted.workload.fact.workload.metadata
        ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
        reserved = types.QuotaReserved(
            workload=ref,
            cluster_queue=admitted.cluster_queue,
            pod_set_assignments=list(admitted.pod_set_assignments),
            at_ms=admitted.reserved_at_ms,
        )
        outputs: list[types.Decision] = [reserved, types.admitted(reserved, at_ms=admitted.reserved_at_ms)]
        head_seq = await bus.last_subject_seq(subjects.heads_of())
        head, rest = build_batch(
            core_engine.SEED, outputs=outputs, basis_seq=await bus.last_seq(), head_seq=head_seq, now_ms=0
        )
        await bus.commit_batch(head=head, expected_head_seq=head_seq, rest=rest, head_filter=subjects.heads_of())
        for fact in core_engine.job_reports(outputs, pods_ready=scenario.pods_ready, now_ms=admitted.reserved_at_ms):
            await bus.publish(subjects.fact_message(fact))
    for workload in scenario.pending:
        assert workload.fact is not None
        await bus.publish(subjects.fact_message(workload.fact))


async def _job_side(bus: Bus) -> None:
    """Every eviction completes (the job stops) and every admitted job gets its pods ready,
    and the watcher says so."""
    async for message in bus.read(subjects=(subjects.DECISIONS,), start_seq=1):  # every partition's
        event = codec.decode(message.data)
        if isinstance(event, types.DECISION_TYPES):
            # a record's carried decisions too (event schema 17), as their own messages were before
            for fact in core_engine.job_reports(types.with_carried(event), pods_ready="auto", now_ms=0):
                await bus.publish(subjects.fact_message(fact))


async def _fold(bus: Bus) -> tuple[ClusterState, list[tuple[int, types.Event]], list]:
    state, log, messages = ClusterState(), [], []
    last = await bus.last_seq()
    for seq in range(1, last + 1):
        message = await bus.get(seq)
        event = codec.decode(message.data)
        for one in types.with_carried(event):  # a record's finished releases, as every fold takes them
            apply(state, one, seq=seq)
        log.append((seq, event))
        if isinstance(event, types.DecisionRecord):  # and the decisions it carries, at its sequence (CoreRun.log)
            log.extend((seq, decision) for decision in event.carried)
        messages.append(message)
    return state, log, messages


async def _until_quiet(bus: Bus, *, quiet: float = 1.5, timeout: float = 60.0) -> None:
    """Wait until the log stops growing for ``quiet`` seconds."""
    await until_steady(bus.last_seq, quiet=quiet, timeout=timeout, what="the log")


def _overuse(log: list[tuple[int, types.Event]]) -> list[str]:
    """At the end of every committed batch: any ClusterQueue or cohort using more than it may."""
    problems: list[str] = []
    state = ClusterState()
    batch_end = -1
    for seq, event in log:
        if seq == batch_end and not isinstance(event, types.DecisionRecord):
            continue  # a decision the record at seq carries: folded with it
        for one in types.with_carried(event):
            apply(state, one, seq=seq)
        if isinstance(event, types.DecisionRecord):
            batch_end = seq + event.output_count
        if seq == batch_end:
            tree = quota.build(state)
            for name, node in tree.cluster_queues.items():
                for fr in node.quotas:
                    if quota._available(node, fr) < 0:
                        problems.append(f"seq {seq}: {name} overuses {fr}")
    return problems


@pytest.mark.slow
async def test_admitter_and_preemptor_race_without_double_booking(tmp_path: Path) -> None:
    scenario = race_scenario()
    expected = core_engine.run_scenario(scenario).outcome()
    assert expected.preempted, "the scenario must preempt"
    async with NatsServer(tmp_path / "nats") as server:
        bus = await nats_bus.connect(server.url)
        loops = [
            DeciderLoop(bus=bus, decider=deciders.ADMITTER, wakeup=0.05),
            DeciderLoop(bus=bus, decider=deciders.ADMITTER, wakeup=0.05),
            DeciderLoop(bus=bus, decider=deciders.PREEMPTOR, wakeup=0.05),
        ]
        try:
            await _seed(bus, scenario)
            tasks = [asyncio.create_task(loop.run()) for loop in loops]
            tasks.append(asyncio.create_task(_job_side(bus)))
            try:
                await _until_quiet(bus)
            finally:
                await cancel_and_wait(tasks)
            state, log, messages = await _fold(bus)
        finally:
            with contextlib.suppress(Exception):
                await bus.close()
    outcome = build_outcome(submitted=scenario.submitted, log=log, state=state)
    assert {k: v.cluster_queue for k, v in outcome.admitted.items()} == {
        k: v.cluster_queue for k, v in expected.admitted.items()
    }
    assert outcome.pending == expected.pending
    assert outcome.preempted == expected.preempted
    assert not _overuse(log)
    conflicts = sum(loop.conflicts for loop in loops)
    assert conflicts > 0, "two admitters and a preemptor on one head never collided: the race was not exercised"
    nominations = {seq: e.workload.key for seq, e in log if isinstance(e, types.PreemptionRequired)}
    answered = {e.nomination_seq for _, e in log if isinstance(e, types.PreemptionIssued)}
    reserved_at = {
        (e.workload.key, seq) for seq, e in log if isinstance(e, types.QuotaReserved | types.WorkloadAdmitted)
    }  # no checks: a WorkloadAdmitted reserves and admits
    assert nominations
    for seq, key in nominations.items():
        # answered, or moot: the preemptor got quota before the preemptor service came to it
        moot = any(k == key and at > seq for k, at in reserved_at)
        assert seq in answered or moot, f"the nomination at seq {seq} for {key} was never answered"
    assert not state.nominations and not state.preemptors
    report = check_log(messages, deciders.BY_ROLE)
    assert not report.mismatches, report.mismatches[:1]
    assert report.complete, (report.gaps, report.orphans, report.stray_dispatch)
    assert report.seeds == report.unverifiable  # only the scenario's seed batches are not re-checked
    assert report.matched == report.decisions - report.skipped
