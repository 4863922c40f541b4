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
  ``kueue.x-k8s.io/prebuilt-workload-name`` and the origin) so the worker's Kueue adopts the Workload;
- :func:`mirrored_job_status`: the remote job's status as the manager's job takes it (batch Job:
  only while the manager's job runs, both are suspended, or the remote one finished);
- :func:`kubeconfig_source`: where a MultiKueueCluster's kubeconfig is (a Secret key or a path).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
"""The label on every remote object, whose value is the manager's ``multiKueue.origin``."""
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
"""The label by which the worker's Kueue adopts an existing Workload for a job (constants.go)."""
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
    and the origin label. A batch/v1 Job also loses ``spec.selector`` and the Job controller's labels
    on its template, which the worker's Job controller generates again (job_multikueue_adapter.go
    SyncJob). Raises :class:`RemoteCopyError` when ``local`` has no name, namespace or spec.
    """
    kind = str(local.get("kind") or "")
    namespace, name = _named(local, kind or "job")
    spec = local.get("spec")
    if not isinstance(spec, Mapping):
        raise RemoteCopyError(f"{kind} {namespace}/{name}: spec is required for its remote copy")
    labels = dict((local.get("metadata") or {}).get("labels") or {})
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
    return {
        "apiVersion": local.get("apiVersion"),
        "kind": kind,
        "metadata": _clean_metadata(local.get("metadata") or {}, labels=labels),
        "spec": remote_spec,
    }


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
    other kind (JobSet) copies it whenever it differs. None also when the statuses are already equal.
    """
    remote_status = dict(remote.get("status") or {})
    if remote_status == dict(local.get("status") or {}):
        return None
    if local.get("kind") == "Job":
        copies = (not _suspended(local)) or (_suspended(local) and _suspended(remote)) or job_finished(remote)
        if not copies:
            return None
    return remote_status


@dataclass(frozen=True, kw_only=True)
class KubeconfigSource:
    """Where a worker's kubeconfig is: the Secret ``location`` (key ``kubeconfig``) in the manager's
    namespace, or a file ``location`` on the manager's disk (``path`` True)."""

    location: str
    path: bool


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
