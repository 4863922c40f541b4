"""Deployment, StatefulSet and LeaderWorkerSet: what Kueue's webhooks write on them and their pods, their pod
sets, and the pods' groups (jobframework/integrations/serving.py); the emulator's pod hook and the simulated
controllers' pure parts (kueue_es/sim/controllers.py). No server.

Kueue sources: pkg/controller/jobs/deployment/deployment_webhook.go, statefulset/statefulset_webhook.go,
statefulset_pod_reconciler.go, leaderworkerset/leaderworkerset_webhook.go, leaderworkerset_reconciler.go, and
their tests.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_es.events import manifests, models, types
from kueue_es.events.manager_config import ManagerConfig
from kueue_es.jobframework import integrations, pods, webhooks, workloads
from kueue_es.jobframework.integrations import serving
from kueue_es.services.kube import resources
from kueue_es.services.watcher import kinds
from kueue_es.services.watcher.inputs import ConversionInputs
from kueue_es.services.watcher.service import watched_kinds
from kueue_es.sim import controllers, emulator
from tests.kube import examples

QUEUE = workloads.QUEUE_LABEL


def sample(relative: str, *, uid: str = "uid-1") -> dict[str, Any]:
    [doc] = examples.load(f"serving-workloads/{relative}")
    doc["metadata"].update(namespace="default", uid=uid)
    return doc


def created(ref: resources.ResourceRef, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` after the emulator's create hooks (Kueue's webhooks), as the API server would store it."""
    out = copy.deepcopy(obj)
    for hook in emulator.KUEUE_WEBHOOKS:
        hook(ref, out)
    return out


# -- the registry ----------------------------------------------------------------------------------


def test_kueue_framework_names_switch_the_kinds() -> None:
    """integrations.frameworks names (deployment_controller.go etc. FrameworkName) select the kinds; each one
    implicitly enables the pod integration (ImplicitlyEnabledFrameworkNames), so the watcher watches Pods too."""
    assert integrations.by_framework("deployment").kind == "Deployment"  # type: ignore[union-attr]
    assert integrations.by_framework("statefulset").kind == "StatefulSet"  # type: ignore[union-attr]
    lws = integrations.by_framework("leaderworkerset.x-k8s.io/leaderworkerset")
    assert lws is not None and (lws.api_version, lws.plural) == ("leaderworkerset.x-k8s.io/v1", "leaderworkersets")
    assert all(
        integrations.registry()[k].suspend_path is None for k in ("Deployment", "StatefulSet", "LeaderWorkerSet")
    )
    assert kinds.FRAMEWORK_KINDS["deployment"] == "Deployment"
    only = watched_kinds(ManagerConfig(configuration=models.Configuration(), frameworks=("statefulset",)))
    assert "StatefulSet" in only and "Pod" in only and "Deployment" not in only and "Job" not in only
    jobs_only = watched_kinds(ManagerConfig(configuration=models.Configuration(), frameworks=("batch/job",)))
    assert "Pod" not in jobs_only and "StatefulSet" not in jobs_only


def test_the_serving_object_itself_is_no_workload() -> None:
    """Their pods are the workloads: facts() of the Deployment, StatefulSet or LWS is None, queue label or not."""
    for relative, kind in (
        ("sample-deployment.yaml", "Deployment"),
        ("sample-statefulset.yaml", "StatefulSet"),
        ("sample-leaderworkerset.yaml", "LeaderWorkerSet"),
    ):
        assert integrations.facts(integrations.registry()[kind], sample(relative)) is None


def test_a_statefulset_is_no_owner_that_takes_its_pods() -> None:
    """Pods of a StatefulSet are not "owned by a managed job" (they are its workload): the watcher does not
    remember the StatefulSet's UID as a managing owner, nor is it a job owner for the pod integration."""
    inputs = ConversionInputs()
    inputs.remember_owner("StatefulSet", sample("sample-statefulset.yaml", uid="sts-uid"))
    inputs.remember_owner("Job", {"metadata": {"name": "j", "namespace": "default", "uid": "job-uid"}})
    assert set(inputs.owners) == {"job-uid"}
    assert not pods.is_job_owner("apps/v1", "StatefulSet")
    assert not pods.is_job_owner("apps/v1", "ReplicaSet")
    assert pods.is_job_owner("batch/v1", "Job")


# -- what the webhooks write on the templates ---------------------------------------------------------


def test_deployment_template_gets_the_parent_mark_managed_queue_and_priority() -> None:
    """deployment_webhook.go Default: suspending-parent annotation, managed label, queue-name and priority-class
    labels copied from the Deployment (Kueue's TestDefault)."""
    deployment = sample("sample-deployment.yaml")
    deployment["metadata"]["labels"][workloads.PRIORITY_CLASS_LABEL] = "high"
    stored = created(resources.DEPLOYMENTS, deployment)
    meta = stored["spec"]["template"]["metadata"]
    assert meta["annotations"] == {serving.SUSPENDED_BY_PARENT_ANNOTATION: "deployment"}
    assert meta["labels"] == {
        "app": "nginx",
        workloads.MANAGED_LABEL: "true",
        QUEUE: "user-queue",
        workloads.PRIORITY_CLASS_LABEL: "high",
    }
    unqueued = copy.deepcopy(deployment)
    del unqueued["metadata"]["labels"][QUEUE]
    assert created(resources.DEPLOYMENTS, unqueued) == unqueued  # not managed: left alone


def test_statefulset_template_gets_only_the_parent_mark() -> None:
    """statefulset_webhook.go Default: only the suspending-parent annotation; a StatefulSet another framework
    marked (a LeaderWorkerSet's) is left alone (managedByAnotherFramework)."""
    stored = created(resources.STATEFUL_SETS, sample("sample-statefulset.yaml"))
    assert stored["spec"]["template"]["metadata"] == {
        "labels": {"app": "nginx"},
        "annotations": {serving.SUSPENDED_BY_PARENT_ANNOTATION: "statefulset"},
    }
    theirs = sample("sample-statefulset.yaml")
    theirs["spec"]["template"]["metadata"]["annotations"] = {
        serving.SUSPENDED_BY_PARENT_ANNOTATION: serving.LWS_FRAMEWORK
    }
    assert created(resources.STATEFUL_SETS, theirs) == theirs


def test_leaderworkerset_templates_get_queue_parent_serving_and_worker_offset() -> None:
    """leaderworkerset_webhook.go Default: both templates get the queue-name label, the suspending-parent and
    serving annotations; with a leader the workers' TAS ranks start at 1 (pod-index-offset) unless they are in a
    pod set group (sample-leaderworkerset-tas)."""
    lws_ref = controllers.LWS_REF
    stored = created(lws_ref, sample("sample-leaderworkerset.yaml"))
    template = stored["spec"]["leaderWorkerTemplate"]
    for name in ("leaderTemplate", "workerTemplate"):
        assert template[name]["metadata"]["labels"] == {QUEUE: "user-queue"}
    base = {serving.SUSPENDED_BY_PARENT_ANNOTATION: serving.LWS_FRAMEWORK, pods.SERVING_ANNOTATION: "true"}
    assert template["leaderTemplate"]["metadata"]["annotations"] == base
    assert template["workerTemplate"]["metadata"]["annotations"] == {**base, serving.POD_INDEX_OFFSET_ANNOTATION: "1"}
    tas = created(lws_ref, sample("sample-leaderworkerset-tas.yaml"))
    assert (
        serving.POD_INDEX_OFFSET_ANNOTATION
        not in tas["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]
    )
    no_leader = sample("sample-leaderworkerset.yaml")
    del no_leader["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    worker = created(lws_ref, no_leader)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]
    assert worker["annotations"] == base  # no leader: no offset
    assert "leaderTemplate" not in created(lws_ref, no_leader)["spec"]["leaderWorkerTemplate"]


# -- pod sets -------------------------------------------------------------------------------------------


def sources(kind: str, obj: dict[str, Any]) -> list[tuple[str, int, str | None]]:
    integration = integrations.registry()[kind]
    return [(s.name, s.count, s.pod_index_label) for s in integration.pod_sets(integration.ref(obj), obj)]


def test_pod_sets_as_kueue_names_them() -> None:
    """StatefulSet: main x replicas (default 1), ranked by apps.kubernetes.io/pod-index; LWS: leader (1) + worker
    (size - 1), or main (size) without a leader template (leaderworkerset_reconciler.go podSets); Deployment: each
    pod's workload is main of 1."""
    assert sources("StatefulSet", sample("sample-statefulset.yaml")) == [("main", 3, "apps.kubernetes.io/pod-index")]
    one = sample("sample-statefulset.yaml")
    del one["spec"]["replicas"]
    assert sources("StatefulSet", one) == [("main", 1, "apps.kubernetes.io/pod-index")]
    lws = sample("sample-leaderworkerset.yaml")
    assert sources("LeaderWorkerSet", lws) == [
        ("leader", 1, None),
        ("worker", 2, serving.LWS_WORKER_INDEX_LABEL),
    ]
    del lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert sources("LeaderWorkerSet", lws) == [("main", 3, serving.LWS_WORKER_INDEX_LABEL)]
    del lws["spec"]["leaderWorkerTemplate"]["size"]
    assert sources("LeaderWorkerSet", lws) == [("main", 1, serving.LWS_WORKER_INDEX_LABEL)]
    assert sources("Deployment", sample("sample-deployment.yaml")) == [("main", 1, None)]


@pytest.mark.parametrize(
    ("kind", "relative", "change", "field"),
    [
        ("StatefulSet", "sample-statefulset.yaml", lambda o: o["spec"].update(replicas="three"), "spec.replicas"),
        ("StatefulSet", "sample-statefulset.yaml", lambda o: o["spec"].pop("template"), "spec.template"),
        (
            "LeaderWorkerSet",
            "sample-leaderworkerset.yaml",
            lambda o: o["spec"]["leaderWorkerTemplate"].update(size=0),
            "spec.leaderWorkerTemplate.size",
        ),
        (
            "LeaderWorkerSet",
            "sample-leaderworkerset.yaml",
            lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"].pop("spec"),
            "spec.leaderWorkerTemplate.workerTemplate.spec",
        ),
        (
            "LeaderWorkerSet",
            "sample-leaderworkerset.yaml",
            lambda o: o["spec"].pop("leaderWorkerTemplate"),
            "spec.leaderWorkerTemplate",
        ),
    ],
)
def test_bad_input_names_the_field(kind: str, relative: str, change: Any, field: str) -> None:
    obj = sample(relative)
    change(obj)
    with pytest.raises(manifests.ManifestError) as raised:
        sources(kind, obj)
    assert raised.value.field == field


# -- the pods' group --------------------------------------------------------------------------------------


def sts_pod(sts: dict[str, Any], ordinal: int) -> dict[str, Any]:
    stored = created(resources.STATEFUL_SETS, sts)
    pod = controllers.statefulset_pod(stored, ordinal)
    pod["metadata"]["uid"] = f"pod-{ordinal}"
    pod["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{ordinal}Z"
    return pod


def test_statefulset_pods_are_one_serving_group_with_fast_admission() -> None:
    """statefulset_pod_reconciler.go setDefault, applied by the pod hook at creation: the pods are gated, in group
    statefulset-<name>-<hash> of total replicas, role main, fast admission and serving; the first pod alone
    makes the workload (fast admission) with pod set main of 3, named after the group."""
    sts = created(resources.STATEFUL_SETS, sample("sample-statefulset.yaml", uid="sts-uid"))
    pod = sts_pod(sts, 0)
    emulator.gate_queued_pods(resources.PODS, pod, lookup=lambda *_: sts)
    name = serving.statefulset_workload_name("nginx-statefulset", "sts-uid")
    assert name == workloads.workload_name(
        owner_name="nginx-statefulset", owner_uid="sts-uid", kind="StatefulSet", group="apps"
    )
    labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
    # annotations, not labels: WorkloadIdentifierAnnotations (on by default; pod_controller.go SetPodGroupName)
    assert pods.GROUP_NAME_KEY not in labels and serving.PREBUILT_WORKLOAD_LABEL not in labels
    assert (labels[QUEUE], labels[workloads.MANAGED_LABEL]) == ("user-queue", "true")
    assert annotations == {
        pods.GROUP_NAME_KEY: name,
        serving.PREBUILT_WORKLOAD_LABEL: name,
        serving.SUSPENDED_BY_PARENT_ANNOTATION: "statefulset",
        pods.GROUP_TOTAL_COUNT_ANNOTATION: "3",
        pods.FAST_ADMISSION_ANNOTATION: "true",
        pods.SERVING_ANNOTATION: "true",
        serving.POD_INDEX_LABEL_ANNOTATION: "apps.kubernetes.io/pod-index",
        pods.ROLE_HASH_ANNOTATION: "main",
    }
    assert [g["name"] for g in pod["spec"]["schedulingGates"]] == [
        "kueue.x-k8s.io/admission",
        "kueue.x-k8s.io/topology",
    ]
    fact = pods.group_facts([pod])
    assert isinstance(fact, types.WorkloadObserved)
    assert fact.workload.metadata.name == name
    assert [(ps.name, ps.count) for ps in fact.workload.spec.pod_sets] == [("main", 3)]


def test_a_pod_of_an_unqueued_or_unknown_parent_is_gated_but_not_grouped() -> None:
    """Kueue's pod webhook gates every pod with the suspending-parent annotation; a StatefulSet's pod gets the
    group labels only from a StatefulSet that names a queue while manageJobsWithoutQueueName is off
    (statefulset_pod_reconciler.go setDefault), none from a StatefulSet not found."""
    sts = created(resources.STATEFUL_SETS, sample("sample-statefulset.yaml", uid="sts-uid"))
    pod = sts_pod(sts, 0)
    unqueued = copy.deepcopy(sts)
    del unqueued["metadata"]["labels"][QUEUE]
    assert not serving.pod_defaults(copy.deepcopy(pod), unqueued)
    assert not serving.pod_defaults(copy.deepcopy(pod), None)
    assert not serving.pod_defaults(copy.deepcopy(pod), None, manage_jobs_without_queue_name=True)
    emulator.gate_queued_pods(resources.PODS, pod, lookup=lambda *_: None)
    assert pods.is_gated(pod) and pods.GROUP_NAME_KEY not in pod["metadata"]["labels"]


def _context(*, manage: bool) -> emulator.WebhookContext:
    return lambda namespace, obj: webhooks.Context(manage_jobs_without_queue_name=manage)


def test_an_unqueued_statefulsets_pods_are_its_group_under_manage_jobs_without_queue_name() -> None:
    """Kueue #5714 (statefulset_pod_reconciler.go setDefault, statefulset_reconciler.go reconcileWorkload): under
    manageJobsWithoutQueueName a StatefulSet without the queue-name label, which its webhook marked, gets its
    group Workload too, naming no LocalQueue (so it waits), and its pods no queue-name label; the StatefulSet
    labelled later puts the group's Workload in that LocalQueue."""
    sts = sample("sample-statefulset.yaml", uid="sts-uid")
    del sts["metadata"]["labels"][QUEUE]
    marked = webhooks.default(
        "apps/v1", "StatefulSet", sts, context=webhooks.Context(manage_jobs_without_queue_name=True)
    )
    assert serving.parent_framework({"metadata": marked["spec"]["template"]["metadata"]}) == "statefulset"
    members = [sts_pod(marked, i) for i in range(3)]
    for pod in members:
        emulator.gate_queued_pods(resources.PODS, pod, lookup=lambda *_: marked, context=_context(manage=True))
    name = serving.statefulset_workload_name("nginx-statefulset", "sts-uid")
    assert all(pods.group_name(p) == name and QUEUE not in p["metadata"]["labels"] for p in members)
    assert all(p["metadata"]["labels"][workloads.MANAGED_LABEL] == "true" for p in members)

    def queue_of(parent: dict[str, Any]) -> str:
        context = workloads.Context(
            manage_jobs_without_queue_name=True,
            objects={"StatefulSet": {("default", "nginx-statefulset"): parent}},
        )
        fact = pods.group_facts(members, context=context)
        assert isinstance(fact, types.WorkloadObserved), fact
        return fact.workload.spec.queue_name

    assert queue_of(marked) == ""
    labelled = copy.deepcopy(marked)
    labelled["metadata"]["labels"][QUEUE] = "user-queue"
    assert queue_of(labelled) == "user-queue"
    alone = sts_pod(marked, 0)
    emulator.gate_queued_pods(resources.PODS, alone, lookup=lambda *_: marked, context=_context(manage=False))
    assert pods.is_gated(alone) and pods.GROUP_NAME_KEY not in alone["metadata"]["labels"]


def test_an_unqueued_leaderworkersets_groups_get_workloads_under_manage_jobs_without_queue_name() -> None:
    """Kueue #4808 (leaderworkerset_reconciler.go setDefault and constructWorkload): a LeaderWorkerSet without the
    queue-name label that its webhook marked (manageJobsWithoutQueueName) has a Workload per group, naming no
    LocalQueue, its pods no queue-name label; labelled with a LocalQueue, the groups' Workloads move to it
    (updateWorkload) and the gated pods are relabelled."""
    lws = sample("sample-leaderworkerset.yaml", uid="lws-uid")
    del lws["metadata"]["labels"][QUEUE]
    marked = webhooks.default(
        serving.LWS_API, "LeaderWorkerSet", lws, context=webhooks.Context(manage_jobs_without_queue_name=True)
    )
    group = lws_pods(marked)
    name = serving.lws_workload_name("nginx-leaderworkerset", "lws-uid", "0")
    assert all(pods.group_name(p) == name and QUEUE not in p["metadata"]["labels"] for p in group)
    assert [pods.role_hash(p) for p in group] == ["leader", "worker", "worker"]

    def workload_of(parent: dict[str, Any]) -> models.Workload:
        context = workloads.Context(
            manage_jobs_without_queue_name=True,
            objects={"LeaderWorkerSet": {("default", "nginx-leaderworkerset"): parent}},
        )
        fact = pods.group_facts(group, context=context)
        assert isinstance(fact, types.WorkloadObserved), fact
        return fact.workload

    assert workload_of(marked).spec.queue_name == ""
    labelled = copy.deepcopy(marked)
    labelled["metadata"]["labels"] = {QUEUE: "user-queue"}
    moved = workload_of(labelled)
    assert moved.spec.queue_name == "user-queue"
    assert serving.queue_relabels(moved, group, queue=serving.lws_queue(labelled)) == sorted(
        p["metadata"]["name"] for p in group
    )


def lws_pods(lws: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods of group 0 of ``lws`` as the simulated LWS controller makes them, after the pod hook."""
    leader_sts = controllers.lws_leader_statefulset(lws)
    leader_sts["metadata"]["uid"] = "leader-sts"
    leader = controllers.statefulset_pod(leader_sts, 0)
    leader["metadata"]["uid"] = "leader-pod"
    out = [leader]
    workers_sts = controllers.lws_worker_statefulset(lws, leader)
    if workers_sts is not None:
        workers_sts["metadata"]["uid"] = "workers-sts"
        out += [controllers.statefulset_pod(workers_sts, i) for i in range(1, 3)]
    for i, pod in enumerate(out):
        pod["metadata"].setdefault("uid", f"worker-{i}")
        pod["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{i}Z"
        emulator.gate_queued_pods(resources.PODS, pod, lookup=lambda *_: lws)
    return out


def test_leaderworkerset_group_pods_make_leader_and_worker_pod_sets() -> None:
    """leaderworkerset_reconciler.go setDefault: group leaderworkerset-<name>-<group index>-<hash> of total size,
    role leader (no leader-name annotation) or worker; no fast admission: the workload exists once all three
    pods do, with pod sets leader (1) and worker (2)."""
    lws = created(controllers.LWS_REF, sample("sample-leaderworkerset.yaml", uid="lws-uid"))
    leader, *workers = lws_pods(lws)
    name = serving.lws_workload_name("nginx-leaderworkerset", "lws-uid", "0")
    assert name.startswith("leaderworkerset-nginx-leaderworkerset-0-")
    assert leader["metadata"]["labels"][serving.LWS_GROUP_INDEX_LABEL] == "0"
    assert [w["metadata"]["labels"][serving.LWS_WORKER_INDEX_LABEL] for w in workers] == ["1", "2"]
    assert [pods.role_hash(p) for p in (leader, *workers)] == ["leader", "worker", "worker"]
    assert {pods.group_name(p) for p in (leader, *workers)} == {name}
    assert all(p["metadata"]["annotations"][pods.GROUP_TOTAL_COUNT_ANNOTATION] == "3" for p in (leader, *workers))
    assert pods.FAST_ADMISSION_ANNOTATION not in leader["metadata"]["annotations"]
    assert pods.group_facts([leader, workers[0]]) is None  # incomplete
    fact = pods.group_facts([leader, *workers])
    assert isinstance(fact, types.WorkloadObserved)
    assert [(ps.name, ps.count, ps.requests["cpu"]) for ps in fact.workload.spec.pod_sets] == [
        ("leader", 1, 100),
        ("worker", 2, 200),
    ]


def test_the_gated_pods_of_a_serving_group_are_relabelled_to_the_queue_its_parent_names() -> None:
    """statefulset_reconciler.go syncQueueLabel, leaderworkerset_reconciler.go setDefault: the group's pods get the
    queue-name label of the LocalQueue their parent names, the gated ones only (Kueue's pod webhook refuses the
    change on the others) and not those being deleted; nothing for a plain pod group's Workload or no queue."""
    sts = created(resources.STATEFUL_SETS, sample("sample-statefulset.yaml", uid="sts-uid"))
    members = [sts_pod(sts, i) for i in range(3)]
    for pod in members:
        emulator.gate_queued_pods(resources.PODS, pod, lookup=lambda *_: sts)
    fact = pods.group_facts(members)
    assert isinstance(fact, types.WorkloadObserved)
    members[1]["spec"]["schedulingGates"] = []  # started
    members[2]["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    assert serving.queue_relabels(fact.workload, members, queue="other-queue") == ["nginx-statefulset-0"]
    assert serving.queue_relabels(fact.workload, members, queue="user-queue") == []
    assert serving.queue_relabels(fact.workload, members, queue="") == []
    plain = models.Workload(metadata=models.ObjectMeta(name="group", namespace="default"), spec=fact.workload.spec)
    assert serving.queue_relabels(plain, members, queue="other-queue") == []


def test_a_leaderworkerset_groups_workload_is_in_the_local_queue_its_leaderworkerset_names_now() -> None:
    """leaderworkerset_reconciler.go updateWorkload: each group Workload's spec.queueName is the LeaderWorkerSet's
    queue-name label, so a label changed while no replica is ready (leaderworkerset_webhook.go ValidateUpdate)
    moves the groups' workloads, whatever the pods already made say (the pods relabelled one by one meanwhile are
    no rejected group); an unknown LeaderWorkerSet, or one made again under the name, leaves the pods' queue."""
    lws = created(controllers.LWS_REF, sample("sample-leaderworkerset.yaml", uid="lws-uid"))
    group = lws_pods(lws)
    relabelled = copy.deepcopy(lws)
    relabelled["metadata"]["labels"][QUEUE] = "other-queue"

    def queue_of(members: list[dict[str, Any]], parent: dict[str, Any] | None) -> str:
        known = {} if parent is None else {("default", "nginx-leaderworkerset"): parent}
        fact = pods.group_facts(members, context=workloads.Context(objects={"LeaderWorkerSet": known}))
        assert isinstance(fact, types.WorkloadObserved), fact
        return fact.workload.spec.queue_name

    assert queue_of(group, lws) == "user-queue"
    assert queue_of(group, relabelled) == "other-queue"
    halfway = copy.deepcopy(group)
    halfway[0]["metadata"]["labels"][QUEUE] = "other-queue"
    assert queue_of(halfway, relabelled) == "other-queue"
    assert queue_of(group, None) == "user-queue"
    made_again = copy.deepcopy(relabelled)
    made_again["metadata"]["uid"] = "made-again"
    assert queue_of(group, made_again) == "user-queue"
    assert serving.lws_queue(relabelled) == "other-queue"


def test_a_leaderworkerset_of_a_fifty_character_name_is_grouped_by_annotations() -> None:
    """Kueue's e2e sequential/extended/workloadidentifierannotations_test.go "should admit group with 50-character
    lws name": with WorkloadIdentifierAnnotations (on by default) the group and prebuilt-workload names are pod
    annotations (pod_controller.go SetPodGroupName, jobframework/utils.go SetPrebuiltWorkloadName), so a group
    name longer than a label value may be (63 characters) still makes the group's Workload."""
    lws = sample("sample-leaderworkerset.yaml", uid="lws-uid")
    lws["metadata"]["name"] = "a" * 50
    lws = created(controllers.LWS_REF, lws)
    group = lws_pods(lws)
    name = serving.lws_workload_name("a" * 50, "lws-uid", "0")
    assert len(name) > 63
    for pod in group:
        assert pod["metadata"]["annotations"][pods.GROUP_NAME_KEY] == name
        assert pod["metadata"]["annotations"][serving.PREBUILT_WORKLOAD_LABEL] == name
        assert pods.GROUP_NAME_KEY not in pod["metadata"]["labels"]
        assert serving.PREBUILT_WORKLOAD_LABEL not in pod["metadata"]["labels"]
        assert serving.lws_owner(pod, lws) == ("a" * 50, "lws-uid", "0")
    fact = pods.group_facts(group)
    assert isinstance(fact, types.WorkloadObserved)
    assert fact.workload.metadata.name == name


def test_leaderworkerset_without_leader_template_is_main() -> None:
    lws = sample("sample-leaderworkerset.yaml", uid="lws-uid")
    del lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    group = lws_pods(created(controllers.LWS_REF, lws))
    assert [pods.role_hash(p) for p in group] == ["main"] * 3
    fact = pods.group_facts(group)
    assert isinstance(fact, types.WorkloadObserved)
    assert [(ps.name, ps.count) for ps in fact.workload.spec.pod_sets] == [("main", 3)]


def test_parent_of_names_the_object_to_read() -> None:
    sts = created(resources.STATEFUL_SETS, sample("sample-statefulset.yaml", uid="sts-uid"))
    assert serving.parent_of(sts_pod(sts, 1)) == ("apps/v1", "StatefulSet", "nginx-statefulset")
    lws = created(controllers.LWS_REF, sample("sample-leaderworkerset.yaml", uid="lws-uid"))
    assert serving.parent_of(lws_pods(lws)[2]) == (
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "nginx-leaderworkerset",
    )
    assert serving.parent_of({"metadata": {"name": "plain"}}) is None


# -- the simulated controllers' pure parts -------------------------------------------------------------


def test_replica_set_for_a_deployment() -> None:
    """Named <deployment>-<pod-template-hash>, the hash label on its template and selector, owned by the
    Deployment; another template, another ReplicaSet."""
    deployment = sample("sample-deployment.yaml", uid="d-uid")
    rs = controllers.replica_set_for(deployment)
    template_hash = rs["spec"]["template"]["metadata"]["labels"][controllers.POD_TEMPLATE_HASH_LABEL]
    assert rs["metadata"]["name"] == f"nginx-deployment-{template_hash}" and len(template_hash) == 10
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "nginx", controllers.POD_TEMPLATE_HASH_LABEL: template_hash}
    [owner] = rs["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Deployment", "d-uid", True)
    changed = copy.deepcopy(deployment)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    assert controllers.replica_set_for(changed)["metadata"]["name"] != rs["metadata"]["name"]


def test_scale_in_deletes_gated_then_unready_then_youngest() -> None:
    def pod(name: str, *, gated: bool, ready: bool, created: str) -> dict[str, Any]:
        status = controllers.running_status({"spec": {}}, created) if ready else {}
        spec = {"schedulingGates": [{"name": "g"}]} if gated else {}
        return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec, "status": status}

    order = controllers.scale_in_order(
        [
            pod("old-ready", gated=False, ready=True, created="2026-01-01T00:00:01Z"),
            pod("young-ready", gated=False, ready=True, created="2026-01-01T00:00:09Z"),
            pod("unready", gated=False, ready=False, created="2026-01-01T00:00:02Z"),
            pod("gated", gated=True, ready=False, created="2026-01-01T00:00:00Z"),
        ]
    )
    assert [p["metadata"]["name"] for p in order] == ["gated", "unready", "young-ready", "old-ready"]


def test_lws_worker_statefulset_is_owned_by_its_leader_and_starts_at_one() -> None:
    lws = sample("sample-leaderworkerset.yaml", uid="lws-uid")
    leader_sts = controllers.lws_leader_statefulset(lws)
    assert (leader_sts["spec"]["replicas"], leader_sts["spec"]["podManagementPolicy"]) == (2, "Parallel")
    leader_sts["metadata"]["uid"] = "s"
    leader = controllers.statefulset_pod(leader_sts, 1)
    leader["metadata"]["uid"] = "leader-1"
    workers = controllers.lws_worker_statefulset(lws, leader)
    assert workers is not None
    assert (workers["metadata"]["name"], workers["spec"]["replicas"], workers["spec"]["ordinals"]) == (
        "nginx-leaderworkerset-1",
        2,
        {"start": 1},
    )
    assert workers["metadata"]["ownerReferences"][0]["uid"] == "leader-1"
    assert (
        workers["spec"]["template"]["metadata"]["annotations"][serving.LWS_LEADER_NAME_ANNOTATION]
        == "nginx-leaderworkerset-1"
    )
    lws["spec"]["leaderWorkerTemplate"]["size"] = 1
    assert controllers.lws_worker_statefulset(lws, leader) is None


# -- external frameworks: pods of Argo Workflows and Tekton --------------------------------------------


def workflow_pod(*, owner: tuple[str, str], labels: dict[str, str]) -> dict[str, Any]:
    """A pod as Argo's workflow controller or Tekton's TaskRun reconciler makes it: controlled by its
    Workflow or TaskRun, the queue label from the Workflow's podMetadata (or the PipelineRun's labels)."""
    api_version, kind = owner
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "steps-1234",
            "namespace": "default",
            "uid": "pod-uid",
            "labels": labels,
            "ownerReferences": [
                {"apiVersion": api_version, "kind": kind, "name": "steps", "uid": "wf-uid", "controller": True}
            ],
        },
        "spec": {"containers": [{"name": "main", "image": "whalesay", "resources": {"requests": {"cpu": "100m"}}}]},
    }


def test_argo_and_tekton_pods_are_plain_pod_workloads() -> None:
    """Kueue's external_workloads/argo_workflow.md and tektoncd.md: each pod of a Workflow step or a TaskRun
    that carries the queue label is its own plain-Pod workload (pod set main of 1); the Workflow and the
    TaskRun are not Kueue's. The emulator's pod hook gates such a pod as Kueue's pod webhook does."""
    [workflow] = examples.load("pod-based-workloads/workflow-single-queue.yaml")
    labels = {**workflow["spec"]["podMetadata"]["labels"], "kueue.x-k8s.io/managed": "true"}
    for owner in (("argoproj.io/v1alpha1", "Workflow"), ("tekton.dev/v1", "TaskRun")):
        pod = workflow_pod(owner=owner, labels=labels)
        fact = pods.pod_facts(pod)
        assert isinstance(fact, types.WorkloadObserved), owner
        assert [(ps.name, ps.count) for ps in fact.workload.spec.pod_sets] == [("main", 1)]
        assert fact.workload.spec.queue_name == "user-queue"
        gated = workflow_pod(owner=owner, labels={QUEUE: "user-queue"})
        emulator.gate_queued_pods(resources.PODS, gated)
        assert pods.is_gated(gated) and gated["metadata"]["labels"][workloads.MANAGED_LABEL] == "true"


def test_pods_of_an_external_framework_are_left_to_it() -> None:
    """integrations.externalFrameworks: a pod controlled by a kind an outside controller runs for Kueue is part
    of its owner's workload, not one of its own (jobframework IsOwnerManagedByKueue, externalIntegrations)."""
    pod = workflow_pod(
        owner=("argoproj.io/v1alpha1", "Workflow"), labels={QUEUE: "user-queue", workloads.MANAGED_LABEL: "true"}
    )
    context = workloads.Context(external_owners={("argoproj.io/v1alpha1", "Workflow")})
    assert pods.pod_facts(pod, context=context) is None
    assert not pods.is_managed(pod, context)
    assert pods.is_managed(pod, workloads.Context())


# -- Kueue's StatefulSet webhook on updates -------------------------------------------------------------


def test_statefulset_updates_kueue_refuses() -> None:
    """statefulset_webhook.go ValidateUpdate: while managed, replicas only to or from 0 (and not up while the
    scale-down's pods are still there), the pod spec's shape immutable, the queue name once a replica was ready.
    These are Kueue's webhook's rules (403), not the API server's: its own validation lets them through."""
    from kueue_es import validation
    from kueue_es.jobframework import webhooks

    old = created(resources.STATEFUL_SETS, sample("sample-statefulset.yaml", uid="sts-uid"))

    def causes(change: Any, *, before: dict[str, Any] = old) -> list[str]:
        new = copy.deepcopy(before)
        change(new)
        assert validation.validate(new, old=before) == []
        return [str(e) for e in webhooks.validate_update("apps/v1", "StatefulSet", before, new)]

    assert causes(lambda o: o["spec"].update(replicas=5)) == ["spec.replicas: Invalid value: 5: field is immutable"]
    assert causes(lambda o: o["spec"].update(replicas=0)) == []  # scale to zero is allowed
    zero = copy.deepcopy(old)
    zero["spec"]["replicas"] = 0
    assert causes(lambda o: o["spec"].update(replicas=2), before=zero) == []
    zero["status"] = {"replicas": 1}
    assert causes(lambda o: o["spec"].update(replicas=2), before=zero) == [
        "spec.replicas: Forbidden: scaling down is still in progress"
    ]
    assert causes(
        lambda o: o["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].update(cpu="2")
    ) == ['spec.template.spec.containers[0].resources.requests: Invalid value: {"cpu":"2"}: field is immutable']
    assert (
        causes(lambda o: o["spec"]["template"]["spec"]["containers"][0].update(image="other")) == []
    )  # not in the shape
    assert causes(lambda o: o["metadata"]["labels"].update({QUEUE: "other"})) == []  # nothing ready yet
    ready = copy.deepcopy(old)
    ready["status"] = {"readyReplicas": 1}
    assert causes(lambda o: o["metadata"]["labels"].update({QUEUE: "other"}), before=ready) == [
        f'metadata.labels[{QUEUE}]: Invalid value: "other": field is immutable'
    ]
    unmanaged = sample("sample-statefulset.yaml")
    del unmanaged["metadata"]["labels"][QUEUE]
    assert causes(lambda o: o["spec"].update(replicas=5), before=unmanaged) == []


def test_a_statefulsets_group_is_in_the_local_queue_its_statefulset_names_now() -> None:
    """statefulset_reconciler.go reconcileWorkload: while replicas > 0 the Workload's spec.queueName is the
    StatefulSet's queue-name label, so a label changed while no replica is ready (the webhook lets it) moves the
    group's workload, whatever its pods' labels say; and syncQueueLabel relabels the pods one by one meanwhile,
    so pods of one StatefulSet naming different queues are no rejected group. Scaled to zero, or with the
    StatefulSet not known, the pods' queue stays."""
    sts = created(resources.STATEFUL_SETS, sample("sample-statefulset.yaml", uid="sts-uid"))
    members = [sts_pod(sts, i) for i in range(2)]
    for pod in members:
        emulator.gate_queued_pods(resources.PODS, pod, lookup=lambda *_: sts)
    relabelled = copy.deepcopy(sts)
    relabelled["metadata"]["labels"][QUEUE] = "other-queue"

    def queue_of(group: list[dict[str, Any]], parent: dict[str, Any] | None) -> str:
        known = {} if parent is None else {("default", "nginx-statefulset"): parent}
        fact = pods.group_facts(group, context=workloads.Context(objects={"StatefulSet": known}))
        assert isinstance(fact, types.WorkloadObserved), fact
        return fact.workload.spec.queue_name

    assert queue_of(members, sts) == "user-queue"
    assert queue_of(members, relabelled) == "other-queue"
    halfway = copy.deepcopy(members)
    halfway[1]["metadata"]["labels"][QUEUE] = "other-queue"  # syncQueueLabel got to one pod so far
    assert queue_of(halfway, relabelled) == "other-queue"
    assert queue_of(members, None) == "user-queue"
    other_uid = copy.deepcopy(relabelled)
    other_uid["metadata"]["uid"] = "made-again"  # another StatefulSet of the name: not these pods' parent
    assert queue_of(members, other_uid) == "user-queue"
    scaled_to_zero = copy.deepcopy(relabelled)
    scaled_to_zero["spec"]["replicas"] = 0
    assert queue_of(members, scaled_to_zero) == "user-queue"
    assert serving.statefulset_queue(relabelled) == "other-queue"
    assert serving.statefulset_queue(scaled_to_zero) == ""
    assert serving.statefulset_queue({**relabelled, "spec": {"replicas": "two"}}) == ""

    held = models.Workload(
        metadata=models.ObjectMeta(name="statefulset-web-12345", namespace="default"),
        spec=models.WorkloadSpec(
            queue_name="user-queue", pod_sets=[models.PodSet(name="main", count=3, requests={"cpu": 100})]
        ),
    )
    assert serving.statefulset_requeued(held, relabelled).spec.queue_name == "other-queue"
    assert serving.statefulset_requeued(held, sts) is held
    assert serving.statefulset_requeued(held, scaled_to_zero) is held


def test_a_held_statefulset_workload_is_resized_to_the_replicas_it_is_scaled_up_to() -> None:
    """Kueue PR #15279: scaled up from zero to another size, the held Workload counts the new replicas; the same
    size, or a count that is not one, leaves it (the latter with the field named)."""
    held = models.Workload(
        metadata=models.ObjectMeta(name="statefulset-web-12345", namespace="default"),
        spec=models.WorkloadSpec(pod_sets=[models.PodSet(name="main", count=3, requests={"cpu": 100})]),
        on_hold=serving.STATEFULSET_ON_HOLD_MESSAGE,
    )
    sts = {"metadata": {"name": "web", "namespace": "default", "uid": "u"}, "spec": {"replicas": 2}}
    resized = serving.statefulset_resized(held, sts)
    assert [(ps.name, ps.count, ps.requests) for ps in resized.spec.pod_sets] == [("main", 2, {"cpu": 100})]
    assert resized.metadata == held.metadata and resized.on_hold == held.on_hold
    assert serving.statefulset_resized(held, {**sts, "spec": {"replicas": 3}}) is held
    with pytest.raises(manifests.ManifestError, match="spec.replicas"):
        serving.statefulset_resized(held, {**sts, "spec": {"replicas": "two"}})


def marked(labels: dict[str, str], annotations: dict[str, str]) -> models.Workload:
    return models.Workload(
        metadata=models.ObjectMeta(name="group", namespace="default", labels=labels, annotations=annotations),
        spec=models.WorkloadSpec(pod_sets=[models.PodSet(name="main", count=1, requests={"cpu": 100})]),
    )


def test_a_parent_wants_its_groups_workload_while_it_is_there_with_replicas_for_it() -> None:
    """Kueue's StatefulSet and LeaderWorkerSet own their groups' Workloads (constructWorkload): the Workload stays
    with its pods gone while that parent is there (its UID), not being deleted, and wants the group: a
    StatefulSet with replicas (scaled to zero it is held instead), a LeaderWorkerSet whose replicas count past
    the group's index (leaderworkerset_reconciler.go filterWorkloads)."""
    sts = {"kind": "StatefulSet", "metadata": {"name": "web", "uid": "sts-1"}, "spec": {"replicas": 3}}
    sts_group = marked(*serving.statefulset_workload_marks("web", "sts-1"))
    assert serving.parent_wants_group(sts_group, sts)
    assert serving.parent_wants_group(sts_group, {**sts, "spec": {}})  # replicas default to 1
    assert not serving.parent_wants_group(sts_group, {**sts, "spec": {"replicas": 0}})
    assert not serving.parent_wants_group(sts_group, {**sts, "spec": {"replicas": "three"}})
    assert not serving.parent_wants_group(sts_group, {**sts, "metadata": {"name": "web", "uid": "sts-2"}})
    deleting = {"name": "web", "uid": "sts-1", "deletionTimestamp": "2026-01-01T00:00:00Z"}
    assert not serving.parent_wants_group(sts_group, {**sts, "metadata": deleting})
    assert not serving.parent_wants_group(sts_group, None)
    assert not serving.parent_wants_group(marked({}, {}), sts)  # a plain pod group's: no parent owns it

    lws = {"kind": "LeaderWorkerSet", "metadata": {"name": "lws", "uid": "lws-1"}, "spec": {"replicas": 2}}
    second = marked(*serving.lws_workload_marks("lws", "lws-1", "1"))
    assert serving.parent_wants_group(second, lws)
    assert not serving.parent_wants_group(second, {**lws, "spec": {"replicas": 1}})
    assert not serving.parent_wants_group(second, sts)  # another kind is not its parent


def test_a_leaderworkerset_group_takes_the_workload_priority_class_of_its_leaderworkerset() -> None:
    """Kueue PR #4711 (leaderworkerset_reconciler.go: the group's Workload gets the LeaderWorkerSet's
    kueue.x-k8s.io/priority-class; leaderworkerset_reconciler_test.go 'should create prebuilt workload with
    workload priority'): the webhook copies the label to both templates, so every pod of the group names it."""
    lws = sample("sample-leaderworkerset.yaml", uid="lws-uid")
    lws["metadata"].setdefault("labels", {})[workloads.PRIORITY_CLASS_LABEL] = "high"
    group = lws_pods(created(controllers.LWS_REF, lws))
    fact = pods.group_facts(group, context=workloads.Context(workload_priority_classes={"high"}))
    assert isinstance(fact, types.WorkloadObserved)
    ref = fact.workload.spec.priority_class_ref
    assert ref is not None and (ref.kind, ref.name) == ("WorkloadPriorityClass", "high")


def test_a_statefulsets_group_copies_the_statefulsets_labels_not_its_pods() -> None:
    """Kueue's StatefulSet reconciler makes the group's Workload from the StatefulSet (statefulset_reconciler.go
    constructWorkload: NewGroupWorkload of the StatefulSet with the labelKeysToCopy), so ``team`` is the
    StatefulSet's own label, whatever its pod template gives the pods; with the StatefulSet not known (yet) the
    pods' value is taken."""
    sts = created(resources.STATEFUL_SETS, sample("sample-statefulset.yaml", uid="sts-uid"))
    sts["metadata"]["labels"]["team"] = "from-the-statefulset"
    members = [sts_pod(sts, i) for i in range(2)]
    for pod in members:
        emulator.gate_queued_pods(resources.PODS, pod, lookup=lambda *_: sts)
        pod["metadata"]["labels"]["team"] = "from-the-template"

    def team_of(parent: dict[str, Any] | None) -> str | None:
        known = {} if parent is None else {("default", "nginx-statefulset"): parent}
        context = workloads.Context(objects={"StatefulSet": known}, label_keys_to_copy=frozenset({"team"}))
        fact = pods.group_facts(members, context=context)
        assert isinstance(fact, types.WorkloadObserved), fact
        return fact.workload.metadata.labels.get("team")

    assert team_of(sts) == "from-the-statefulset"
    assert team_of(None) == "from-the-template"
