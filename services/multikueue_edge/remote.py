"""What the MultiKueue edge writes on a worker cluster, and what it copies back: pure builders.

Why this module exists: the manager's objects and the worker's copies differ in a few fields
Kueue sets on purpose (SEMANTICS-ADVANCED E.2 4-6; Kueue
pkg/controller/admissionchecks/multikueue/workload.go cloneForCreate, the job adapters
``SyncJob`` in pkg/controller/jobs/job/job_multikueue_adapter.go and
jobset/jobset_multikueue_adapter.go). Keeping those rules here, without I/O, lets the unit
tests hold them and the service stay a thin runner:

- :func:`remote_workload`: the Workload copy a worker gets (same name and namespace, same spec,
  labels plus the origin label, the job-uid label dropped, no status, no owner);
- :func:`remote_job`: the job created on the winning worker (a copy of the manager's job,
  ``managedBy`` cleared, the Job's selector and controller-uid labels dropped, labels
  ``kueue.x-k8s.io/prebuilt-workload-name``, an annotation past 63 characters, and the origin) so the
  worker's Kueue adopts the Workload;
- :func:`mirrored_job_status`: the remote job's status as the manager's job takes it (batch Job:
  only while the manager's job runs, both are suspended, or the remote one finished);
- :func:`pods_of_owner`, :func:`remote_pods_of_group`: the Pods a Pod-owned workload runs on the winner,
  every Pod of its group as Kueue's pod adapter lists them (pod_multikueue_adapter.go), and those to delete;
- :func:`kubeconfig_source`: where a MultiKueueCluster's kubeconfig is (a Secret key or a path);
- :func:`insecure_kubeconfig`, :func:`path_problem`, :func:`cluster_source_problem`: Kueue's checks on
  it before connecting, each a :class:`KubeconfigProblem` with the cluster's ``Active=False`` reason.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kueue_es.jobframework import pods as pod_groups
from kueue_es.jobframework import workloads
from kueue_es.services.multikueue_edge.core import Priority

ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
"""The label on every remote object, whose value is the manager's ``multiKueue.origin``."""
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
"""The label (or, for a name too long for a label value, annotation) by which the worker's Kueue adopts an
existing Workload for a job (constants.go)."""
LABEL_VALUE_MAX_LENGTH = 63
"""The longest label value the API server takes (validation.LabelValueMaxLength)."""
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""The AdmissionCheck controllerName, and the ``managedBy`` value of jobs MultiKueue runs."""
KUBECONFIG_KEY = "kubeconfig"
"""The Secret key holding a worker's kubeconfig (Kueue multikueuecluster.go)."""

#: Labels the Job controller puts on a Job and its template; the worker's Job controller sets its own.
_JOB_CONTROLLER_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)
#: Metadata a copy must not carry: the server sets it, or it names the manager's objects.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "selfLink",
    "finalizers",
)


class RemoteCopyError(ValueError):
    """A manager object lacks what its remote copy needs (the message names the object and field)."""


def _clean_metadata(meta: Mapping[str, Any], *, labels: Mapping[str, str]) -> dict[str, Any]:
    out = {k: copy.deepcopy(v) for k, v in meta.items() if k not in _SERVER_METADATA}
    annotations = dict(out.get("annotations") or {})
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if annotations:
        out["annotations"] = annotations
    else:
        out.pop("annotations", None)
    out["labels"] = dict(labels)
    return out


def _named(obj: Mapping[str, Any], what: str) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if not name or not namespace:
        raise RemoteCopyError(
            f"{what} {namespace or '?'}/{name or '?'}: metadata.name and metadata.namespace are required"
        )
    return str(namespace), str(name)


def remote_workload(local: Mapping[str, Any], *, origin: str) -> dict[str, Any]:
    """The Workload a worker gets for the manager's Workload object ``local`` (a raw v1beta2 dict).

    Same name, namespace, annotations and spec; labels are the local ones without
    ``kueue.x-k8s.io/job-uid`` plus ``kueue.x-k8s.io/multikueue-origin: <origin>``; no status,
    owner references, finalizers or server fields (Kueue workload.go cloneForCreate). Raises
    :class:`RemoteCopyError` when ``local`` has no name, namespace or spec.
    """
    namespace, name = _named(local, "Workload")
    spec = local.get("spec")
    if not isinstance(spec, Mapping):
        raise RemoteCopyError(f"Workload {namespace}/{name}: spec is required for its remote copy")
    labels = {k: v for k, v in ((local.get("metadata") or {}).get("labels") or {}).items() if k != JOB_UID_LABEL}
    labels[ORIGIN_LABEL] = origin
    return {
        "apiVersion": local.get("apiVersion") or "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": _clean_metadata(local.get("metadata") or {}, labels=labels),
        "spec": copy.deepcopy(dict(spec)),
    }


def remote_job(local: Mapping[str, Any], *, workload_name: str, origin: str) -> dict[str, Any]:
    """The job created on the winning worker for the manager's job ``local`` (a Job or a JobSet, raw dict).

    A copy of ``local`` without status and server fields, ``spec.managedBy`` removed (the worker's
    own controller runs it), labels plus ``kueue.x-k8s.io/prebuilt-workload-name: <workload_name>``
    and the origin label; a ``workload_name`` longer than a label value (63 characters) goes in the
    annotation of that key instead (jobframework utils.go SetPrebuiltWorkloadName, Kueue #13636), and
    the key the manager's job carried in the other place is dropped. A batch/v1 Job also loses ``spec.selector`` and the Job controller's labels
    on its template, which the worker's Job controller generates again (job_multikueue_adapter.go
    SyncJob). Raises :class:`RemoteCopyError` when ``local`` has no name, namespace or spec.
    """
    kind = str(local.get("kind") or "")
    namespace, name = _named(local, kind or "job")
    spec = local.get("spec")
    if not isinstance(spec, Mapping):
        raise RemoteCopyError(f"{kind} {namespace}/{name}: spec is required for its remote copy")
    labels = dict((local.get("metadata") or {}).get("labels") or {})
    labels.pop(PREBUILT_WORKLOAD_LABEL, None)
    if len(workload_name) <= LABEL_VALUE_MAX_LENGTH:
        labels[PREBUILT_WORKLOAD_LABEL] = workload_name
    labels[ORIGIN_LABEL] = origin
    remote_spec = copy.deepcopy(dict(spec))
    remote_spec.pop("managedBy", None)
    if kind == "Job":
        remote_spec.pop("selector", None)
        remote_spec.pop("manualSelector", None)
        template_meta = (remote_spec.get("template") or {}).get("metadata")
        if isinstance(template_meta, dict) and template_meta.get("labels"):
            template_meta["labels"] = {
                k: v for k, v in template_meta["labels"].items() if k not in _JOB_CONTROLLER_LABELS
            }
    metadata = _clean_metadata(local.get("metadata") or {}, labels=labels)
    annotations = dict(metadata.pop("annotations", None) or {})
    annotations.pop(PREBUILT_WORKLOAD_LABEL, None)
    if len(workload_name) > LABEL_VALUE_MAX_LENGTH:
        annotations[PREBUILT_WORKLOAD_LABEL] = workload_name
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": local.get("apiVersion"), "kind": kind, "metadata": metadata, "spec": remote_spec}


def names_prebuilt(job: Mapping[str, Any], workload_name: str) -> bool:
    """Whether the remote ``job`` names ``workload_name`` as its prebuilt Workload, by annotation (read first) or
    label, as the worker's Kueue reads it (jobframework utils.go PrebuiltWorkloadNameFor)."""
    return workloads.prebuilt_workload(job) == workload_name


def pods_of_owner(owner_name: str, pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The manager's Pods that a workload owned by Pod ``owner_name`` runs on its worker, sorted by name.

    ``pods``: the Pods of the workload's namespace on the manager (raw dicts). A single Pod (no
    ``kueue.x-k8s.io/pod-group-name``) is just itself; a Pod of a group brings every Pod of that
    namespace with the same group name, finished or replaced ones too, as Kueue's pod adapter lists them
    by its group-name index (pod_multikueue_adapter.go SyncJob, syncPodGroup, listLocalPods). ``[]`` when
    the owner is not among ``pods`` (deleted meanwhile: nothing to copy).
    """
    by_name = {str((p.get("metadata") or {}).get("name") or ""): p for p in pods}
    owner = by_name.get(owner_name)
    if owner is None:
        return []
    group = pod_groups.group_name(owner)
    if not group:
        return [owner]
    return [by_name[name] for name in sorted(by_name) if pod_groups.group_name(by_name[name]) == group]


def remote_pods_of_group(owner: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], *, origin: str) -> list[str]:
    """The names of a worker's Pods to delete with the remote Pod ``owner`` (the workload's owner's copy), sorted.

    Only a copy of this ``origin`` is deleted (jobframework/utils.go DeleteRemoteObjectIfOwned); a single Pod
    alone; a Pod of a group with every Pod of the worker's ``pods`` (its namespace) of the same group and origin.
    Kueue deletes the worker's Pods named as the manager's group members (pod_multikueue_adapter.go
    DeleteRemoteObject); listing the worker's own also removes the copy of a member already deleted on the
    manager, which Kueue would leave running.
    """
    if not owned_by_origin(owner, origin):
        return []
    name = str((owner.get("metadata") or {}).get("name") or "")
    group = pod_groups.group_name(owner)
    if not group:
        return [name]
    return sorted(
        str((p.get("metadata") or {}).get("name") or "")
        for p in pods
        if pod_groups.group_name(p) == group and owned_by_origin(p, origin)
    )


def _suspended(job: Mapping[str, Any]) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def job_finished(job: Mapping[str, Any]) -> bool:
    """Whether a batch/v1 Job or a JobSet has a true ``Complete``/``Completed`` or ``Failed`` condition."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Completed", "Failed") and cond.get("status") == "True":
            return True
    return False


def mirrored_job_status(local: Mapping[str, Any], remote: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status the manager's job takes from its remote copy, or None when it keeps its own.

    A batch/v1 Job copies the remote status only while the manager's Job is unsuspended, when both
    are suspended, or once the remote Job finished (Kueue job_multikueue_adapter.go SyncJob); any
    other kind (JobSet, Pod) copies it whenever it differs, a gated Pod keeping its own ``PodScheduled``
    until the worker's is True (:func:`_pod_status`). None also when the statuses are already equal.
    """
    remote_status = dict(remote.get("status") or {})
    if local.get("kind") == "Pod":
        remote_status = _pod_status(local, remote_status)
    if remote_status == dict(local.get("status") or {}):
        return None
    if local.get("kind") == "Job":
        copies = (not _suspended(local)) or (_suspended(local) and _suspended(remote)) or job_finished(remote)
        if not copies:
            return None
    return remote_status


def _pod_status(local: Mapping[str, Any], remote_status: dict[str, Any]) -> dict[str, Any]:
    """The remote Pod's status as the manager's gated Pod takes it: while the worker has not scheduled its Pod,
    the manager's keeps its own ``PodScheduled`` (False, ``SchedulingGated``), so that a cluster autoscaler on
    the manager does not take it for an unschedulable Pod (Kueue pod_multikueue_adapter.go
    syncLocalPodWithRemote)."""
    gated = any(
        isinstance(g, Mapping) and g.get("name") == "kueue.x-k8s.io/admission"
        for g in (local.get("spec") or {}).get("schedulingGates") or []
    )

    def scheduled(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return next(
            (c for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type") == "PodScheduled"),
            None,
        )

    own = scheduled(local.get("status") or {})
    theirs = scheduled(remote_status)
    if not gated or own is None or (theirs is not None and theirs.get("status") == "True"):
        return remote_status
    conditions = list(remote_status.get("conditions") or [])
    if theirs is None:
        conditions.append(dict(own))
    else:
        conditions = [dict(own) if c is theirs else c for c in conditions]
    return {**remote_status, "conditions": conditions}


@dataclass(frozen=True, kw_only=True)
class KubeconfigSource:
    """Where a worker's kubeconfig is: the Secret ``location`` (key ``kubeconfig``) in the manager's
    namespace, or a file ``location`` on the manager's disk (``path`` True)."""

    location: str
    path: bool


def owned_by_origin(obj: Mapping[str, Any], origin: str) -> bool:
    """Whether a worker's object is this manager's: its ``kueue.x-k8s.io/multikueue-origin`` label is
    ``origin`` (Kueue jobframework/utils.go ValidateRemoteObjectOwnership)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(origin) and labels.get(ORIGIN_LABEL) == origin


def copy_priority(workload: Mapping[str, Any]) -> Priority | None:
    """A raw remote Workload's priority as :func:`core.plan` compares it: its ``spec.priorityClassRef`` name
    ("" without one) and ``spec.priority``; None when the class is a Pod PriorityClass (Kueue does not
    update those: pkg/workload PriorityChanged)."""
    spec = workload.get("spec") or {}
    ref = spec.get("priorityClassRef") or {}
    if ref and ref.get("kind", "WorkloadPriorityClass") != "WorkloadPriorityClass":
        return None
    value = spec.get("priority")
    return Priority(class_name=str(ref.get("name") or ""), value=value if isinstance(value, int) else None)


def priority_patch(priority: Priority) -> dict[str, Any]:
    """The ``spec`` merge patch giving a remote copy the manager's WorkloadPriorityClass and priority
    (Kueue workload.go reconcileGroup step 5 sets both fields)."""
    return {
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": priority.class_name},
        "priority": priority.value,
    }


def kubeconfig_source(cluster: Mapping[str, Any]) -> KubeconfigSource:
    """The kubeconfig source of a raw MultiKueueCluster (``spec.clusterSource.kubeConfig``).

    ``locationType`` Secret (the default) or Path (Kueue multikueue_types.go). Raises
    :class:`RemoteCopyError` naming the cluster and field when the cluster has no kubeConfig
    (a ``clusterProfileRef`` is not supported by this edge) or an unknown locationType.
    """
    name = (cluster.get("metadata") or {}).get("name") or "?"
    source = ((cluster.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig")
    if not isinstance(source, Mapping) or not source.get("location"):
        raise RemoteCopyError(
            f"MultiKueueCluster {name}: spec.clusterSource.kubeConfig.location is required"
            " (clusterProfileRef is not supported)"
        )
    kind = source.get("locationType") or "Secret"
    if kind not in ("Secret", "Path"):
        raise RemoteCopyError(
            f"MultiKueueCluster {name}: spec.clusterSource.kubeConfig.locationType {kind!r} is not Secret or Path"
        )
    return KubeconfigSource(location=str(source["location"]), path=kind == "Path")


def reconnect_delay_seconds(failures: int) -> float:
    """Seconds to wait before the next connection attempt after ``failures`` failed ones (>= 1):
    5 s·2^(n−1), at most 7 doublings (Kueue multikueuecluster.go retryAfter)."""
    return 5.0 * 2 ** (min(max(failures, 1), 7) - 1)


# -- loading a worker's kubeconfig (Kueue multikueuecluster.go loadClientConfig) -------------------

BAD_KUBECONFIG = "BadKubeConfig"
"""Reason of a MultiKueueCluster whose kubeconfig cannot be read (Secret, key or file missing)."""
INSECURE_KUBECONFIG = "InsecureKubeConfig"
"""Reason of a MultiKueueCluster whose kubeconfig does not parse or asks for what Kueue forbids."""
CLUSTER_PROFILE_DISABLED = "MultiKueueClusterProfileFeatureDisabled"
"""Reason of a MultiKueueCluster naming a ClusterProfile while the MultiKueueClusterProfile gate is off."""
BAD_CLUSTER_PROFILE = "BadClusterProfile"
"""Reason of a MultiKueueCluster naming a ClusterProfile (the gate on): kueue-es cannot read them."""
PATH_VALIDATION_GATE = "MultiKueueKubeConfigPathValidation"
"""The feature gate (Beta, on by default since Kueue 0.20) that keeps Path kubeconfigs under :data:`KUBECONFIG_DIR`."""
CLUSTER_PROFILE_GATE = "MultiKueueClusterProfile"
"""The feature gate (Alpha, off by default) of ``spec.clusterSource.clusterProfileRef``."""
KUBECONFIG_DIR = "/etc/multikueue/kubeconfigs"
"""Where Path kubeconfigs must be while :data:`PATH_VALIDATION_GATE` is on (defaultKubeConfigPathPrefix)."""
PATH_NOT_ALLOWED = "kubeconfig path is not under the allowed prefix"


class KubeconfigProblem(Exception):
    """Why a MultiKueueCluster has no client: ``reason`` is its ``Active=False`` reason and the message
    follows Kueue's ``load client config failed: <error>`` (multikueuecluster.go Reconcile)."""

    def __init__(self, reason: str, error: str) -> None:
        super().__init__(f"load client config failed: {error}")
        self.reason = reason


def cluster_source_problem(cluster: Mapping[str, Any], *, gates: Mapping[str, bool]) -> KubeconfigProblem | None:
    """The problem of a raw MultiKueueCluster naming ``spec.clusterSource.clusterProfileRef`` (None for a
    kubeConfig source): Kueue's :data:`CLUSTER_PROFILE_DISABLED` while the gate is off, else
    :data:`BAD_CLUSTER_PROFILE` since kueue-es reads no ClusterProfile (multikueuecluster.go loadClientConfig)."""
    source = (cluster.get("spec") or {}).get("clusterSource") or {}
    if not source.get("clusterProfileRef") or source.get("kubeConfig"):
        return None
    if not gates.get(CLUSTER_PROFILE_GATE, False):
        return KubeconfigProblem(CLUSTER_PROFILE_DISABLED, "MultiKueueClusterProfile feature gate is disabled")
    return KubeconfigProblem(BAD_CLUSTER_PROFILE, "clusterProfileRef sources are not supported by kueue-es")


def path_problem(raw: str, *, resolved: str | None, prefix: str | None) -> str | None:
    """Why a Path kubeconfig ``raw`` may not be read while :data:`PATH_VALIDATION_GATE` is on, or None.

    ``resolved`` and ``prefix`` are ``raw`` and :data:`KUBECONFIG_DIR` with their symlinks resolved
    (None when that failed: the file or the directory does not exist). Kueue multikueuecluster.go
    validateKubeConfigPath: absolute, no ``..`` component, inside the prefix directory.
    """
    if not raw:
        return "kubeconfig path must not be empty"
    if ".." in raw.split("/"):
        return f'{PATH_NOT_ALLOWED}: path contains ".."'
    if not raw.startswith("/"):
        return f"{PATH_NOT_ALLOWED}: path must be absolute"
    if prefix is None:
        return f'{PATH_NOT_ALLOWED}: "{raw}" is not under "{KUBECONFIG_DIR}"'
    if resolved is None:
        return f"cannot resolve kubeconfig path symlinks: lstat {raw}: no such file or directory"
    if not (resolved + "/").startswith(prefix.rstrip("/") + "/"):
        return f'{PATH_NOT_ALLOWED}: "{resolved}" is not under "{prefix}"'
    return None


def _named_entries(config: Mapping[str, Any], section: str, field: str) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for entry in config.get(section) or []:
        if isinstance(entry, Mapping):
            body = entry.get(field)
            out.append((str(entry.get("name") or ""), body if isinstance(body, Mapping) else {}))
    return out


def _trusted_server(server: str) -> bool:
    """Whether ``server``'s host is an IP address or a DNS-1123 subdomain (Kueue isValidHostname)."""
    try:
        host = urlsplit(server.lower()).hostname or ""
    except ValueError:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    label = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    return len(host) <= 253 and re.fullmatch(rf"{label}(\.{label})*", host) is not None


def insecure_kubeconfig(config: Mapping[str, Any]) -> str | None:
    """Why a parsed kubeconfig is not safe for a MultiKueueCluster, or None (Kueue multikueuecluster.go
    validateKubeconfig and validateRestConfig): no user with ``tokenFile``; no cluster with
    ``insecure-skip-tls-verify`` or a ``certificate-authority`` file, each with a ``server``; the current
    context's server an IP or DNS name and its user without basic auth, ``exec`` or ``auth-provider``."""
    users = _named_entries(config, "users", "user")
    clusters = _named_entries(config, "clusters", "cluster")
    if any(user.get("tokenFile") for _, user in users):
        return "tokenFile is not allowed"
    for name, cluster in clusters:
        if cluster.get("insecure-skip-tls-verify"):
            return f"insecure TLS verification is not allowed for cluster {name}"
        if cluster.get("certificate-authority"):
            return (
                f"certificate-authority file paths are not allowed, use certificate-authority-data for cluster {name}"
            )
        if not cluster.get("server"):
            return f"server URL is required for cluster {name}"
    contexts = dict(_named_entries(config, "contexts", "context"))
    current = str(config.get("current-context") or "")
    if current not in contexts:
        return (
            f'invalid configuration: context "{current}" does not exist'
            if current
            else ("invalid configuration: no configuration has been provided")
        )
    context = contexts[current]
    cluster = dict(clusters).get(str(context.get("cluster") or ""), {})
    user = dict(users).get(str(context.get("user") or ""), {})
    if not _trusted_server(str(cluster.get("server") or "")):
        return "untrusted server endpoint"
    if user.get("username") or user.get("password"):
        return "basic auth is not allowed"
    if user.get("exec"):
        return "exec plugins are not allowed"
    if user.get("auth-provider"):
        return "auth providers are not allowed"
    return None
