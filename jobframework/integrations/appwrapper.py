"""AppWrapper (workload.codeflare.dev/v1beta2): one pod set per pod set of its wrapped components.

Why this module exists: an AppWrapper bundles arbitrary Kubernetes objects (its
``spec.components``, each an embedded object in ``template``) that must be admitted
and run together; the AppWrapper controller creates them once Kueue unsuspends it.
Kueue (pkg/controller/jobs/appwrapper/appwrapper_controller.go, with the AppWrapper
project's pkg/utils) admits it as one Workload:

- pod sets: each component's ``podSets`` (``path`` into the component, starting with
  ``template``, and ``replicas``, default 1), or, when a component declares none, the
  ones the AppWrapper infers for the kinds it knows (batch/v1 Job, JobSet, PyTorchJob,
  RayCluster, RayJob, Pod, Deployment, StatefulSet); once the AppWrapper controller
  has written ``status.componentStatus`` for every component, its pod sets there. They
  are named ``<appwrapper name>-<index>``, numbered across all components in order.
  The pod set's template is the subset of the wrapped pod template Kueue takes
  (GetPodTemplateSpec); TAS rank hints come from the pod set's annotations.
- start: Kueue does not touch the wrapped templates; it writes each pod set's
  PodSetInfo (node selector, tolerations, labels, annotations, scheduling gates) into
  ``spec.components[i].podSetInfos[j]`` and unsuspends ``spec.suspend``; the AppWrapper
  controller puts them into the objects it creates. A stop suspends and clears every
  ``podSetInfos``.
- finished: ``status.phase`` Succeeded, or Failed once ``ResourcesDeployed`` is no
  longer True; active: ``QuotaReserved`` True; PodsReady: the ``PodsReady`` condition.

The wrapped objects are owned by the AppWrapper and are not workloads of their own
(:attr:`~kueue_es.jobframework.integrations.Integration.owns_any_kind`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import (
    Finished,
    Integration,
    Path,
    PodSetSource,
    PodSetView,
    condition_true,
    field_name,
    get_at,
)

API_VERSION = "workload.codeflare.dev/v1beta2"
KIND = "AppWrapper"
#: Pod set annotations naming TAS rank hints (AppWrapper pkg/utils PodSetAnnotationTAS*).
TAS_POD_INDEX_LABEL = "workload.codeflare.dev.appwrapper/tas-pod-index-label"
TAS_SUB_GROUP_INDEX_LABEL = "workload.codeflare.dev.appwrapper/tas-sub-group-index-label"
TAS_SUB_GROUP_COUNT = "workload.codeflare.dev.appwrapper/tas-sub-group-count"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
KUBEFLOW_REPLICA_INDEX = "training.kubeflow.org/replica-index"

_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def parse_path(path: Any) -> Path | None:
    """An AppWrapper pod set ``path`` (``template.spec.replicatedJobs[0].template.spec.template``) as path
    steps from the component, or None when it is not one (it must start with ``template``; AppWrapper
    pkg/utils getValueAtPath)."""
    if not isinstance(path, str) or not path.startswith("template"):
        return None
    steps: list[str | int] = ["template"]
    rest = path[len("template") :]
    while rest:
        match = _STEP.match(rest)
        if match is None:
            return None
        steps.append(match[1] if match[1] is not None else int(match[2]))
        rest = rest[match.end() :]
    return tuple(steps)


# -- pod sets inferred for the kinds the AppWrapper knows ------------------------------------------

_Declared = dict[str, Any]
"""An AppWrapperPodSet: ``path``, ``replicas`` (absent: 1), ``annotations``."""


def _plain_int(value: Any) -> int | None:
    """An integer field as the AppWrapper's GetReplicas reads it: only a JSON integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _replicas(ref: workloads.JobRef, component: Mapping[str, Any], path: str, *, where: str) -> int:
    """inferReplicas: the integer at ``path`` (absent: 1); anything else is an error."""
    value = get_at(component, parse_path(path) or ())
    if value is None:
        return 1
    number = _plain_int(value)
    if number is None:
        raise ref.error(field=f"{where}.{path}", problem=f"{value!r} is not an integer")
    return number


def _job_pods(spec: Any) -> int:
    """Pods of one Job: parallelism (1 when absent or not an integer), at most completions."""
    spec = workloads.as_mapping(spec)
    pods = _plain_int(spec.get("parallelism"))
    pods = 1 if pods is None else pods
    completions = _plain_int(spec.get("completions"))
    return completions if completions is not None and completions < pods else pods


def _ray(ref: workloads.JobRef, component: Mapping[str, Any], prefix: str, *, where: str) -> list[_Declared]:
    out: list[_Declared] = [{"replicas": 1, "path": f"{prefix}headGroupSpec.template"}]
    workers = get_at(component, parse_path(f"{prefix}workerGroupSpecs") or ())
    for index, group in enumerate(workers if isinstance(workers, list) else []):
        if isinstance(group, dict) and "template" in group:
            group_path = f"{prefix}workerGroupSpecs[{index}]"
            replicas = _replicas(ref, component, f"{group_path}.replicas", where=where)
            out.append({"replicas": replicas, "path": f"{group_path}.template"})
    return out


def infer_pod_sets(ref: workloads.JobRef, component: Mapping[str, Any], *, where: str) -> list[_Declared]:
    """The pod sets the AppWrapper infers for a component that declares none (AppWrapper pkg/utils
    InferPodSets): by the wrapped object's apiVersion and kind; none for a kind it does not know.
    ``where``: the component's field. Raises ManifestError for a replica count that is not an integer."""
    template = workloads.as_mapping(component.get("template"))
    spec = workloads.as_mapping(template.get("spec"))
    match (template.get("apiVersion"), template.get("kind")):
        case ("batch/v1", "Job"):
            return [
                {
                    "replicas": _job_pods(spec),
                    "path": "template.spec.template",
                    "annotations": {TAS_POD_INDEX_LABEL: JOB_COMPLETION_INDEX},
                }
            ]
        case ("jobset.x-k8s.io/v1alpha2", "JobSet"):
            out: list[_Declared] = []
            jobs = spec.get("replicatedJobs")
            for index, rjob in enumerate(jobs if isinstance(jobs, list) else []):
                if not isinstance(rjob, dict) or "template" not in rjob:
                    continue
                replicas = _plain_int(rjob.get("replicas"))
                replicas = 1 if replicas is None else replicas
                pods = _job_pods(workloads.as_mapping(rjob["template"]).get("spec"))
                out.append(
                    {
                        "replicas": replicas * pods,
                        "path": f"template.spec.replicatedJobs[{index}].template.spec.template",
                        "annotations": {
                            TAS_POD_INDEX_LABEL: JOB_COMPLETION_INDEX,
                            TAS_SUB_GROUP_INDEX_LABEL: JOBSET_JOB_INDEX,
                            TAS_SUB_GROUP_COUNT: str(replicas),
                        },
                    }
                )
            return out
        case ("kubeflow.org/v1", "PyTorchJob"):
            specs = workloads.as_mapping(spec.get("pytorchReplicaSpecs"))
            out = []
            for replica_type in ("Master", "Worker"):
                if "template" not in workloads.as_mapping(specs.get(replica_type)):
                    continue
                prefix = f"template.spec.pytorchReplicaSpecs.{replica_type}."
                out.append(
                    {
                        "replicas": _replicas(ref, component, f"{prefix}replicas", where=where),
                        "path": f"{prefix}template",
                        "annotations": {TAS_POD_INDEX_LABEL: KUBEFLOW_REPLICA_INDEX},
                    }
                )
            return out
        case ("ray.io/v1", "RayCluster"):
            return _ray(ref, component, "template.spec.", where=where)
        case ("ray.io/v1", "RayJob"):
            return _ray(ref, component, "template.spec.rayClusterSpec.", where=where)
        case ("v1", "Pod"):
            return [{"replicas": 1, "path": "template"}]
        case ("apps/v1", "Deployment" | "StatefulSet"):
            if "template" not in spec:
                return []
            return [
                {
                    "replicas": _replicas(ref, component, "template.spec.replicas", where=where),
                    "path": "template.spec.template",
                }
            ]
    return []


# -- the pod sets -----------------------------------------------------------------------------------

_CONTAINER_FIELDS = ("name", "image", "command", "args", "resources", "securityContext")
_SPEC_FIELDS = (
    "restartPolicy",
    "nodeSelector",
    "nodeName",
    "securityContext",
    "affinity",
    "schedulerName",
    "tolerations",
    "priorityClassName",
    "preemptionPolicy",
    "overhead",
    "topologySpreadConstraints",
)


def kueue_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of a wrapped pod template (or Pod) Kueue's pod set gets (AppWrapper pkg/utils
    GetPodTemplateSpec): string labels and annotations; of the spec the containers and init containers
    (name, image, command, args, requests and limits, securityContext), node selector and name,
    affinity, tolerations, priority class, preemption policy, overhead, topology spread, scheduler.
    Not kept: among others ``runtimeClassName`` and a sidecar's ``restartPolicy``."""
    meta = workloads.as_mapping(template.get("metadata"))
    out_meta = {
        key: {k: v for k, v in meta[key].items() if isinstance(v, str)}
        for key in ("labels", "annotations")
        if isinstance(meta.get(key), dict)
    }
    spec = workloads.as_mapping(template.get("spec"))

    def containers(items: Any) -> list[Any]:
        out = []
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                out.append(item)
                continue
            kept = {k: item[k] for k in _CONTAINER_FIELDS if k in item}
            if isinstance(kept.get("resources"), dict):
                kept["resources"] = {k: v for k, v in kept["resources"].items() if k in ("requests", "limits")}
            out.append(kept)
        return out

    out_spec: dict[str, Any] = {}
    if spec.get("initContainers"):
        out_spec["initContainers"] = containers(spec["initContainers"])
    out_spec["containers"] = containers(spec.get("containers"))
    out_spec.update({k: spec[k] for k in _SPEC_FIELDS if k in spec})
    return {"metadata": out_meta, "spec": out_spec}


def _declared(ref: workloads.JobRef, aw: Mapping[str, Any]) -> list[tuple[int, list[_Declared], str | None]]:
    """Per component: (index, its pod sets, the field they come from; None when inferred)."""
    components = aw["spec"].get("components")
    if not isinstance(components, list):
        raise ref.error(field="spec.components", problem="must be a list of components")
    statuses = workloads.as_mapping(aw.get("status")).get("componentStatus")
    use_status = isinstance(statuses, list) and len(statuses) == len(components)
    out = []
    for index, component in enumerate(components):
        where = f"spec.components[{index}]"
        if not isinstance(component, dict):
            raise ref.error(field=where, problem="must be a mapping (a component)")
        if not isinstance(component.get("template"), dict):
            raise ref.error(field=f"{where}.template", problem="must be a mapping (an embedded object)")
        field: str | None
        if use_status:
            pod_sets = workloads.as_mapping(statuses[index]).get("podSets") if isinstance(statuses, list) else None
            field = f"status.componentStatus[{index}].podSets"
        else:
            pod_sets, field = component.get("podSets"), f"{where}.podSets"
            if not pod_sets:
                pod_sets, field = infer_pod_sets(ref, component, where=where), None
        if pod_sets is not None and not isinstance(pod_sets, list):
            raise ref.error(field=str(field), problem="must be a list of pod sets")
        out.append((index, list(pod_sets or []), field))
    return out


def _sub_group_count(value: Any) -> int | None:
    """A malformed count is ignored, as Kueue does (it logs it)."""
    number = workloads.parse_int(value)
    return number if number is not None and number >= 0 else None


def placed_pod_sets(ref: workloads.JobRef, aw: Mapping[str, Any]) -> list[tuple[PodSetSource, int, int]]:
    """Each pod set with its component index and its index among that component's pod sets, in Kueue's
    order (appwrapper_controller.go PodSets). Raises ManifestError naming the field: a path that is not
    one, or that does not reach a pod template with a ``spec``; a replica count that is not a
    non-negative integer."""
    name = ref.name
    out: list[tuple[PodSetSource, int, int]] = []
    for index, pod_sets, field in _declared(ref, aw):
        for position, pod_set in enumerate(pod_sets):
            where = f"{field}[{position}]" if field is not None else f"spec.components[{index}].template"
            if not isinstance(pod_set, dict):
                raise ref.error(field=where, problem="must be a mapping (a pod set)")
            steps = parse_path(pod_set.get("path"))
            if steps is None:
                raise ref.error(
                    field=f"{where}.path",
                    problem=f"{pod_set.get('path')!r} is not a path into the component starting with 'template'",
                )
            path: Path = ("spec", "components", index, *steps)
            template = get_at(aw, path)
            if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
                if field is None:  # inferred: the wrapped object lacks the template its kind has
                    raise ref.error(field=field_name(path), problem="must be a pod template with a spec")
                raise ref.error(
                    field=f"{where}.path", problem=f"{field_name(path)} does not refer to a pod template with a spec"
                )
            count = workloads.count_field(ref, pod_set.get("replicas"), field=f"{where}.replicas", default=1)
            annotations = workloads.as_mapping(pod_set.get("annotations"))
            source = PodSetSource(
                name=f"{name}-{len(out)}",
                count=count,
                template_path=path,
                workload_template=kueue_template(template),
                pod_index_label=annotations.get(TAS_POD_INDEX_LABEL),
                sub_group_index_label=annotations.get(TAS_SUB_GROUP_INDEX_LABEL),
                sub_group_count=_sub_group_count(annotations.get(TAS_SUB_GROUP_COUNT)),
            )
            out.append((source, index, position))
    return out


def pod_sets(ref: workloads.JobRef, aw: Mapping[str, Any]) -> list[PodSetSource]:
    """The AppWrapper's pod sets (:func:`placed_pod_sets`), named ``<name>-<index>``."""
    return [source for source, _, _ in placed_pod_sets(ref, aw)]


# -- the start and the stop: podSetInfos --------------------------------------------------------------

_INFO_FIELDS = (("metadata", "labels"), ("metadata", "annotations"))
_INFO_SPEC_FIELDS = ("nodeSelector", "tolerations", "schedulingGates")


def _place(aw: Mapping[str, Any], source: PodSetSource) -> tuple[int, int, int]:
    """(component, pod set in it, pod sets of that component) of pod set ``source``."""
    placed = placed_pod_sets(workloads.job_ref(aw, kind=KIND, api_version=API_VERSION), aw)
    for found, index, position in placed:
        if found.name == source.name:
            return index, position, sum(1 for _, i, _ in placed if i == index)
    raise KeyError(source.name)


def read_info(aw: Mapping[str, Any], source: PodSetSource) -> dict[str, Any]:
    """``spec.components[i].podSetInfos[j]`` of pod set ``source`` as a pod template (empty when unset)."""
    index, position, _ = _place(aw, source)
    infos = aw["spec"]["components"][index].get("podSetInfos")
    info = workloads.as_mapping(infos[position]) if isinstance(infos, list) and position < len(infos) else {}
    template: dict[str, Any] = {}
    for section, key in _INFO_FIELDS:
        if info.get(key):
            template.setdefault(section, {})[key] = dict(info[key])
    for key in _INFO_SPEC_FIELDS:
        if info.get(key):
            template.setdefault("spec", {})[key] = list(info[key]) if isinstance(info[key], list) else dict(info[key])
    return template


def write_info(aw: dict[str, Any], source: PodSetSource, template: dict[str, Any]) -> None:
    """Pod set ``source``'s PodSetInfo from a started pod template, into ``podSetInfos[j]`` of its component
    (a list as long as the component's pod sets, made anew when it is not; AppWrapper SetPodSetInfos)."""
    index, position, size = _place(aw, source)
    component = aw["spec"]["components"][index]
    infos = component.get("podSetInfos")
    if not isinstance(infos, list) or len(infos) != size:
        infos = [{} for _ in range(size)]
    info = {}
    for section, key in _INFO_FIELDS:
        if value := workloads.as_mapping(template.get(section)).get(key):
            info[key] = value
    for key in _INFO_SPEC_FIELDS:
        if value := workloads.as_mapping(template.get("spec")).get(key):
            info[key] = value
    infos[position] = info
    component["podSetInfos"] = infos


def clear_infos(aw: dict[str, Any]) -> None:
    """A stop clears every component's ``podSetInfos`` (AppWrapper ClearPodSetInfos)."""
    for component in aw["spec"].get("components") or []:
        if isinstance(component, dict):
            component.pop("podSetInfos", None)


# -- status -----------------------------------------------------------------------------------------


def finished(aw: Mapping[str, Any]) -> Finished | None:
    """``status.phase`` Succeeded; Failed once its resources are no longer deployed (while
    ``ResourcesDeployed`` is True they are still being deleted: not finished yet) (Finished)."""
    phase = workloads.as_mapping(aw.get("status")).get("phase")
    if phase == "Succeeded":
        return Finished(succeeded=True, message="AppWrapper finished successfully")
    if phase == "Failed" and condition_true(aw, "ResourcesDeployed") is None:
        return Finished(succeeded=False, message="AppWrapper failed")
    return None


def active(aw: Mapping[str, Any]) -> bool:
    """The ``QuotaReserved`` condition is True (IsActive: the controller still holds its resources)."""
    return condition_true(aw, "QuotaReserved") is not None


def pods_ready(aw: Mapping[str, Any]) -> bool:
    """The ``PodsReady`` condition is True (PodsReady)."""
    return condition_true(aw, "PodsReady") is not None


INTEGRATIONS = (
    Integration(
        framework="workload.codeflare.dev/appwrapper",
        api_version=API_VERSION,
        kind=KIND,
        plural="appwrappers",
        suspend_path=("spec", "suspend"),
        pod_sets=pod_sets,
        pod_sets_field="spec.components",
        finished=finished,
        active=active,
        pods_ready=pods_ready,
        pod_set_view=PodSetView(read=read_info, write=write_info),
        stopped=clear_infos,
        owns_any_kind=True,
    ),
)
