"""Kueue's MultiKueue e2e cases (test/e2e/multikueue/baseline/e2e_test.go) on one multi-cluster demo: a manager
and two workers (:mod:`kueue_es.multikueue_demo`), the manager run with the Configuration of Kueue's MultiKueue
baseline suite (tests/fixtures/kueue-e2e/multikueue-baseline-config.yaml, test/e2e/config/multikueue/baseline/
unchanged). The steps are in tests/e2e/kueue_e2e_multikueue.py, each with its own namespace, MultiKueueClusters,
AdmissionCheck and queues, all run at once (the demo's start-up is shared; CI's slow tests have a fixed budget).
Which of Kueue's MultiKueue cases are elsewhere or not ported, and why, is in docs/multikueue.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from kueue_es.multikueue_demo import WORKERS, Cluster, setup_manifests, start_system
from tests.e2e import kueue_e2e_multikueue
from tests.e2e.kueue_e2e_multikueue import System

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "kueue_es" / "demo_manifests" / "multikueue-setup.yaml"
CONFIG = ROOT / "tests" / "fixtures" / "kueue-e2e" / "multikueue-baseline-config.yaml"


async def test_kueue_multikueue_baseline_e2e_cases(tmp_path: Path) -> None:
    """Every step of kueue_e2e_multikueue on one manager and two workers, at once."""
    manager = Cluster(name="manager", run_dir=tmp_path / "manager")
    workers = [Cluster(name=name, run_dir=tmp_path / name) for name in WORKERS]
    async with contextlib.AsyncExitStack() as stack:
        await start_system(
            stack,
            manager=manager,
            workers=workers,
            setup=setup_manifests(SETUP),
            duration=2.0,
            config_file=CONFIG,
        )
        system = System(manager=manager, workers=workers)
        await asyncio.gather(*(step(system) for step in kueue_e2e_multikueue.STEPS))
