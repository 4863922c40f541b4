"""The architecture as code: the import contracts in ``.importlinter`` catch what they must.

ARCHITECTURE.md §1 and STYLE.md habit 9: tools -> services -> scheduling | jobframework ->
projections -> events, never back; the five services never import each other; the Kubernetes
clients stay at the edge. ``.ci/run`` runs ``lint-imports`` over the whole package and fails the
build on a broken contract. These tests hold the contracts themselves to account: each plants one
forbidden import in a copy of the package laid out as installed (``scripts/import_tree.py``) and
asserts that lint-imports names it, so a contract that stopped covering a package (a typo, a
rename, a package-dir mapping grimp cannot see) fails here. The pure cores of the services, which
import-linter cannot select without their runners, are checked by walking their source.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
RUNNERS = (  # a service's runners: the dispatcher's real and simulated API writers and their collaborators
    "service.py",
    "simulated.py",
    "kube_api.py",
    "job_writes.py",
    "object_sync.py",
    "recording.py",
    "ungating.py",
)
SERVICE_PACKAGES = ("watcher", "admitter", "preemptor", "tas_placer", "dispatcher")


def _import_tree() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_tree", ROOT / "scripts" / "import_tree.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Probe(NamedTuple):
    """One forbidden import planted in a copy of the package, and the contract that must report it."""

    module: str
    source: str
    contract: str
    want_line: str


PROBES = {
    "the vocabulary imports no Kubernetes client": Probe(
        module="kueue_es.events.probe",
        source="import kubernetes_asyncio\n",
        contract="kubernetes-at-the-edge",
        want_line="kueue_es.events.probe -> kubernetes_asyncio",
    ),
    "the vocabulary imports no Kubernetes client (sync either)": Probe(
        module="kueue_es.events.bus.probe",
        source="from kubernetes import client\n",
        contract="kubernetes-at-the-edge",
        want_line="kueue_es.events.bus.probe -> kubernetes",
    ),
    "a projection imports no Kubernetes client": Probe(
        module="kueue_es.projections.probe",
        source="import kubernetes_asyncio.client\n",
        contract="kubernetes-at-the-edge",
        want_line="kueue_es.projections.probe -> kubernetes_asyncio",
    ),
    "events import nothing above them": Probe(
        module="kueue_es.events.probe",
        source="from kueue_es.projections import quota\n",
        contract="layers",
        want_line="kueue_es.events.probe -> kueue_es.projections.quota",
    ),
    "projections import no service": Probe(
        module="kueue_es.projections.probe",
        source="from kueue_es.services import runtime\n",
        contract="layers",
        want_line="kueue_es.projections.probe -> kueue_es.services.runtime",
    ),
    "a service imports no tool": Probe(
        module="kueue_es.services.probe",
        source="from kueue_es import cli\n",
        contract="layers",
        want_line="kueue_es.services.probe -> kueue_es.cli",
    ),
    "a service imports no other service": Probe(
        module="kueue_es.services.tas_placer.probe",
        source="from kueue_es.services.admitter import core\n",
        contract="independent-services",
        want_line="kueue_es.services.tas_placer.probe -> kueue_es.services.admitter.core",
    ),
    "a projection does no I/O": Probe(
        module="kueue_es.projections.probe",
        source="import nats\n",
        contract="pure-folds-and-rules",
        want_line="kueue_es.projections.probe -> nats",
    ),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package laid out as installed (links to the sources), the way .ci/run lints it."""
    out = tmp_path_factory.mktemp("import-tree")
    _import_tree().build(root=ROOT, out=out)
    return out


@pytest.mark.parametrize("probe", PROBES.values(), ids=PROBES.keys())
def test_a_contract_reports_a_forbidden_import(probe: Probe, tree: Path) -> None:
    """lint-imports, run as CI runs it, names the planted import under the contract that forbids it."""
    planted = tree.joinpath(*probe.module.split(".")).with_suffix(".py")
    planted.write_text(probe.source)
    try:
        result = subprocess.run(
            [str(LINT_IMPORTS), str(ROOT / ".importlinter"), "--contract", probe.contract, "--no-cache"],
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "COLUMNS": "300"},  # one import a line: rich wraps at the terminal's width
        )
    finally:
        planted.unlink()
    assert result.returncode == 1, result.stdout + result.stderr
    assert probe.want_line in " ".join(result.stdout.split()), result.stdout


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "services").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_cores_are_pure(path: Path) -> None:
    """The pure modules of a service (all but its runner, ``service.py``) import no I/O,
    clock or randomness."""
    if path.name in RUNNERS or path.parent.name not in SERVICE_PACKAGES:
        return
    banned = ("asyncio", "time", "datetime", "random", "uuid", "nats", "kubernetes_asyncio", "aiohttp", "os")
    bad = {m for m in imports_of(path) if m.split(".")[0] in banned}
    assert not bad, bad
