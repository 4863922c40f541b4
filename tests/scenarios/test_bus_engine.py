"""The bus engine: scenarios through real nats-server and all five services as processes.

Each scenario here runs on both engines; the outcomes must be equal and match the
expectation. A run costs a few seconds (a nats-server, an emulated API server and
five Python processes), so this covers the shared examples and a spread of ``tests/scenarios`` (about
SPREAD files evenly spaced, so CI's time does not grow with the corpus; at least one per section; a
few chosen ones) rather than all of them; the core engine runs them all (``test_runner.py``), and
``pytest -m exhaustive tests/scenarios/test_bus_engine.py`` runs them all here (about an
hour on 2 cores for the 922 scenarios of 2026-12: not in CI).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kueue_es.scenarios import ScenarioError, core_engine, load_scenario
from kueue_es.scenarios.bus_engine import BusEngine
from kueue_es.scenarios.checking import check

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1].parent / "shared" / "scenarios" / "examples"
SPREAD = 12  # evenly spaced files beside the chosen ones (35 before: 74 bus runs, ~550 s of CI's slow stage)


ALSO_ON_BUS = (
    "checks/check-retry-backoff-then-readmitted.yaml",  # a real backoff sat out by the services' clock
    "podsready/block-admission-waits-for-ready.yaml",
    "dra/rct-devices-charged-per-pod.yaml",  # device quota charged (the first dra/ one is a refusal)
    "dra/cel-insufficient-matching-devices.yaml",  # CEL selectors matched against ResourceSlices
    "dra/cel-resource-slice-published-admits.yaml",  # a ResourceSlice published requeues
    "dra/counter-sources-charge-consumed-counters.yaml",  # counter sources (partitionable devices)
    "dra/capacity-sources-charge-requested-capacity.yaml",  # capacity sources (consumable capacity)
    # elastic workload slices (issue 21): each behaviour through the services
    "elastic/replacement-keeps-the-original-flavor.yaml",
    "elastic/scale-down-releases-quota-to-waiting.yaml",
    "elastic/scale-up-admits-replacement-slice.yaml",
    "elastic/scale-up-waits-for-quota-then-preempts.yaml",
    # elastic slices with TAS (issue 21, ElasticJobsViaWorkloadSlicesWithTAS)
    "elastic/tas-elastic-required-topology-refused.yaml",
    "elastic/tas-scale-up-delta-waits-for-a-node.yaml",
    "elastic/tas-scale-up-keeps-first-pods-places-delta.yaml",
    "elastic/tas-scale-up-keeps-spread-pods-places-delta.yaml",
    "elastic/tas-scale-down-replacement-truncates-assignment.yaml",
    "elastic/tas-same-count-replacement-reuses-assignment.yaml",
    # the runner itself: a fact identical to an earlier one is still a new write (not deduplicated)
    "checks/rejected-then-reactivated-queues-again.yaml",
    # the runner itself: a hand-over (a ClusterQueue created after its LocalQueue's workload) decided
    "queues/clusterqueue-created-later.yaml",
)


def _selection() -> list[Any]:
    params = [pytest.param(p, id=f"examples/{p.stem}") for p in sorted(EXAMPLES.glob("*.yaml"))]
    files = sorted(HERE.rglob("*.yaml"))
    chosen: dict[Path, None] = {}
    for section in sorted({p.parent for p in files}):
        on_bus = [p for p in files if p.parent == section and "engines:" not in p.read_text()]
        chosen.setdefault(next(iter(on_bus), next(p for p in files if p.parent == section)))
    for path in ALSO_ON_BUS:
        chosen.setdefault(HERE / path)
    for path in files[:: max(1, len(files) // SPREAD)]:
        chosen.setdefault(path)
    for path in sorted(chosen):
        try:
            scenario = load_scenario(path)
        except ScenarioError as err:  # reported by test_runner's own loading test
            params.append(pytest.param(path, id=path.relative_to(HERE).as_posix(), marks=pytest.mark.skip(str(err))))
            continue
        if not scenario.runs_on("bus") or scenario.xfail:
            continue  # a known gap is shown on the core engine (test_runner.py), a bus run adds nothing
        params.append(pytest.param(path, id=path.relative_to(HERE).as_posix()))
    return params


def _every() -> list[Any]:
    """Every file (loaded in the test, so collecting the suite does not load them all twice)."""
    return [
        pytest.param(p, id=p.relative_to(HERE).as_posix(), marks=pytest.mark.exhaustive)
        for p in sorted(HERE.rglob("*.yaml"))
    ]


@pytest.mark.parametrize("path", _selection())
def test_bus_engine_matches_core_and_expectation(path: Path) -> None:
    """Same outcome on the bus as in-process, and the outcome Kueue gives."""
    _run_and_compare(path)


@pytest.mark.parametrize("path", _every())
def test_every_scenario_on_the_bus_engine(path: Path) -> None:
    """The whole set (``-m exhaustive``): too long for CI's 45 minutes beside the rest."""
    try:
        scenario = load_scenario(path)
    except ScenarioError as err:  # reported by test_runner's own loading test
        pytest.skip(str(err))
    if not scenario.runs_on("bus") or scenario.xfail:
        pytest.skip("core engine only (engines:) or a known gap (xfail), shown by test_runner.py")
    _run_and_compare(path)


def _run_and_compare(path: Path) -> None:
    scenario = load_scenario(path)
    on_bus = BusEngine().run(scenario)
    assert on_bus == core_engine.CoreEngine().run(scenario)
    assert check(expect=scenario.expect, outcome=on_bus) == []
