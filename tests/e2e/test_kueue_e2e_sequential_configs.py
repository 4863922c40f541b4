"""Kueue's test/e2e/sequential/ cases of waitforpodsready_test.go, objectretentionpolicies_test.go,
managejobswithoutqueuename_test.go (baseline, and extended's JobSet cases), podintegrationautoenablement_test.go,
workloadpriorityclassdefaulting_test.go and reconcile_test.go on ``kueue-es demo --keep`` (the steps, and the cases
not ported, are in tests/e2e/kueue_e2e_sequential_configs.py).

Each of Kueue's Describes restarts Kueue with its own manager Configuration. A demo's start-up takes up to a minute
of CI's fixed slow-test budget on a loaded 2-core machine, so the Configurations share demos:

- the settings only the deciders read (waitForPodsReady, objectRetentionPolicies, feature gates) are followed from
  the demo's Configuration file, so one demo runs those Describes one after the other, the file rewritten between
  them as Kueue's UpdateKueueConfigurationAndRestart rewrites its ConfigMap (:func:`kueue_e2e_sequential_configs.switch`);
- the settings the API server's webhooks and the watcher read at start (manageJobsWithoutQueueName,
  managedJobsNamespaceSelector, the integrations, WorkloadPriorityClassDefaulting) need a demo started with them:
  the Describes of managejobswithoutqueuename_test.go (baseline, and extended's JobSet cases), reconcile_test.go
  and workloadpriorityclassdefaulting_test.go run on one demo whose Configuration is the union of theirs, which
  changes none of their cases: each case's namespace has the label reconcile_test.go's managedJobsNamespaceSelector
  asks for; kube-system has not, as Kueue's default selector leaves it out, nor has the namespace of extended's
  Describe "ManageJobsWithoutQueueName with namespace selector excluding test namespace", as its selector leaves
  that one out; the gates Kueue's e2e Configuration adds are used by none of them;
- podintegrationautoenablement_test.go's integrations ([statefulset] only) would need a demo of their own: its
  cases run instead on the first demo, whose integrations are ``batch/job`` (all its other cases use) and
  ``statefulset``, during objectretentionpolicies_test.go's last Configuration (no waitForPodsReady timeout, and
  a retention that touches only finished or deactivated Workloads). Kueue's case checks that ``pod`` is not among
  the integrations and that a StatefulSet still runs (its pods' integration enabled implicitly): the same here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e import kueue_e2e_sequential_configs as seq
from tests.e2e.kueue_e2e import demo_system, priority_class, run_steps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


async def test_wait_for_pods_ready_object_retention_and_pod_integration_configurations(tmp_path: Path) -> None:
    """The Describes of waitforpodsready_test.go and objectretentionpolicies_test.go, each on its Configuration,
    and podintegrationautoenablement_test.go's with the last of them (module docstring)."""

    def frameworks(cfg: dict[str, Any]) -> None:
        cfg["integrations"]["frameworks"] = ["batch/job", "statefulset"]

    def tiny_timeout(cfg: dict[str, Any]) -> None:
        frameworks(cfg)
        cfg["waitForPodsReady"] = seq.wait_for_pods_ready(seq.TINY, recovery=None, base=10, limit=1)

    def tiny_recovery(cfg: dict[str, Any]) -> None:
        frameworks(cfg)
        cfg["waitForPodsReady"] = seq.wait_for_pods_ready("5m", recovery=seq.TINY, base=1, limit=2)

    def long_recovery(cfg: dict[str, Any]) -> None:
        frameworks(cfg)
        cfg["waitForPodsReady"] = seq.wait_for_pods_ready("5m", recovery="90s", base=1, limit=1)

    wfpr = seq.wait_for_pods_ready(seq.TINY, recovery=None, base=1, limit=1)

    def retention_off(cfg: dict[str, Any]) -> None:
        frameworks(cfg)
        cfg.pop("featureGates", None)
        cfg["waitForPodsReady"] = wfpr

    def retention_after_deactivation(cfg: dict[str, Any]) -> None:
        frameworks(cfg)
        cfg["objectRetentionPolicies"] = {"workloads": {"afterDeactivatedByKueue": seq.TINY}}
        cfg["waitForPodsReady"] = wfpr

    def retention_tiny(cfg: dict[str, Any]) -> None:
        frameworks(cfg)
        cfg["objectRetentionPolicies"] = {"workloads": {"afterFinished": seq.TINY, "afterDeactivatedByKueue": seq.TINY}}

    config = seq.configuration(tmp_path / "config.yaml", tiny_timeout)
    async with demo_system(tmp_path / "demo", config=config) as e2e:
        # Describe "WaitForPodsReady with tiny Timeout and no RecoveryTimeout"
        await run_steps(e2e, seq.WAIT_FOR_PODS_READY_TIMEOUT)
        # Describe "WaitForPodsReady with default Timeout and a tiny RecoveryTimeout"
        await seq.switch(e2e, config, tiny_recovery)
        await run_steps(e2e, seq.WAIT_FOR_PODS_READY_TINY_RECOVERY)
        # Describe "WaitForPodsReady with default Timeout and a long RecoveryTimeout"
        await seq.switch(e2e, config, long_recovery)
        await run_steps(e2e, seq.WAIT_FOR_PODS_READY_LONG_RECOVERY)
        # Describe "ObjectRetentionPolicies": its case changes the Configuration half way; the second one is that
        # of Describe "ObjectRetentionPolicies with TinyTimeout and RequeuingLimitExceeded", run with it
        await seq.switch(e2e, config, retention_off)
        ns, wl = await seq.orp_deactivated_workload_kept(e2e)
        await seq.switch(e2e, config, retention_after_deactivation)
        await run_steps(
            e2e,
            [lambda e: seq.orp_deactivated_workload_deleted(e, ns, wl), seq.orp_requeuing_limit_exceeded_deletes_job],
        )
        # Describe "ObjectRetentionPolicies with TinyTimeout", and "Auto-Enablement of Pod Integration for
        # Pod-Dependent Frameworks" (its StatefulSet must not meet a tiny waitForPodsReady timeout)
        await seq.switch(e2e, config, retention_tiny)
        await run_steps(e2e, [*seq.RETENTION_TINY, *seq.POD_INTEGRATION_AUTO_ENABLEMENT])


async def test_manage_jobs_without_queue_name_reconcile_and_priority_defaulting(tmp_path: Path) -> None:
    """Describe "ManageJobsWithoutQueueName" (baseline; and extended's JobSet cases, with its Describe "with
    namespace selector excluding test namespace"), "Job reconciliation with
    ManagedJobsNamespaceSelectorAlwaysRespected" and "WorkloadPriorityClassDefaulting" on the union of their
    Configurations (the WorkloadPriorityClass ``default`` the last one's BeforeEach makes is made once, first)."""

    def change(cfg: dict[str, Any]) -> None:
        cfg["manageJobsWithoutQueueName"] = True
        cfg["managedJobsNamespaceSelector"] = {
            "matchExpressions": [{"key": "managed-by-kueue", "operator": "In", "values": ["true"]}]
        }
        cfg["featureGates"] = {"WorkloadPriorityClassDefaulting": True}

    config = seq.configuration(tmp_path / "config.yaml", change)
    async with demo_system(tmp_path / "demo", config=config) as e2e:
        await e2e.kubectl.ok(
            "apply", "--server-side", "-f", str(seq.FIXTURES / "crds" / "jobset.x-k8s.io_jobsets.yaml")
        )
        await e2e.kubectl.ok("wait", "--for", "condition=established", "crd/jobsets.jobset.x-k8s.io")
        await e2e.apply(priority_class("default", 100))
        await run_steps(e2e, [*seq.MANAGE_JOBS_WITHOUT_QUEUE_NAME, *seq.RECONCILE, *seq.PRIORITY_CLASS_DEFAULTING])
