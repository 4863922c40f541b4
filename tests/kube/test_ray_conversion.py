"""KubeRay's RayJob, RayCluster and RayService to Workloads (jobframework/integrations/ray.py), pure.

Kueue's samples (jobs/ray-*.yaml) give the pod sets Kueue gives them: ``head`` (1), one per worker group
(``replicas`` x ``numOfHosts``, lower-cased group name), and a RayJob's ``submitter`` (1) in K8sJobMode with
KubeRay's default submitter template; the head counts what KubeRay adds to its pod (submitter sidecar,
Redis cleanup); what Kueue's webhooks refuse is an ObjectRejected naming the field
(pkg/controller/jobs/rayjob/*_test.go, raycluster/*_test.go, rayservice/*_test.go).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.jobframework import integrations, workloads
from kueue_es.jobframework.integrations import ray
from tests.kube import examples

Mi, Gi = 2**20, 2**30


def sample(name: str) -> dict[str, Any]:
    [doc] = [d for d in examples.load(f"jobs/{name}.yaml") if d["kind"] != "ConfigMap"]
    doc["metadata"].update(uid="uid-1", creationTimestamp="2026-01-01T00:00:00Z")
    doc["metadata"].setdefault("namespace", "default")
    return doc


def converted(job: dict[str, Any], context: workloads.Context | None = None) -> types.Fact | None:
    return integrations.facts(integrations.registry()[job["kind"]], job, context=context)


def observed(job: dict[str, Any]) -> Any:
    fact = converted(job)
    assert isinstance(fact, types.WorkloadObserved), fact
    return fact.workload


def rejected(job: dict[str, Any]) -> types.ObjectRejected:
    fact = converted(job)
    assert isinstance(fact, types.ObjectRejected), fact
    return fact


def pod_sets(job: dict[str, Any]) -> list[tuple[str, int, dict[str, int]]]:
    return [(ps.name, ps.count, ps.requests) for ps in observed(job).spec.pod_sets]


def test_sample_rayjob_has_head_workers_and_the_default_submitter() -> None:
    """ray-job-sample.yaml has no submissionMode: the CRD's default K8sJobMode gives the submitter pod set,
    counted with KubeRay's default submitter container (500m CPU, 200Mi)."""
    job = sample("ray-job-sample")
    wl = observed(job)
    assert [(ps.name, ps.count, ps.requests) for ps in wl.spec.pod_sets] == [
        ("head", 1, {"cpu": 1000}),
        ("small-group", 1, {"cpu": 1000}),
        ("submitter", 1, {"cpu": 500, "memory": 200 * Mi}),
    ]
    assert wl.spec.queue_name == "user-queue"
    assert wl.metadata.name.startswith("rayjob-rayjob-sample-")
    assert (wl.owner.api_version, wl.owner.kind) == ("ray.io/v1", "RayJob")  # type: ignore[union-attr]
    [submitter] = [
        s for s in ray.rayjob_pod_sets(integrations.registry()["RayJob"].ref(job), job) if s.name == "submitter"
    ]
    assert submitter.default_template == {
        "spec": {
            "containers": [
                {"name": "ray-job-submitter", "image": "rayproject/ray:2.9.0", "resources": ray.SUBMITTER_RESOURCES}
            ],
            "restartPolicy": "Never",
        }
    }


def test_submission_modes() -> None:
    """An explicit submitterPodTemplate is counted; HTTPMode has no submitter; SidecarMode counts the
    submitter sidecar in the head (rayjob_controller.go addSidecarSubmitterToHeadPodSet)."""
    job = sample("ray-job-sample")
    job["spec"]["submitterPodTemplate"] = {
        "spec": {"containers": [{"name": "s", "image": "x", "resources": {"requests": {"cpu": "2"}}}]}
    }
    assert pod_sets(job)[-1] == ("submitter", 1, {"cpu": 2000})
    job["spec"]["submissionMode"] = "HTTPMode"
    assert [name for name, _, _ in pod_sets(job)] == ["head", "small-group"]
    job["spec"]["submissionMode"] = "SidecarMode"
    assert pod_sets(job) == [("head", 1, {"cpu": 1500, "memory": 200 * Mi}), ("small-group", 1, {"cpu": 1000})]


def test_sample_raycluster_and_rayservice() -> None:
    """ray-cluster-sample.yaml and ray-service-sample.yaml: head (1) + small-group (replicas 1); min/max
    replicas play no part."""
    assert pod_sets(sample("ray-cluster-sample")) == [
        ("head", 1, {"cpu": 1000, "memory": 2_000_000_000}),
        ("small-group", 1, {"cpu": 1000, "memory": 1_000_000_000}),
    ]
    service = sample("ray-service-sample")
    wl = observed(service)
    assert [(ps.name, ps.count, ps.requests) for ps in wl.spec.pod_sets] == [
        ("head", 1, {"cpu": 2000, "memory": 4 * Gi}),
        ("small-group", 1, {"cpu": 1000, "memory": 2 * Gi}),
    ]
    assert wl.metadata.name.startswith("rayservice-test-rayservice-")


def test_worker_counts_replicas_default_and_num_of_hosts() -> None:
    """Kueue TestPodSets: replicas absent is 1; numOfHosts multiplies; group names are lower-cased."""
    cluster = sample("ray-cluster-sample")
    worker = cluster["spec"]["workerGroupSpecs"][0]
    del worker["replicas"]
    second = copy.deepcopy(worker) | {"groupName": "TPU-Group", "replicas": 3, "numOfHosts": 4}
    cluster["spec"]["workerGroupSpecs"].append(second)
    assert [(n, c) for n, c, _ in pod_sets(cluster)] == [("head", 1), ("small-group", 1), ("tpu-group", 12)]


def test_gcs_fault_tolerance_counts_the_redis_cleanup_in_the_head() -> None:
    """With gcsFaultToleranceOptions (or the ray.io/ft-enabled annotation) the head's Ray container requests
    at least 200m CPU and 256Mi (Kueue TestPodSets "with gcs fault tolerance"): more is kept."""
    cluster = sample("ray-cluster-sample")
    cluster["metadata"]["annotations"] = {"ray.io/ft-enabled": "True"}
    assert pod_sets(cluster)[0] == ("head", 1, {"cpu": 1000, "memory": 2_000_000_000})
    job = sample("ray-job-sample")
    job["spec"]["rayClusterSpec"]["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    assert pod_sets(job)[0] == ("head", 1, {"cpu": 1000, "memory": 256 * Mi})
    # the job itself is not changed: only the Workload counts it
    assert (
        "memory"
        not in job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"][
            "requests"
        ]
    )


def test_autoscaler_sidecar_is_counted_in_the_head_template() -> None:
    """The head template the Workload would count with in-tree autoscaling (elastic jobs, issue 21): the
    autoscaler sidecar with autoscalerOptions.resources, else KubeRay's 500m / 512Mi."""
    job = sample("ray-cluster-sample")
    ref = integrations.registry()["RayCluster"].ref(job)
    template = job["spec"]["headGroupSpec"]["template"]
    cluster = {**job["spec"], "enableInTreeAutoscaling": True}
    out = ray.head_workload_template(
        ref, template, cluster=cluster, annotations={}, where="spec.headGroupSpec.template"
    )
    assert out is not None and out["spec"]["containers"][-1] == {
        "name": "autoscaler",
        "resources": ray.AUTOSCALER_RESOURCES,
    }
    own = {"requests": {"cpu": "1"}}
    cluster["autoscalerOptions"] = {"resources": own}
    out = ray.head_workload_template(
        ref, template, cluster=cluster, annotations={}, where="spec.headGroupSpec.template"
    )
    assert out is not None and out["spec"]["containers"][-1]["resources"] == own
    assert len(template["spec"]["containers"]) == 1, "the job's template is left alone"


@pytest.mark.parametrize(
    ("name", "change", "field", "problem"),
    [
        # Kueue's own autoscaling sample without its elastic-job annotation: refused, the gate on (its default)
        (
            "ray-job-autoscaling-sample",
            lambda j: j["metadata"].pop("annotations"),
            "spec.rayClusterSpec.enableInTreeAutoscaling",
            "autoscaling",
        ),
        (
            "ray-job-sample",
            lambda j: j["spec"].update(shutdownAfterJobFinishes=False),
            "spec.shutdownAfterJobFinishes",
            "true",
        ),
        (
            "ray-job-sample",
            lambda j: j["spec"].pop("shutdownAfterJobFinishes"),
            "spec.shutdownAfterJobFinishes",
            "true",
        ),
        (
            "ray-job-sample",
            lambda j: j["spec"].update(clusterSelector={"k1": "v1"}),
            "spec.clusterSelector",
            "existing cluster",
        ),
        ("ray-job-sample", lambda j: j["spec"].pop("rayClusterSpec"), "spec.rayClusterSpec", "required"),
        (
            "ray-job-sample",
            lambda j: j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].update(groupName="head"),
            "spec.rayClusterSpec.workerGroupSpecs[0].groupName",
            "reserved",
        ),
        (
            "ray-job-sample",
            lambda j: j["spec"]["rayClusterSpec"].update(
                workerGroupSpecs=[
                    {**j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0], "groupName": f"g{i}"} for i in range(18)
                ]
            ),
            "spec.rayClusterSpec.workerGroupSpecs",
            "at most 17",
        ),
        (
            "ray-job-sample",
            lambda j: j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].update(numOfHosts="two"),
            "spec.rayClusterSpec.workerGroupSpecs[0].numOfHosts",
            "'two'",
        ),
        (
            "ray-cluster-sample",
            lambda j: j["spec"].update(enableInTreeAutoscaling=True),
            "spec.enableInTreeAutoscaling",
            "elastic",
        ),
        ("ray-cluster-sample", lambda j: j["spec"].pop("headGroupSpec"), "spec.headGroupSpec", "mapping"),
        (
            "ray-cluster-sample",
            lambda j: j["spec"]["workerGroupSpecs"][0].pop("groupName"),
            "spec.workerGroupSpecs[0].groupName",
            "required",
        ),
        (
            "ray-cluster-sample",
            lambda j: j["spec"]["workerGroupSpecs"].append(
                {**j["spec"]["workerGroupSpecs"][0], "groupName": "Small-Group"}
            ),
            "spec.workerGroupSpecs",
            "unique",
        ),
        (
            "ray-service-sample",
            lambda j: j["spec"]["rayClusterConfig"].update(enableInTreeAutoscaling=True),
            "spec.rayClusterConfig.enableInTreeAutoscaling",
            "autoscaling",
        ),
        (
            "ray-service-sample",
            lambda j: j["spec"]["rayClusterConfig"]["workerGroupSpecs"][0].update(replicas=-1),
            "spec.rayClusterConfig.workerGroupSpecs[0].replicas",
            "non-negative",
        ),
    ],
)
def test_what_kueue_refuses_is_rejected_naming_the_field(name: str, change: Any, field: str, problem: str) -> None:
    job = sample(name)
    if change is not None:
        change(job)
    fact = rejected(job)
    assert (fact.kind, fact.name, fact.field) == (job["kind"], job["metadata"]["name"], field)
    assert problem in fact.problem


def test_a_rayjob_on_an_existing_cluster_is_not_kueues() -> None:
    """clusterSelector without rayClusterSpec: Kueue skips the RayJob (JobWithSkip), so no workload."""
    job = sample("ray-job-sample")
    job["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    del job["spec"]["rayClusterSpec"]
    assert converted(job) is None


def test_a_raycluster_its_rayjob_created_is_part_of_the_rayjob() -> None:
    """KubeRay copies the RayJob's labels (the queue name) to its RayCluster; owned by a managed RayJob, the
    cluster gives no workload of its own; alone it is one."""
    cluster = sample("ray-cluster-sample")
    cluster["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rayjob-sample", "uid": "job-uid", "controller": True}
    ]
    assert (
        converted(
            cluster,
            workloads.Context(
                owners={
                    "job-uid": workloads.Owner(
                        api_version="ray.io/v1",
                        kind="RayJob",
                        namespace="default",
                        name="rayjob-sample",
                        uid="job-uid",
                        labels={"kueue.x-k8s.io/queue-name": "q"},
                    )
                }
            ),
        )
        is None
    )
    assert isinstance(
        converted(
            cluster,
            workloads.Context(
                owners={
                    "other": workloads.Owner(
                        api_version="ray.io/v1",
                        kind="RayJob",
                        namespace="default",
                        name="owner",
                        uid="other",
                        labels={"kueue.x-k8s.io/queue-name": "q"},
                    )
                }
            ),
        ),
        types.WorkloadObserved,
    )
    assert integrations.registry()["RayCluster"].owner_kinds == ("RayJob", "RayService")


def test_rayjob_status_readers() -> None:
    """Finished: jobDeploymentStatus Complete/Failed, succeeded when jobStatus SUCCEEDED, with the message;
    active unless Suspended or new; PodsReady when the cluster is ready (Kueue Test_RayJobFinished)."""
    rj = integrations.registry()["RayJob"]
    job = sample("ray-job-sample")
    assert not rj.active(job) and not rj.pods_ready(job) and rj.finished(job) is None
    job["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterStatus": {"state": "ready"}}
    assert rj.active(job) and rj.pods_ready(job) and rj.finished(job) is None
    job["status"] = {"jobDeploymentStatus": "Suspended"}
    assert not rj.active(job)
    job["status"] = {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "message": "entrypoint failed"}
    fact = converted(job)
    assert isinstance(fact, types.WorkloadFinished)
    assert (fact.succeeded, fact.message) == (False, "entrypoint failed")
    job["status"] = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
    done = rj.finished(job)
    assert done is not None and done.succeeded


def test_raycluster_and_rayservice_status_readers() -> None:
    """A RayCluster is active and ready in state ``ready``; a RayService with its Ready condition; neither
    ever finishes (Kueue Finished is false), whatever their state."""
    rc, rs = integrations.registry()["RayCluster"], integrations.registry()["RayService"]
    cluster = sample("ray-cluster-sample") | {"status": {"state": "ready"}}
    assert rc.active(cluster) and rc.pods_ready(cluster)
    failed = cluster | {"status": {"state": "failed", "reason": "boom"}}
    assert not rc.active(failed) and rc.finished(failed) is None
    assert isinstance(converted(failed), types.WorkloadObserved)
    service = sample("ray-service-sample") | {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert rs.active(service) and rs.pods_ready(service) and rs.finished(service) is None
    assert not rs.active(sample("ray-service-sample"))


def test_start_and_stop_of_a_rayjob() -> None:
    """The start writes the default submitter template with the pod set's changes (as Kueue's
    RunWithPodSetsInfo sets submitterPodTemplate) and unsuspends; the stop gives each template back and
    suspends; a RayService's suspend field is in its cluster config."""
    rj = integrations.registry()["RayJob"]
    job = sample("ray-job-sample") | {}
    job["spec"]["suspend"] = True

    def add(template: dict[str, Any]) -> dict[str, Any]:
        return template | {"spec": {**template["spec"], "nodeSelector": {"instance-type": "spot"}}}

    def remove(template: dict[str, Any]) -> dict[str, Any]:
        spec = dict(template["spec"])
        spec.pop("nodeSelector", None)
        return template | {"spec": spec}

    names = ["head", "small-group", "submitter"]
    started = integrations.changed_job(rj, job, templates=dict.fromkeys(names, add), suspend=False)
    assert started["spec"]["suspend"] is False
    assert started["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {"instance-type": "spot"}
    assert started["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"]
    stopped = integrations.changed_job(rj, started, templates=dict.fromkeys(names, remove), suspend=True)
    assert stopped["spec"]["suspend"] is True
    assert stopped["spec"]["rayClusterSpec"] == job["spec"]["rayClusterSpec"]
    assert stopped["spec"]["submitterPodTemplate"] == ray.submitter_template(job)

    rs = integrations.registry()["RayService"]
    service = sample("ray-service-sample")
    out = integrations.changed_job(rs, service, templates={}, suspend=True)
    assert out["spec"]["rayClusterConfig"]["suspend"] is True and "suspend" not in out["spec"]


def test_pod_label_selectors() -> None:
    """Each kind's pods by KubeRay's ``ray.io/cluster`` label: the RayCluster's name, the cluster a RayJob or
    RayService reports in its status ("" before it has one) (each kind's PodLabelSelector)."""
    registry = integrations.registry()
    selector = {}
    for kind in ("RayJob", "RayCluster", "RayService"):
        found = registry[kind].pod_label_selector
        assert found is not None
        selector[kind] = found
    job, cluster, service = sample("ray-job-sample"), sample("ray-cluster-sample"), sample("ray-service-sample")
    assert selector["RayCluster"](cluster) == "ray.io/cluster=raycluster-complete"
    assert selector["RayJob"](job) == selector["RayService"](service) == ""
    job["status"] = {"rayClusterName": "rayjob-sample-raycluster-x"}
    service["status"] = {"activeServiceStatus": {"rayClusterName": "test-rayservice-raycluster-y"}}
    assert selector["RayJob"](job) == "ray.io/cluster=rayjob-sample-raycluster-x"
    assert selector["RayService"](service) == "ray.io/cluster=test-rayservice-raycluster-y"


def test_an_elastic_ray_job_may_autoscale_only_with_the_gate_on() -> None:
    """raycluster/common.go ValidateCreate, raycluster_webhook.go (ElasticJobsViaWorkloadSlices): Kueue's
    autoscaling sample (annotated elastic) converts with the gate on (the head counting the autoscaler
    sidecar), the gate being on by default (Kueue v0.18+); without the annotation or with the gate off it is
    refused naming the field."""
    elastic_on = workloads.Context(elastic_jobs=True)
    elastic_off = workloads.Context(elastic_jobs=False)
    job = sample("ray-job-autoscaling-sample")
    assert job["metadata"]["annotations"] == {ray.ELASTIC_JOB_ANNOTATION: "true"}  # Kueue's sample is elastic
    plain = copy.deepcopy(job)
    del plain["metadata"]["annotations"]
    assert isinstance(converted(plain, elastic_on), types.ObjectRejected), "not annotated: refused"
    fact = converted(job, elastic_on)
    assert isinstance(fact, types.WorkloadObserved), fact
    head = fact.workload.spec.pod_sets[0]
    assert head.name == "head" and head.requests["cpu"] >= 500  # the autoscaler sidecar's 500m at least
    assert isinstance(converted(job), types.WorkloadObserved), "the default context has the gate on"
    off = converted(job, elastic_off)
    assert isinstance(off, types.ObjectRejected) and off.field == "spec.rayClusterSpec.enableInTreeAutoscaling"
    cluster = sample("ray-cluster-sample")
    cluster["spec"]["enableInTreeAutoscaling"] = True
    cluster["metadata"]["annotations"] = {ray.ELASTIC_JOB_ANNOTATION: "true"}
    assert isinstance(converted(cluster, elastic_on), types.WorkloadObserved)
    [refused] = [converted(cluster, elastic_off)]
    assert isinstance(refused, types.ObjectRejected)
    assert refused.problem.startswith("a kueue-managed RayCluster can use autoscaling only as an elastic job")


def test_a_ray_jobs_counts_from_its_raycluster() -> None:
    """raycluster/common.go UpdatePodSets, effectiveWorkerCount: a worker group of the RayCluster KubeRay made
    counts ``replicas`` times ``numOfHosts`` by its lower-cased name; a group without ``replicas`` is left to
    the job's own spec; no RayCluster yet: nothing."""
    cluster = {
        "spec": {
            "workerGroupSpecs": [
                {"groupName": "Small-Group", "replicas": 3},
                {"groupName": "multi", "replicas": 2, "numOfHosts": 4},
                {"groupName": "unset"},
            ]
        }
    }
    assert ray.child_cluster_counts(cluster) == {"small-group": 3, "multi": 8}
    assert ray.child_cluster_counts(None) == {}
