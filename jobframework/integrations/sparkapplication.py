"""SparkApplication (sparkoperator.k8s.io/v1beta2): pod sets ``driver`` (1) and ``executor`` (instances).

Why this module exists: the Spark operator's SparkApplication does not hold pod
templates; it describes its driver and executors by Spark fields (``coreRequest``,
``memory`` in Java's notation, ``nodeSelector``, ``tolerations``, sidecars, volumes,
...) and the operator builds the pods from them. Kueue
(pkg/controller/jobs/sparkapplication/sparkapplication_controller.go and
sparkapplication_podset.go; an alpha integration behind the
``SparkApplicationIntegration`` feature gate) builds a pod template per role the way
the operator's pod defaulter does, for the resource fields only, and admits the
application as one Workload:

- pod sets ``driver`` (1 pod) and ``executor`` (``spec.executor.instances``, 0 when
  absent). A pod's requests come from ``coreRequest`` (cpu) and ``memory`` (Java
  notation: ``1g`` is ``1Gi``), its limits from ``coreLimit``, ``memoryLimit`` and
  ``gpu``; ``cores`` and ``memoryOverhead`` are not counted, as in Kueue. Init
  containers, sidecars, the volumes the role mounts, node selector, affinity,
  tolerations and priority class are the role's; labels and annotations are its
  ``template``'s with the role's own merged in.
- a managed application must run in ``cluster`` mode and may not use dynamic
  allocation (Kueue's webhook; elastic workload slices do not exist in kueue-es).
- start: the PodSetInfo goes into the role's own fields (``labels``,
  ``annotations``, ``nodeSelector``, ``tolerations``, and the scheduling gates into
  ``template.spec.schedulingGates``, the template made with the role's bare container
  when absent); an application-wide ``spec.nodeSelector`` is copied into both roles
  and then removed. ``spec.suspend`` is unsuspended.
- finished: ``status.applicationState.state`` COMPLETED (succeeded), FAILED or
  SUBMISSION_FAILED; active: RUNNING; PodsReady: RUNNING and every requested
  executor RUNNING or COMPLETED in ``status.executorState``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_es.events import quantities
from kueue_es.jobframework import workloads
from kueue_es.jobframework.integrations import Finished, Integration, PodSetSource, PodSetView

API_VERSION = "sparkoperator.k8s.io/v1beta2"
FRAMEWORK = "sparkoperator.k8s.io/sparkapplication"
#: The feature gate Kueue needs on before it sets this integration up (alpha since Kueue 0.17).
FEATURE_GATE = "SparkApplicationIntegration"
DRIVER, EXECUTOR = "driver", "executor"
#: The containers the operator names (spark-operator pkg/common: SparkDriverContainerName,
#: Spark3DefaultExecutorContainerName, SparkExecutorContainerName).
DRIVER_CONTAINER = "spark-kubernetes-driver"
EXECUTOR_CONTAINER = "spark-kubernetes-executor"
EXECUTOR_CONTAINER_LOOKED_FOR = "executor"
LOCAL_DIR_VOLUME_PREFIX = "spark-local-dir-"
_JAVA_UNITS = {"k": "Ki", "kb": "Ki", "m": "Mi", "mb": "Mi", "g": "Gi", "gb": "Gi", "t": "Ti", "tb": "Ti"}
_JAVA_UNITS |= {"p": "Pi", "pb": "Pi"}
_FINISHED = ("COMPLETED", "FAILED", "SUBMISSION_FAILED")


def java_memory(value: str) -> str:
    """A memory size in Java's notation as a Kubernetes quantity: ``1g`` -> ``1Gi``, ``512m`` -> ``512Mi``;
    anything without a Java unit as it is, trimmed (spark-operator ConvertJavaMemoryStringToK8sMemoryString)."""
    lower = value.strip().lower()
    for unit in sorted(_JAVA_UNITS, key=len, reverse=True):
        if lower.endswith(unit):
            return lower.removesuffix(unit) + _JAVA_UNITS[unit]
    return value.strip()


def _role(ref: workloads.JobRef, app: Mapping[str, Any], role: str) -> Mapping[str, Any]:
    spec = app["spec"].get(role)
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise ref.error(field=f"spec.{role}", problem=f"must be a mapping (the {role}'s spec)")
    return spec


def _list(ref: workloads.JobRef, value: Any, *, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ref.error(field=field, problem="must be a list")
    return value


def _quantity(ref: workloads.JobRef, value: Any, *, field: str, memory: bool = False) -> str:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ref.error(field=field, problem=f"{value!r} is not a quantity")
    text = java_memory(str(value)) if memory else str(value)
    try:
        quantities.parse(text)
    except quantities.QuantityError:
        raise ref.error(field=field, problem=f"{value!r} is not a quantity") from None
    return text


def pod_template(ref: workloads.JobRef, app: Mapping[str, Any], role: str) -> dict[str, Any]:
    """The pod template Kueue builds for ``role`` (``driver`` or ``executor``; sparkapplication_podset.go
    build*PodTemplateSpec and mutateSparkPod, in its order). Raises ManifestError naming the field of a
    quantity that is not one or a list that is not a list."""
    spec, role_spec = app["spec"], _role(ref, app, role)
    where = f"spec.{role}"
    container: dict[str, Any] = {"name": DRIVER_CONTAINER if role == DRIVER else EXECUTOR_CONTAINER}
    pod: dict[str, Any] = {"containers": [container]}
    volumes = {
        v["name"]: v
        for v in _list(ref, spec.get("volumes"), field="spec.volumes")
        if isinstance(v, dict) and "name" in v
    }
    added: set[str] = set()
    for mount in _list(ref, role_spec.get("volumeMounts"), field=f"{where}.volumeMounts"):
        name = workloads.as_mapping(mount).get("name")
        if not isinstance(name, str) or name.startswith(LOCAL_DIR_VOLUME_PREFIX) or name not in volumes:
            continue
        if name not in added:
            pod.setdefault("volumes", []).append(volumes[name])
            added.add(name)
        container.setdefault("volumeMounts", []).append(mount)

    def absent(containers: list[Any], candidate: Any) -> bool:
        key = (workloads.as_mapping(candidate).get("name"), workloads.as_mapping(candidate).get("image"))
        return all((c.get("name"), c.get("image")) != key for c in containers)

    pod["initContainers"] = []
    for init in _list(ref, role_spec.get("initContainers"), field=f"{where}.initContainers"):
        if absent(pod["initContainers"], init):
            pod["initContainers"].append(init)
    for sidecar in _list(ref, role_spec.get("sidecars"), field=f"{where}.sidecars"):
        if absent(pod["containers"], sidecar):
            pod["containers"].append(sidecar)
    if role_spec.get("priorityClassName"):
        pod["priorityClassName"] = role_spec["priorityClassName"]
    pod["nodeSelector"] = dict(workloads.as_mapping(role_spec.get("nodeSelector")))
    if role_spec.get("affinity") is not None:
        pod["affinity"] = role_spec["affinity"]
    pod["tolerations"] = list(_list(ref, role_spec.get("tolerations"), field=f"{where}.tolerations"))

    looked_for = DRIVER_CONTAINER if role == DRIVER else EXECUTOR_CONTAINER_LOOKED_FOR
    names = [workloads.as_mapping(c).get("name") for c in pod["containers"]]
    target = pod["containers"][names.index(looked_for) if looked_for in names else 0]
    resources: dict[str, dict[str, str]] = {}
    for key, kind, resource, memory in (
        ("coreRequest", "requests", "cpu", False),
        ("coreLimit", "limits", "cpu", False),
        ("memory", "requests", "memory", True),
        ("memoryLimit", "limits", "memory", True),
    ):
        if role_spec.get(key) is not None:
            value = _quantity(ref, role_spec[key], field=f"{where}.{key}", memory=memory)
            resources.setdefault(kind, {})[resource] = value
    gpu = workloads.as_mapping(role_spec.get("gpu"))
    gpu_count = workloads.parse_int(gpu.get("quantity"))
    if gpu.get("name") and gpu_count is not None and gpu_count > 0:
        resources.setdefault("limits", {})[str(gpu["name"])] = str(gpu_count)
    if resources:
        own = workloads.as_mapping(target.get("resources"))
        target["resources"] = {
            **own,
            **{kind: {**workloads.as_mapping(own.get(kind)), **values} for kind, values in resources.items()},
        }

    base = role_spec.get("template")
    labels = dict(workloads.as_mapping(role_spec.get("labels")))
    annotations = dict(workloads.as_mapping(role_spec.get("annotations")))
    if isinstance(base, dict):
        meta = dict(workloads.as_mapping(base.get("metadata")))
        meta["labels"] = {**workloads.as_mapping(meta.get("labels")), **labels}
        meta["annotations"] = {**workloads.as_mapping(meta.get("annotations")), **annotations}
    else:
        meta = {key: value for key, value in (("labels", labels), ("annotations", annotations)) if value}
    return {"metadata": meta, "spec": pod}


def pod_sets(ref: workloads.JobRef, app: Mapping[str, Any]) -> list[PodSetSource]:
    """``driver`` (1) and ``executor`` (``spec.executor.instances``, default 0) with the templates of
    :func:`pod_template` (sparkapplication_controller.go PodSets). Kueue's webhook rules for a managed
    application are checked here: ``spec.mode`` must be ``cluster`` and ``spec.dynamicAllocation.enabled``
    must not be true. Raises ManifestError naming the field."""
    spec = app["spec"]
    if spec.get("mode") != "cluster":
        raise ref.error(
            field="spec.mode", problem=f"{spec.get('mode')!r}: only cluster mode is supported for a Kueue managed job"
        )
    if workloads.as_mapping(spec.get("dynamicAllocation")).get("enabled") is True:
        raise ref.error(
            field="spec.dynamicAllocation.enabled",
            problem="a Kueue managed job cannot use dynamic allocation (it needs elastic workload slices)",
        )
    executor = _role(ref, app, EXECUTOR)
    instances = workloads.count_field(ref, executor.get("instances"), field="spec.executor.instances", default=0)
    return [
        PodSetSource(
            name=DRIVER, count=1, template_path=("spec", DRIVER), workload_template=pod_template(ref, app, DRIVER)
        ),
        PodSetSource(
            name=EXECUTOR,
            count=instances,
            template_path=("spec", EXECUTOR),
            workload_template=pod_template(ref, app, EXECUTOR),
        ),
    ]


# -- the start and the stop: the roles' own fields -------------------------------------------------


def read_role(app: Mapping[str, Any], source: PodSetSource) -> dict[str, Any]:
    """A role's ``labels``, ``annotations``, ``nodeSelector`` (the application-wide one instead while it is
    set), ``tolerations`` and ``template.spec.schedulingGates`` as a pod template (fields left out when
    empty)."""
    spec = app["spec"]
    role = workloads.as_mapping(spec.get(source.name))
    selector = spec["nodeSelector"] if spec.get("nodeSelector") is not None else role.get("nodeSelector")
    gates = workloads.as_mapping(workloads.as_mapping(role.get("template")).get("spec")).get("schedulingGates")
    template: dict[str, Any] = {}
    for section, key, value in (
        ("metadata", "labels", role.get("labels")),
        ("metadata", "annotations", role.get("annotations")),
        ("spec", "nodeSelector", selector),
        ("spec", "tolerations", role.get("tolerations")),
        ("spec", "schedulingGates", gates),
    ):
        if value:
            template.setdefault(section, {})[key] = dict(value) if isinstance(value, dict) else list(value)
    return template


def write_role(app: dict[str, Any], source: PodSetSource, template: dict[str, Any]) -> None:
    """A changed :func:`read_role` template back into the role's fields (RunWithPodSetsInfo /
    RestorePodSetsInfo); the role gets a ``template`` with its bare container when it has none."""
    role = app["spec"].setdefault(source.name, {})
    meta, pod = workloads.as_mapping(template.get("metadata")), workloads.as_mapping(template.get("spec"))
    for key, value in (
        ("labels", meta.get("labels")),
        ("annotations", meta.get("annotations")),
        ("nodeSelector", pod.get("nodeSelector")),
        ("tolerations", pod.get("tolerations")),
    ):
        if value:
            role[key] = value
        else:
            role.pop(key, None)
    if not isinstance(role.get("template"), dict):
        name = DRIVER_CONTAINER if source.name == DRIVER else EXECUTOR_CONTAINER
        role["template"] = {"spec": {"containers": [{"name": name}]}}
    role_pod = role["template"].setdefault("spec", {})
    if pod.get("schedulingGates"):
        role_pod["schedulingGates"] = pod["schedulingGates"]
    else:
        role_pod.pop("schedulingGates", None)


def drop_global_selector(app: dict[str, Any], _counts: Mapping[str, int] | None = None) -> None:
    """``spec.nodeSelector`` removed: a start copied it into both roles (the operator takes one or the other)."""
    app["spec"].pop("nodeSelector", None)


def pod_label_selector(app: Mapping[str, Any]) -> str:
    """``sparkoperator.k8s.io/app-name=<name>``: the label the operator puts on the application's pods
    (Kueue PodLabelSelector)."""
    return f"sparkoperator.k8s.io/app-name={workloads.as_mapping(app.get('metadata')).get('name', '')}"


# -- status -----------------------------------------------------------------------------------------


def _state(app: Mapping[str, Any]) -> Mapping[str, Any]:
    return workloads.as_mapping(workloads.as_mapping(app.get("status")).get("applicationState"))


def finished(app: Mapping[str, Any]) -> Finished | None:
    """State COMPLETED (succeeded), FAILED or SUBMISSION_FAILED, with its ``errorMessage`` (Finished)."""
    state = _state(app)
    if state.get("state") not in _FINISHED:
        return None
    at = workloads.as_mapping(app.get("status")).get("terminationTime") or None
    return Finished(succeeded=state.get("state") == "COMPLETED", message=str(state.get("errorMessage") or ""), at=at)


def active(app: Mapping[str, Any]) -> bool:
    """State RUNNING (IsActive)."""
    return _state(app).get("state") == "RUNNING"


def pods_ready(app: Mapping[str, Any]) -> bool:
    """State RUNNING and at least ``spec.executor.instances`` executors RUNNING or COMPLETED in
    ``status.executorState`` (the state alone turns RUNNING once the driver runs) (PodsReady)."""
    if not active(app):
        return False
    executor = workloads.as_mapping(workloads.as_mapping(app.get("spec")).get(EXECUTOR))
    expected = workloads.parse_int(executor.get("instances")) or 0
    states = workloads.as_mapping(workloads.as_mapping(app.get("status")).get("executorState"))
    return sum(1 for s in states.values() if s in ("RUNNING", "COMPLETED")) >= expected


INTEGRATIONS = (
    Integration(
        framework=FRAMEWORK,
        api_version=API_VERSION,
        kind="SparkApplication",
        plural="sparkapplications",
        refused_at_create=True,
        suspend_path=("spec", "suspend"),
        pod_sets=pod_sets,
        pod_sets_field="spec",
        finished=finished,
        active=active,
        pods_ready=pods_ready,
        pod_set_view=PodSetView(read=read_role, write=write_role),
        started=drop_global_selector,
        stopped=drop_global_selector,
        pod_label_selector=pod_label_selector,
    ),
)
