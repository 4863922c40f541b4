"""Pods and Jobs as a real API server stores them on create, read back with the real kubectl.

kube-apiserver's create strategies write what no request sends: a Pod's ``status`` (phase Pending, its QoS
class, and PodScheduled False ``SchedulingGated`` while it has scheduling gates, which ``kubectl get pods``
prints as its STATUS), and a Job's ``spec.selector`` with the ``controller-uid`` / ``job-name`` labels on its
pod template (which ``kubectl get jobs -o wide`` prints as SELECTOR). Kueue's Workload keeps only
``batch.kubernetes.io/job-name`` of those. Before that, defaulting fills in what a request leaves out of a pod
spec and a Job (``restartPolicy``, ``imagePullPolicy``, ``backoffLimit``, ...), and ``kubectl get jobs`` reads
a Job's STATUS from its conditions. The emulator must match, as users run kubectl against it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.jobframework import integrations
from kueue_es.services.kube import client, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import emulator, strategies
from kueue_es.sim.controllers import SimulatedControllers
from tests.kube.test_kubectl import SAMPLE_JOB, SETUP, Kubectl, table

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: these tests run the real one"),
]

GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


@pytest.fixture
async def kubectl(cluster: emulator.ClusterEmulator, tmp_path: Path) -> Kubectl:
    return Kubectl(cluster.url, tmp_path)


def pod(name: str, *, labels: dict[str, str] | None = None, resources: dict[str, Any] | None = None) -> str:
    """A one-container pod manifest (JSON, for kubectl's stdin)."""
    container = {"name": "c", "image": "busybox", "resources": resources or {}}
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or {}}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}}
    return json.dumps(body)


async def test_a_pod_kueue_gates_reads_back_pending_and_scheduling_gated(kubectl: Kubectl) -> None:
    """A pod naming a queue gets Kueue's two scheduling gates from its webhook, then from the API server phase
    Pending, its QoS class and PodScheduled False SchedulingGated (at its creation time, no probe time), and
    `kubectl get pods` prints STATUS SchedulingGated. A pod nobody gates is Pending with no condition; a pod
    limiting cpu and memory is Guaranteed. Before, such pods had no status at all."""
    queued = pod("queued", labels={"kueue.x-k8s.io/queue-name": "user-queue"}, resources={"requests": {"cpu": "1"}})
    await kubectl.ok("create", "-f", "-", stdin=queued)
    await kubectl.ok("create", "-f", "-", stdin=pod("plain"))
    limited = {"limits": {"cpu": "500m", "memory": "1Gi"}}
    await kubectl.ok("create", "-f", "-", stdin=pod("sized", resources=limited))
    stored = json.loads(await kubectl.ok("get", "pod", "queued", "-o", "json"))
    assert [g["name"] for g in stored["spec"]["schedulingGates"]] == [
        "kueue.x-k8s.io/admission",
        "kueue.x-k8s.io/topology",
    ]
    assert stored["status"] == {
        "phase": "Pending",
        "qosClass": "Burstable",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": stored["metadata"]["creationTimestamp"],
                "reason": "SchedulingGated",
                "message": GATED_MESSAGE,
            }
        ],
    }
    plain = json.loads(await kubectl.ok("get", "pod", "plain", "-o", "json"))
    assert plain["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert await kubectl.ok("get", "pod", "sized", "-o", "jsonpath={.status.qosClass}") == "Guaranteed"
    rows = table(await kubectl.ok("get", "pods"))
    assert [row[:3] for row in rows] == [
        ["NAME", "READY", "STATUS"],
        ["plain", "0/1", "Pending"],
        ["queued", "0/1", "SchedulingGated"],
        ["sized", "0/1", "Pending"],
    ]


async def test_an_ungated_pod_stays_scheduling_gated_until_it_runs_then_reads_running(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """Kueue's start takes the gates off: until something schedules the pod, its SchedulingGated condition stays
    (the API server changes no status on a spec update) and kubectl still prints SchedulingGated. Once the
    simulated kubelet runs it, PodScheduled is True with no SchedulingGated reason left, the QoS class kept, and
    kubectl prints Running."""
    await kubectl.ok("create", "-f", "-", stdin=pod("p", labels={"kueue.x-k8s.io/queue-name": "user-queue"}))
    await kubectl.ok("patch", "pod", "p", "--type=json", "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')
    ungated = json.loads(await kubectl.ok("get", "pod", "p", "-o", "json"))
    assert "schedulingGates" not in ungated["spec"]
    assert [(c["type"], c["reason"]) for c in ungated["status"]["conditions"]] == [("PodScheduled", "SchedulingGated")]
    assert table(await kubectl.ok("get", "pod", "p"))[1][2] == "SchedulingGated"

    controllers = asyncio.create_task(SimulatedControllers(api, lws=False, ray=False).run())
    try:
        async with asyncio.timeout(10):
            while (await client.get_object(api, resources.PODS, namespace="default", name="p"))["status"][
                "phase"
            ] != "Running":
                await asyncio.sleep(0.05)
    finally:
        await cancel_and_wait([controllers])
    status = json.loads(await kubectl.ok("get", "pod", "p", "-o", "jsonpath={.status}"))
    assert status["qosClass"] == "BestEffort"
    assert {c["type"]: (c["status"], c.get("reason")) for c in status["conditions"]} == {
        "PodScheduled": ("True", None),
        "Initialized": ("True", None),
        "ContainersReady": ("True", None),
        "Ready": ("True", None),
    }
    assert table(await kubectl.ok("get", "pod", "p"))[1][:3] == ["p", "1/1", "Running"]


@pytest.mark.parametrize(
    ("resources", "want"),
    [
        pytest.param([], "BestEffort", id="nothing asked: BestEffort"),
        pytest.param([{"requests": {"cpu": "0"}, "limits": {"nvidia.com/gpu": "1"}}], "BestEffort", id="zero cpu, gpu only"),
        pytest.param([{"requests": {"memory": "1Gi"}}], "Burstable", id="a request without limits"),
        pytest.param([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Guaranteed", id="limits stand for requests"),
        pytest.param([{"requests": {"cpu": "1000m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1024Mi"}}], "Guaranteed", id="equal amounts written apart"),
        pytest.param([{"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}], "Burstable", id="requests below limits"),
        pytest.param([{"limits": {"cpu": "1"}}], "Burstable", id="no memory limit"),
        pytest.param([{"limits": {"cpu": "1", "memory": "1Gi"}}, {}], "Burstable", id="one container unlimited"),
        pytest.param([{"limits": {"cpu": "x", "memory": "1Gi"}}], "Burstable", id="an unreadable quantity is skipped"),
    ],
)  # fmt: skip
def test_the_qos_class_follows_kubernetes_compute_pod_qos(resources: list[dict[str, Any]], want: str) -> None:
    """Only cpu and memory above zero count; Guaranteed needs both limited in every container and requests equal
    to limits (a missing request is its limit, as defaulted); no amount at all is BestEffort (qos.go)."""
    containers = [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]
    assert strategies.pod_qos_class({"containers": containers}) == want


def test_pod_level_resources_stand_for_the_containers() -> None:
    """With ``spec.resources`` (pod-level resources), the QoS class is the pod's: limits on cpu and memory equal to
    its requests make it Guaranteed whatever its containers ask."""
    spec = {"resources": {"limits": {"cpu": "2", "memory": "2Gi"}}, "containers": [{"name": "c", "resources": {}}]}
    assert strategies.pod_qos_class(spec) == "Guaranteed"
    spec["resources"] = {"requests": {"cpu": "1"}}
    assert strategies.pod_qos_class(spec) == "Burstable"


async def test_a_created_job_gets_its_generated_selector_and_template_labels(kubectl: Kubectl) -> None:
    """`kubectl create -f sample-job.yaml`: the Job's pod template carries the job-name and controller-uid labels
    in both their forms and its selector matches batch.kubernetes.io/controller-uid, as kube-apiserver
    generates them; `kubectl get jobs -o wide` prints its containers, images and that selector. A Job with
    manualSelector keeps its own selector and gets no labels."""
    name = (await kubectl.ok("create", "-f", str(SAMPLE_JOB))).split()[0].removeprefix("job.batch/")
    job = json.loads(await kubectl.ok("get", "job", name, "-o", "json"))
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    rows = table(await kubectl.ok("get", "jobs", "-o", "wide"))
    assert rows[0] == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert rows[1][0] == name and rows[1][-3:] == [
        "dummy-job",
        "registry.k8s.io/e2e-test-images/agnhost:2.53",
        f"batch.kubernetes.io/controller-uid={uid}",
    ]
    manual = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "manual"},
        "spec": {
            "manualSelector": True,
            "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["y", "x"]}]},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    await kubectl.ok("create", "-f", "-", stdin=json.dumps(manual))
    stored = json.loads(await kubectl.ok("get", "job", "manual", "-o", "jsonpath={.spec}"))
    assert stored["template"]["metadata"]["labels"] == {"app": "x"}
    assert stored["selector"] == manual["spec"]["selector"]
    assert table(await kubectl.ok("get", "job", "manual", "-o", "wide"))[1][-1] == "app in (x,y)"


async def test_kueues_workload_template_keeps_only_the_job_name_label(api: k8s_client.ApiClient) -> None:
    """The Workload's pod template is the Job's without the labels the Job controller manages but
    batch.kubernetes.io/job-name (Kueue job_controller.go cleanLabels); the Job's own template labels stay."""
    body = {
        "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            }
        },
    }
    job = await client.create_object(api, resources.JOBS, namespace="default", body=body)
    template = integrations.job_pod_templates("batch/v1", "Job", job)["main"]
    assert template["metadata"] == {"labels": {"team": "a", "batch.kubernetes.io/job-name": "j"}}
    assert template["spec"] == job["spec"]["template"]["spec"]
    assert "controller-uid" in job["spec"]["template"]["metadata"]["labels"]  # the Job's template is not changed


async def test_deployment_replica_set_and_statefulset_print_their_wide_columns(kubectl: Kubectl) -> None:
    """`kubectl get deploy,rs,sts -o wide` prints CONTAINERS and IMAGES, and SELECTOR but for a StatefulSet, as
    kube-apiserver's printers do; before, the emulator sent none of them."""
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}, {"name": "side", "image": "busybox"}]},
    }
    spec = {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    for kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        body = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web"}, "spec": spec}
        await kubectl.ok("create", "-f", "-", stdin=json.dumps(body))
    deploy = table(await kubectl.ok("get", "deploy", "-o", "wide"))
    assert deploy[0][-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert deploy[1][-3:] == ["nginx,side", "nginx:1.27,busybox", "app=web"]
    rs = table(await kubectl.ok("get", "rs", "-o", "wide"))
    assert rs[0] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert rs[1][-3:] == ["nginx,side", "nginx:1.27,busybox", "app=web"]
    sts = table(await kubectl.ok("get", "sts", "-o", "wide"))
    assert sts[0] == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    assert sts[1][0] == "web" and sts[1][-2:] == ["nginx,side", "nginx:1.27,busybox"]


async def test_a_work_queue_job_prints_its_completions_as_kubectl_does(kubectl: Kubectl) -> None:
    """A Job without completions (a work queue) prints 0/1 with one pod at a time and 0/1 of N with N."""
    for name, parallelism in (("one", 1), ("three", 3)):
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "parallelism": parallelism,
                "suspend": True,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
            },
        }
        await kubectl.ok("create", "-f", "-", stdin=json.dumps(body))
    rows = table(await kubectl.ok("get", "jobs"))
    assert [[row[0], row[2]] for row in rows[1:]] == [["one", "0/1"], ["three", "0/1 of 3"]]


def _job_condition(kind: str, status: str = "True") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": "Test",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


async def test_a_jobs_status_column_reads_its_conditions_and_deletion(kubectl: Kubectl) -> None:
    """`kubectl get jobs` STATUS is Kubernetes 1.32's printJob: Complete, Failed, Terminating (being deleted),
    Suspended, FailureTarget from the Job's conditions, else Running. ``spec.suspend`` alone is no state (the
    Job controller's Suspended condition is), and SuccessCriteriaMet alone reads Running. Before, the emulator
    printed Suspended from the spec and Terminating for FailureTarget or SuccessCriteriaMet."""
    states = {
        "fresh": [],  # suspended in its spec, not yet by the Job controller
        "held": [_job_condition("Suspended")],
        "resumed": [_job_condition("Suspended", "False")],
        "failing": [_job_condition("FailureTarget")],
        "met": [_job_condition("SuccessCriteriaMet")],
        "done": [_job_condition("SuccessCriteriaMet"), _job_condition("Complete")],
        "failed": [_job_condition("FailureTarget"), _job_condition("Failed")],
        "leaving": [_job_condition("Suspended")],
    }
    for name, conditions in states.items():
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "finalizers": ["example.com/hold"] if name == "leaving" else []},
            "spec": {
                "suspend": True,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
            },
        }
        await kubectl.ok("create", "-f", "-", stdin=json.dumps(body))
        if conditions:
            patch = json.dumps({"status": {"conditions": conditions}})
            await kubectl.ok("patch", "job", name, "--subresource=status", "--type=merge", "-p", patch)
    await kubectl.ok("delete", "job", "leaving", "--wait=false")
    rows = table(await kubectl.ok("get", "jobs"))
    assert {row[0]: row[1] for row in rows[1:]} == {
        "fresh": "Running",
        "held": "Suspended",
        "resumed": "Running",
        "failing": "FailureTarget",
        "met": "Running",
        "done": "Complete",
        "failed": "Failed",
        "leaving": "Terminating",
    }
    await kubectl.ok("patch", "job", "leaving", "--type=merge", "-p", '{"metadata": {"finalizers": null}}')


async def test_applying_a_job_again_server_side_keeps_the_generated_selector(kubectl: Kubectl) -> None:
    """The selector and labels the API server generated belong to no field manager: applying the same Job again
    (client- or server-side) leaves them, and nothing is refused as a change of the immutable selector."""
    await kubectl.ok("apply", "-f", str(SETUP))
    job_file = SAMPLE_JOB.read_text().replace("generateName: sample-job-", "name: sample-job")
    await kubectl.ok("apply", "--server-side", "-f", "-", stdin=job_file)
    before = json.loads(await kubectl.ok("get", "job", "sample-job", "-o", "jsonpath={.spec.selector}"))
    out = await kubectl.ok("apply", "--server-side", "-f", "-", stdin=job_file)
    assert out.strip() == "job.batch/sample-job serverside-applied"
    after = json.loads(await kubectl.ok("get", "job", "sample-job", "-o", "json"))
    assert after["spec"]["selector"] == before
    assert after["spec"]["template"]["metadata"]["labels"]["job-name"] == "sample-job"


#: What kube-apiserver's SetDefaults_PodSpec adds to any pod spec that leaves it out.
POD_SPEC_DEFAULTS = {
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "terminationGracePeriodSeconds": 30,
    "securityContext": {},
}
#: What SetDefaults_Container adds to every container (but the image pull policy).
CONTAINER_DEFAULTS = {"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}


async def test_a_pod_reads_back_with_kube_apiservers_defaults(kubectl: Kubectl) -> None:
    """`kubectl get pod -o json` shows what kube-apiserver's defaulting wrote (pkg/apis/core/v1/defaults.go):
    the pod spec's restart and DNS policies, scheduler, grace period and empty securityContext, and for a Pod
    only enableServiceLinks and requests from limits; each container's pull policy (Always for latest or no
    tag, else IfNotPresent), termination message fields and its ports' protocol. Before, none were written."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox:latest"}],
            "containers": [
                {"name": "untagged", "image": "busybox", "resources": {"limits": {"cpu": "1"}}},
                {"name": "tagged", "image": "registry:5000/nginx:1.27", "ports": [{"containerPort": 80}]},
                {"name": "pinned", "image": "busybox@sha256:" + "0" * 64, "imagePullPolicy": "Never"},
            ],
        },
    }
    await kubectl.ok("create", "-f", "-", stdin=json.dumps(body))
    spec = json.loads(await kubectl.ok("get", "pod", "p", "-o", "jsonpath={.spec}"))
    assert {key: spec[key] for key in POD_SPEC_DEFAULTS} == POD_SPEC_DEFAULTS
    assert (spec["restartPolicy"], spec["enableServiceLinks"]) == ("Always", True)
    [init] = spec["initContainers"]
    assert init == {"name": "init", "image": "busybox:latest", "imagePullPolicy": "Always", "resources": {}} | (
        CONTAINER_DEFAULTS
    )
    untagged, tagged, pinned = spec["containers"]
    assert untagged["imagePullPolicy"] == "Always"
    assert untagged["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}
    assert {key: untagged[key] for key in CONTAINER_DEFAULTS} == CONTAINER_DEFAULTS
    assert tagged["imagePullPolicy"] == "IfNotPresent" and tagged["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert pinned["imagePullPolicy"] == "Never"  # what the user set is kept


async def test_a_job_reads_back_with_kube_apiservers_defaults(kubectl: Kubectl) -> None:
    """A Job gets SetDefaults_Job's fields (pkg/apis/batch/v1/defaults.go): completions and parallelism,
    backoffLimit (the int32 maximum with backoffLimitPerIndex), completionMode, suspend, podReplacementPolicy,
    and its template's labels as its own when it has none (not the selector labels, generated after); its pod
    template gets the pod spec defaults, but not a Pod's requests from limits. A Job with labels keeps them."""
    template = {
        "metadata": {"labels": {"app": "train"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36", "resources": {"limits": {"cpu": "1"}}}],
        },
    }
    for name, extra in (("plain", {}), ("indexed", {"completionMode": "Indexed", "completions": 2})):
        spec = {"template": template, **extra}
        if extra:
            spec["backoffLimitPerIndex"] = 1
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}
        await kubectl.ok("create", "-f", "-", stdin=json.dumps(body))
    labelled = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "own", "labels": {"team": "a"}}}
    await kubectl.ok("create", "-f", "-", stdin=json.dumps({**labelled, "spec": {"template": template}}))
    plain = json.loads(await kubectl.ok("get", "job", "plain", "-o", "json"))
    assert plain["metadata"]["labels"] == {"app": "train"}
    spec = plain["spec"]
    assert {key: spec[key] for key in ("completions", "parallelism", "backoffLimit", "completionMode", "suspend")} == {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": 6,
        "completionMode": "NonIndexed",
        "suspend": False,
    }
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed" and "manualSelector" not in spec
    pod_spec = spec["template"]["spec"]
    assert {key: pod_spec[key] for key in POD_SPEC_DEFAULTS} == POD_SPEC_DEFAULTS
    assert pod_spec["restartPolicy"] == "Never" and "enableServiceLinks" not in pod_spec
    [container] = pod_spec["containers"]
    assert container["resources"] == {"limits": {"cpu": "1"}} and container["imagePullPolicy"] == "IfNotPresent"
    indexed = json.loads(await kubectl.ok("get", "job", "indexed", "-o", "jsonpath={.spec}"))
    assert (indexed["backoffLimit"], indexed["parallelism"], indexed["completions"]) == (2**31 - 1, 1, 2)
    own = json.loads(await kubectl.ok("get", "job", "own", "-o", "jsonpath={.metadata.labels}"))
    assert own == {"team": "a"}


async def test_pod_templates_of_built_in_kinds_are_defaulted_and_a_jobsets_are_not(kubectl: Kubectl) -> None:
    """A Deployment's, ReplicaSet's, StatefulSet's, CronJob's and PodTemplate's pod template reads back with the
    pod spec defaults, as kube-apiserver decodes them; a JobSet's (a custom resource: the API server knows no
    pod template in it) as sent."""
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    spec = {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    for kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        body = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web"}, "spec": spec}
        await kubectl.ok("create", "-f", "-", stdin=json.dumps(body))
    cron_template = {"metadata": {}, "spec": {**template["spec"], "restartPolicy": "OnFailure"}}
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": cron_template}}},
    }
    pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template}
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "w",
                    "template": {"spec": {"template": {"spec": {**cron_template["spec"]}}}},
                }
            ],
        },
    }
    for body in (cron, pod_template, jobset):
        await kubectl.ok("create", "-f", "-", stdin=json.dumps(body))
    paths = {
        "deployment/web": "{.spec.template.spec}",
        "replicaset/web": "{.spec.template.spec}",
        "statefulset/web": "{.spec.template.spec}",
        "cronjob/nightly": "{.spec.jobTemplate.spec.template.spec}",
        "podtemplate/t": "{.template.spec}",
    }
    for name, path in paths.items():
        pod_spec = json.loads(await kubectl.ok("get", name, "-o", f"jsonpath={path}"))
        assert {key: pod_spec[key] for key in POD_SPEC_DEFAULTS} == POD_SPEC_DEFAULTS, name
        assert pod_spec["containers"][0]["imagePullPolicy"] == "Always", name
        assert pod_spec["restartPolicy"] == ("OnFailure" if name.startswith("cronjob") else "Always"), name
    stored = json.loads(
        await kubectl.ok("get", "jobset", "js", "-o", "jsonpath={.spec.replicatedJobs[0].template.spec.template.spec}")
    )
    assert "dnsPolicy" not in stored and "imagePullPolicy" not in stored["containers"][0]
