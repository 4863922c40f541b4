"""Admitter logic 17 (Kueue's scheduler.go ``fits`` and ``getInitialAssignments``), and 16 kept for replay.

tests/scenarios/preemption/preemptions-in-two-queues-same-cycle.yaml: two preemptors of one cohort, each
needing its own ClusterQueue's victim. Kueue takes every victim of the cycle out of a preempting entry's fit
check, so both preempt in one cycle; logic 16 counted the first one's victim in the second's check and
skipped it. tests/scenarios/flavors/partial-admission-gate-off-multiple-pod-sets.yaml: with the
PartialAdmission gate off Kueue tries the full counts only; logic 16 tried smaller ones and admitted.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.admitter import core as admitter
from tests.scenario_states import before_first_record

SCENARIOS = Path(__file__).parents[1] / "scenarios"
TWO_QUEUES = SCENARIOS / "preemption/preemptions-in-two-queues-same-cycle.yaml"
GATE_OFF = SCENARIOS / "flavors/partial-admission-gate-off-multiple-pod-sets.yaml"


def _before_first_decision(path: Path) -> tuple[ClusterState, int, str]:
    """The state up to the scenario's first admitter record, that cycle's time and partition."""
    return before_first_record(path, admitter.ROLE)


def _nominated(outputs: list[types.Output]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.PreemptionRequired))


def test_two_preemptors_of_a_cohort_both_nominate_in_one_cycle_from_logic_17() -> None:
    state, now_ms, partition = _before_first_decision(TWO_QUEUES)
    now = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert _nominated(now) == ["eng-alpha/preemptor", "eng-beta/preemptor"]
    earlier = admitter.decide_as(16)(state, now_ms=now_ms, partition=partition)
    assert _nominated(earlier) == ["eng-alpha/preemptor"]
    assert admitter.LOGIC_VERSION >= 17 and 16 in admitter.EARLIER_LOGIC_VERSIONS


def test_partial_admission_gate_off_tries_full_counts_only_from_logic_17() -> None:
    state, now_ms, partition = _before_first_decision(GATE_OFF)
    now = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert [o for o in now if isinstance(o, types.WorkloadAdmitted)] == []
    earlier = admitter.decide_as(16)(state, now_ms=now_ms, partition=partition)
    earlier = [o for o in earlier if isinstance(o, types.WorkloadAdmitted)]
    assert [o.workload.key for o in earlier] == ["sales/new"]


RECLAIM_OTHER_FLAVOR = SCENARIOS / "cycle/borrow-beside-head-that-cannot-reclaim-other-flavor.yaml"
TAINT_AND_QUOTA = SCENARIOS / "flavors/mixed-taint-and-insufficient-quota-pending.yaml"


def _pending_message(path: Path, key: str, *, version: int | None = None) -> str:
    state, now_ms, partition = _before_first_decision(path)
    decide = admitter.decide if version is None else admitter.decide_as(version)
    for out in decide(state, now_ms=now_ms, partition=partition):
        if isinstance(out, types.WorkloadInadmissible | types.PendingOutcome) and out.workload.key == key:
            return out.message
    raise AssertionError(f"no pending outcome for {key}")


def test_pending_messages_are_kueues_from_logic_17() -> None:
    """The messages Kueue's TestSchedule expects, word for word: a pod set's reasons sorted and joined with
    ", " (flavorassigner.go Status.Message), a taint printed as Go prints a corev1.Taint."""
    assert _pending_message(RECLAIM_OTHER_FLAVOR, "eng-alpha/can-reclaim") == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
        "50 more needed, insufficient unused quota for cpu in flavor spot, 1 more needed"
    )
    assert _pending_message(TAINT_AND_QUOTA, "sales/new-job") == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
        "5 more needed, untolerated taint {key val NoSchedule <nil>} in flavor spot-tainted"
    )
    # logic 16, for replay: "; " in flavor order, the taint as {key: value}
    assert _pending_message(TAINT_AND_QUOTA, "sales/new-job", version=16) == (
        "couldn't assign flavors to pod set main: untolerated taint {key: val} in flavor spot-tainted; "
        "insufficient unused quota for cpu in flavor on-demand, 5 more needed"
    )


def test_group_and_tas_messages_are_kueues_from_logic_17() -> None:
    """Every member of a pod set group carries the group's status, so each gets its line (worker, then
    leader: TestAssignFlavors "... without group it would fit"); a pod set given two TAS flavors is
    Kueue's MultipleTASFlavorsAssignedError (flavorassigner/errors.go)."""
    group = SCENARIOS / "flavors/group-summed-requests-fit-no-flavor.yaml"
    reasons = (
        "insufficient quota for cpu in flavor one, previously considered podsets requests (0) + current podset "
        "request (5) > maximum capacity (4), insufficient quota for example.com/gpu in flavor two, previously "
        "considered podsets requests (0) + current podset request (4) > maximum capacity (0)"
    )
    assert _pending_message(group, "default/incoming") == (
        f"couldn't assign flavors to pod set worker: {reasons}; couldn't assign flavors to pod set leader: {reasons}"
    )
    tas = SCENARIOS / "flavors/tas-flavors-differ-between-resource-groups-pending.yaml"
    assert _pending_message(tas, "default/incoming") == (
        "failed to assign flavors to pod set main: more than one TAS flavor assigned: tas-a, tas-b"
    )
    assert _pending_message(tas, "default/incoming", version=16) == (
        "pod set main: multiple TAS flavors assigned: tas-a, tas-b"
    )
