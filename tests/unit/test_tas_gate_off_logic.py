"""Admitter logic 50 and preemptor logic 23 read the gate TopologyAwareScheduling; 49 and 22 are kept for replay.

With the gate off Kueue's cache takes no flavor as a TAS flavor (cache.go ``handleTASFlavor``) and its flavor
assigner and preemptor run none of their TAS steps (Kueue PR #8167), so a workload is admitted, and preempts,
on quota alone, however its flavor names a topology. The scenarios of docs/tas.md check the outcomes with the
current logic; here, that a log decided by the earlier logic still replays as it decided.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.services.admitter import core as admitter
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record

SCENARIOS = Path(__file__).parent.parent / "scenarios"


def admitted(outputs: list[types.Output]) -> list[str]:
    return [o.workload.key for o in outputs if isinstance(o, types.WorkloadAdmitted | types.QuotaReserved)]


def test_logic_50_admits_on_quota_where_49_needed_a_node() -> None:
    state, now, partition = before_first_record(
        SCENARIOS / "tas" / "gate-off-topology-flavor-admits-on-quota-without-nodes.yaml", admitter.ROLE
    )
    assert admitter.LOGIC_VERSION >= 50 and 49 in admitter.EARLIER_LOGIC_VERSIONS
    assert admitted(admitter.decide(state, now_ms=now, partition=partition)) == ["default/w1"]
    assert admitted(admitter.decide_as(49)(state, now_ms=now, partition=partition)) == []


def test_logic_50_ignores_a_topology_request_the_flavor_cannot_serve() -> None:
    state, now, partition = before_first_record(
        SCENARIOS / "flavors" / "gate-off-topology-request-on-plain-flavor-admits.yaml", admitter.ROLE
    )
    assert admitted(admitter.decide(state, now_ms=now, partition=partition)) == ["ns/wl"]
    refused = admitter.decide_as(49)(state, now_ms=now, partition=partition)
    assert admitted(refused) == []
    assert any(
        'Flavor "flavor-a" does not support TopologyAwareScheduling' in o.message
        for o in refused
        if isinstance(o, types.WorkloadInadmissible | types.PendingOutcome)
    )


def test_preemptor_logic_23_is_kept_beside_22() -> None:
    assert preemptor.LOGIC_VERSION >= 23 and 22 in preemptor.EARLIER_LOGIC_VERSIONS
    state, now, partition = before_first_record(
        SCENARIOS / "tas" / "preemption-tas-gate-off-topology-flavor-no-nodes.yaml", preemptor.ROLE
    )
    answers = preemptor.decide(state, now_ms=now, partition=partition)
    evicted = [o.workload.key for o in answers if isinstance(o, types.EvictionRequested)]
    assert evicted == ["default/low-priority"]
    # logic 22 on the same state took the flavor as a TAS flavor: with no node, no victim makes the workload fit
    (answer,) = preemptor.decide_as(22)(state, now_ms=now, partition=partition)
    assert isinstance(answer, types.PreemptionIssued) and answer.targets == []
    assert answer.message == "the nomination is no longer current: no targets make the workload fit"
