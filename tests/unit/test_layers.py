"""The architecture as code: the import contracts in ``.importlinter`` catch what they must.

ARCHITECTURE.md §1 and STYLE.md habit 9: tools -> services -> scheduling | jobframework ->
projections -> events, never back; the five services never import each other; the Kubernetes
clients stay at the edge. ``.ci/run`` runs ``lint-imports`` over the whole package and fails the
build on a broken contract. These tests hold the contracts themselves to account: each plants one
forbidden import in a copy of the package laid out as installed (``scripts/import_tree.py``) and
asserts that lint-imports names it, so a contract that stopped covering a package (a typo, a
rename, a package-dir mapping grimp cannot see) fails here.
"""

from __future__ import annotations

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
    "a rule reads no clock": Probe(
        module="kueue_es.scheduling.tas.probe",
        source="import time\n",
        contract="pure-folds-and-rules",
        want_line="kueue_es.scheduling.tas.probe -> time",
    ),
    "the job framework does no I/O": Probe(
        module="kueue_es.jobframework.probe",
        source="import asyncio\n",
        contract="pure-folds-and-rules",
        want_line="kueue_es.jobframework.probe -> asyncio",
    ),
    "a decider's core draws no random numbers": Probe(
        module="kueue_es.services.admitter.probe",
        source="import random\n",
        contract="pure-folds-and-rules",
        want_line="kueue_es.services.admitter.probe -> random",
    ),
    "the rules import no service": Probe(
        module="kueue_es.scheduling.probe",
        source="from kueue_es.services.admitter import core\n",
        contract="layers",
        want_line="kueue_es.scheduling.probe -> kueue_es.services.admitter.core",
    ),
    "the job framework imports no service": Probe(
        module="kueue_es.jobframework.probe",
        source="from kueue_es.services.dispatcher import core\n",
        contract="layers",
        want_line="kueue_es.jobframework.probe -> kueue_es.services.dispatcher.core",
    ),
    "the watcher and the dispatcher meet only in the job framework": Probe(
        module="kueue_es.services.watcher.probe",
        source="from kueue_es.services.dispatcher import core\n",
        contract="independent-services",
        want_line="kueue_es.services.watcher.probe -> kueue_es.services.dispatcher.core",
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
