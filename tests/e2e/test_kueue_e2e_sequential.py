"""Kueue's test/e2e/sequential/ cases of baseline/admission_fair_sharing_test.go, custom_metrics_test.go,
metrics_test.go, quota_check_strategy_test.go, visibility_server_test.go and
extended/workloadidentifierannotations_test.go (tests/e2e/kueue_e2e_sequential.py, which names the cases not
ported and why), on one ``kueue-es demo --keep``.

Kueue restarts its manager with another Configuration for each of those files; here their Configurations are
merged into one (tests/fixtures/kueue-e2e-sequential/controller_manager_config.yaml, which says why they do not
meet), so the cases share one demo's start-up: CI's slow tests have a fixed budget.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import kueue_e2e_sequential
from tests.e2e.kueue_e2e import demo_system, run_steps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONFIG = FIXTURES / "kueue-e2e-sequential" / "controller_manager_config.yaml"
LWS_CRD = FIXTURES / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_kueue_sequential_e2e_cases_on_the_demo(tmp_path: Path) -> None:
    """Every step of kueue_e2e_sequential.py on one demo with the merged Configuration, at once (the
    LeaderWorkerSet CRD installed first, as a user installs that controller)."""
    async with demo_system(tmp_path / "demo", config=CONFIG) as e2e:
        await e2e.kubectl.ok("apply", "--server-side", "-f", str(LWS_CRD))
        await e2e.kubectl.ok("wait", "--for", "condition=established", "crd/leaderworkersets.leaderworkerset.x-k8s.io")
        await run_steps(e2e, kueue_e2e_sequential.STEPS)
