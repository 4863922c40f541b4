"""States folded from a scenario's core-engine log, for tests that re-run one decider at a recorded cycle."""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario


def before_first_record(path: Path, role: str) -> tuple[ClusterState, int, str]:
    """The state folded from the scenario at ``path``'s log up to its first DecisionRecord of ``role``, and
    that record's cycle time (ms) and partition. Raises StopIteration when no record of ``role`` is logged."""
    return before_record(path, role, 0)


def before_record(path: Path, role: str, index: int) -> tuple[ClusterState, int, str]:
    """:func:`before_first_record` for the scenario's DecisionRecord of ``role`` number ``index`` (0: the
    first). Raises ValueError when it logs fewer."""
    run = run_scenario(load_scenario(path))
    records = [
        i for i, (_, event) in enumerate(run.log) if isinstance(event, types.DecisionRecord) and event.role == role
    ]
    if index >= len(records):
        raise ValueError(f"{path}: {len(records)} records of {role}, not {index + 1}")
    first = records[index]
    state = ClusterState()
    for seq, event in run.log[:first]:
        apply(state, event, seq=seq)
    record = run.log[first][1]
    assert isinstance(record, types.DecisionRecord)
    return state, record.now_ms, record.partition


def with_releases(event: types.Event) -> list[types.Event]:
    """An entry of a core run's ``log`` as a fold takes it: a DecisionRecord followed by the QuotaReleased of
    each finished release it carries (its carried decisions are the log's next entries, ``CoreRun.log``); any
    other event alone. (``types.with_carried`` adds the carried decisions too: for a log of messages.)"""
    if isinstance(event, types.DecisionRecord):
        return [event, *event.released_decisions()]
    return [event]
