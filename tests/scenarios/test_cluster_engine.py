"""The cluster engine: scenarios through the Kubernetes API, the five services and the emulated API server.

Every object of a scenario is created through the API, workloads are standalone
Workload objects, and the outcome is read back from those objects; it must equal
the core engine's and the expectation. A run costs several seconds, so the suite
run by CI covers the shared examples and a spread of ``tests/scenarios`` (one per
section, and a few chosen ones); every scenario runs with ``-m exhaustive``
(README, "Tests").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kueue_es.scenarios import ScenarioError, core_engine, load_scenario
from kueue_es.scenarios.checking import check
from kueue_es.scenarios.cluster_engine import ClusterEngine, _ClusterRun
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.sim.emulator import serve_emulator

pytestmark = pytest.mark.timeout(300)  # five services starting on a loaded 2-core machine
HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1].parent / "shared" / "scenarios" / "examples"

ALSO_ON_CLUSTER = (
    "preemption/reclaim-within-cohort.yaml",
    "lifecycle/finished-releases-quota.yaml",
    "dra/rct-devices-charged-per-pod.yaml",  # device quota charged through the API (the first dra/ one refuses)
    "queues/clusterqueue-created-later.yaml",  # a hand-over (the workload moves partition) decided after its fence
)


def _param(path: Path, *, marks: tuple[Any, ...] = ()) -> Any:
    name = f"examples/{path.stem}" if path.parent == EXAMPLES else path.relative_to(HERE).as_posix()
    try:
        scenario = load_scenario(path)
    except ScenarioError as err:  # reported by test_runner's own loading test
        return pytest.param(path, id=name, marks=(*marks, pytest.mark.skip(str(err))))
    if not scenario.runs_on("cluster") or scenario.xfail:
        return None  # a known gap is shown on the core engine (test_runner.py)
    return pytest.param(path, id=name, marks=marks)


def _representative() -> list[Any]:
    """The shared examples, the first scenario of each section that runs everywhere, and the chosen ones."""
    files = sorted(HERE.rglob("*.yaml"))
    chosen: dict[Path, None] = dict.fromkeys(sorted(EXAMPLES.glob("*.yaml")))
    for section in sorted({p.parent for p in files}):
        everywhere = [p for p in files if p.parent == section and "engines:" not in p.read_text()]
        if everywhere:
            chosen.setdefault(everywhere[0])
    for name in ALSO_ON_CLUSTER:
        if (HERE / name).exists():
            chosen.setdefault(HERE / name)
    params = [_param(p, marks=(pytest.mark.slow,)) for p in chosen]
    return [p for p in params if p is not None]


def _every() -> list[Any]:
    params = [_param(p, marks=(pytest.mark.exhaustive,)) for p in sorted(HERE.rglob("*.yaml"))]
    return [p for p in params if p is not None]


def _run_and_compare(path: Path) -> None:
    scenario = load_scenario(path)
    on_cluster = ClusterEngine().run(scenario)
    assert check(expect=scenario.expect, outcome=on_cluster) == []
    in_process = core_engine.CoreEngine().run(scenario)
    assert on_cluster.admitted == in_process.admitted
    assert (on_cluster.reserved, on_cluster.pending, on_cluster.preempted) == (
        in_process.reserved,
        in_process.pending,
        in_process.preempted,
    )
    assert (on_cluster.finished, on_cluster.deleted) == (in_process.finished, in_process.deleted)


@pytest.mark.parametrize("path", _representative())
def test_cluster_engine_matches_core_and_expectation(path: Path) -> None:
    """Through the Kubernetes API: the outcome Kueue gives, and the same as in-process."""
    _run_and_compare(path)


@pytest.mark.parametrize("path", _every())
def test_every_scenario_on_the_cluster_engine(path: Path) -> None:
    """The whole set (``-m exhaustive``): too long for CI's 45 minutes on 2 cores."""
    _run_and_compare(path)


async def test_a_status_write_survives_a_finalizer_put_on_meanwhile() -> None:
    """Kueue's finalizer lands on an AdmissionCheck between the runner's create and its status write (a CI
    flake: 409 Conflict): the runner reads the object again, as a controller does, and its status is written."""
    scenario = load_scenario(HERE / "checks" / "adding-check-does-not-evict-admitted.yaml")
    [check_object] = [o for o in scenario.objects if o.kind == "AdmissionCheck"]
    run = _ClusterRun(scenario)
    async with serve_emulator() as emulator:
        run.api = await kube.make_api_client(server=emulator.url)
        try:
            created = await kube.apply_manifest(run.api, {**check_object.manifest, "status": None})
            await kube.patch_object(  # what the dispatcher's _keep_held does as the check appears
                run.api,
                resources.ADMISSION_CHECKS,
                name="prov",
                patch={"metadata": {"finalizers": ["kueue.x-k8s.io/resource-in-use"]}},
            )
            await run._write_status("AdmissionCheck", check_object.manifest, created)
            stored = await kube.get_object(run.api, resources.ADMISSION_CHECKS, name="prov")
        finally:
            await run.api.close()
    [active] = stored["status"]["conditions"]
    assert (active["type"], active["status"]) == ("Active", "True")
    assert stored["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
