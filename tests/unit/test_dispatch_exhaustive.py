"""Every event type is classified by the dispatcher's plan and by its status fold: handled, or named as ignored.

STYLE.md habit 6 (Armada's converters): a new event type added to ``kueue_es.events.types``
fails here until it is put in ``core.PLAN_HANDLED``/``PLAN_IGNORED`` and
``status.STATUS_HANDLED``/``STATUS_IGNORED``; and an event of a type in neither makes
``plan`` and ``fold_record`` fail loudly instead of dropping it.
"""

from __future__ import annotations

import msgspec
import pytest

from kueue_es.events import models, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.services.dispatcher import core, status


def _subclasses(cls: type) -> set[type]:
    out: set[type] = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


EVENT_TYPES = sorted(set(types.Event.__args__) | _subclasses(types._Event), key=lambda t: t.__name__)


class Unclassified(msgspec.Struct, frozen=True, kw_only=True):
    """An event type the dispatcher has never heard of (not in the union, so not in any list)."""

    workload: types.WorkloadRef


def test_the_union_holds_every_tagged_event() -> None:
    """The walk below covers every tagged event Struct: each one is in the Event union."""
    assert set(EVENT_TYPES) == set(types.Event.__args__)
    assert len(EVENT_TYPES) > 20


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda t: t.__name__)
def test_plan_handles_or_names_every_event_type(event_type: type) -> None:
    """plan() either turns the type into a write or names it among the events it ignores, never both."""
    handled, ignored = event_type in core.PLAN_HANDLED, event_type in core.PLAN_IGNORED
    assert handled != ignored, f"{event_type.__name__}: handled={handled}, ignored={ignored}"


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda t: t.__name__)
def test_status_fold_handles_or_names_every_event_type(event_type: type) -> None:
    """fold_record() either folds the type into a workload's status or names it among those it ignores."""
    handled, ignored = event_type in status.STATUS_HANDLED, event_type in status.STATUS_IGNORED
    assert handled != ignored, f"{event_type.__name__}: handled={handled}, ignored={ignored}"


def test_the_lists_name_only_event_types() -> None:
    """No list names a type that is not an event (a stale entry after a rename or removal)."""
    listed = core.PLAN_HANDLED + core.PLAN_IGNORED + status.STATUS_HANDLED + status.STATUS_IGNORED
    assert set(listed) <= set(EVENT_TYPES)


REF = types.WorkloadRef(namespace="ns", name="w", uid="u1")


def _state_with_workload() -> ClusterState:
    state = ClusterState()
    observed = types.WorkloadObserved(
        workload=models.Workload(
            metadata=models.ObjectMeta(name="w", namespace="ns", uid="u1"),
            spec=models.WorkloadSpec(queue_name="lq", pod_sets=[models.PodSet(requests={"cpu": 1000})]),
        )
    )
    apply(state, observed, seq=1)
    return state


def test_plan_fails_loudly_on_an_unclassified_event() -> None:
    """An event of a type plan() does not know raises AssertionError rather than planning nothing."""
    view = core.DispatchState()
    with pytest.raises(AssertionError):
        core.plan(view, Unclassified(workload=REF), seq=1)  # type: ignore[arg-type]


def test_status_fold_fails_loudly_on_an_unclassified_event() -> None:
    """An event of a type fold_record() does not know raises AssertionError rather than folding nothing."""
    state = _state_with_workload()
    before = status.Before.of(state.workloads["ns/w"])
    unknown = Unclassified(workload=REF)
    with pytest.raises(AssertionError):
        status.fold_record({}, unknown, key="ns/w", before=before, state=state)  # type: ignore[arg-type]


def test_an_ignored_event_plans_nothing_and_folds_nothing() -> None:
    """A named, ignored event (WorkloadStopped) plans no write and leaves the workload's record as it was."""
    state = _state_with_workload()
    view = core.DispatchState(cluster=state)
    stopped = types.WorkloadStopped(workload=REF, reason="Preempted", at_ms=2)
    assert core.plan(view, stopped, seq=2) is None
    records: dict[str, status.WorkloadRecord] = {}
    before = status.Before.of(state.workloads["ns/w"])
    observed = types.WorkloadObserved(workload=state.workloads["ns/w"].workload)
    status.fold_record(records, observed, key="ns/w", before=before, state=state)
    assert status.fold_record(records, stopped, key="ns/w", before=before, state=state) is False
