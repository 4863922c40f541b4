"""The AppWrapper and SparkApplication conversions, start and stop (jobframework/integrations/appwrapper.py,
sparkapplication.py), against Kueue's own unit test expectations
(pkg/controller/jobs/appwrapper/appwrapper_controller_test.go, pkg/controller/jobs/sparkapplication/
sparkapplication_controller_test.go and sparkapplication_podset_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_es.events import manager_config, models, types
from kueue_es.jobframework import integrations
from kueue_es.jobframework.integrations import appwrapper, sparkapplication

AW = integrations.registry()["AppWrapper"]
SPARK = integrations.registry()["SparkApplication"]
Mi = 2**20
TOLERATION = {"key": "t1k", "operator": "Equal", "value": "t1v", "effect": "NoExecute"}


def observed(integration: integrations.Integration, job: dict[str, Any]) -> models.Workload:
    fact = integrations.facts(integration, job)
    assert isinstance(fact, types.WorkloadObserved), fact
    return fact.workload


def rejected(integration: integrations.Integration, job: dict[str, Any]) -> types.ObjectRejected:
    fact = integrations.facts(integration, job)
    assert isinstance(fact, types.ObjectRejected), fact
    return fact


def added(template: dict[str, Any]) -> dict[str, Any]:
    """A start's change to a pod template: the spot flavor's node label and toleration."""
    out = copy.deepcopy(template)
    spec = out.setdefault("spec", {})
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), "instance-type": "spot"}
    spec["tolerations"] = [*(spec.get("tolerations") or []), TOLERATION]
    return out


def removed(template: dict[str, Any]) -> dict[str, Any]:
    """The stop's change: what :func:`added` put in taken out."""
    out = copy.deepcopy(template)
    spec = out.setdefault("spec", {})
    selector = {k: v for k, v in (spec.get("nodeSelector") or {}).items() if k != "instance-type"}
    tolerations = [t for t in spec.get("tolerations") or [] if t != TOLERATION]
    for key, value in (("nodeSelector", selector), ("tolerations", tolerations)):
        if value:
            spec[key] = value
        else:
            spec.pop(key, None)
    return out


# -- AppWrapper -------------------------------------------------------------------------------------


def pod_template(cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}], **spec}}


def pytorchjob(master: int, worker: int, *, annotations: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    def replica(count: int, kind: str) -> dict[str, Any]:
        template = pod_template()
        if annotations and kind in annotations:
            template["metadata"] = {"annotations": annotations[kind]}
        return {"replicas": count, "template": template}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pytorchjob"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(master, "Master"), "Worker": replica(worker, "Worker")}},
    }


def batch_job(parallelism: int, completions: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": parallelism, "template": pod_template(restartPolicy="Never")}
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"}, "spec": spec}


def make_aw(*components: dict[str, Any], name: str = "aw", status: dict[str, Any] | None = None) -> dict[str, Any]:
    aw: dict[str, Any] = {
        "apiVersion": appwrapper.API_VERSION,
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": "ns", "uid": "aw-uid", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"suspend": True, "components": list(components)},
    }
    if status is not None:
        aw["status"] = status
    return aw


def counts(wl: models.Workload) -> list[tuple[str, int]]:
    return [(ps.name, ps.count) for ps in wl.spec.pod_sets]


def test_appwrapper_pod_sets_are_numbered_across_components() -> None:
    """Kueue TestPodSets "no annotations": a PyTorchJob (master 1, worker 4) and a Job (parallelism 2)
    give aw-0 (1), aw-1 (4), aw-2 (2), each with its template's requests."""
    wl = observed(AW, make_aw({"template": pytorchjob(1, 4)}, {"template": batch_job(2)}))
    assert counts(wl) == [("aw-0", 1), ("aw-1", 4), ("aw-2", 2)]
    assert [ps.requests for ps in wl.spec.pod_sets] == [{"cpu": 1000}] * 3
    assert wl.metadata.name == AW.workload_name("aw", "aw-uid")


def test_appwrapper_topology_requests_and_rank_hints() -> None:
    """Kueue TestPodSets "with required and preferred topology annotation": the wrapped templates'
    annotations ask for TAS, with the inferred pod index label of a PyTorchJob."""
    job = pytorchjob(
        1,
        4,
        annotations={
            "Master": {"kueue.x-k8s.io/podset-required-topology": "cloud.com/rack"},
            "Worker": {"kueue.x-k8s.io/podset-preferred-topology": "cloud.com/block"},
        },
    )
    master, worker = observed(AW, make_aw({"template": job})).spec.pod_sets
    assert master.topology_request is not None and worker.topology_request is not None
    assert (master.topology_request.required, master.topology_request.pod_index_label) == (
        "cloud.com/rack",
        "training.kubeflow.org/replica-index",
    )
    assert worker.topology_request.preferred == "cloud.com/block"


def test_appwrapper_inferred_counts_of_known_kinds() -> None:
    """AppWrapper InferPodSets: a Job runs min(parallelism, completions); a JobSet's replicated job
    replicas x pods per Job, with its rank hints; a Deployment its replicas (1 when absent); a Pod one."""
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 3, "template": {"spec": batch_job(2)["spec"]}}]},
    }
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": pod_template()}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, **pod_template()}
    aw = make_aw(
        {"template": batch_job(4, completions=3)},
        {"template": jobset},
        {"template": deployment},
        {"template": pod},
        name="x",
    )
    assert counts(observed(AW, aw)) == [("x-0", 3), ("x-1", 6), ("x-2", 1), ("x-3", 1)]
    [_, rjob, _, _] = AW.pod_sets(AW.ref(aw), aw)
    assert (rjob.pod_index_label, rjob.sub_group_index_label, rjob.sub_group_count) == (
        "batch.kubernetes.io/job-completion-index",
        "jobset.sigs.k8s.io/job-index",
        3,
    )
    path = ("spec", "components", 1, "template", "spec", "replicatedJobs", 0, "template", "spec", "template")
    assert rjob.template_path == path


def test_appwrapper_declared_pod_sets_and_status_pod_sets() -> None:
    """Declared pod sets win over inference; once the controller wrote status.componentStatus for every
    component, its pod sets are used."""
    component = {"podSets": [{"path": "template.spec.template", "replicas": 5}], "template": batch_job(2)}
    assert counts(observed(AW, make_aw(component))) == [("aw-0", 5)]
    status = {"componentStatus": [{"podSets": [{"path": "template.spec.template", "replicas": 7}]}]}
    assert counts(observed(AW, make_aw(component, status=status))) == [("aw-0", 7)]


def test_appwrapper_unknown_kind_without_pod_sets_has_none() -> None:
    """A kind the AppWrapper does not know gets no inferred pod sets; a Workload needs at least one."""
    other = {"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"template": pod_template()}}
    fact = rejected(AW, make_aw({"template": other}))
    assert fact.field == "spec.components" and "no pod sets" in fact.problem


@pytest.mark.parametrize(
    ("pod_set", "field"),
    [
        ({"path": "spec.template"}, "spec.components[0].podSets[0].path"),
        ({"path": "template.spec.missing"}, "spec.components[0].podSets[0].path"),
        ({"path": "template.spec.template", "replicas": -1}, "spec.components[0].podSets[0].replicas"),
    ],
)
def test_appwrapper_bad_pod_sets_are_rejected_naming_the_field(pod_set: dict[str, Any], field: str) -> None:
    fact = rejected(AW, make_aw({"podSets": [pod_set], "template": batch_job(1)}))
    assert fact.field == field


def test_appwrapper_pod_set_template_is_kueues_subset() -> None:
    """GetPodTemplateSpec keeps no runtimeClassName: its overhead is not counted."""
    template = pod_template(runtimeClassName="kata", nodeSelector={"a": "b"})
    template["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}]
    kept = appwrapper.kueue_template(template)
    assert "runtimeClassName" not in kept["spec"] and kept["spec"]["nodeSelector"] == {"a": "b"}
    assert kept["spec"]["containers"] == [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]


def test_appwrapper_start_writes_pod_set_infos_and_stop_clears_them() -> None:
    """RunWithPodSetsInfo: each pod set's PodSetInfo in its component's podSetInfos, the wrapped objects
    unchanged; Suspend + RestorePodSetsInfo clears every podSetInfos."""
    aw = make_aw({"template": pytorchjob(1, 4)}, {"template": batch_job(2)})
    started = integrations.changed_job(AW, aw, templates=dict.fromkeys(("aw-0", "aw-1", "aw-2"), added), suspend=False)
    assert started["spec"]["suspend"] is False
    info = {"nodeSelector": {"instance-type": "spot"}, "tolerations": [TOLERATION]}
    assert [c["podSetInfos"] for c in started["spec"]["components"]] == [[info, info], [info]]
    assert [c["template"] for c in started["spec"]["components"]] == [c["template"] for c in aw["spec"]["components"]]
    stopped = integrations.changed_job(
        AW, started, templates=dict.fromkeys(("aw-0", "aw-1", "aw-2"), removed), suspend=True
    )
    assert stopped == aw


def test_appwrapper_status() -> None:
    """Finished on phase Succeeded; Failed only once ResourcesDeployed is no longer True; active while
    QuotaReserved; PodsReady from its condition. A finished AppWrapper gets no Workload (Kueue's
    "workload shouldn't be recreated for completed job")."""
    true = {"status": "True"}
    assert appwrapper.finished({"status": {"phase": "Succeeded"}}) == integrations.Finished(
        succeeded=True, message="AppWrapper finished successfully"
    )
    deleting = {"status": {"phase": "Failed", "conditions": [{"type": "ResourcesDeployed", **true}]}}
    assert appwrapper.finished(deleting) is None
    assert appwrapper.finished({"status": {"phase": "Failed"}}) == integrations.Finished(
        succeeded=False, message="AppWrapper failed"
    )
    assert appwrapper.active({"status": {"conditions": [{"type": "QuotaReserved", **true}]}})
    assert not appwrapper.active({"status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]}})
    assert appwrapper.pods_ready({"status": {"conditions": [{"type": "PodsReady", **true}]}})
    done = make_aw({"template": batch_job(2)}, status={"phase": "Succeeded"})
    assert isinstance(integrations.facts(AW, done), types.WorkloadFinished)


def test_appwrapper_parse_path() -> None:
    assert appwrapper.parse_path("template.spec.replicatedJobs[10].template") == (
        "template",
        "spec",
        "replicatedJobs",
        10,
        "template",
    )
    assert appwrapper.parse_path("template") == ("template",)
    assert appwrapper.parse_path("spec.template") is None
    assert appwrapper.parse_path("template.a[x]") is None


# -- SparkApplication -------------------------------------------------------------------------------


def make_spark(**changes: Any) -> dict[str, Any]:
    """Kueue's MakeSparkApplication: cluster mode, driver and executor with 100m cpu and 512Mi, 1 executor."""
    role = {"memory": "512Mi", "serviceAccount": "spark-operator-spark", "coreRequest": "100m"}
    app: dict[str, Any] = {
        "apiVersion": sparkapplication.API_VERSION,
        "kind": "SparkApplication",
        "metadata": {
            "name": "sparkapp",
            "namespace": "ns",
            "uid": "s-uid",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "driver": dict(role),
            "executor": {**role, "instances": 1, "deleteOnTermination": False},
        },
    }
    for path, value in changes.items():
        target = app["spec"]
        *parents, last = path.split("__")
        for step in parents:
            target = target.setdefault(step, {})
        target[last] = value
    return app


def test_spark_pod_sets_base() -> None:
    """Kueue TestPodSets "base": driver (1) and executor (3) with the roles' node selector and tolerations,
    100m cpu and 512Mi memory each, in the operator's container names."""
    app = make_spark(
        driver__nodeSelector={"test": "test"},
        driver__tolerations=[TOLERATION],
        executor__nodeSelector={"test": "test"},
        executor__tolerations=[TOLERATION],
        executor__instances=3,
    )
    wl = observed(SPARK, app)
    assert counts(wl) == [("driver", 1), ("executor", 3)]
    for ps in wl.spec.pod_sets:
        assert ps.requests == {"cpu": 100, "memory": 512 * Mi}
        assert ps.node_selector == {"test": "test"}
    [driver, executor] = SPARK.pod_sets(SPARK.ref(app), app)
    assert driver.workload_template is not None and executor.workload_template is not None
    assert driver.workload_template["spec"]["containers"][0]["name"] == "spark-kubernetes-driver"
    assert executor.workload_template["spec"]["containers"][0]["name"] == "spark-kubernetes-executor"
    assert driver.workload_template["spec"]["tolerations"] == [TOLERATION]


def test_spark_topology_request_from_role_annotations() -> None:
    """Kueue TestPodSets "with TopologyAwareScheduling": the roles' annotations ask for TAS."""
    required = {"kueue.x-k8s.io/podset-required-topology": "cloud.com/block"}
    wl = observed(SPARK, make_spark(driver__annotations=required, executor__annotations=required))
    assert [ps.topology_request and ps.topology_request.required for ps in wl.spec.pod_sets] == ["cloud.com/block"] * 2


def test_spark_resources_from_spark_fields() -> None:
    """coreRequest / coreLimit / memory (Java notation) / memoryLimit / gpu; cores and memoryOverhead are
    not counted (Kueue's mutateSparkPod); the sample's 1g is 1Gi."""
    app = make_spark(
        driver__memory="1g",
        driver__cores=4,
        driver__memoryOverhead="1g",
        executor__coreLimit="2",
        executor__memoryLimit="2g",
        executor__gpu={"name": "nvidia.com/gpu", "quantity": 1},
    )
    driver, executor = observed(SPARK, app).spec.pod_sets
    assert driver.requests == {"cpu": 100, "memory": 1024 * Mi}
    [_, source] = SPARK.pod_sets(SPARK.ref(app), app)
    assert source.workload_template is not None
    assert source.workload_template["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "100m", "memory": "512Mi"},
        "limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"},
    }
    assert executor.requests["nvidia.com/gpu"] == 1
    assert [sparkapplication.java_memory(v) for v in ("512m", "2G", "1gb", " 512Mi ", "100")] == [
        "512Mi",
        "2Gi",
        "1Gi",
        "512Mi",
        "100",
    ]


def test_spark_volumes_and_sidecars() -> None:
    """Kueue TestAddVolumes: a mount's volume added once, unknown and local-dir mounts skipped; sidecars and
    init containers added (their requests count)."""
    app = make_spark(
        volumes=[{"name": "data"}, {"name": "spark-local-dir-0"}],
        driver__volumeMounts=[
            {"name": "data", "mountPath": "/a"},
            {"name": "data", "mountPath": "/b"},
            {"name": "unknown", "mountPath": "/c"},
            {"name": "spark-local-dir-0", "mountPath": "/tmp"},
        ],
        driver__sidecars=[{"name": "side", "image": "s", "resources": {"requests": {"cpu": "1"}}}],
        driver__initContainers=[{"name": "init", "image": "i", "resources": {"requests": {"cpu": "3"}}}],
    )
    [driver, _] = SPARK.pod_sets(SPARK.ref(app), app)
    assert driver.workload_template is not None
    spec = driver.workload_template["spec"]
    assert spec["volumes"] == [{"name": "data"}]
    assert [m["mountPath"] for m in spec["containers"][0]["volumeMounts"]] == ["/a", "/b"]
    assert [c["name"] for c in spec["containers"]] == ["spark-kubernetes-driver", "side"]
    assert observed(SPARK, app).spec.pod_sets[0].requests["cpu"] == 3000  # init 3 > 100m + 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"mode": "client"}, "spec.mode"),
        ({"dynamicAllocation": {"enabled": True}}, "spec.dynamicAllocation.enabled"),
        ({"executor__instances": -1}, "spec.executor.instances"),
        ({"driver__coreRequest": "lots"}, "spec.driver.coreRequest"),
        ({"executor__memory": "1x"}, "spec.executor.memory"),
    ],
)
def test_spark_bad_input_is_rejected_naming_the_field(changes: dict[str, Any], field: str) -> None:
    assert rejected(SPARK, make_spark(**changes)).field == field


def test_spark_no_instances_is_an_executor_pod_set_of_none() -> None:
    app = make_spark()
    del app["spec"]["executor"]["instances"]
    assert counts(observed(SPARK, app)) == [("driver", 1), ("executor", 0)]


def test_spark_start_and_stop() -> None:
    """Kueue TestRunWithPodsetsInfo / TestRestorePodSetsInfo: the roles get the node selector and toleration,
    and a template with their bare container; a stop takes them out again."""
    app = make_spark()
    started = integrations.changed_job(SPARK, app, templates={"driver": added, "executor": added}, suspend=False)
    assert started["spec"]["suspend"] is False
    for role, container in (("driver", "spark-kubernetes-driver"), ("executor", "spark-kubernetes-executor")):
        assert started["spec"][role]["nodeSelector"] == {"instance-type": "spot"}
        assert started["spec"][role]["tolerations"] == [TOLERATION]
        assert started["spec"][role]["template"] == {"spec": {"containers": [{"name": container}]}}
    stopped = integrations.changed_job(SPARK, started, templates={"driver": removed, "executor": removed}, suspend=True)
    for role in ("driver", "executor"):
        assert {k: v for k, v in stopped["spec"][role].items() if k != "template"} == app["spec"][role]
    assert stopped["spec"]["suspend"] is True


def test_spark_global_node_selector_goes_into_the_roles() -> None:
    """Kueue "should apply different node selectors per role when global nodeSelector is set": the
    application-wide selector is copied into each role with the flavor's labels, then removed."""
    app = make_spark(nodeSelector={"zone": "us-east"})
    started = integrations.changed_job(SPARK, app, templates={"driver": added, "executor": added}, suspend=False)
    assert "nodeSelector" not in started["spec"]
    for role in ("driver", "executor"):
        assert started["spec"][role]["nodeSelector"] == {"zone": "us-east", "instance-type": "spot"}


def test_spark_global_node_selector_does_not_clobber_the_other_role() -> None:
    """Kueue #12647 "should apply different node selectors per role when global nodeSelector is set": each role
    admitted on its own flavor gets the application-wide selector with its own flavor's labels; the executor's
    no longer overwrites the driver's through ``spec.nodeSelector`` (both pods then ran on the executor's nodes)."""

    def flavor(node_type: str) -> Any:
        def change(template: dict[str, Any]) -> dict[str, Any]:
            out = copy.deepcopy(template)
            spec = out.setdefault("spec", {})
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), "node-type": node_type}
            return out

        return change

    app = make_spark(nodeSelector={"zone": "us-east"})
    templates = {"driver": flavor("cpu"), "executor": flavor("gpu")}
    started = integrations.changed_job(SPARK, app, templates=templates, suspend=False)
    assert "nodeSelector" not in started["spec"]
    assert started["spec"]["driver"]["nodeSelector"] == {"zone": "us-east", "node-type": "cpu"}
    assert started["spec"]["executor"]["nodeSelector"] == {"zone": "us-east", "node-type": "gpu"}


def test_spark_is_gated_as_kueue_gates_it() -> None:
    """The configuration refuses the framework without the gate this integration names."""
    assert manager_config.GATED_FRAMEWORKS == {SPARK.framework: sparkapplication.FEATURE_GATE}
    assert SPARK.framework == "sparkoperator.k8s.io/sparkapplication"
    assert AW.framework == "workload.codeflare.dev/appwrapper" and AW.plural == "appwrappers"
    assert SPARK.pod_label_selector is not None
    assert SPARK.pod_label_selector(make_spark()) == "sparkoperator.k8s.io/app-name=sparkapp"


def test_spark_status() -> None:
    """Finished on COMPLETED / FAILED / SUBMISSION_FAILED with the error message; PodsReady needs every
    requested executor running (Kueue TestReconciler's driver-only case)."""
    failed = {"status": {"applicationState": {"state": "FAILED", "errorMessage": "boom"}}}
    assert sparkapplication.finished(failed) == integrations.Finished(succeeded=False, message="boom")
    assert sparkapplication.finished({"status": {"applicationState": {"state": "SUBMITTED"}}}) is None
    driver_only = make_spark(executor__instances=2)
    driver_only["status"] = {"applicationState": {"state": "RUNNING"}}
    assert sparkapplication.active(driver_only) and not sparkapplication.pods_ready(driver_only)
    driver_only["status"]["executorState"] = {"a": "RUNNING", "b": "COMPLETED"}
    assert sparkapplication.pods_ready(driver_only)
