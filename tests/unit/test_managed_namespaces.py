"""Which jobs Kueue manages: managedJobsNamespaceSelector (labels, expressions, Kueue's default) and the
default LocalQueue the job webhooks give a job created without a queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kmock
import pytest

from kueue_es.events import manager_config, models
from kueue_es.jobframework import jobs, pods, workloads
from kueue_es.services.kube import resources
from kueue_es.sim import store
from kueue_es.sim.emulator import KUEUE_WEBHOOKS, DefaultLocalQueue

TEAM = models.LabelSelector(match_labels={"team": "a"})
EXISTS = models.LabelSelector(
    match_expressions=[models.LabelSelectorRequirement(key="kueue-managed", operator="Exists")]
)


def job(namespace: str, *, queue: str | None = "user-queue") -> dict[str, Any]:
    labels = {workloads.QUEUE_LABEL: queue} if queue else {}
    pod = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": namespace, "uid": "u", "labels": labels},
        "spec": {"template": {"spec": pod}},
    }


def queue_of(manifest: dict[str, Any], context: workloads.Context) -> str | None:
    ref = workloads.job_ref(manifest, kind="Job", api_version="batch/v1")
    return workloads.queue_name(ref, context)


@pytest.mark.parametrize(
    ("namespace", "context", "want"),
    [
        ("default", workloads.Context(), "user-queue"),
        ("kube-system", workloads.Context(), None),  # Kueue's default selector, even with the queue label
        ("kueue-system", workloads.Context(manage_jobs_without_queue_name=True), None),
        (
            "a",
            workloads.Context(managed_jobs_namespace_selector=TEAM, namespace_labels={"a": {"team": "a"}}),
            "user-queue",
        ),
        ("b", workloads.Context(managed_jobs_namespace_selector=TEAM, namespace_labels={"b": {"team": "b"}}), None),
        ("c", workloads.Context(managed_jobs_namespace_selector=TEAM), None),  # not seen: only its name label
        (
            "d",
            workloads.Context(managed_jobs_namespace_selector=EXISTS, namespace_labels={"d": {"kueue-managed": ""}}),
            "user-queue",
        ),
        ("kube-system", workloads.Context(managed_jobs_namespace_selector=models.LabelSelector()), "user-queue"),
    ],
)
def test_the_selector_decides_for_labelled_jobs_too(
    namespace: str, context: workloads.Context, want: str | None
) -> None:
    """Kueue's reconciler ignores jobs in namespaces the selector does not pick (GA since v0.19)."""
    assert queue_of(job(namespace), context) == want
    if want is None:
        assert jobs.job_facts(job(namespace), context=context) is None


def test_the_name_label_is_matched_and_unlabelled_jobs_need_the_option() -> None:
    by_name = models.LabelSelector(
        match_expressions=[
            models.LabelSelectorRequirement(key="kubernetes.io/metadata.name", operator="In", values=["ml"])
        ]
    )
    managed = workloads.Context(managed_jobs_namespace_selector=by_name, manage_jobs_without_queue_name=True)
    assert queue_of(job("ml", queue=None), managed) == ""
    assert queue_of(job("web", queue=None), managed) is None
    assert queue_of(job("ml", queue=None), workloads.Context(managed_jobs_namespace_selector=by_name)) is None


def test_pods_follow_the_selector() -> None:
    """The pod webhook leaves pods of unselected namespaces alone, queue label or not; the reconciler too,
    also a pod the webhook marked before its namespace was left out."""
    labels = {workloads.QUEUE_LABEL: "q", workloads.MANAGED_LABEL: "true"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "b", "uid": "p", "labels": labels},
        "spec": {"containers": [{"name": "c"}]},
    }
    context = workloads.Context(managed_jobs_namespace_selector=TEAM, namespace_labels={"b": {"team": "a"}})
    assert pods.is_managed(pod, context)
    assert not pods.is_managed(pod, workloads.Context(managed_jobs_namespace_selector=TEAM))


def test_the_configuration_file_gives_the_selector() -> None:
    config = manager_config.parse(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueName: true\n"
        "managedJobsNamespaceSelector:\n  matchExpressions:\n  - {key: team, operator: In, values: [a, b]}\n",
        source="test",
    )
    assert config.manage_jobs_without_queue_name
    selector = config.managed_jobs_namespace_selector
    assert selector is not None and selector.matches({"team": "b"}) and not selector.matches({"team": "c"})


def emulated_store() -> store.ObjectStore:
    hook = DefaultLocalQueue()
    objects = store.ObjectStore(objects=kmock.ObjectsArray(), create_hooks=(hook, *KUEUE_WEBHOOKS))
    hook.store = objects
    objects.create(resources.NAMESPACES, namespace=None, body={"metadata": {"name": "other"}})
    return objects


def test_a_job_created_without_a_queue_goes_to_the_default_local_queue() -> None:
    """Kueue's job webhook (ApplyDefaultLocalQueue): the ``default`` LocalQueue of the namespace, at
    creation, then suspended as any queued Job; not in a namespace without one, nor in kube-system."""
    objects = emulated_store()
    for namespace in ("default", "kube-system"):
        lq = {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq"}}
        objects.create(resources.LOCAL_QUEUES, namespace=namespace, body=lq)
    for namespace, want_queue in (("default", "default"), ("kube-system", None), ("other", None)):
        body = job(namespace, queue=None)
        del body["metadata"]["uid"]
        created = objects.create(resources.JOBS, namespace=namespace, body=body)
        assert created["metadata"].get("labels", {}).get(workloads.QUEUE_LABEL) == want_queue, namespace
        assert created["spec"].get("suspend", False) is (want_queue is not None), namespace
    labelled = objects.create(
        resources.JOBS,
        namespace="default",
        body={**job("default"), "metadata": {"name": "k", "labels": {workloads.QUEUE_LABEL: "mine"}}},
    )
    assert labelled["metadata"]["labels"][workloads.QUEUE_LABEL] == "mine"


def test_a_pod_created_without_a_queue_goes_to_the_default_local_queue() -> None:
    """Kueue's pod webhook defaults the queue too (pod_webhook.go Default, "Local queue defaulting"), as
    ``kueue-es service webhook`` does: a plain Pod gets ``default`` and is then gated as any queued pod; not in
    a namespace without one, nor in kube-system, nor a pod its Deployment marked (suspendByParent). Before, the
    emulated API server left plain Pods unlabelled and ungated: they ran outside Kueue."""
    objects = emulated_store()
    for namespace in ("default", "kube-system"):
        lq = {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq"}}
        objects.create(resources.LOCAL_QUEUES, namespace=namespace, body=lq)

    def pod(name: str, **annotations: str) -> dict[str, Any]:
        meta = {"name": name, "annotations": annotations}
        return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}

    for namespace, want_queue in (("default", "default"), ("kube-system", None), ("other", None)):
        created = objects.create(resources.PODS, namespace=namespace, body=pod("p"))
        labels = created["metadata"].get("labels", {})
        assert labels.get(workloads.QUEUE_LABEL) == want_queue, namespace
        assert pods.is_gated(created) is (want_queue is not None), namespace
        assert (labels.get(workloads.MANAGED_LABEL) == "true") is (want_queue is not None), namespace
    of_deployment = pod("d", **{"kueue.x-k8s.io/pod-suspending-parent": "deployment"})
    created = objects.create(resources.PODS, namespace="default", body=of_deployment)
    assert workloads.QUEUE_LABEL not in created["metadata"].get("labels", {}) and pods.is_gated(created)


def test_demo_and_up_give_the_emulator_the_file_s_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``demo --config`` and ``up --emulator --config``: the emulated API server's webhooks get the file's
    ``manageJobsWithoutQueueName`` and ``managedJobsNamespaceSelector``, as the watcher they start does
    (before, they got neither: its pods were gated in every namespace but kube-system and kueue-system)."""
    from kueue_es import cli, demo, supervisor

    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueName: true\n"
        "managedJobsNamespaceSelector:\n  matchLabels: {team: a}\n"
    )
    seen: dict[str, Any] = {}

    async def fake_demo(**options: Any) -> int:
        seen["demo"] = options
        return 0

    async def fake_up(args: Any) -> int:
        seen["up"] = supervisor.emulator_webhook_options(args)
        return 0

    monkeypatch.delenv(cli.MANAGE_ENV, raising=False)
    monkeypatch.setattr(demo, "run_demo", fake_demo)
    monkeypatch.setattr(supervisor, "run_up", fake_up)
    assert cli.main(["demo", "--config", str(config), "--dir", str(tmp_path / "demo")]) == 0
    assert cli.main(["up", "--emulator", "--config", str(config), "--dir", str(tmp_path / "up")]) == 0
    for command in ("demo", "up"):
        assert seen[command]["manage_jobs_without_queue_name"] is True, command
        assert seen[command]["managed_jobs_namespace_selector"] == TEAM, command


def test_demo_and_up_give_the_emulator_the_file_s_feature_gates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``demo --config`` and ``up --emulator --config``: the emulated API server's Kueue Workload webhooks get the
    file's ``featureGates`` (PartialAdmission off: mworkload.kb.io drops minCount), as the watcher has them."""
    from kueue_es import cli, demo, supervisor

    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfeatureGates:\n  PartialAdmission: false\n"
    )
    seen: dict[str, Any] = {}

    async def fake_demo(**options: Any) -> int:
        seen["demo"] = options
        return 0

    async def fake_up(args: Any) -> int:
        seen["up"] = supervisor.emulator_webhook_options(args)
        return 0

    monkeypatch.delenv(cli.MANAGE_ENV, raising=False)
    monkeypatch.setattr(demo, "run_demo", fake_demo)
    monkeypatch.setattr(supervisor, "run_up", fake_up)
    assert cli.main(["demo", "--config", str(config), "--dir", str(tmp_path / "demo")]) == 0
    assert cli.main(["up", "--emulator", "--config", str(config), "--dir", str(tmp_path / "up")]) == 0
    for command in ("demo", "up"):
        assert seen[command]["feature_gates"] == {"PartialAdmission": False}, command
