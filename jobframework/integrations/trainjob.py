"""TrainJob (Kubeflow Trainer v2, trainer.kubeflow.org/v1alpha1): the pod sets of the JobSet its runtime gives.

Why this module exists: a TrainJob carries no pod templates. It names a runtime
(``spec.runtimeRef``: a TrainingRuntime in its namespace or a ClusterTrainingRuntime)
whose JobSet template the Trainer controller turns into the JobSet it runs, with the
TrainJob's own settings applied (``trainer.numNodes``, ``trainer.resourcesPerNode``,
``runtimePatches``). Kueue builds that JobSet the same way and admits the TrainJob with
the JobSet's pod sets (Kueue pkg/controller/jobs/trainjob/trainjob_controller.go
getChildJobSet, PodSets; the Trainer v2.3.0 it pins: pkg/runtime/core/trainingruntime.go
newRuntimeInfo, mergeRuntimePatches, the ML policy plugins' EnforceMLPolicy and
plugins/jobset/builder.go). Kueue starts the TrainJob by writing each pod set's flavor node
selector, tolerations, labels, annotations and scheduling gates into its own
``runtimePatches`` entry (manager ``kueue.x-k8s.io/manager``, added by its webhook at
creation) and unsuspending it; a stop suspends it and empties that entry
(RunWithPodSetsInfo, Stop, RestorePodSetsInfo). The runtimes are inputs of the
conversion (:attr:`Integration.inputs`): the watcher keeps them in memory and converts
the pending TrainJobs again when one changes.

What of the JobSet is built: what the Workload reads -- the replicated jobs in the
runtime's order with the patches merged in (Kubernetes strategic merge: lists of named
items merged by name), each Job's ``parallelism``/``completions`` and ``replicas``, the
``node`` container's resources, the pod templates' scheduling fields and annotations.
Not built, as Kueue does not build them either: what the Trainer's plugins add later
(environment variables, volumes, the MPI SSH secret, Flux's init container). Errors in a
runtime's templates name the field of that JobSet (``spec.replicatedJobs[0]...``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kueue_es.events import manifests
from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import (
    Finished,
    InputKind,
    Integration,
    PodSetSource,
    TemplateChange,
    as_list,
    count_of,
    finished_by_conditions,
    jobset,
)

GROUP = "trainer.kubeflow.org"
API_VERSION = f"{GROUP}/v1alpha1"
TRAINING_RUNTIME = InputKind(api_version=API_VERSION, kind="TrainingRuntime", plural="trainingruntimes")
CLUSTER_TRAINING_RUNTIME = InputKind(
    api_version=API_VERSION, kind="ClusterTrainingRuntime", plural="clustertrainingruntimes", namespaced=False
)
#: The label of a runtime's replicated job saying which TrainJob step it runs (constants.LabelTrainJobAncestor).
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER = "trainer"
INITIALIZERS = ("dataset-initializer", "model-initializer")
#: The trainer's replicated job (MPI) and container name (constants.Node).
NODE = "node"
#: The manager of Kueue's entry in ``spec.runtimePatches`` (trainjob_controller.go runtimePatchManagerName).
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"

#: Lists merged item by item in a strategic merge, by field name, and the key naming an item (Kubernetes'
#: patchMergeKey of the JobSet, Job and Pod API types; every other list is replaced whole).
_MERGE_KEYS = {
    "replicatedJobs": "name",
    "dependsOn": "name",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "claims": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "hostAliases": "ip",
}


def strategic_merge(base: Any, patch: Any, *, field: str = "") -> Any:
    """``patch`` merged into a copy of ``base`` as a Kubernetes strategic merge patch does for the API types here
    (k8s.io/apimachinery strategicpatch): maps key by key (null removes a key), lists of :data:`_MERGE_KEYS`
    item by item by their key (new items appended), anything else replaced. ``field``: the field's name."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if key.startswith("$"):
                continue
            if value is None:
                out.pop(key, None)
            else:
                out[key] = strategic_merge(base.get(key), value, field=key)
        return out
    merge_key = _MERGE_KEYS.get(field)
    if merge_key is not None and isinstance(base, list) and isinstance(patch, list):
        out_list = list(base)
        for item in patch:
            name = item.get(merge_key) if isinstance(item, dict) else None
            at = next(
                (i for i, old in enumerate(out_list) if isinstance(old, dict) and old.get(merge_key) == name), None
            )
            if name is None or at is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[at] = strategic_merge(out_list[at], item)
        return out_list
    return copy.deepcopy(patch)


def _mapping(ref: workloads.JobRef, value: Any, *, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ref.error(field=field, problem="must be a mapping")
    return value


def runtime_of(ref: workloads.JobRef, trainjob: Mapping[str, Any], context: workloads.Context) -> Mapping[str, Any]:
    """The TrainingRuntime (in the TrainJob's namespace) or ClusterTrainingRuntime ``spec.runtimeRef`` names
    (apiGroup ``trainer.kubeflow.org`` and kind ClusterTrainingRuntime by default, as the CRD defaults them),
    from ``context.objects``. Raises ManifestError for another kind or one not found (Kueue: "unsupported
    runtime", "runtime not found": no Workload until it exists)."""
    runtime_ref = _mapping(
        ref, _mapping(ref, trainjob.get("spec"), field="spec").get("runtimeRef"), field="spec.runtimeRef"
    )
    name = runtime_ref.get("name")
    if not isinstance(name, str) or not name:
        raise ref.error(field="spec.runtimeRef.name", problem="is required")
    group = runtime_ref.get("apiGroup") or GROUP
    kind = runtime_ref.get("kind") or CLUSTER_TRAINING_RUNTIME.kind
    if group != GROUP or kind not in (TRAINING_RUNTIME.kind, CLUSTER_TRAINING_RUNTIME.kind):
        raise ref.error(field="spec.runtimeRef", problem=f"names an unsupported runtime: {kind}.{group}")
    key = (ref.namespace if kind == TRAINING_RUNTIME.kind else "", name)
    runtime = context.objects.get(kind, {}).get(key)
    if runtime is None:
        where = f" in namespace {ref.namespace}" if key[0] else ""
        raise ref.error(field="spec.runtimeRef.name", problem=f'{kind} "{name}" not found{where}')
    return runtime


def _merge_resources(base: Any, override: Mapping[str, Any]) -> dict[str, Any]:
    """``resourcesPerNode`` over a container's resources: limits and requests key by key, claims by name
    (trainingruntime.MergeResourceRequirements)."""
    merged = strategic_merge(base if isinstance(base, dict) else {}, dict(override))
    return dict(merged)


def _named(rjob: Mapping[str, Any]) -> bool:
    return isinstance(rjob.get("name"), str)


def _ancestor(rjob: Mapping[str, Any]) -> Any:
    """The TrainJob step a replicated job runs: its Job template's ancestor label, or None."""
    meta = workloads.as_mapping(workloads.as_mapping(rjob.get("template")).get("metadata"))
    return workloads.as_mapping(meta.get("labels")).get(ANCESTOR_LABEL)


def child_jobset(ref: workloads.JobRef, trainjob: Mapping[str, Any], context: workloads.Context) -> dict[str, Any]:
    """The JobSet the Trainer would create for ``trainjob`` from its runtime in ``context``, as far as Kueue
    reads it (trainjob_controller.go getChildJobSet; module docstring).

    1. The runtime's ``spec.template.spec`` with each ``spec.runtimePatches[].trainingRuntimeSpec.template.spec``
       strategically merged in, the replicated jobs kept in the runtime's order (mergeRuntimePatches).
    2. Per replicated job, its pod count: ``parallelism`` (1 when absent); for the trainer step (label
       ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``) with an ``mlPolicy``, ``mlPolicy.numNodes``
       (1 when absent) (newRuntimeInfo). ``trainer.resourcesPerNode`` is merged into the ``node`` container of
       the trainer step (with an mlPolicy), or of the ``node`` replicated job of an MPI runtime whose launcher
       runs as a node.
    3. ``trainer.numNodes`` (EnforceMLPolicy): with an MPI policy the ``node`` replicated job runs that many
       (one fewer, at least 1, when ``runLauncherAsNode``); with any other policy, or none, the trainer step.
    4. Every replicated job runs its count as ``parallelism`` and ``completions``; the trainer and initializer
       steps have ``replicas`` 1, the others keep theirs (1 when absent, the CRD default) (the JobSet builder).
    Raises ManifestError naming the TrainJob's field, or the runtime's in the JobSet's terms.
    """
    runtime = runtime_of(ref, trainjob, context)
    spec = _mapping(ref, trainjob.get("spec"), field="spec")
    runtime_spec = _mapping(ref, runtime.get("spec"), field="spec.runtimeRef (the runtime's spec)")
    ml_policy = runtime_spec.get("mlPolicy")
    ml_policy = ml_policy if isinstance(ml_policy, dict) else None
    template = workloads.as_mapping(workloads.as_mapping(runtime_spec.get("template")).get("spec"))
    js_spec: Any = copy.deepcopy(dict(template))
    if not isinstance(js_spec.get("replicatedJobs"), list):
        raise ref.error(field="spec.runtimeRef", problem="names a runtime without spec.template.spec.replicatedJobs")
    order = {rj["name"]: i for i, rj in enumerate(js_spec["replicatedJobs"]) if isinstance(rj, dict) and _named(rj)}
    patches = spec.get("runtimePatches") or []
    if not isinstance(patches, list):
        raise ref.error(field="spec.runtimePatches", problem="must be a list")
    for index, patch in enumerate(patches):
        where = f"spec.runtimePatches[{index}]"
        patch_spec = workloads.as_mapping(_mapping(ref, patch, field=where).get("trainingRuntimeSpec"))
        jobset_patch = workloads.as_mapping(patch_spec.get("template")).get("spec")
        if jobset_patch is not None:
            js_spec = strategic_merge(
                js_spec, _mapping(ref, jobset_patch, field=f"{where}.trainingRuntimeSpec.template.spec")
            )
    replicated = js_spec.get("replicatedJobs")
    if not isinstance(replicated, list) or not all(isinstance(rj, dict) for rj in replicated):
        raise ref.error(field="spec.runtimePatches", problem="must leave replicatedJobs a list of mappings")
    replicated.sort(key=lambda rj: order.get(rj["name"], 0) if _named(rj) else 0)  # stable, as sort.SliceStable
    trainer = _mapping(ref, spec.get("trainer"), field="spec.trainer")
    resources = trainer.get("resourcesPerNode")
    if resources is not None and not isinstance(resources, dict):
        raise ref.error(field="spec.trainer.resourcesPerNode", problem="must be a mapping (resource requirements)")
    mpi = workloads.as_mapping(ml_policy.get("mpi")) if ml_policy is not None and "mpi" in ml_policy else None
    launcher_as_node = mpi is not None and mpi.get("runLauncherAsNode") is True

    counts: list[int] = []
    for index, rjob in enumerate(replicated):
        ancestor = _ancestor(rjob)
        job_spec = workloads.as_mapping(workloads.as_mapping(rjob.get("template")).get("spec"))
        where = f"spec.replicatedJobs[{index}].template.spec"
        count = workloads.count_field(ref, job_spec.get("parallelism"), field=f"{where}.parallelism", default=1)
        if ancestor == TRAINER and ml_policy is not None:
            count = workloads.count_field(
                ref, ml_policy.get("numNodes"), field="spec.runtimeRef (the runtime's mlPolicy.numNodes)", default=1
            )
        trainer_step = ancestor == TRAINER and ml_policy is not None
        if resources is not None and (trainer_step or (launcher_as_node and rjob.get("name") == NODE)):
            pod_spec = workloads.as_mapping(workloads.as_mapping(job_spec.get("template")).get("spec"))
            for container in pod_spec.get("containers") or []:
                if isinstance(container, dict) and container.get("name") == NODE:
                    container["resources"] = _merge_resources(container.get("resources"), resources)
                    break
        counts.append(count)

    num_nodes = trainer.get("numNodes")
    if num_nodes is not None:
        nodes = workloads.count_field(ref, num_nodes, field="spec.trainer.numNodes", default=1)
        names = [rj.get("name") for rj in replicated]
        if mpi is not None:
            if NODE in names:
                counts[names.index(NODE)] = max(nodes - 1, 1) if launcher_as_node else nodes
        else:
            steps = [i for i, rj in enumerate(replicated) if _ancestor(rj) == TRAINER]
            if steps:
                counts[steps[0]] = nodes

    for rjob, count in zip(replicated, counts, strict=True):
        if not isinstance(rjob.get("template"), dict):
            rjob["template"] = {}
        if not isinstance(rjob["template"].get("spec"), dict):
            rjob["template"]["spec"] = {}
        rjob["template"]["spec"]["parallelism"] = rjob["template"]["spec"]["completions"] = count
        if (ancestor := _ancestor(rjob)) == TRAINER or ancestor in INITIALIZERS:
            rjob["replicas"] = 1
        elif rjob.get("replicas") is None:
            rjob["replicas"] = 1
    meta = workloads.as_mapping(trainjob.get("metadata"))
    return {
        "apiVersion": jobset.API_VERSION,
        "kind": "JobSet",
        "metadata": {"name": meta.get("name", ""), "namespace": ref.namespace},
        "spec": js_spec,
    }


def pod_sets(ref: workloads.JobRef, child: Mapping[str, Any]) -> list[PodSetSource]:
    """The child JobSet's pod sets (Kueue: the JobSet integration's PodSets on it): one per replicated job."""
    return jobset.pod_sets(ref, child)


def finished(trainjob: Mapping[str, Any]) -> Finished | None:
    """The ``Complete`` or ``Failed`` condition when True (trainjob_controller.go Finished)."""
    return finished_by_conditions(trainjob, succeeded=("Complete",), failed=("Failed",))


def _jobs_status(trainjob: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statuses = as_list(workloads.as_mapping(trainjob.get("status")).get("jobsStatus"))
    return [s for s in statuses if isinstance(s, dict)]


def reclaimable_pods_in(trainjob: Mapping[str, Any], context: workloads.Context) -> dict[str, int]:
    """Succeeded child Jobs' pods by replicated job (trainjob_controller.go ReclaimablePods): the JobSet rule
    (:func:`.jobset.reclaimable_pods`) over the child JobSet the runtime gives and ``status.jobsStatus``;
    ``{}`` when the TrainJob reports no Jobs or its runtime is not known."""
    statuses = _jobs_status(trainjob)
    if not statuses:
        return {}
    ref = workloads.job_ref(trainjob, kind="TrainJob", api_version=API_VERSION)
    try:
        child = child_jobset(ref, trainjob, context)
    except manifests.ManifestError:
        return {}
    return jobset.reclaimable_pods({"spec": child["spec"], "status": {"replicatedJobsStatus": statuses}})


def active(trainjob: Mapping[str, Any]) -> bool:
    """Any child Job active: ``status.jobsStatus[].active`` > 0 (IsActive)."""
    return any(count_of(s.get("active"), default=0) > 0 for s in _jobs_status(trainjob))


def pods_ready_in(trainjob: Mapping[str, Any], context: workloads.Context) -> bool:
    """The ready and succeeded child Jobs over ``status.jobsStatus`` add up to the replicas of the child
    JobSet's replicated jobs (trainjob_controller.go PodsReady); False when the runtime is not known."""
    ref = workloads.job_ref(trainjob, kind="TrainJob", api_version=API_VERSION)
    try:
        child = child_jobset(ref, trainjob, context)
    except manifests.ManifestError:  # as Kueue: no child JobSet, not ready
        return False
    replicas = sum(count_of(rj.get("replicas")) for rj in child["spec"]["replicatedJobs"])
    done = sum(
        count_of(s.get("ready"), default=0) + count_of(s.get("succeeded"), default=0) for s in _jobs_status(trainjob)
    )
    return done == replicas


def _kueue_patch(trainjob: dict[str, Any]) -> dict[str, Any] | None:
    patches = workloads.as_mapping(trainjob.get("spec")).get("runtimePatches")
    for patch in patches if isinstance(patches, list) else []:
        if isinstance(patch, dict) and patch.get("manager") == KUEUE_PATCH_MANAGER:
            return patch
    return None


def on_create(trainjob: dict[str, Any]) -> None:
    """Kueue's webhook appends its (empty) ``runtimePatches`` entry, manager ``kueue.x-k8s.io/manager``
    (trainjob_webhook.go Default); kept once when the TrainJob already has it."""
    spec = trainjob.setdefault("spec", {})
    if not isinstance(spec, dict) or _kueue_patch(trainjob) is not None:
        return
    patches = spec.get("runtimePatches")
    if not isinstance(patches, list):
        patches = spec["runtimePatches"] = []
    patches.append({"manager": KUEUE_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}})


def write_templates(trainjob: dict[str, Any], templates: Mapping[str, TemplateChange], suspend: bool) -> None:
    """A start writes, per pod set in admission order, what it adds to the pod template -- the flavors' node
    selector and tolerations, the admission checks' labels, annotations and scheduling gates -- as Kueue's
    ``runtimePatches`` entry's ``replicatedJobs`` (RunWithPodSetsInfo, replacing what was there); a stop
    empties it (RestorePodSetsInfo). An entry the webhook did not add is added (Kueue fails the start)."""
    patch = _kueue_patch(trainjob)
    if patch is None:
        on_create(trainjob)
        patch = _kueue_patch(trainjob)
        assert patch is not None
    template = patch.setdefault("trainingRuntimeSpec", {}).setdefault("template", {})
    jobset_patch = template.setdefault("spec", {})
    if suspend:
        jobset_patch.pop("replicatedJobs", None)
        return
    replicated = []
    for name, change in templates.items():
        added = change({})
        pod_template = {
            part: {key: value for key, value in workloads.as_mapping(added.get(part)).items() if value}
            for part in ("metadata", "spec")
        }
        pod_template = {part: fields for part, fields in pod_template.items() if fields}
        replicated.append({"name": name, "template": {"spec": {"template": pod_template}}})
    jobset_patch["replicatedJobs"] = replicated


def pod_label_selector(trainjob: Mapping[str, Any]) -> str:
    """``jobset.sigs.k8s.io/jobset-name=<name>``: the child JobSet's pods (trainjob_controller.go PodLabelSelector)."""
    return f"{jobset.JOBSET_NAME_LABEL}={workloads.as_mapping(trainjob.get('metadata')).get('name', '')}"


INTEGRATIONS = (
    Integration(
        framework="trainer.kubeflow.org/trainjob",
        api_version=API_VERSION,
        kind="TrainJob",
        plural="trainjobs",
        suspend_path=("spec", "suspend"),
        pod_sets=pod_sets,
        pod_sets_field="spec.runtimeRef",
        finished=finished,
        active=active,
        on_create=on_create,
        pod_label_selector=pod_label_selector,
        inputs=(TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME),
        pod_set_object=child_jobset,
        pods_ready_in=pods_ready_in,
        reclaimable_pods_in=reclaimable_pods_in,
        write_templates=write_templates,
    ),
)
