"""Kueue's own end-to-end cases of test/e2e/singlecluster/baseline/ (job_test.go, pod_test.go, statefulset_test.go,
deployment_test.go, e2e_v1beta1_test.go, fair_sharing_test.go, hierarchical_cohort_test.go, metrics_test.go,
visibility_test.go, concurrent_admission_test.go (kueue_e2e_concurrent_jobs.py: a Job's Workload as the parent) and what
of prometheus_test.go runs without a Prometheus), test/integration's controller/concurrentadmission/
concurrent_admission_test.go (kueue_e2e_concurrent.py, Workloads of no job) and extended/jobset_test.go,
leaderworkerset_test.go, kuberay_test.go, kuberay_autoscaling_test.go, appwrapper_test.go, pytorchjob_test.go,
jaxjob_test.go, mpijob_test.go and trainjob_test.go on one ``kueue-es demo --keep``, driven through the real kubectl as
Kueue's tests drive a kind cluster, with the manager Configuration Kueue's e2e suite runs with
(tests/fixtures/kueue-e2e/: fair sharing on, its feature gates, LocalQueueMetrics, ClusterQueue resource metrics; the
extended suite's test/e2e/config/extended/ differs from it only in leader election, which kueue-es does not read).

The steps are in tests/e2e/kueue_e2e_job.py, kueue_e2e_pod.py, kueue_e2e_serving.py, kueue_e2e_v1beta1.py (Kueue's
objects written and read as the deprecated v1beta1), kueue_e2e_jobset.py, kueue_e2e_lws.py, kueue_e2e_cohort.py,
kueue_e2e_metrics.py, kueue_e2e_visibility.py, kueue_e2e_ray.py and kueue_e2e_kubeflow.py (the JobSet,
LeaderWorkerSet, KubeRay, AppWrapper, PyTorchJob, JAXJob, MPIJob, TrainJob and ClusterTrainingRuntime CRDs and the
Trainer's torch-distributed runtime installed first, as a user installs those controllers; the KubeRay and AppWrapper cases that need Ray
running in the pods are named in kueue_e2e_ray.py), one per ``ginkgo.It``, each in its own namespace and ClusterQueue,
all run at once on one system (its start-up is shared; CI's slow tests have a fixed budget). Kueue's cases not here,
and why:

- pod_test.go "Unscheduled Pod which is deleted can be replaced in group": needs a kube-scheduler that leaves a pod
  whose nodeSelector matches no node Pending with PodScheduled=False ``Unschedulable``;
- statefulset_test.go "should allow to change queue name if ReadyReplicas=0" and "should allow to change queue
  name after scale up from zero (two-phase pattern)": kueue-es does not follow a StatefulSet's new queue-name label
  onto its pods and Workload (statefulset_reconciler.go syncQueueLabel, reconcileWorkload);
- job_test.go "keeps the reserved quota equal to the running pods": makes chosen completion indexes of an elastic
  Indexed Job succeed by exec into their pods, which the simulated controllers do not run for an elastic Job;
- leaderworkerset_test.go's restart-policy cases (RecreateGroupOnPodRestart, NoneRestartPolicy): the simulated
  LeaderWorkerSet controller has no restart policies; its other cases (scale up, priority updates, queue-name on
  pod templates or changed) are not ported yet.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import (
    kueue_e2e_cohort,
    kueue_e2e_concurrent,
    kueue_e2e_concurrent_jobs,
    kueue_e2e_job,
    kueue_e2e_jobset,
    kueue_e2e_kubeflow,
    kueue_e2e_kueuectl,
    kueue_e2e_lws,
    kueue_e2e_metrics,
    kueue_e2e_pod,
    kueue_e2e_ray,
    kueue_e2e_serving,
    kueue_e2e_v1beta1,
    kueue_e2e_visibility,
)
from tests.e2e.kueue_e2e import demo_system, run_steps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CRDS = FIXTURES / "crds"
KUEUE_E2E_CONFIG = FIXTURES / "kueue-e2e" / "controller_manager_config.yaml"

#: The CRDs of the controllers the steps use (JobSet, LeaderWorkerSet, KubeRay, AppWrapper, the Kubeflow training
#: operators and Trainer), as a user installs them.
CRD_FILES = (
    "jobset.x-k8s.io_jobsets.yaml",
    "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    "ray.io_rayclusters.yaml",
    "ray.io_rayjobs.yaml",
    "workload.codeflare.dev_appwrappers.yaml",
    "kubeflow.org_pytorchjobs.yaml",
    "kubeflow.org_jaxjobs.yaml",
    "kubeflow.org_mpijobs.yaml",
    "trainer.kubeflow.org_trainjobs.yaml",
    "trainer.kubeflow.org_clustertrainingruntimes.yaml",
)
CRD_NAMES = (
    "jobsets.jobset.x-k8s.io",
    "leaderworkersets.leaderworkerset.x-k8s.io",
    "rayclusters.ray.io",
    "rayjobs.ray.io",
    "appwrappers.workload.codeflare.dev",
    "pytorchjobs.kubeflow.org",
    "jaxjobs.kubeflow.org",
    "mpijobs.kubeflow.org",
    "trainjobs.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
)
TORCH_DISTRIBUTED = CRDS / "samples" / "clustertrainingruntime-torch-distributed.yaml"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


async def test_kueue_baseline_e2e_cases_on_the_demo(tmp_path: Path) -> None:
    """Every step of Kueue's baseline suite's modules on one demo, at once."""
    steps = [
        *kueue_e2e_job.STEPS,
        *kueue_e2e_pod.STEPS,
        *kueue_e2e_serving.STEPS,
        *kueue_e2e_v1beta1.STEPS,
        *kueue_e2e_cohort.STEPS,
        *kueue_e2e_concurrent.STEPS,
        *kueue_e2e_concurrent_jobs.STEPS,
        *kueue_e2e_metrics.STEPS,
        *kueue_e2e_visibility.STEPS,
        *kueue_e2e_kueuectl.STEPS,
    ]
    async with demo_system(tmp_path / "demo", config=KUEUE_E2E_CONFIG) as e2e:
        await run_steps(e2e, steps)


async def test_kueue_extended_e2e_cases_on_the_demo(tmp_path: Path) -> None:
    """Every step of Kueue's extended suite's modules (the integrations' controllers installed first) on a demo of
    its own, at once: one demo for all of them ran some sixty steps at once, and the simulated controllers of a
    loaded 2-core machine then took longer than the steps wait (StatefulSet replicas a minute apart)."""
    steps = [
        *kueue_e2e_jobset.STEPS,
        *kueue_e2e_lws.STEPS,
        *kueue_e2e_ray.STEPS,
        *kueue_e2e_kubeflow.STEPS,
    ]
    async with demo_system(tmp_path / "demo", config=KUEUE_E2E_CONFIG) as e2e:
        for crd in CRD_FILES:
            await e2e.kubectl.ok("apply", "--server-side", "-f", str(CRDS / crd))
        await e2e.kubectl.ok("wait", "--for", "condition=established", *(f"crd/{name}" for name in CRD_NAMES))
        # the Trainer's runtime Kueue's TrainJob cases name, installed with the Trainer as in Kueue's suite
        await e2e.kubectl.ok("apply", "--server-side", "-f", str(TORCH_DISTRIBUTED))
        await run_steps(e2e, steps)
