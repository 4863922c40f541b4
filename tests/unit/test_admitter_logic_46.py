"""Admitter logic 46: Kueue's pending message once a resource's flavor fits, for a pod set group asking for a
resource no resource group covers, and after pod sets that need preemption; 45 kept for replay.

Kueue's findFlavorForPodSets (pkg/scheduler/flavorassigner/flavorassigner.go) returns no status once the best
flavor of a resource fits, so the flavors tried before it give no reason; assignFlavors sets a pod set group's
status on every member, and Assignment.Message writes a line for each pod set whose status is not Fit, up to the
one that failed. Found walking Kueue's "Share Quotas Across Resource Flavors" page (its Event names the credits
alone) and the LeaderWorkerSet TAS example.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.services.admitter import core as admitter
from tests.scenario_states import before_first_record

SCENARIOS = Path(__file__).parents[1] / "scenarios"
SHARED_QUOTA = SCENARIOS / "config/shared-quota-credits-short-fitting-flavor-gives-no-reason.yaml"
LWS_GROUP = SCENARIOS / "flavors/group-uncovered-resource-names-every-member.yaml"


def _pending(path: Path, key: str, *, version: int | None = None) -> tuple[str, str]:
    """(reason, message) of the first cycle's pending outcome for ``key`` (logic ``version``, or the current)."""
    state, now_ms, partition = before_first_record(path, admitter.ROLE)
    decide = admitter.decide if version is None else admitter.decide_as(version)
    for out in decide(state, now_ms=now_ms, partition=partition):
        if isinstance(out, types.WorkloadInadmissible | types.PendingOutcome) and out.workload.key == key:
            return out.reason, out.message
    raise AssertionError(f"no pending outcome for {key}")


def test_a_fitting_flavor_gives_no_reason_from_logic_46() -> None:
    assert _pending(SHARED_QUOTA, "default/fifth-job") == (
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu_credits in flavor credits, "
        "1 more needed",
    )
    assert _pending(SHARED_QUOTA, "default/fifth-job", version=45)[1] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
        "3 more needed, insufficient unused quota for cpu_credits in flavor credits, 1 more needed"
    )


def test_an_uncovered_resource_names_every_group_member_from_logic_46() -> None:
    assert _pending(LWS_GROUP, "default/lws-group-0") == (
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set leader: resource nvidia.com/gpu unavailable in ClusterQueue; "
        "couldn't assign flavors to pod set worker: resource nvidia.com/gpu unavailable in ClusterQueue",
    )
    assert _pending(LWS_GROUP, "default/lws-group-0", version=45)[1] == (
        "couldn't assign flavors to pod set leader: resource nvidia.com/gpu unavailable in ClusterQueue"
    )
    assert admitter.LOGIC_VERSION >= 46 and 45 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_nofit_message_keeps_the_preempting_pod_sets_before_it_from_logic_46() -> None:
    path = SCENARIOS / "flavors/multi-podset-preempting-then-nofit-message-lists-both.yaml"
    assert _pending(path, "default/incoming") == (
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set first: insufficient unused quota for cpu in flavor default, 1 more "
        "needed; couldn't assign flavors to pod set second: resource example.com/gpu unavailable in ClusterQueue",
    )
    assert _pending(path, "default/incoming", version=45)[1] == (
        "couldn't assign flavors to pod set second: resource example.com/gpu unavailable in ClusterQueue"
    )
