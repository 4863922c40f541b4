"""Admitter logic 55: Kueue's no-fit reason and every resource of a flavor in the pending message; 54 kept for replay.

Kueue's findFlavorForPodSets (pkg/scheduler/flavorassigner/flavorassigner.go) checks each requested resource of a
flavor in a closure (requests.ForEach) whose ``return`` on noFit only ends that resource's check, so the later
resources are still checked and their reasons added to the message. Each flavor's no-fit reason is the most severe
of its resources' (mostSevereReason), where a resource that reaches the preemption check has its reason cleared
(fitsResourceQuota), and resolveNoFitReason takes the least severe per resource group. Found by a user's trial of
kueue-es: a 1 CPU / 10Gi workload in a full 4 CPU / 8Gi ClusterQueue was WaitingForQuota (Kueue:
ExceedsMaxQuota), and a 10 CPU / 20Gi one named only its cpu.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.services.admitter import core as admitter
from tests.scenario_states import before_first_record

SCENARIOS = Path(__file__).parents[1] / "scenarios"
PREEMPTIBLE_CPU = SCENARIOS / "flavors/nofit-memory-over-capacity-cpu-preemptible-exceeds-max-quota.yaml"
EVERY_RESOURCE = SCENARIOS / "flavors/nofit-every-resource-of-a-flavor-in-message.yaml"


def _pending(path: Path, key: str, *, version: int | None = None) -> tuple[str, str]:
    """(reason, message) of the first cycle's pending outcome for ``key`` (logic ``version``, or the current)."""
    state, now_ms, partition = before_first_record(path, admitter.ROLE)
    decide = admitter.decide if version is None else admitter.decide_as(version)
    for out in decide(state, now_ms=now_ms, partition=partition):
        if isinstance(out, types.WorkloadInadmissible | types.PendingOutcome) and out.workload.key == key:
            return out.reason, out.message
    raise AssertionError(f"no pending outcome for {key}")


def _over(resource: str, flavor: str, request: str, capacity: str) -> str:
    return (
        f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests (0) + "
        f"current podset request ({request}) > maximum capacity ({capacity})"
    )


def test_a_resource_preemption_could_serve_gives_no_reason_from_logic_55() -> None:
    message = (
        f"couldn't assign flavors to pod set main: {_over('memory', 'on-demand', '10Gi', '8Gi')}, "
        "insufficient unused quota for cpu in flavor on-demand, 1 more needed"
    )
    assert _pending(PREEMPTIBLE_CPU, "default/big-memory") == ("ExceedsMaxQuota", message)
    assert _pending(PREEMPTIBLE_CPU, "default/big-memory", version=54) == ("WaitingForQuota", message)


def test_every_resource_of_a_flavor_is_in_the_message_from_logic_55() -> None:
    lines = [
        _over("cpu", "on-demand", "10", "6"),
        _over("cpu", "spot", "10", "4"),
        _over("memory", "on-demand", "20Gi", "16Gi"),
        _over("memory", "spot", "20Gi", "8Gi"),
    ]
    assert _pending(EVERY_RESOURCE, "default/huge") == (
        "ExceedsMaxQuota",
        f"couldn't assign flavors to pod set main: {', '.join(lines)}",
    )
    assert _pending(EVERY_RESOURCE, "default/huge", version=54) == (
        "ExceedsMaxQuota",
        f"couldn't assign flavors to pod set main: {lines[0]}, {lines[1]}",
    )
    assert admitter.LOGIC_VERSION >= 55 and 54 in admitter.EARLIER_LOGIC_VERSIONS
