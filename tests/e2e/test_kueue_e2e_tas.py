"""Kueue's Topology-Aware Scheduling end-to-end cases, test/e2e/singlecluster/baseline/tas_test.go and
test/e2e/tas/baseline/ (job_test.go, pod_group_test.go, statefulset_test.go, hotswap_test.go), on one
``kueue-es demo --keep`` with the manager Configuration both suites run with (test/e2e/config/default, as
tests/fixtures/kueue-e2e/), driven through the real kubectl; the steps and the Nodes, made as Kueue's kind clusters
label theirs, are in tests/e2e/kueue_e2e_tas.py. All steps run at once (CI's slow tests have a fixed budget).

Kueue's cases not here, and why:

- hotswap_test.go "Should replace a node when it becomes NotReady and pods are Pending": stops the node's kubelet
  (``docker exec ... systemctl stop kubelet``) and keeps the pods behind an artificial scheduling gate; the
  emulator's pods have no kubelet to stop.

Two hotswap_test.go cases were left out until a new user's TAS trial had these fixed: "Should replace a node when
it becomes tainted with NoExecute and tolerationSeconds" needed the simulated taint-eviction controller to evict the
pods (kueue_es/sim/controllers.py); "... tainted with NoSchedule and pod fails" needed the ungater to keep pods off a
node listed in status.unhealthyNodes and Kueue's node controller's markPodsFailed for a pod ungated there first
(services/dispatcher/ungating.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import kueue_e2e_tas
from tests.e2e.kueue_e2e import demo_system, run_steps

KUEUE_E2E_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "kueue-e2e" / "controller_manager_config.yaml"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_kueue_tas_e2e_cases_on_the_demo(tmp_path: Path) -> None:
    """Every step of kueue_e2e_tas.py on one demo with Kueue's e2e Configuration, at once, after the singlecluster
    kind cluster's two workers are made (each TAS step makes its own eight)."""
    async with demo_system(tmp_path / "demo", config=KUEUE_E2E_CONFIG) as e2e:
        await kueue_e2e_tas.kind_cluster_nodes(e2e)
        await run_steps(e2e, kueue_e2e_tas.STEPS)
