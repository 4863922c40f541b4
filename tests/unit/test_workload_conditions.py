"""Evicted and Preempted conditions across re-admissions (Kueue #6819).

When a Workload reserves quota again, Kueue turns an Evicted or Preempted condition that is True to False,
reason QuotaReserved, its message prefixed ``Previously: `` (pkg/workload/workload.go SetQuotaReservation,
resetActiveCondition). A condition already False is left alone, so a workload admitted a third time
keeps one ``Previously: ``, not two (Kueue #6819 fixed the doubled prefix).
"""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.dispatcher import core, status

SCENARIO = Path(__file__).parents[1] / "scenarios" / "preemption" / "readmitted-twice-keeps-one-previously.yaml"
LOW = "default/low"


def _conditions(view: core.DispatchState) -> dict[str, tuple[str, str, str]]:
    written = status.workload_status(view.records[LOW], generation=1)
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in written["conditions"]}


def test_a_third_admission_keeps_one_previously_prefix() -> None:
    run = run_scenario(load_scenario(SCENARIO))
    view = core.DispatchState()
    after_reservations: list[dict[str, tuple[str, str, str]]] = []
    for message, decoded in zip(run.messages, run.events, strict=True):
        # a record, then what it stands for at its sequence (the decisions it carries, event schema 17)
        for event in types.with_carried(decoded):
            core.fold(view, event, seq=message.seq)
            if isinstance(event, types.WorkloadAdmitted) and event.workload.key == LOW:
                after_reservations.append(_conditions(view))
    assert len(after_reservations) == 3  # first admission, after the preemption, after the reactivation
    second, third = after_reservations[1], after_reservations[2]
    preempted = second["Preempted"]
    assert preempted[:2] == ("False", "QuotaReserved")
    assert preempted[2].startswith("Previously: Preempted to accommodate a workload")
    assert not preempted[2].startswith("Previously: Previously: ")
    assert third["Preempted"] == preempted  # already False: left as it was
    evicted = third["Evicted"]
    assert evicted[:2] == ("False", "QuotaReserved")
    assert evicted[2].startswith("Previously: ")
    assert not evicted[2].startswith("Previously: Previously: ")
