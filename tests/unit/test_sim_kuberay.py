"""The simulated KubeRay operator's pure rules (kueue_es/sim/kuberay.py; ray-operator raycluster_controller.go,
rayjob_controller.go, common/pod.go)."""

from __future__ import annotations

from typing import Any

from kueue_es.sim import kuberay

NOW = "2026-01-01T00:00:00Z"


def _cluster_spec(*, autoscaling: bool = False) -> dict[str, Any]:
    head = {"spec": {"containers": [{"name": "head", "image": "ray:2", "resources": {"requests": {"cpu": "1"}}}]}}
    worker = {"spec": {"containers": [{"name": "worker", "image": "ray:2"}]}}
    spec: dict[str, Any] = {
        "headGroupSpec": {"template": head},
        "workerGroupSpecs": [{"groupName": "workers", "replicas": 2, "template": worker}],
    }
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
    return spec


def cluster(*, suspend: bool | None = None, autoscaling: bool = False, status: Any = None) -> dict[str, Any]:
    spec = _cluster_spec(autoscaling=autoscaling)
    if suspend is not None:
        spec["suspend"] = suspend
    out = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": "ns", "uid": "u"}}
    out["spec"] = spec
    if status is not None:
        out["status"] = status
    return out


def running(group: kuberay.Group) -> dict[str, Any]:
    pod = {"metadata": dict(group.template["metadata"]), "spec": group.template["spec"]}
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod


def test_a_cluster_wants_a_head_and_its_workers_with_kuberay_labels() -> None:
    head, workers = kuberay.groups(cluster())
    assert (head.node_type, head.name, head.wanted) == ("head", "headgroup", 1)
    assert (workers.node_type, workers.name, workers.wanted) == ("worker", "workers", 2)
    assert workers.template["metadata"]["labels"] == {
        "ray.io/cluster": "rc",
        "ray.io/node-type": "worker",
        "ray.io/group": "workers",
    }
    assert [c["name"] for c in head.template["spec"]["containers"]] == ["head"]
    assert kuberay.pod_generate_name("rc", workers) == "rc-workers-worker-"


def test_a_suspended_cluster_wants_no_pods() -> None:
    assert [g.wanted for g in kuberay.groups(cluster(suspend=True))] == [0, 0]
    assert kuberay.cluster_status(cluster(suspend=True), [], now=NOW)["state"] == "suspended"


def test_in_tree_autoscaling_adds_kuberays_autoscaler_sidecar_to_the_head() -> None:
    head = kuberay.groups(cluster(autoscaling=True))[0]
    autoscaler = head.template["spec"]["containers"][-1]
    assert autoscaler == {
        "name": "autoscaler",
        "image": "ray:2",
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
    }
    custom = cluster(autoscaling=True)
    custom["spec"]["autoscalerOptions"] = {"resources": {"requests": {"cpu": "1"}}}
    assert kuberay.groups(custom)[0].template["spec"]["containers"][-1]["resources"] == {"requests": {"cpu": "1"}}


def test_the_cluster_is_ready_once_its_head_and_wanted_workers_run() -> None:
    rc = cluster()
    head, workers = kuberay.groups(rc)
    partly = kuberay.cluster_status(rc, [running(head), running(workers)], now=NOW)
    assert (partly["desiredWorkerReplicas"], partly["readyWorkerReplicas"], "state" in partly) == (2, 1, False)
    ready = kuberay.cluster_status(rc, [running(head), running(workers), running(workers)], now=NOW)
    assert (ready["readyWorkerReplicas"], ready["availableWorkerReplicas"], ready["state"]) == (2, 2, "ready")
    (condition,) = ready["conditions"]
    assert (condition["type"], condition["status"], condition["message"]) == ("HeadPodReady", "True", "")


def rayjob(*, mode: str | None = None, suspend: bool = False, status: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"suspend": suspend, "shutdownAfterJobFinishes": True, "rayClusterSpec": _cluster_spec()}
    if mode:
        spec["submissionMode"] = mode
    meta = {
        "name": "rj",
        "namespace": "ns",
        "uid": "uid-1",
        "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        "annotations": {kuberay.SIM_DURATION_ANNOTATION: "3"},
    }
    out = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta, "spec": spec}
    if status is not None:
        out["status"] = status
    return out


def test_an_unsuspended_rayjob_gets_its_cluster_then_its_submitter_job_then_completes() -> None:
    job = rayjob()
    first = kuberay.rayjob_sync(job, [], [], now=NOW)
    made = first.create_cluster
    assert made is not None and first.create_job is None
    assert made["metadata"]["name"] == kuberay.cluster_name(job) and made["metadata"]["name"].startswith("rj-")
    assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert made["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert first.status["jobDeploymentStatus"] == "Initializing"

    made["status"] = {"state": "ready"}
    second = kuberay.rayjob_sync({**job, "status": first.status}, [made], [], now=NOW)
    submitter = second.create_job
    assert submitter is not None and submitter["metadata"]["name"] == "rj"
    assert submitter["metadata"]["annotations"] == {kuberay.SIM_DURATION_ANNOTATION: "3"}
    assert submitter["spec"]["template"]["spec"]["containers"][0]["name"] == "ray-job-submitter"
    assert second.status["jobDeploymentStatus"] == "Running"

    submitter["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    third = kuberay.rayjob_sync({**job, "status": second.status}, [made], [submitter], now=NOW)
    assert (third.status["jobDeploymentStatus"], third.status["jobStatus"]) == ("Complete", "SUCCEEDED")
    done = kuberay.rayjob_sync({**job, "status": third.status}, [made], [submitter], now=NOW)
    assert done.delete_clusters == [made]  # shutdownAfterJobFinishes


def test_a_sidecar_mode_rayjob_runs_the_submitter_in_its_head_and_makes_no_job() -> None:
    job = rayjob(mode="SidecarMode")
    made = kuberay.rayjob_sync(job, [], [], now=NOW).create_cluster
    assert made is not None
    head = made["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in head] == ["head", "ray-job-submitter"]
    assert head[1]["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    made["status"] = {"state": "ready"}
    later = kuberay.rayjob_sync({**job, "status": {"jobDeploymentStatus": "Initializing"}}, [made], [], now=NOW)
    assert later.create_job is None and later.status["jobDeploymentStatus"] == "Running"


def test_a_rayjob_suspended_while_running_loses_its_cluster_and_job() -> None:
    job = rayjob(suspend=True, status={"jobDeploymentStatus": "Running", "rayClusterName": "rj-x"})
    rc, submitter = {"metadata": {"name": "rj-x"}}, {"metadata": {"name": "rj"}}
    out = kuberay.rayjob_sync(job, [rc], [submitter], now=NOW)
    assert (out.delete_clusters, out.delete_jobs) == ([rc], [submitter])
    assert out.status["jobDeploymentStatus"] == "Suspended" and out.status["rayClusterName"] is None
