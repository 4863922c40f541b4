"""Server-side printing: lists and objects as ``meta.k8s.io/v1`` Tables, as ``kubectl get`` asks for them.

Why this module exists: ``kubectl get`` sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``
and prints the columns the server returns (``-o wide`` adds those of priority > 0).
A real API server builds them from a CRD's ``additionalPrinterColumns`` (JSONPath
evaluated on each object) and, for built-in kinds, from its own printers.  The
emulator does the same: the kueue.x-k8s.io kinds from the columns of
:mod:`kueue_es.crds` (Kueue's own columns), the kinds of CRDs applied to it from their
``additionalPrinterColumns`` (``printer_columns``), the built-in kinds it serves (Pod,
Node, Namespace, Event, Job, CronJob, PriorityClass, Lease, ConfigMap, CustomResourceDefinition, RBAC's roles and bindings,
FlowSchema, PriorityLevelConfiguration,
PodTemplate, Deployment, ReplicaSet, StatefulSet) with the columns of kube-apiserver's printers
(Kubernetes pkg/printers/internalversion/printers.go, ``-o wide`` ones included), the
custom kinds it serves without their CRD (JobSet, ProvisioningRequest) with that CRD's columns
(:data:`SERVED_KIND_COLUMNS`), anything else as NAME and AGE.

Cells are as the API server sends them: strings, integers, ``None`` for a
missing value (kubectl prints ``<none>``), and ages as Kubernetes' short
human durations (``45s``, ``5m30s``, ``3h``, ``2d``).
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jsonpath_ng import JSONPath
from jsonpath_ng.ext import parse as parse_jsonpath

from kueue_es import crds
from kueue_es.services.kube import resources
from kueue_es.sim import event_versions, selectors

TABLE_MEDIA = "as=Table"

Cell = str | int | float | bool | None
_Row = Callable[[dict[str, Any], datetime.datetime], list[Cell]]


def wants_table(accept: str) -> bool:
    """Whether an Accept header asks for a Table first (``application/json;as=Table;v=v1;g=meta.k8s.io``)."""
    first = accept.split(",", 1)[0].replace(" ", "")
    return TABLE_MEDIA in first and "g=meta.k8s.io" in first


def human_duration(seconds: float) -> str:
    """A duration as Kubernetes prints ages (apimachinery's ``duration.HumanDuration``): ``45s``,
    ``5m30s``, ``42m``, ``5h10m``, ``30h``, ``3d4h``, ``40d``, ``2y10d``."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(timestamp: Any, now: datetime.datetime) -> str | None:
    """The age of an RFC 3339 timestamp at ``now``; None when absent or unreadable."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        moment = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return human_duration((now - moment).total_seconds())


def table(
    ref: resources.ResourceRef,
    objects: Iterable[dict[str, Any]],
    *,
    now: datetime.datetime,
    resource_version: str = "",
    include_object: str = "PartialObjectMetadata",
    printer_columns: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``objects`` of one kind, evaluated at ``now`` (UTC).

    ``include_object`` is the request's ``includeObject``: ``None`` (no object per
    row), ``Object`` (the whole object), or ``PartialObjectMetadata`` (its metadata:
    the default, which kubectl uses for ``-A`` and ``--show-labels``).
    ``printer_columns``: a CRD version's ``additionalPrinterColumns`` (``name``, ``type``,
    ``jsonPath``, ``description``, ``priority``, ``format``) for a kind of a CRD; an empty
    list gives NAME and AGE, as the API server does.
    """
    columns, row = _printer(ref) if printer_columns is None else _additional_printer(printer_columns)
    rows = []
    for obj in objects:
        entry: dict[str, Any] = {"cells": row(obj, now)}
        if include_object == "Object":
            entry["object"] = obj
        elif include_object != "None":
            entry["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(entry)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version} if resource_version else {},
        "columnDefinitions": columns,
        "rows": rows,
    }


def _column(name: str, type_: str = "string", description: str = "", priority: int = 0, **extra: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": type_,
        "format": extra.get("format", ""),
        "description": description,
        "priority": priority,
    }


_NAME = _column("Name", format="name", description="Name must be unique within a namespace.")


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def _created(obj: Mapping[str, Any]) -> Any:
    return obj.get("metadata", {}).get("creationTimestamp")


@functools.cache
def _compiled(json_path: str) -> JSONPath:
    return parse_jsonpath("$" + json_path)


def jsonpath_cell(obj: Mapping[str, Any], json_path: str, *, type_: str, now: datetime.datetime) -> Cell:
    """One additionalPrinterColumns cell: ``json_path`` (``.status.x``,
    ``.status.conditions[?(@.type=='Admitted')].status``) on ``obj``; None when nothing
    matches; a ``date`` column as an age; several matches joined with commas."""
    values = [match.value for match in _compiled(json_path).find(obj)]
    if not values:
        return None
    if type_ == "date":
        return age(values[0], now)
    if len(values) == 1 and isinstance(values[0], str | int | float | bool):
        return values[0]
    return ",".join(str(value) for value in values)


def _crd_printer(kind: crds.Kind) -> tuple[list[dict[str, Any]], _Row]:
    columns = list(kind.columns) or [crds.Column("Age", ".metadata.creationTimestamp", "date")]
    definitions = [_NAME] + [_column(c.name, c.type, c.description, c.priority, format="") for c in columns]

    def row(obj: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        return [_name(obj)] + [jsonpath_cell(obj, c.json_path, type_=c.type, now=now) for c in columns]

    return definitions, row


def _additional_printer(columns: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], _Row]:
    """A CRD's additionalPrinterColumns; without any, the API server's Age column."""
    if not columns:
        columns = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    definitions = [_NAME] + [
        {
            "name": str(c.get("name", "")),
            "type": str(c.get("type", "string")),
            "format": str(c.get("format", "")),
            "description": str(c.get("description", "")),
            "priority": int(c.get("priority", 0)),
        }
        for c in columns
    ]

    def row(obj: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        cells: list[Cell] = [_name(obj)]
        for c in columns:
            try:
                cells.append(jsonpath_cell(obj, str(c.get("jsonPath", "")), type_=str(c.get("type", "")), now=now))
            except Exception:  # noqa: BLE001 -- a JSONPath jsonpath-ng cannot read prints as <none>, not a 500
                cells.append(None)
        return cells

    return definitions, row


def _crd_definition_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [_NAME, _column("Created At", "date", "Time the CRD was created")]

    def row(crd: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        return [_name(crd), _created(crd)]

    return columns, row


def _default_printer() -> tuple[list[dict[str, Any]], _Row]:
    def row(obj: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        return [_name(obj), age(_created(obj), now)]

    return [_NAME, _column("Age", "string", "Time since the object was created")], row


def _printer(ref: resources.ResourceRef) -> tuple[list[dict[str, Any]], _Row]:
    if ref.group == crds.GROUP:
        for kind in crds.KINDS:
            if kind.kind == ref.kind:
                return _crd_printer(kind)
    if (ref.group, ref.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
        return _crd_definition_printer()
    served = SERVED_KIND_COLUMNS.get((ref.group, ref.kind))
    if served is not None:
        return _additional_printer(served)
    built_in = _BUILT_IN.get(ref.kind) if ref.group in _BUILT_IN_GROUPS else None
    return built_in() if built_in is not None else _default_printer()


# -- built-in kinds, with the columns of kubectl's printers (pkg/printers/internalversion) -----


def _pod_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _NAME,
        _column("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
        _column("Status", description="The aggregate status of the containers in this pod."),
        _column("Restarts", description="The number of times the containers in this pod have been restarted."),
        _column("Age"),
        _column("IP", description="The IP address assigned to the pod", priority=1),
        _column("Node", description="Name of the node the pod is scheduled on", priority=1),
        _column("Nominated Node", description="The node the pod is nominated to run on", priority=1),
        _column("Readiness Gates", description="The pod's readiness gates", priority=1),
    ]

    def row(pod: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        spec, status = pod.get("spec", {}), pod.get("status", {})
        statuses = status.get("containerStatuses") or []
        ready = sum(1 for s in statuses if s.get("ready"))
        restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
        return [
            _name(pod),
            f"{ready}/{len(spec.get('containers') or [])}",
            _pod_status(pod),
            str(restarts),
            age(_created(pod), now),
            status.get("podIP") or "<none>",
            spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>",
            "<none>",
        ]

    return columns, row


def _pod_status(pod: Mapping[str, Any]) -> str:
    """The STATUS kubectl shows (printers.go printPod): the phase (or ``status.reason``); SchedulingGated while
    the pod carries PodScheduled with that reason (which kube-apiserver writes for a pod created with scheduling
    gates, :mod:`kueue_es.sim.strategies`, and which stays until the pod is scheduled); a container's waiting or
    terminated reason (the first container's wins; ``Completed`` beside a running one reads Running, or NotReady
    without the Ready condition); Terminating for a pod being deleted that has not ended."""
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    reason = str(status.get("reason") or phase)
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in conditions):
        reason = "SchedulingGated"
    running = False
    for container in reversed(status.get("containerStatuses") or []):
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated")
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif isinstance(terminated, Mapping):
            signal = terminated.get("signal")
            exited = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
            reason = terminated.get("reason") or exited
        elif container.get("ready") and state.get("running") is not None:
            running = True
    if reason == "Completed" and running:
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        reason = "Running" if ready else "NotReady"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            return "Unknown"
        if phase not in ("Succeeded", "Failed"):
            return "Terminating"
    return reason


def _node_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _NAME,
        _column("Status", description="The status of the node"),
        _column("Roles", description="The roles of the node"),
        _column("Age"),
        _column("Version", description="Kubelet Version reported by the node."),
        _column("Internal-IP", description="The node's internal address", priority=1),
        _column("External-IP", description="The node's external address", priority=1),
        _column("OS-Image", description="OS Image reported by the node.", priority=1),
        _column("Kernel-Version", description="Kernel Version reported by the node.", priority=1),
        _column("Container-Runtime", description="Container Runtime Version reported by the node.", priority=1),
    ]

    def row(node: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        status = node.get("status", {})
        ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        state = "Ready" if ready == "True" else ("NotReady" if ready == "False" else "Unknown")
        if node.get("spec", {}).get("unschedulable"):
            state += ",SchedulingDisabled"
        roles = sorted(
            label.split("/", 1)[1]
            for label in node.get("metadata", {}).get("labels", {}) or {}
            if label.startswith("node-role.kubernetes.io/")
        )
        addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
        info = status.get("nodeInfo", {})
        return [
            _name(node),
            state,
            ",".join(roles) or "<none>",
            age(_created(node), now),
            info.get("kubeletVersion", ""),
            addresses.get("InternalIP") or "<none>",
            addresses.get("ExternalIP") or "<none>",
            info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>",
        ]

    return columns, row


def _namespace_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [_NAME, _column("Status", description="The status of the namespace"), _column("Age")]

    def row(namespace: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        return [_name(namespace), namespace.get("status", {}).get("phase", ""), age(_created(namespace), now)]

    return columns, row


def _event_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _column("Last Seen", description="Time when the event was last seen"),
        _column("Type", description="Type of this event (Normal, Warning)"),
        _column("Reason", description="Why the action was taken"),
        _column("Object", description="The object this Event is about"),
        _column("Subobject", description="The subobject this Event is about", priority=1),
        _column("Source", description="The component reporting this event", priority=1),
        _column("Message", description="A human-readable description of the status of this operation"),
        _column("First Seen", description="Time when the event was first seen", priority=1),
        _column("Count", description="The number of times this event has occurred", priority=1),
        _column("Name", format="name", description="Name of the event", priority=1),
    ]

    def row(event: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        if event_versions.is_events_v1(event):  # printed as the core Event it is a view of
            event = event_versions.to_core(event)
        # kube-apiserver's printEvent: a series (events.k8s.io's repeats) gives the count and the last time
        involved = event.get("involvedObject", {})
        first = event.get("firstTimestamp") or event.get("eventTime") or _created(event)
        last = event.get("lastTimestamp") or first
        count = int(event.get("count") or 1)
        series = event.get("series")
        if isinstance(series, dict):
            last = series.get("lastObservedTime") or last
            count = int(series.get("count") or count)
        source = event.get("source", {}).get("component") or event.get("reportingComponent") or ""
        return [
            age(last, now),
            event.get("type", ""),
            event.get("reason", ""),
            f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            involved.get("fieldPath", ""),
            source,
            str(event.get("message", "")).strip(),
            age(first, now),
            count,
            _name(event),
        ]

    return columns, row


def _template_columns(*, selector: str | None) -> list[dict[str, Any]]:
    """The wide columns (``-o wide``) kubectl prints for a kind with a pod template (printers.go): CONTAINERS and
    IMAGES, then SELECTOR with the description ``selector`` (a StatefulSet has none: None)."""
    columns = [
        _column("Containers", description="Names of each container in the template.", priority=1),
        _column("Images", description="Images referenced by each container in the template.", priority=1),
    ]
    if selector is not None:
        columns.append(_column("Selector", description=selector, priority=1))
    return columns


def _template_cells(spec: Mapping[str, Any], *, selector: bool = True) -> list[Cell]:
    """The cells of :func:`_template_columns` for an object's ``spec`` (a CronJob's ``jobTemplate.spec``): its
    template's container names and images, comma-separated (layoutContainerCells), and its ``selector`` as
    metav1.FormatLabelSelector prints it."""
    containers = [c for c in ((spec.get("template") or {}).get("spec") or {}).get("containers") or [] if c]
    cells: list[Cell] = [
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    ]
    if selector:
        cells.append(selectors.format_label_selector(spec.get("selector")))
    return cells


_JOB_SELECTOR = "Label selector of the job's pods."
_PODS_SELECTOR = "Label selector for pods."


def _job_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _NAME,
        _column("Status", description="Status of the job."),
        _column("Completions", description="The completion status of the job."),
        _column("Duration", description="Time required to complete the job."),
        _column("Age"),
        *_template_columns(selector=_JOB_SELECTOR),
    ]

    def row(job: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        spec, status = job.get("spec", {}), job.get("status", {})
        state = _job_state(job)
        completions = spec.get("completions")
        succeeded = int(status.get("succeeded") or 0)
        parallelism = int(spec.get("parallelism") or 0)
        if completions is not None:
            done = f"{succeeded}/{completions}"
        else:  # a work queue: one success completes it ("of N" only when several pods run at once)
            done = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
        start, end = status.get("startTime"), status.get("completionTime")
        duration = None
        if start:
            finish = datetime.datetime.fromisoformat(end.replace("Z", "+00:00")) if end else now
            duration = human_duration(
                (finish - datetime.datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
            )
        return [_name(job), state, done, duration, age(_created(job), now), *_template_cells(spec)]

    return columns, row


def _job_state(job: Mapping[str, Any]) -> str:
    """The STATUS cell of a Job, as Kubernetes 1.32's printJob (pkg/printers/internalversion/printers.go)
    derives it: from the Job's conditions and its deletion, never from ``spec.suspend`` (a suspended Job reads
    Running until the Job controller has written Suspended True). In order: Complete, Failed, Terminating (a
    deletionTimestamp), Suspended, FailureTarget, else Running. SuccessCriteriaMet is no state of its own
    before Kubernetes 1.34 (kubernetes PR 132832): a Job that has only met its success policy reads Running."""
    if _job_condition(job, "Complete"):
        return "Complete"
    if _job_condition(job, "Failed"):
        return "Failed"
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    if _job_condition(job, "Suspended"):
        return "Suspended"
    if _job_condition(job, "FailureTarget"):
        return "FailureTarget"
    return "Running"


def _job_condition(job: Mapping[str, Any], kind: str) -> bool:
    """Whether the Job's first condition of type ``kind`` is True (printers.go hasJobCondition looks no further
    than the first of a type)."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition.get("status") == "True"
    return False


def _cron_job_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _NAME,
        _column("Schedule", description="The schedule in Cron format."),
        _column("Timezone", description="The time zone name for the given schedule."),
        _column("Suspend", "boolean", "Whether the controller suspends subsequent executions."),
        _column("Active", "integer", "A list of pointers to currently running jobs."),
        _column("Last Schedule", description="Information when was the last time the job was successfully scheduled."),
        _column("Age"),
        *_template_columns(selector=_JOB_SELECTOR),
    ]

    def row(cron_job: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        spec, status = cron_job.get("spec") or {}, cron_job.get("status") or {}
        suspend = spec.get("suspend")
        return [
            _name(cron_job),
            str(spec.get("schedule", "")),
            spec.get("timeZone") or "<none>",
            "<unset>" if suspend is None else str(bool(suspend)),  # printBoolPtr
            len(status.get("active") or []),
            age(status.get("lastScheduleTime"), now) or "<none>",
            age(_created(cron_job), now),
            *_template_cells((spec.get("jobTemplate") or {}).get("spec") or {}),
        ]

    return columns, row


def _priority_class_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _NAME,
        _column("Value", "integer", "The value of this priority class."),
        _column("Global-Default", "boolean", "Whether this priority class is the default priority."),
        _column("Age"),
        _column("PreemptionPolicy", description="The Policy for preempting pods with lower priority."),
    ]

    def row(priority_class: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        return [
            _name(priority_class),
            int(priority_class.get("value") or 0),
            bool(priority_class.get("globalDefault")),
            age(_created(priority_class), now),
            priority_class.get("preemptionPolicy") or "<unset>",
        ]

    return columns, row


def _role_printer() -> tuple[list[dict[str, Any]], _Row]:
    """A Role's or ClusterRole's: NAME and CREATED AT, the creation time as written (printers.go printRole)."""
    columns = [_NAME, _column("Created At", "date", "Time at which the role was created")]

    def row(role: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        return [_name(role), _created(role) or ""]

    return columns, row


def _role_binding_printer() -> tuple[list[dict[str, Any]], _Row]:
    """A RoleBinding's or ClusterRoleBinding's: NAME, ROLE (``Kind/name`` of its roleRef), AGE, and with ``-o
    wide`` its subjects by kind (printers.go printRoleBinding)."""
    columns = [
        _NAME,
        _column("Role", description="Role indicates the Role or ClusterRole this binding refers to"),
        _column("Age"),
        _column("Users", description="Users in the roleBinding", priority=1),
        _column("Groups", description="Groups in the roleBinding", priority=1),
        _column("ServiceAccounts", description="ServiceAccounts in the roleBinding", priority=1),
    ]

    def row(binding: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        ref = binding.get("roleRef") or {}
        subjects = [s for s in binding.get("subjects") or [] if isinstance(s, dict)]

        def named(kind: str) -> str:
            if kind == "ServiceAccount":
                return ", ".join(
                    f"{s.get('namespace', '')}/{s.get('name', '')}" for s in subjects if s.get("kind") == kind
                )
            return ", ".join(str(s.get("name", "")) for s in subjects if s.get("kind") == kind)

        return [
            _name(binding),
            f"{ref.get('kind', '')}/{ref.get('name', '')}",
            age(_created(binding), now),
            named("User"),
            named("Group"),
            named("ServiceAccount"),
        ]

    return columns, row


def _flow_schema_printer() -> tuple[list[dict[str, Any]], _Row]:
    """A FlowSchema's: its priority level, matching precedence, distinguisher method, AGE and whether its
    priority level is missing (its ``Dangling`` condition's status, ``?`` without one; printers.go
    printFlowSchema)."""
    columns = [
        _NAME,
        _column("PriorityLevel", description="The PriorityLevelConfiguration this FlowSchema points at"),
        _column("MatchingPrecedence", "string", "The matching precedence of this FlowSchema"),
        _column("DistinguisherMethod", description="How requests are split into flows"),
        _column("Age"),
        _column("MissingPL", description="Whether the PriorityLevelConfiguration is missing"),
    ]

    def row(schema: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        spec = schema.get("spec") or {}
        method = (spec.get("distinguisherMethod") or {}).get("type") or "<none>"
        dangling = next(
            (c for c in (schema.get("status") or {}).get("conditions") or [] if c.get("type") == "Dangling"), None
        )
        return [
            _name(schema),
            (spec.get("priorityLevelConfiguration") or {}).get("name", ""),
            str(spec.get("matchingPrecedence", "")),
            method,
            age(_created(schema), now),
            dangling.get("status", "?") if dangling else "?",
        ]

    return columns, row


def _priority_level_printer() -> tuple[list[dict[str, Any]], _Row]:
    """A PriorityLevelConfiguration's: TYPE, its concurrency shares and queuing (``<none>`` where its type
    has none), AGE (printers.go printPriorityLevelConfiguration)."""
    columns = [
        _NAME,
        _column("Type", description="Limited or Exempt"),
        _column("NominalConcurrencyShares", "string", "The concurrency shares of a Limited level"),
        _column("Queues", "string", "The queues of a level that queues"),
        _column("HandSize", "string", "The hand size of a level that queues"),
        _column("QueueLengthLimit", "string", "The queue length limit of a level that queues"),
        _column("Age"),
    ]

    def row(level: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        spec = level.get("spec") or {}
        limited = spec.get("limited") if spec.get("type") == "Limited" else None
        shares, queues, hand, length = "<none>", "<none>", "<none>", "<none>"
        if isinstance(limited, dict):
            shares = str(limited.get("nominalConcurrencyShares", 30))  # the API server's default
            queuing = (limited.get("limitResponse") or {}).get("queuing")
            if isinstance(queuing, dict):
                queues, hand, length = (str(queuing.get(k, "")) for k in ("queues", "handSize", "queueLengthLimit"))
        return [_name(level), spec.get("type", ""), shares, queues, hand, length, age(_created(level), now)]

    return columns, row


def _lease_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [_NAME, _column("Holder", description="The holder of the lease"), _column("Age")]

    def row(lease: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        return [_name(lease), lease.get("spec", {}).get("holderIdentity") or "", age(_created(lease), now)]

    return columns, row


def _config_map_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [_NAME, _column("Data", "integer", "The number of entries"), _column("Age")]

    def row(config_map: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        entries = len(config_map.get("data") or {}) + len(config_map.get("binaryData") or {})
        return [_name(config_map), entries, age(_created(config_map), now)]

    return columns, row


def _deployment_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _NAME,
        _column("Ready", description="Number of the pod with ready state"),
        _column("Up-to-date", "integer", "Total number of non-terminated pods targeted by this deployment"),
        _column("Available", "integer", "Total number of available pods targeted by this deployment."),
        _column("Age"),
        *_template_columns(selector=_PODS_SELECTOR),
    ]

    def row(deployment: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
        desired = spec.get("replicas", 1)
        ready = f"{status.get('readyReplicas', 0)}/{desired}"
        updated, available = status.get("updatedReplicas", 0), status.get("availableReplicas", 0)
        return [_name(deployment), ready, updated, available, age(_created(deployment), now), *_template_cells(spec)]

    return columns, row


def _replica_set_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _NAME,
        _column("Desired", "integer", "Number of desired pods"),
        _column("Current", "integer", "Number of actual replicas"),
        _column("Ready", "integer", "Number of ready replicas"),
        _column("Age"),
        *_template_columns(selector=_PODS_SELECTOR),
    ]

    def row(rs: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        spec, status = rs.get("spec") or {}, rs.get("status") or {}
        return [
            _name(rs),
            spec.get("replicas", 1),
            status.get("replicas", 0),
            status.get("readyReplicas", 0),
            age(_created(rs), now),
            *_template_cells(spec),
        ]

    return columns, row


def _stateful_set_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _NAME,
        _column("Ready", description="Number of the pod with ready state"),
        _column("Age"),
        *_template_columns(selector=None),
    ]

    def row(sts: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        spec, status = sts.get("spec") or {}, sts.get("status") or {}
        ready = f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}"
        return [_name(sts), ready, age(_created(sts), now), *_template_cells(spec, selector=False)]

    return columns, row


def _pod_template_printer() -> tuple[list[dict[str, Any]], _Row]:
    columns = [
        _NAME,
        _column("Containers", description="Names of each container in the template."),
        _column("Images", description="Images referenced by each container in the template."),
        _column("Pod Labels", description="The labels of the pod template."),
    ]

    def row(template: dict[str, Any], now: datetime.datetime) -> list[Cell]:
        body = template.get("template") or {}
        containers = (body.get("spec") or {}).get("containers") or []
        labels = (body.get("metadata") or {}).get("labels") or {}
        return [
            _name(template),
            ",".join(str(c.get("name", "")) for c in containers),
            ",".join(str(c.get("image", "")) for c in containers) or None,
            ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>",
        ]

    return columns, row


#: autoscaling.x-k8s.io ProvisioningRequest: its class and the status of its conditions.
_PROVISIONING_REQUEST_COLUMNS = (
    {"name": "Class", "type": "string", "jsonPath": ".spec.provisioningClassName"},
    {"name": "Accepted", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Accepted')].status"},
    {"name": "Provisioned", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Provisioned')].status"},
    {"name": "Failed", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Failed')].status"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
)

#: jobset.x-k8s.io JobSet: the ``additionalPrinterColumns`` of JobSet's CRD (kubernetes-sigs/jobset v0.12.0,
#: config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml, which is tests/fixtures/crds/
#: jobset.x-k8s.io_jobsets.yaml). The emulator serves JobSets without that CRD installed; a cluster
#: serves them only through it, so ``kubectl get jobsets`` prints these columns there.
_JOBSET_COLUMNS = (
    {
        "name": "TerminalState",
        "type": "string",
        "description": "Final state of JobSet",
        "jsonPath": ".status.terminalState",
    },
    {"name": "Restarts", "type": "string", "description": "Number of restarts", "jsonPath": ".status.restarts"},
    {"name": "Completed", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Completed")].status'},
    {"name": "Suspended", "type": "string", "description": "JobSet suspended", "jsonPath": ".spec.suspend"},
    {
        "name": "Age",
        "type": "date",
        "description": "Time this JobSet was created",
        "jsonPath": ".metadata.creationTimestamp",
    },
)

#: The printer columns of the custom kinds the emulator serves by itself, by (group, kind): those a
#: cluster serves from their CRD's ``additionalPrinterColumns``. Once a CRD for one is applied to the
#: emulator, that CRD's columns are used instead (``table``'s ``printer_columns``).
SERVED_KIND_COLUMNS: dict[tuple[str, str], tuple[dict[str, Any], ...]] = {
    ("autoscaling.x-k8s.io", "ProvisioningRequest"): _PROVISIONING_REQUEST_COLUMNS,
    ("jobset.x-k8s.io", "JobSet"): _JOBSET_COLUMNS,
}


_BUILT_IN: dict[str, Callable[[], tuple[list[dict[str, Any]], _Row]]] = {
    "PodTemplate": _pod_template_printer,
    "Deployment": _deployment_printer,
    "ReplicaSet": _replica_set_printer,
    "StatefulSet": _stateful_set_printer,
    "Pod": _pod_printer,
    "Node": _node_printer,
    "Namespace": _namespace_printer,
    "Event": _event_printer,
    "Job": _job_printer,
    "CronJob": _cron_job_printer,
    "PriorityClass": _priority_class_printer,
    "Lease": _lease_printer,
    "ConfigMap": _config_map_printer,
    "Role": _role_printer,
    "ClusterRole": _role_printer,
    "RoleBinding": _role_binding_printer,
    "ClusterRoleBinding": _role_binding_printer,
    "FlowSchema": _flow_schema_printer,
    "PriorityLevelConfiguration": _priority_level_printer,
}
#: The API groups of the built-in kinds printed with kubectl's columns (others: NAME and AGE).
_BUILT_IN_GROUPS = (
    "",
    event_versions.GROUP,  # the same Events as core's, printed alike (kube-apiserver's printEvent)
    "batch",
    "coordination.k8s.io",
    "apps",
    "scheduling.k8s.io",
    "rbac.authorization.k8s.io",
    "flowcontrol.apiserver.k8s.io",
)
