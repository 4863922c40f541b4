"""MPIJob (kubeflow.org/v2beta1) and TrainJob (Kubeflow Trainer v2) to Workloads, and their start and stop, pure
(jobframework/integrations/mpijob.py, trainjob.py).

MPIJob: Kueue's sample (jobs/sample-mpijob.yaml) gives pod sets ``launcher`` and ``worker`` (mpijob_controller.go
PodSets: that order, ``replicas`` pods, 1 when absent, a null replica spec skipped); the PriorityClass order of
TestCalcPriorityClassName; the webhook's pod index offset for ``runLauncherAsWorker``. TrainJob: the pod sets of
the JobSet its runtime gives (trainjob_controller_test.go TestReconciler), the Trainer's numNodes and
resourcesPerNode rules, runtimePatches merged, and Kueue's own runtimePatches entry written on a start and
emptied on a stop (TestRunWithPodsetsInfo, TestRestorePodSetsInfo).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_es.events import manager_config, types
from kueue_es.jobframework import integrations, workloads
from kueue_es.jobframework.integrations import trainjob
from kueue_es.services.dispatcher.core import PodSetInfo
from kueue_es.services.watcher import service as watcher_service
from tests.kube import examples

TRAINER = "trainer.kubeflow.org/v1alpha1"
ANCESTOR = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}


def converted(job: dict[str, Any], context: workloads.Context | None = None) -> types.Fact | None:
    return integrations.facts(integrations.registry()[job["kind"]], job, context=context)


def observed(job: dict[str, Any], context: workloads.Context | None = None) -> Any:
    fact = converted(job, context)
    assert isinstance(fact, types.WorkloadObserved), fact
    return fact.workload


def shape(wl: Any) -> list[tuple[str, int]]:
    return [(ps.name, ps.count) for ps in wl.spec.pod_sets]


# -- MPIJob ---------------------------------------------------------------------------------------


def mpijob() -> dict[str, Any]:
    [doc] = examples.load("jobs/sample-mpijob.yaml")
    doc["metadata"].update(uid="uid-1", namespace="default")
    return doc


def test_sample_mpijob() -> None:
    wl = observed(mpijob())
    assert shape(wl) == [("launcher", 1), ("worker", 2)]
    assert wl.spec.pod_sets[1].requests == {"cpu": 1000, "memory": 1024**3}
    assert wl.spec.queue_name == "user-queue"
    assert wl.metadata.name.startswith("mpijob-pi-")
    assert (wl.owner.api_version, wl.owner.kind, wl.owner.name) == ("kubeflow.org/v2beta1", "MPIJob", "pi")


def test_mpijob_pod_sets_in_kueue_order_with_defaults() -> None:
    job = mpijob()
    specs = job["spec"]["mpiReplicaSpecs"]
    job["spec"]["mpiReplicaSpecs"] = {"Worker": specs["Worker"], "Launcher": specs["Launcher"], "Extra": {}}
    del specs["Launcher"]["replicas"]
    assert shape(observed(job)) == [("launcher", 1), ("worker", 2)], "Kueue's order; other replica types ignored"
    job["spec"]["mpiReplicaSpecs"]["Launcher"] = None
    assert shape(observed(job)) == [("worker", 2)], "a null replica spec is skipped"


@pytest.mark.parametrize(
    ("run_policy", "launcher", "worker", "want"),
    [
        ("scheduling-priority", "launcher-priority", "worker-priority", "scheduling-priority"),
        (None, "launcher-priority", "worker-priority", "launcher-priority"),
        (None, None, "worker-priority", "worker-priority"),
        (None, None, None, None),
    ],
)
def test_mpijob_priority_class_order(
    run_policy: str | None, launcher: str | None, worker: str | None, want: Any
) -> None:
    job = mpijob()
    specs = job["spec"]["mpiReplicaSpecs"]
    for replica_type, name in (("Launcher", launcher), ("Worker", worker)):
        if name:
            specs[replica_type]["template"]["spec"]["priorityClassName"] = name
    if run_policy:
        job["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": run_policy}
    names = ("scheduling-priority", "launcher-priority", "worker-priority")
    classes = {n: workloads.PriorityClass(name=n, value=v) for v, n in enumerate(names, start=1)}
    wl = observed(job, workloads.Context(priority_classes=classes))
    assert (wl.spec.priority_class_ref.name if wl.spec.priority_class_ref else None) == want


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda s: s.update(mpiReplicaSpecs=[]), "spec.mpiReplicaSpecs", "mapping"),
        (lambda s: s["mpiReplicaSpecs"].update(Worker="w"), "spec.mpiReplicaSpecs[Worker]", "replica spec"),
        (lambda s: s["mpiReplicaSpecs"]["Worker"].update(replicas=-1), "spec.mpiReplicaSpecs[Worker].replicas", "-1"),
        (lambda s: s.update(mpiReplicaSpecs={}), "spec.mpiReplicaSpecs", "at least one"),
    ],
)
def test_bad_mpijobs_are_rejected_naming_the_field(change: Any, field: str, problem: str) -> None:
    job = mpijob()
    change(job["spec"])
    fact = converted(job)
    assert isinstance(fact, types.ObjectRejected), fact
    assert (fact.kind, fact.name, fact.field) == ("MPIJob", "pi", field)
    assert problem in fact.problem


def test_mpijob_run_launcher_as_worker_gets_the_worker_pod_index_offset() -> None:
    integration = integrations.registry()["MPIJob"]
    assert integration.on_create is not None
    job = mpijob()
    integration.on_create(job)
    assert "metadata" not in job["spec"]["mpiReplicaSpecs"]["Worker"]["template"], "only with runLauncherAsWorker"
    job["spec"]["runLauncherAsWorker"] = True
    integration.on_create(job)
    worker_meta = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]
    assert worker_meta["annotations"] == {"kueue.x-k8s.io/pod-index-offset": "1"}
    grouped = mpijob()
    grouped["spec"]["runLauncherAsWorker"] = True
    launcher = grouped["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    launcher["metadata"] = {"annotations": {"kueue.x-k8s.io/podset-group-name": "g"}}
    integration.on_create(grouped)
    assert "metadata" not in grouped["spec"]["mpiReplicaSpecs"]["Worker"]["template"], "a pod set group: no offset"


def test_mpijob_status_readers_and_start_stop() -> None:
    integration = integrations.registry()["MPIJob"]
    job = mpijob()
    job["status"] = {
        "replicaStatuses": {"Launcher": {"active": 0}, "Worker": {"active": 2}},
        "conditions": [{"type": "Running", "status": "True"}],
    }
    assert integration.active(job) and integration.pods_ready(job) and integration.finished(job) is None
    job["status"] = {"conditions": [{"type": "Failed", "status": "True", "message": "mpirun exited 1"}]}
    assert not integration.active(job) and not integration.pods_ready(job)
    fact = converted(job)
    assert isinstance(fact, types.WorkloadFinished) and (fact.succeeded, fact.message) == (False, "mpirun exited 1")

    created = mpijob()
    created["spec"]["runPolicy"]["suspend"] = True
    infos = [PodSetInfo(name=n, node_selector={"instance-type": "spot"}) for n in ("launcher", "worker")]
    started = integrations.changed_job(
        integration, created, templates={i.name: i.started for i in infos}, suspend=False
    )
    assert started["spec"]["runPolicy"]["suspend"] is False
    for replica_type in ("Launcher", "Worker"):
        assert started["spec"]["mpiReplicaSpecs"][replica_type]["template"]["spec"]["nodeSelector"] == {
            "instance-type": "spot"
        }
    stopped = integrations.changed_job(integration, started, templates={i.name: i.stopped for i in infos}, suspend=True)
    assert stopped == created


# -- TrainJob -------------------------------------------------------------------------------------


def replicated_job(name: str, *, labels: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    container = {"name": "node", "image": "trainer", "resources": {"requests": {"cpu": "1"}}}
    template: dict[str, Any] = {"spec": {"template": {"spec": {"containers": [container]}}}}
    if labels:
        template["metadata"] = {"labels": labels}
    return {"name": name, "template": template, **fields}


def runtime(
    *jobs: dict[str, Any], kind: str = "ClusterTrainingRuntime", ml_policy: dict[str, Any] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "test"}
    if kind == "TrainingRuntime":
        meta["namespace"] = "ns"
    spec: dict[str, Any] = {"template": {"spec": {"replicatedJobs": list(jobs)}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {"apiVersion": TRAINER, "kind": kind, "metadata": meta, "spec": spec}


def context_with(*runtimes: dict[str, Any]) -> workloads.Context:
    objects: dict[str, dict[tuple[str, str], Any]] = {}
    for obj in runtimes:
        objects.setdefault(obj["kind"], {})[(obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = obj
    return workloads.Context(objects=objects)


def train_job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {
            "name": "trainjob",
            "namespace": "ns",
            "uid": "tj-uid",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {"runtimeRef": {"name": "test", "kind": "ClusterTrainingRuntime"}, **spec},
    }


#: Kueue's TestReconciler runtime: ``node`` (the trainer step) and ``foo``, one replica of one pod each.
RECONCILER_RUNTIME = runtime(replicated_job("node", labels=ANCESTOR, replicas=1), replicated_job("foo", replicas=1))


def test_kueue_reconciler_cases() -> None:
    context = context_with(RECONCILER_RUNTIME)
    wl = observed(train_job(), context)
    assert shape(wl) == [("node", 1), ("foo", 1)]
    assert wl.metadata.name.startswith("trainjob-trainjob-")
    assert (wl.owner.api_version, wl.owner.kind) == (TRAINER, "TrainJob")
    assert shape(observed(train_job(trainer={"numNodes": 2}), context)) == [("node", 2), ("foo", 1)]
    integration = integrations.registry()["TrainJob"]
    _, sources = integrations.pod_set_sources(integration, train_job(), context=context)
    assert [(s.pod_index_label, s.sub_group_index_label, s.sub_group_count) for s in sources] == [
        ("batch.kubernetes.io/job-completion-index", "jobset.sigs.k8s.io/job-index", 1)
    ] * 2


def test_kueue_docs_trainjob_on_torch_distributed() -> None:
    """trainjobs.md: 2 nodes of cpu 4, memory 8Gi and a GPU each, on the Trainer's torch-distributed runtime."""
    torch = runtime(
        {
            "name": "node",
            "template": {
                "metadata": {"labels": ANCESTOR},
                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "pytorch"}]}}},
            },
        },
        ml_policy={"numNodes": 1, "torch": {}},
    )
    torch["metadata"]["name"] = "torch-distributed"
    job = train_job(
        trainer={"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}}}
    )
    job["spec"]["runtimeRef"]["name"] = "torch-distributed"
    wl = observed(job, context_with(torch))
    assert shape(wl) == [("node", 2)]
    assert wl.spec.pod_sets[0].requests == {"cpu": 4000, "memory": 8 * 1024**3, "nvidia.com/gpu": 1}
    del job["spec"]["trainer"]["numNodes"]
    assert shape(observed(job, context_with(torch))) == [("node", 1)], "the runtime's mlPolicy.numNodes"


def test_training_runtime_in_the_trainjobs_namespace_and_missing_runtimes() -> None:
    namespaced = runtime(replicated_job("node", labels=ANCESTOR), kind="TrainingRuntime")
    job = train_job()
    job["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    assert shape(observed(job, context_with(namespaced))) == [("node", 1)]
    elsewhere = copy.deepcopy(job)
    elsewhere["metadata"]["namespace"] = "other"
    fact = converted(elsewhere, context_with(namespaced))
    assert isinstance(fact, types.ObjectRejected) and fact.field == "spec.runtimeRef.name"
    assert 'TrainingRuntime "test" not found in namespace other' in fact.problem
    missing = converted(train_job(), context_with(namespaced))
    assert isinstance(missing, types.ObjectRejected) and 'ClusterTrainingRuntime "test" not found' in missing.problem
    unsupported = train_job()
    unsupported["spec"]["runtimeRef"] = {"name": "test", "apiGroup": "example.com", "kind": "Runtime"}
    fact = converted(unsupported, context_with(RECONCILER_RUNTIME))
    assert isinstance(fact, types.ObjectRejected) and fact.field == "spec.runtimeRef"
    assert "unsupported runtime: Runtime.example.com" in fact.problem
    bad = train_job(trainer={"numNodes": "many"})
    fact = converted(bad, context_with(RECONCILER_RUNTIME))
    assert isinstance(fact, types.ObjectRejected) and fact.field == "spec.trainer.numNodes"


def test_default_runtime_kind_is_cluster_training_runtime() -> None:
    job = train_job()
    job["spec"]["runtimeRef"] = {"name": "test"}
    assert shape(observed(job, context_with(RECONCILER_RUNTIME))) == [("node", 1), ("foo", 1)]


@pytest.mark.parametrize(
    ("launcher_as_node", "num_nodes", "want"),
    [
        (True, 3, [("launcher", 1), ("node", 2)]),
        (True, 1, [("launcher", 1), ("node", 1)]),
        (False, 3, [("launcher", 1), ("node", 3)]),
    ],
)
def test_mpi_runtime_node_count(launcher_as_node: bool, num_nodes: int, want: list[tuple[str, int]]) -> None:
    """The MPI plugin: the ``node`` replicated job runs numNodes, one fewer (at least 1) when the launcher is a node."""
    mpi = runtime(
        replicated_job("launcher"),
        replicated_job("node", labels=ANCESTOR),
        ml_policy={"numNodes": 1, "mpi": {"runLauncherAsNode": launcher_as_node}},
    )
    assert shape(observed(train_job(trainer={"numNodes": num_nodes}), context_with(mpi))) == want


def test_initializers_and_trainer_run_one_replica_others_keep_theirs() -> None:
    steps = runtime(
        replicated_job("dataset-initializer", labels={ANCESTOR_KEY: "dataset-initializer"}, replicas=3),
        replicated_job("model-initializer", labels={ANCESTOR_KEY: "model-initializer"}, replicas=2),
        replicated_job("node", labels=ANCESTOR, replicas=4),
        replicated_job("sidecar", replicas=2, template=None),
    )
    steps["spec"]["template"]["spec"]["replicatedJobs"][3]["template"] = {
        "spec": {"parallelism": 3, "template": {"spec": {"containers": [{"name": "s", "image": "s"}]}}}
    }
    wl = observed(train_job(trainer={"numNodes": 2}), context_with(steps))
    assert shape(wl) == [("dataset-initializer", 1), ("model-initializer", 1), ("node", 2), ("sidecar", 6)]


ANCESTOR_KEY = "trainer.kubeflow.org/trainjob-ancestor-step"


def test_resources_per_node_merge_into_the_node_container() -> None:
    rt = runtime(replicated_job("node", labels=ANCESTOR), ml_policy={"torch": {}})
    container = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    container["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "8"}}
    container["containers"].append({"name": "sidecar", "image": "s", "resources": {"requests": {"cpu": "500m"}}})
    job = train_job(trainer={"resourcesPerNode": {"requests": {"cpu": "4"}}})
    wl = observed(job, context_with(rt))
    assert wl.spec.pod_sets[0].requests == {"cpu": 4500, "memory": 1024**3}
    no_policy = runtime(replicated_job("node", labels=ANCESTOR))
    wl = observed(job, context_with(no_policy))
    assert wl.spec.pod_sets[0].requests == {"cpu": 1000}, "without an mlPolicy resourcesPerNode is not applied"


def test_runtime_patches_are_merged_by_name_in_the_runtimes_order() -> None:
    user_patch = {
        "manager": "example.com/user-manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "nodeSelector": {"disktype": "ssd"},
                                            "tolerations": [{"key": "t", "operator": "Exists"}],
                                        }
                                    }
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    wl = observed(train_job(runtimePatches=[user_patch]), context_with(RECONCILER_RUNTIME))
    assert shape(wl) == [("node", 1), ("foo", 1)]
    node = wl.spec.pod_sets[0]
    assert node.node_selector == {"disktype": "ssd"} and [t.key for t in node.tolerations] == ["t"]
    assert node.requests == {"cpu": 1000}, "the runtime's containers kept"
    assert wl.spec.pod_sets[1].node_selector == {}


def test_webhook_adds_kueues_runtime_patch_once() -> None:
    job = train_job()
    trainjob.on_create(job)
    trainjob.on_create(job)
    assert job["spec"]["runtimePatches"] == [
        {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}
    ]


def test_start_writes_kueues_runtime_patch_and_stop_empties_it() -> None:
    """Kueue's TestRunWithPodsetsInfo "should respect user provided RuntimePatches" and "should replace existing
    Kueue overrides", then TestRestorePodSetsInfo; the TrainJob's pod set then carries both patches."""
    integration = integrations.registry()["TrainJob"]
    user = {
        "manager": "example.com/user-manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": {"nodeSelector": {"disktype": "sdd"}}}}},
                        }
                    ]
                }
            }
        },
    }
    created = train_job(runtimePatches=[user], suspend=True)
    integration.on_create and integration.on_create(created)
    info = PodSetInfo(
        name="node",
        node_selector={"gpu": "nvidia"},
        tolerations=[{"key": "t2k", "operator": "Equal", "value": "t2v", "effect": "NoSchedule"}],
        labels={"test-label": "label"},
        annotations={"test-annotation": "test"},
        scheduling_gates=["test-scheduling-gate-2"],
    )
    started = integrations.changed_job(integration, created, templates={"node": info.started}, suspend=False)
    assert started["spec"]["suspend"] is False
    assert started["spec"]["runtimePatches"][0] == user
    assert started["spec"]["runtimePatches"][1]["trainingRuntimeSpec"]["template"]["spec"] == {
        "replicatedJobs": [
            {
                "name": "node",
                "template": {
                    "spec": {
                        "template": {
                            "metadata": {"labels": {"test-label": "label"}, "annotations": {"test-annotation": "test"}},
                            "spec": {
                                "nodeSelector": {"gpu": "nvidia"},
                                "tolerations": [
                                    {"key": "t2k", "operator": "Equal", "value": "t2v", "effect": "NoSchedule"}
                                ],
                                "schedulingGates": [{"name": "test-scheduling-gate-2"}],
                            },
                        }
                    }
                },
            }
        ]
    }
    again = PodSetInfo(name="node", node_selector={"new-selector": "value"})
    restarted = integrations.changed_job(integration, started, templates={"node": again.started}, suspend=False)
    [entry] = restarted["spec"]["runtimePatches"][1]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert entry["template"]["spec"]["template"] == {"spec": {"nodeSelector": {"new-selector": "value"}}}, "replaced"
    context = context_with(RECONCILER_RUNTIME)
    holder, sources = integrations.pod_set_sources(integration, started, context=context)
    node = integrations.get_at(holder, sources[0].template_path)
    assert node["spec"]["nodeSelector"] == {"disktype": "sdd", "gpu": "nvidia"}, "both patches merged"
    stopped = integrations.changed_job(integration, started, templates={"node": info.stopped}, suspend=True)
    assert stopped == created


def test_trainjob_status_readers() -> None:
    integration = integrations.registry()["TrainJob"]
    context = context_with(RECONCILER_RUNTIME)
    job = train_job()
    job["status"] = {
        "jobsStatus": [{"name": "node", "active": 1, "ready": 1}, {"name": "foo", "active": 1, "ready": 0}]
    }
    assert integration.active(job)
    assert not integrations.pods_ready(integration, job, context=context), "1 of 2 replicated jobs ready"
    job["status"]["jobsStatus"][1].update(ready=0, succeeded=1)
    assert integrations.pods_ready(integration, job, context=context)
    assert not integrations.pods_ready(integration, job), "no runtime known: not ready"
    job["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}], "jobsStatus": []}
    assert not integration.active(job)
    fact = converted(job, context)
    assert isinstance(fact, types.WorkloadFinished) and (fact.succeeded, fact.message) == (True, "done")


def test_the_trainers_jobset_is_part_of_the_trainjob() -> None:
    """The JobSet the Trainer creates is owned by the TrainJob: no workload of its own (owner_kinds)."""
    child = trainjob.child_jobset(
        integrations.registry()["TrainJob"].ref(train_job()), train_job(), context_with(RECONCILER_RUNTIME)
    )
    child["metadata"].update(
        uid="js-uid",
        labels={"kueue.x-k8s.io/queue-name": "q"},
        ownerReferences=[
            {"apiVersion": TRAINER, "kind": "TrainJob", "name": "trainjob", "uid": "tj-uid", "controller": True}
        ],
    )
    assert (
        converted(
            child,
            workloads.Context(
                owners={
                    "tj-uid": workloads.Owner(
                        api_version="trainer.kubeflow.org/v1alpha1",
                        kind="TrainJob",
                        namespace="ns",
                        name="trainjob",
                        uid="tj-uid",
                        labels={"kueue.x-k8s.io/queue-name": "q"},
                    )
                }
            ),
        )
        is None
    )
    assert isinstance(converted(child), types.WorkloadObserved), "without its managed owner it would be one"


def test_runtimes_are_watched_only_with_trainjob() -> None:
    def config(*frameworks: str) -> manager_config.ManagerConfig:
        text = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n  frameworks:\n"
        return manager_config.parse(text + "".join(f"  - {f}\n" for f in frameworks))

    assert "TrainingRuntime" not in watcher_service.watched_kinds(config("batch/job"))
    with_trainjob = watcher_service.watched_kinds(config("batch/job", "trainer.kubeflow.org/trainjob"))
    assert {"TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"} <= set(with_trainjob)
    assert "MPIJob" in watcher_service.watched_kinds(config("kubeflow.org/mpijob"))


def test_trainjob_reclaimable_pods_from_its_succeeded_child_jobs() -> None:
    """trainjob_controller.go ReclaimablePods: for each replicated job of the child JobSet, succeeded Jobs (at most
    its replicas) times the pods of one Job; nothing without jobsStatus or without the runtime."""
    context = context_with(RECONCILER_RUNTIME)
    job = train_job(trainer={"numNodes": 3})
    integration = integrations.registry()["TrainJob"]
    assert integrations.reclaimable_pods(integration, job, context=context) == {}
    # numNodes is the node Job's parallelism (one replica of 3 pods), so its one succeeded Job frees 3 pods
    job["status"] = {"jobsStatus": [{"name": "node", "succeeded": 1}, {"name": "foo", "succeeded": 0, "active": 1}]}
    assert integrations.reclaimable_pods(integration, job, context=context) == {"node": 3}
    job["status"]["jobsStatus"][0]["succeeded"] = 2  # more than its one replica: Kueue reports none
    assert integrations.reclaimable_pods(integration, job, context=context) == {}
    assert integrations.reclaimable_pods(integration, job, context=workloads.Context()) == {}  # no runtime
