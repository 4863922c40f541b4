"""The pending reason of Kueue's TestIsNoFitDueToCapacityAndLimits cases (flavorassigner_test.go).

Each case is a scenario in ``tests/scenarios``, which checks the outcome (admitted or pending); the case
itself checks the granular reason Kueue writes on the QuotaReserved condition of a workload that fits no
flavor (flavorassigner.go resolveNoFitReason, gate UnadmittedWorkloadsObservability, on by default), which
the scenario format has no key for. Here the reason the admitter recorded last is compared with Kueue's
wantNoFitReason.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario

SCENARIOS = Path(__file__).parents[1] / "scenarios"

CASES = [
    ("flavors/nofit-exceeds-max-capacity-pending.yaml", "ns/wl", "ExceedsMaxQuota"),
    ("flavors/nofit-selector-and-taint-mismatch-pending.yaml", "ns/wl", "NoMatchingFlavor"),
    ("flavors/nofit-both-flavors-declare-selector-key-pending.yaml", "ns/wl", "NoMatchingFlavor"),
    ("flavors/nofit-structural-mismatch-over-capacity-pending.yaml", "ns/wl", "NoMatchingFlavor"),
    ("flavors/nofit-topology-without-tas-flavor-pending.yaml", "ns/wl", "NoMatchingFlavor"),
    ("flavors/nofit-topology-level-missing-pending.yaml", "ns/wl", "NoMatchingFlavor"),
    ("flavors/nofit-no-topology-request-no-flavor-pending.yaml", "ns/wl", "NoMatchingFlavor"),
    ("flavors/nofit-topology-placement-fails-no-nodes-pending.yaml", "ns/wl", "TopologyPlacementFailed"),
    ("flavors/nofit-topology-placement-and-quota-fail-pending.yaml", "ns/wl", "ExceedsMaxQuota"),
    ("flavors/nofit-topology-placement-fails-no-preemption.yaml", "ns/wl", "TopologyPlacementFailed"),
    ("flavors/nofit-exceeds-cohort-capacity-pending.yaml", "ns/wl", "ExceedsMaxQuota"),
    ("flavors/nofit-exceeds-borrowing-limit-pending.yaml", "ns/wl", "ExceedsMaxQuota"),
    ("elastic/replacement-original-flavor-refused-for-selector-pending.yaml", "ns/job-a-2", "NoMatchingFlavor"),
    # observability_test.go 'When evaluating multi-flavor resource assignments'
    ("flavors/nofit-taint-and-used-quota-waiting-for-quota.yaml", "obs/new-job", "WaitingForQuota"),
    ("flavors/nofit-taint-and-over-capacity-exceeds-max-quota.yaml", "obs/new-job", "ExceedsMaxQuota"),
]


@pytest.mark.parametrize(("path", "key", "reason"), CASES, ids=[c[0].split("/")[1][: -len(".yaml")] for c in CASES])
def test_pending_reason_is_kueues(path: str, key: str, reason: str) -> None:
    run = run_scenario(load_scenario(SCENARIOS / path))
    wl = run.state.workloads[key]
    assert wl.reservation is None
    assert wl.pending_reason == reason, wl.pending_message


def test_waiting_for_quota_before_the_sibling_finishes() -> None:
    """'insufficient capacity, cohort has available capacity (waiting for quota)': WaitingForQuota until the
    scenario's finish event frees the sibling's quota (the run stops before it here)."""
    scenario = load_scenario(SCENARIOS / "flavors/nofit-waiting-for-quota-cohort-used-then-admitted.yaml")
    run = run_scenario(msgspec.structs.replace(scenario, events=()))
    assert run.state.workloads["ns/wl"].pending_reason == "WaitingForQuota"


def test_exceeds_cohort_capacity_with_fair_sharing() -> None:
    """fair_sharing_test.go 'Preemption is disabled' / 'Shouldn't reserve quota because not enough resources':
    the QuotaReserved condition Kueue's test expects, reason and message, for a 10-CPU workload in an 8-CPU cohort."""
    run = run_scenario(load_scenario(SCENARIOS / "fairsharing/exceeds-cohort-capacity-pending-with-fair-sharing.yaml"))
    wl = run.state.workloads["default/wl"]
    assert wl.reservation is None
    assert wl.pending_reason == "ExceedsMaxQuota"
    assert wl.pending_message == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously "
        "considered podsets requests (0) + current podset request (10) > maximum capacity (8)"
    )
