"""The simulated Kubeflow training operators' and Trainer's rules (kueue_es/sim/training.py), pure.

Before them nothing ran a PyTorchJob, JAXJob, MPIJob or TrainJob on the emulated cluster: an admitted one made
no pods, never reported Running nor finished, and held its quota until deleted (Kueue's extended e2e cases of
these kinds, tests/e2e/kueue_e2e_kubeflow.py, could not run).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es.events import manifests
from kueue_es.sim import training

#: The Trainer's published torch-distributed ClusterTrainingRuntime.
TORCH_DISTRIBUTED = yaml.safe_load(
    (Path(__file__).parents[1] / "fixtures/crds/samples/clustertrainingruntime-torch-distributed.yaml").read_text()
)

NOW = "2026-12-05T07:00:00Z"
PYTORCH = training.KINDS["PyTorchJob"]
JAX = training.KINDS["JAXJob"]
MPI = training.KINDS["MPIJob"]


def template(*, restart: str | None = "Never") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "agnhost"}], "nodeSelector": {"zone": "a"}}
    if restart:
        spec["restartPolicy"] = restart
    return {"metadata": {"labels": {"app": "x"}}, "spec": spec}


def job(kind: training.Kind, specs: dict[str, int], *, suspend: bool = False, status: Any = None) -> dict[str, Any]:
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "uid-1",
            "annotations": {training.SIM_DURATION_ANNOTATION: "60"},
        },
        "spec": {
            "runPolicy": {"suspend": suspend},
            kind.field: {t: {"replicas": n, "template": template()} for t, n in specs.items()},
        },
        "status": status or {},
    }


def pod(name: str, replica_type: str, index: int, phase: str) -> dict[str, Any]:
    labels = {training.REPLICA_TYPE_LABEL: replica_type, training.REPLICA_INDEX_LABEL: str(index)}
    return {"metadata": {"name": name, "labels": labels}, "status": {"phase": phase}}


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_a_started_pytorchjob_gets_a_pod_per_replica_with_the_operators_labels() -> None:
    out = training.sync(PYTORCH, job(PYTORCH, {"Master": 1, "Worker": 2}), [], now=NOW)
    assert [p["metadata"]["name"] for p in out.create] == ["j-master-0", "j-worker-0", "j-worker-1"]
    master = out.create[0]
    assert master["metadata"]["labels"] == {
        "app": "x",
        training.JOB_NAME_LABEL: "j",
        training.OPERATOR_NAME_LABEL: "pytorchjob-controller",
        training.REPLICA_TYPE_LABEL: "master",
        training.REPLICA_INDEX_LABEL: "0",
        training.JOB_ROLE_LABEL: "master",
    }
    assert training.JOB_ROLE_LABEL not in out.create[1]["metadata"]["labels"]
    assert master["metadata"]["annotations"] == {training.SIM_DURATION_ANNOTATION: "60"}
    [owner] = master["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("PyTorchJob", "uid-1", True)
    assert master["spec"]["nodeSelector"] == {"zone": "a"} and master["spec"]["restartPolicy"] == "Never"
    assert conditions(out.status) == {"Created": ("True", "PyTorchJobCreated")}
    assert out.status["startTime"] == NOW


@pytest.mark.parametrize(
    ("replica", "pod_template", "want"),
    [
        ({"restartPolicy": "ExitCode"}, "Always", "Never"),
        ({"restartPolicy": "OnFailure"}, "Never", "OnFailure"),
        ({}, "Never", "Never"),
        ({}, None, "OnFailure"),
    ],
)
def test_the_pods_restart_policy(replica: dict[str, Any], pod_template: str | None, want: str) -> None:
    """The replica spec's restartPolicy (ExitCode: Never), else the template's, else OnFailure."""
    obj = job(PYTORCH, {"Master": 1})
    obj["spec"]["pytorchReplicaSpecs"]["Master"].update(replica, template=template(restart=pod_template))
    [made] = training.sync(PYTORCH, obj, [], now=NOW).create
    assert made["spec"]["restartPolicy"] == want


def test_running_once_every_pod_runs_and_no_pod_made_twice() -> None:
    pods = [pod("j-worker-0", "worker", 0, "Running"), pod("j-worker-1", "worker", 1, "Pending")]
    out = training.sync(JAX, job(JAX, {"Worker": 2}), pods, now=NOW)
    assert out.create == [] and "Running" not in conditions(out.status)
    assert out.status["replicaStatuses"] == {"Worker": {"active": 2, "succeeded": 0, "failed": 0}}
    pods[1]["status"]["phase"] = "Running"
    out = training.sync(JAX, job(JAX, {"Worker": 2}), pods, now=NOW)
    assert conditions(out.status)["Running"] == ("True", "JAXJobRunning")


def test_a_jaxjob_succeeds_once_all_its_pods_succeeded() -> None:
    pods = [pod("j-worker-0", "worker", 0, "Succeeded"), pod("j-worker-1", "worker", 1, "Running")]
    out = training.sync(JAX, job(JAX, {"Worker": 2}), pods, now=NOW)
    assert "Succeeded" not in conditions(out.status)
    pods[1]["status"]["phase"] = "Succeeded"
    out = training.sync(JAX, job(JAX, {"Worker": 2}), pods, now=NOW)
    assert conditions(out.status)["Succeeded"] == ("True", "JAXJobSucceeded")
    assert "Running" not in conditions(out.status)  # never set on this status: not made up False
    assert out.status["completionTime"] == NOW and out.create == []


def test_an_mpijob_succeeds_with_its_launcher_and_its_running_workers_go() -> None:
    """Kueue's sample MPIJob asks ``cleanPodPolicy: Running``: its running workers are deleted once the launcher
    succeeded, counted as succeeded (ReconcileJobs: Succeeded += Active)."""
    pods = [pod("j-launcher-0", "launcher", 0, "Succeeded"), pod("j-worker-0", "worker", 0, "Running")]
    mpijob = job(MPI, {"Launcher": 1, "Worker": 1})
    mpijob["spec"]["runPolicy"]["cleanPodPolicy"] = "Running"
    out = training.sync(MPI, mpijob, pods, now=NOW)
    assert conditions(out.status)["Succeeded"] == ("True", "MPIJobSucceeded")
    assert [p["metadata"]["name"] for p in out.delete] == ["j-worker-0"]
    assert out.status["replicaStatuses"]["Worker"] == {"active": 0, "succeeded": 1, "failed": 0}
    after = training.sync(MPI, {**mpijob, "status": out.status}, pods[:1], now=NOW)
    assert after.status["replicaStatuses"] == out.status["replicaStatuses"], "a finished job's pods not recounted"


@pytest.mark.parametrize(("policy", "deleted"), [(None, []), ("None", []), ("All", ["j-master-0", "j-worker-0"])])
def test_a_finished_jobs_pods_go_as_its_clean_pod_policy_says(policy: str | None, deleted: list[str]) -> None:
    """DeletePodsAndServices: without a cleanPodPolicy (None, every operator's default) a PyTorchJob whose Master
    succeeded keeps its running Worker, which runs to its end; ``All`` deletes every pod. Before, the running
    ones were always deleted: an AppWrapper's PyTorchJob then never had all its pods succeed and the AppWrapper
    (which waits for them) never finished."""
    pods = [pod("j-master-0", "master", 0, "Succeeded"), pod("j-worker-0", "worker", 0, "Running")]
    pytorchjob = job(PYTORCH, {"Master": 1, "Worker": 1})
    if policy is not None:
        pytorchjob["spec"]["runPolicy"]["cleanPodPolicy"] = policy
    out = training.sync(PYTORCH, pytorchjob, pods, now=NOW)
    assert conditions(out.status)["Succeeded"][0] == "True"
    assert [p["metadata"]["name"] for p in out.delete] == deleted
    again = training.sync(PYTORCH, {**pytorchjob, "status": out.status}, pods, now=NOW)
    assert [p["metadata"]["name"] for p in again.delete] == deleted and again.create == []


def test_a_failed_master_fails_the_pytorchjob() -> None:
    pods = [pod("j-master-0", "master", 0, "Failed")]
    out = training.sync(PYTORCH, job(PYTORCH, {"Master": 1}), pods, now=NOW)
    assert conditions(out.status)["Failed"] == ("True", "PyTorchJobFailed")


def test_a_suspended_job_loses_its_pods_and_says_so_then_resumes() -> None:
    running = job(PYTORCH, {"Master": 1}, status={"startTime": NOW, "conditions": []})
    pods = [pod("j-master-0", "master", 0, "Running")]
    running["spec"]["runPolicy"]["suspend"] = True
    out = training.sync(PYTORCH, running, pods, now=NOW)
    assert [p["metadata"]["name"] for p in out.delete] == ["j-master-0"] and out.create == []
    assert conditions(out.status)["Suspended"] == ("True", "PyTorchJobSuspended")
    assert "startTime" not in out.status
    assert out.status["replicaStatuses"] == {"Master": {"active": 0, "succeeded": 0, "failed": 0}}
    resumed = job(PYTORCH, {"Master": 1}, status=out.status)
    out = training.sync(PYTORCH, resumed, [], now=NOW)
    assert conditions(out.status)["Suspended"] == ("False", "PyTorchJobResumed")
    assert [p["metadata"]["name"] for p in out.create] == ["j-master-0"]


def state(status: dict[str, Any]) -> str:
    """What ``kubectl get`` prints as STATE: the CRDs' printer column ``.status.conditions[-1:].type``."""
    return str(status["conditions"][-1]["type"])


def test_the_last_condition_is_the_jobs_state_as_the_operators_order_them() -> None:
    """setCondition moves each changed condition to the end (training-operator pkg/util/status.go): a job Kueue
    created suspended and then started reads Running while its pods run and Succeeded at the end. Before, the
    simulated operator changed conditions in place, so the ``Suspended`` (False, Resumed) condition stayed last
    and ``kubectl get pytorchjob`` printed STATE Suspended for a running job."""
    created = training.sync(PYTORCH, job(PYTORCH, {"Master": 1, "Worker": 1}, suspend=True), [], now=NOW)
    assert [c["type"] for c in created.status["conditions"]] == ["Created", "Suspended"]
    assert "Running" not in conditions(created.status)  # it never ran: no Running False (IsRunning first)
    started = job(PYTORCH, {"Master": 1, "Worker": 1}, status=created.status)
    resumed = training.sync(PYTORCH, started, [], now="2026-12-05T07:00:01Z")
    assert state(resumed.status) == "Suspended" and conditions(resumed.status)["Suspended"][0] == "False"
    pods = [pod("j-master-0", "master", 0, "Running"), pod("j-worker-0", "worker", 0, "Running")]
    running = training.sync(PYTORCH, job(PYTORCH, {"Master": 1, "Worker": 1}, status=resumed.status), pods, now=NOW)
    assert [c["type"] for c in running.status["conditions"]] == ["Created", "Suspended", "Running"]
    again = training.sync(PYTORCH, job(PYTORCH, {"Master": 1, "Worker": 1}, status=running.status), pods, now="x")
    assert again.status["conditions"] == running.status["conditions"], "set again as it is: left where it is"
    pods[0]["status"]["phase"] = "Succeeded"
    done = training.sync(PYTORCH, job(PYTORCH, {"Master": 1, "Worker": 1}, status=running.status), pods, now=NOW)
    assert [c["type"] for c in done.status["conditions"]] == ["Created", "Suspended", "Running", "Succeeded"]
    assert conditions(done.status)["Running"] == ("False", "PyTorchJobRunning")


def test_a_preempted_running_job_reads_suspended() -> None:
    """Suspended while running: Running False (<Kind>Suspended), then Suspended True, both moved last; resumed,
    Suspended False moves last until Running is set again (common/job.go ReconcileJobs)."""
    status = {"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated"}]}
    status["conditions"].append({"type": "Running", "status": "True", "reason": "PyTorchJobRunning"})
    out = training.sync(PYTORCH, job(PYTORCH, {"Master": 1}, suspend=True, status=status), [], now=NOW)
    assert [(c["type"], c["status"]) for c in out.status["conditions"]] == [
        ("Created", "True"),
        ("Running", "False"),
        ("Suspended", "True"),
    ]
    again = training.sync(PYTORCH, job(PYTORCH, {"Master": 1}, status=out.status), [], now=NOW)
    assert [c["type"] for c in again.status["conditions"]] == ["Created", "Running", "Suspended"]
    pods = [pod("j-master-0", "master", 0, "Running")]
    running = training.sync(PYTORCH, job(PYTORCH, {"Master": 1}, status=again.status), pods, now=NOW)
    assert state(running.status) == "Running"


def test_a_finished_job_makes_no_pods() -> None:
    done = job(PYTORCH, {"Master": 1}, status={"conditions": [{"type": "Succeeded", "status": "True"}]})
    out = training.sync(PYTORCH, done, [pod("j-master-0", "master", 0, "Succeeded")], now=NOW)
    assert out.create == [] and out.delete == []


# -- TrainJob --------------------------------------------------------------------------------------------------------

RUNTIMES = {"ClusterTrainingRuntime": {("", "torch-distributed"): TORCH_DISTRIBUTED}}
SPOT = {"instance-type": "spot"}


def trainjob(*, suspend: bool, patch_selector: dict[str, str] | None = None, status: Any = None) -> dict[str, Any]:
    kueue_patch: dict[str, Any] = {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {"template": {"spec": {}}},
    }
    if patch_selector:
        pod_template = {"spec": {"nodeSelector": patch_selector}}
        replicated = [{"name": "node", "template": {"spec": {"template": pod_template}}}]
        kueue_patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = replicated
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "ns", "uid": "uid-t"},
        "spec": {
            "suspend": suspend,
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"resourcesPerNode": {"requests": {"cpu": "500m"}}},
            "runtimePatches": [kueue_patch],
        },
        "status": status or {},
    }


def test_a_trainjob_gets_its_jobset_suspended_as_it_is() -> None:
    out = training.sync_trainjob(trainjob(suspend=True), None, RUNTIMES, now=NOW)
    made = out.jobset_create
    assert made is not None and made["metadata"]["name"] == "t" and made["spec"]["suspend"] is True
    [owner] = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainJob", "uid-t", True)
    [node] = made["spec"]["replicatedJobs"]
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "500m"}}
    assert conditions(out.status) == {"Suspended": ("True", "Suspended")}


def test_a_started_trainjob_resumes_its_jobset_with_kueues_patch() -> None:
    child = training.trainjob_jobset(trainjob(suspend=True), RUNTIMES)
    started = trainjob(suspend=False, patch_selector=SPOT, status={"conditions": [{"type": "Suspended"}]})
    out = training.sync_trainjob(started, child, RUNTIMES, now=NOW)
    assert out.jobset_create is None and out.jobset_patch is not None
    assert out.jobset_patch["spec"]["suspend"] is False
    [node] = out.jobset_patch["spec"]["replicatedJobs"]
    assert node["template"]["spec"]["template"]["spec"]["nodeSelector"] == SPOT
    assert conditions(out.status)["Suspended"] == ("False", "Resumed")


def test_a_stopped_trainjob_suspends_its_jobset() -> None:
    child = training.trainjob_jobset(trainjob(suspend=False, patch_selector=SPOT), RUNTIMES)
    out = training.sync_trainjob(trainjob(suspend=True), child, RUNTIMES, now=NOW)
    assert out.jobset_patch == {"spec": {"suspend": True}}


def test_a_trainjob_completes_with_its_jobset_and_reports_its_jobs() -> None:
    child = copy.deepcopy(training.trainjob_jobset(trainjob(suspend=False), RUNTIMES))
    jobs = [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}]
    child["status"] = {
        "replicatedJobsStatus": jobs,
        "conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}],
    }
    out = training.sync_trainjob(trainjob(suspend=False), child, RUNTIMES, now=NOW)
    assert conditions(out.status)["Complete"] == ("True", "AllJobsCompleted")  # the JobSet's, renamed
    assert out.status["jobsStatus"] == jobs and out.jobset_patch is None


def test_a_trainjobs_conditions_stay_in_place_as_the_trainers() -> None:
    """The Trainer sets a TrainJob's conditions with apimachinery's SetStatusCondition (trainjob_controller.go
    setSuspendedCondition, the jobset plugin's Status): in place, so a TrainJob Kueue started keeps its
    Suspended (False, Resumed) condition first and last until Complete is appended; ``kubectl get trainjob``
    prints STATE Suspended while it runs, with the real Trainer too, then Complete."""
    child = copy.deepcopy(training.trainjob_jobset(trainjob(suspend=False), RUNTIMES))
    started = trainjob(suspend=False, status={"conditions": [{"type": "Suspended", "status": "True"}]})
    running = training.sync_trainjob(started, child, RUNTIMES, now=NOW)
    assert [(c["type"], c["status"]) for c in running.status["conditions"]] == [("Suspended", "False")]
    completed = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed"}
    child["status"] = {"conditions": [completed]}
    done = training.sync_trainjob(trainjob(suspend=False, status=running.status), child, RUNTIMES, now=NOW)
    assert [c["type"] for c in done.status["conditions"]] == ["Suspended", "Complete"]
    assert done.status["conditions"][-1]["message"] == "jobset completed"


def test_a_trainjob_without_its_runtime_is_not_built() -> None:
    with pytest.raises(manifests.ManifestError, match="torch-distributed"):
        training.sync_trainjob(trainjob(suspend=True), None, {}, now=NOW)


def test_an_mpijobs_pods_carry_the_mpi_operators_launcher_and_worker_roles() -> None:
    """mpi_job_controller.go defaultLabels: ``training.kubeflow.org/job-role`` is ``launcher`` or ``worker``
    (Kueue's TAS e2e, mpijob_test.go readRankAssignmentsFromMPIJobPods, finds the worker ranks by it)."""
    out = training.sync(MPI, job(MPI, {"Launcher": 1, "Worker": 2}), [], now=NOW)
    roles = {p["metadata"]["name"]: p["metadata"]["labels"].get(training.JOB_ROLE_LABEL) for p in out.create}
    assert roles == {"j-launcher-0": "launcher", "j-worker-0": "worker", "j-worker-1": "worker"}


def test_an_mpijob_running_its_launcher_as_a_worker_numbers_its_workers_from_one() -> None:
    """The launcher is rank 0, the workers' replica indexes follow from 1 (Kueue's mpijob webhook sets their
    ``pod-index-offset`` to 1; mpijob_test.go expects worker/1..3 on the first three nodes)."""
    mpijob = job(MPI, {"Launcher": 1, "Worker": 2})
    mpijob["spec"]["runLauncherAsWorker"] = True
    out = training.sync(MPI, mpijob, [], now=NOW)
    indexes = sorted(
        (p["metadata"]["labels"][training.JOB_ROLE_LABEL], p["metadata"]["labels"][training.REPLICA_INDEX_LABEL])
        for p in out.create
    )
    assert indexes == [("launcher", "0"), ("worker", "1"), ("worker", "2")]
    again = training.sync(MPI, mpijob, out.create, now=NOW)
    assert again.create == []
