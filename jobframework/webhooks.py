"""Kueue's job webhooks as pure functions: what a managed job gets at creation, and what is refused.

Why this module exists: in a cluster, Kueue's admission webhooks do two things to
every job before it is stored. The mutating one (``Default``) makes a job Kueue
manages wait for admission -- a Job, JobSet, PyTorchJob, RayJob, ... is created
suspended through its kind's suspend field, a plain Pod is created with Kueue's
scheduling gates -- and gives a job without a queue the namespace's ``default``
LocalQueue. The validating one (``ValidateCreate`` / ``ValidateUpdate``) refuses
labels and annotations Kueue cannot honour, and changes it must not see while the
job runs (the queue name of an admitted job). The rules are the same for every
integration (Kueue pkg/controller/jobframework/base_webhook.go, defaults.go,
validation.go, tas_validation.go) plus a few of the kind's own
(pkg/controller/jobs/job/job_webhook.go, pod/pod_webhook.go). Both the webhook
server (:mod:`kueue_es.services.webhook`) and the emulated API server's create
hooks (:mod:`kueue_es.sim.emulator`) call these functions, so the demo and a
cluster behave alike.

Everything is pure: what the cluster knows (whether the namespace has a
``default`` LocalQueue, whether ``managedJobsNamespaceSelector`` selects it) comes
in a :class:`Context`. Errors are :class:`FieldError` values with Kubernetes' field
paths and messages (``metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value:
"a_b": a lowercase RFC 1123 subdomain must ...``), never exceptions.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Final

from kueue_es.events import gojson, labels, manifests, slices, tas_requests
from kueue_es.jobframework import goint, integrations, jobs, pods, workloads
from kueue_es.jobframework.annotations import POD_GROUP_POD_INDEX_LABEL
from kueue_es.jobframework.integrations import ray, serving

QUEUE_LABEL: Final = workloads.QUEUE_LABEL
PRIORITY_CLASS_LABEL: Final = workloads.PRIORITY_CLASS_LABEL
MAX_EXEC_TIME_LABEL: Final = workloads.MAX_EXEC_TIME_LABEL
MANAGED_LABEL: Final = workloads.MANAGED_LABEL
#: The prebuilt Workload a job names (label, or annotation with WorkloadIdentifierAnnotations; constants.go).
PREBUILT_WORKLOAD_KEY: Final = "kueue.x-k8s.io/prebuilt-workload-name"
#: The scheduling gates Kueue's pod webhook adds (kueue.x-k8s.io/admission; TopologySchedulingGate).
ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE: Final = "kueue.x-k8s.io/topology"

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must"
    " start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is"
    " '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_IMMUTABLE = "field is immutable"
_GO_BOOL = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_GO_BOOL |= {"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


class _Omit:
    """The value an error leaves out (Kubernetes' field.OmitValueType)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()

_TYPE_TEXT = {
    "Invalid": "Invalid value",
    "Forbidden": "Forbidden",
    "Required": "Required value",
    "TooMany": "Too many",
    "TooLong": "Too long",
    "NotFound": "Not found",
    "NotSupported": "Unsupported value",
    "Duplicate": "Duplicate value",
}
#: The types whose message shows the refused value (field.Error ErrorBody).
_SHOWS_VALUE = ("Invalid", "TooMany", "NotFound", "NotSupported", "Duplicate")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FieldError:
    """One refused field, as Kubernetes' ``field.Error``: ``type`` (``Invalid``, ``Forbidden``, ``Required``,
    ``TooMany``, whose value is the count, ``TooLong``, ``NotFound`` or ``NotSupported``), ``field``
    (``metadata.labels[kueue.x-k8s.io/queue-name]``), the ``value`` that was refused (:data:`OMIT` for none)
    and ``detail``."""

    type: str
    field: str
    detail: str
    value: Any = OMIT

    def __str__(self) -> str:
        """``<field>: <Invalid value: "x"|Forbidden|Required value|Too many: 19>: <detail>``, as field.Error.Error()
        writes it."""
        body = _TYPE_TEXT[self.type]
        if self.type in _SHOWS_VALUE and self.value is not OMIT:
            body += f": {_go_value(self.value)}"
        return f"{self.field}: {body}: {self.detail}" if self.detail else f"{self.field}: {body}"


@dataclasses.dataclass(frozen=True)
class GoLiteral:
    """A refused value Kubernetes prints as Go's ``%#v`` of a struct or slice (field.Error's fallback), given
    as that text."""

    text: str


def _go_value(value: Any) -> str:
    """A refused value as Kubernetes prints it: strings quoted, numbers and booleans bare, null for none."""
    if isinstance(value, GoLiteral):
        return value.text
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def message(errors: Sequence[FieldError]) -> str:
    """The denial message of a list of errors: one error as it is, more as ``[e1, e2]`` (utilerrors.Aggregate)."""
    if len(errors) == 1:
        return str(errors[0])
    return "[" + ", ".join(str(e) for e in errors) + "]"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Context:
    """What the webhook knows about the cluster for one request.

    ``manage_jobs_without_queue_name``: Kueue's option (a job without the queue-name label is
    managed too). ``namespace_managed``: whether ``managedJobsNamespaceSelector`` selects the
    object's namespace (:func:`workloads.namespace_selected`; the webhook configurations'
    ``namespaceSelector`` already leaves out kube-system, kueue-system and kueue-es, a
    Configuration's selector may leave out more; what it changes: :func:`default`).
    ``default_local_queue``: whether the object's namespace has a
    LocalQueue named ``default`` (LocalQueueDefaulting, on since Kueue v0.19).
    ``topology_aware_scheduling``: the feature gate (on by default): pods get the topology gate
    and TAS annotations are validated. ``elastic_jobs``: the gate ElasticJobsViaWorkloadSlices
    (beta, on by default since Kueue v0.18): a Job annotated ``kueue.x-k8s.io/elastic-job: "true"`` gets the
    elastic-job scheduling gate on its pod template, and the annotation is checked.
    ``multikueue_queue``: whether the object's LocalQueue points
    at a ClusterQueue with a MultiKueue admission check (:func:`uses_multikueue`), so a Job or
    JobSet gets ``spec.managedBy: kueue.x-k8s.io/multikueue``. ``lws_immutable_group_size``: the gate
    LWSImmutableGroupSize (beta, on by default): a managed LeaderWorkerSet's
    ``spec.leaderWorkerTemplate.size`` may not change. ``owners``: the objects of the object's controller
    chain read from the API server, by :func:`owner_key` (:func:`owner_to_read` says which to read), which
    :func:`walk` goes through as Kueue's FindAncestorJobManagedByKueue does to decide whether a job is
    suspended (WorkloadShouldBeSuspended); None: not read, and the controller's kind alone decides
    (:func:`owner_managed`). ``statefulset_workload``: for the update of a StatefulSet scaled up from 0, the
    Workload of its group as the API server has it (named by :func:`scale_up_workload`), which Kueue's
    StatefulSet webhook reads (statefulset_webhook.go ValidateUpdate, findWorkload); None: there is none, or it
    was not read. ``default_priority_class``: whether a WorkloadPriorityClass named ``default`` exists and
    the gate WorkloadPriorityClassDefaulting (beta, on by default since Kueue v0.20) is on, so a job without
    the ``kueue.x-k8s.io/priority-class`` label gets it (:func:`default_priority_class_applies`).
    """

    manage_jobs_without_queue_name: bool = False
    namespace_managed: bool = True
    default_local_queue: bool = False
    default_priority_class: bool = False
    topology_aware_scheduling: bool = True
    elastic_jobs: bool = slices.GATE_DEFAULT
    multikueue_queue: bool = False
    lws_immutable_group_size: bool = True
    owners: Mapping[tuple[str, str, str], workloads.Owner] | None = None
    statefulset_workload: Mapping[str, Any] | None = None


MULTIKUEUE_MANAGED_BY: Final = "kueue.x-k8s.io/multikueue"
"""The ``spec.managedBy`` of a job MultiKueue runs on a worker cluster, and the MultiKueue AdmissionCheck's
controllerName (Kueue apis/kueue/v1beta2/constants.go MultiKueueControllerName)."""
#: The kinds whose ``spec.managedBy`` Kueue defaults for MultiKueue here (Job, JobSet: their adapters).
MULTIKUEUE_KINDS: Final = frozenset({("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet")})


def uses_multikueue(cluster_queue: Mapping[str, Any], controllers: Mapping[str, str]) -> bool:
    """Whether a raw ClusterQueue has a MultiKueue admission check: one of its checks
    (``spec.admissionChecksStrategy.admissionChecks[].name`` or the older ``spec.admissionChecks``)
    whose AdmissionCheck's controllerName (``controllers``: check name -> controllerName) is
    ``kueue.x-k8s.io/multikueue`` (Kueue jobframework/defaults.go ApplyDefaultForManagedBy)."""
    spec = cluster_queue.get("spec") or {}
    names = [str(c.get("name")) for c in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []]
    names += [str(n) for n in spec.get("admissionChecks") or []]
    return any(controllers.get(name) == MULTIKUEUE_MANAGED_BY for name in names)


# -- the kinds served ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Target:
    """One kind the webhooks serve: ``api_version``, ``kind``, ``plural``, ``framework`` (its name in
    Kueue's ``integrations.frameworks``: ``batch/job``, ``pod``, ``kubeflow.org/pytorchjob``) and its
    integration (None for batch/v1 Job and v1 Pod, which have their own modules)."""

    api_version: str
    kind: str
    plural: str
    framework: str
    integration: integrations.Integration | None = None

    @property
    def group(self) -> str:
        """The API group ("" for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        """The API version within the group (``v1``)."""
        return self.api_version.rpartition("/")[2]

    def path(self, verb: str) -> str:
        """Kueue's webhook path: ``/<mutate|validate>-<group, dots as dashes>-<version>-<kind lower-cased>``
        (controller-runtime generateMutatePath; ``/mutate--v1-pod`` for the core group)."""
        return f"/{verb}-{self.group.replace('.', '-')}-{self.version}-{self.kind.lower()}"


JOB = Target(api_version=jobs.JOB_API, kind="Job", plural="jobs", framework="batch/job")
POD = Target(api_version=pods.POD_API, kind="Pod", plural="pods", framework="pod")


def targets() -> tuple[Target, ...]:
    """Every kind served: batch/v1 Job, v1 Pod and each registered integration, in kind order."""
    found = [JOB, POD]
    for kind in sorted(integrations.registry()):
        integration = integrations.registry()[kind]
        found.append(
            Target(
                api_version=integration.api_version,
                kind=integration.kind,
                plural=integration.plural,
                framework=integration.framework,
                integration=integration,
            )
        )
    return tuple(found)


def target(api_version: str, kind: str) -> Target | None:
    """The served kind of ``apiVersion``/``kind``, or None."""
    return next((t for t in targets() if (t.api_version, t.kind) == (api_version, kind)), None)


def enabled_kinds(frameworks: Collection[str] | None) -> frozenset[str] | None:
    """The kinds (``Job``, ``Pod``, ``JobSet``, ...) whose webhooks are Kueue's own under a Configuration's
    ``integrations.frameworks`` (as parsed: Kueue's default ``batch/job`` when it lists none); every other
    served kind gets the no-op webhook (:func:`noop`). A kind run through its pods (Deployment,
    StatefulSet, LeaderWorkerSet: no ``suspend_path``) enables ``pod`` too, since its pods are what
    Kueue gates (their controllers' ImplicitlyEnabledFrameworkNames, integrationmanager.go
    collectImplicitlyEnabledIntegrations). Names kueue-es has no integration for are skipped.
    None in, None out: no Configuration, every served kind enabled (kueue-es without ``--config``)."""
    if frameworks is None:
        return None
    listed = [t for t in targets() if t.framework in frameworks]
    if any(t.integration is not None and t.integration.suspend_path is None for t in listed):
        listed.append(POD)  # Kueue gates their pods: the pod webhook must be its own
    return frozenset(t.kind for t in listed)


def implicitly_enabled_kinds(frameworks: Collection[str] | None) -> frozenset[str]:
    """The kinds :func:`enabled_kinds` enables only because a listed framework runs through them, not
    because ``frameworks`` lists theirs: ``Pod`` with ``deployment``, ``statefulset`` or
    ``leaderworkerset.x-k8s.io/leaderworkerset`` but not ``pod`` (Kueue integrationmanager.go
    collectImplicitlyEnabledIntegrations). Kueue's pod reconciler then skips every pod no such parent
    marked (pod_controller.go Skip). None (no Configuration): none."""
    enabled = enabled_kinds(frameworks)
    if enabled is None or frameworks is None:
        return frozenset()
    return enabled - {t.kind for t in targets() if t.framework in frameworks}


def noop(served: Target, enabled: Collection[str] | None) -> bool:
    """Whether the webhooks of ``served`` are Kueue's no-op webhook: its kind is not among ``enabled``
    (:func:`enabled_kinds`; None: every kind enabled). The no-op webhook admits every request unchanged,
    with no defaulting, no validation and no queue-name handling (Kueue pkg/util/webhook/noop_webhook.go,
    set up by jobframework/setup.go ``WithNoopWebhook`` for each framework not enabled)."""
    return enabled is not None and served.kind not in enabled


def defaults_on_update(served: Target) -> bool:
    """Whether Kueue's mutating webhook of ``served`` is called on UPDATE too, and defaults the object then as
    at creation (:func:`default`: the ``default`` LocalQueue, the template marks of a managed one): the kinds
    run through their pods (Deployment, StatefulSet, LeaderWorkerSet; deployment_webhook.go,
    statefulset_webhook.go, leaderworkerset_webhook.go register ``verbs=create;update`` and their Default
    does not look at the operation). Every other kind's is called on CREATE only."""
    return served.integration is not None and served.integration.suspend_path is None


def target_of_path(path: str) -> tuple[str, Target] | None:
    """``("mutate" | "validate", target)`` of a webhook path (:meth:`Target.path`), or None."""
    for candidate in targets():
        for verb in ("mutate", "validate"):
            if candidate.path(verb) == path:
                return verb, candidate
    return None


# -- helpers on metadata -------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = _meta(obj).get("labels")
    return labels if isinstance(labels, dict) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = _meta(obj).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def _label_path(key: str) -> str:
    return f"metadata.labels[{key}]"


def _annotation_path(key: str) -> str:
    return f"metadata.annotations[{key}]"


def queue_name(obj: Mapping[str, Any]) -> str:
    """The ``kueue.x-k8s.io/queue-name`` label ("" when absent; jobframework QueueNameForObject)."""
    return str(_labels(obj).get(QUEUE_LABEL) or "")


def owner_managed(obj: Mapping[str, Any]) -> bool:
    """Whether the object's controller is a kind whose jobs Kueue manages as a whole (a Job, a JobSet, a
    PyTorchJob, ...; Kueue IsOwnerManagedByKueueForObject): such a child is part of its owner's workload and
    is neither given a queue nor suspended."""
    owner = workloads.controller_owner(_meta(obj))
    return owner is not None and pods.is_job_owner(owner.get("apiVersion"), owner.get("kind"))


OwnerKey = tuple[str, str, str]
"""An owner read for a walk: ``(apiVersion, kind, name)`` of the reference (the namespace is the object's)."""

#: What Kueue's webhooks answer when the controller chain is longer than Kueue walks, or loops
#: (jobframework/reconciler.go ErrManagedOwnersChainLimitReached, ErrCyclicOwnership: the error's text, denied).
CHAIN_LIMIT_MESSAGE: Final = "managed owner chain limit reached"
CYCLIC_MESSAGE: Final = "cyclic ownership"


def owner_key(reference: Mapping[str, Any]) -> OwnerKey:
    """The :data:`OwnerKey` of an owner reference."""
    return str(reference.get("apiVersion") or ""), str(reference.get("kind") or ""), str(reference.get("name") or "")


def walks_owners(served: Target, obj: Mapping[str, Any]) -> bool:
    """Whether Kueue's webhook of ``served`` walks ``obj``'s owners through the API server: a job or a Pod whose
    controller is a job (pod_webhook.go Default asks FindAncestorJobManagedByKueue too: a Pod whose Job is not
    managed, or whose reference's UID is not the Job's, is gated as a plain Pod), and that is not being deleted
    (WithDeletingObjectTolerance with SkipAncestorCheckForDeletedWorkloads, beta, on: the check is skipped for a
    terminating object, whose owners may be gone)."""
    if served == POD and serving.parent_framework(obj):
        return False  # suspendByParent: the pod webhook gates it before any walk
    return owner_managed(obj) and not _meta(obj).get("deletionTimestamp")


def _owner_lookup(
    read: Mapping[OwnerKey, workloads.Owner], wanted: list[Mapping[str, Any]] | None = None
) -> workloads.OwnerLookup:
    def lookup(reference: Mapping[str, Any]) -> workloads.Owner | None:
        if not pods.is_job_owner(reference.get("apiVersion"), reference.get("kind")):
            return None  # a kind Kueue does not walk through here: the walk ends (isKnownOwner)
        found = read.get(owner_key(reference))
        if found is None and wanted is not None:
            wanted.append(reference)
        return found

    return lookup


def owner_to_read(
    obj: Mapping[str, Any], read: Mapping[OwnerKey, workloads.Owner], *, manage_jobs_without_queue_name: bool
) -> Mapping[str, Any] | None:
    """The owner reference whose object the walk of ``obj``'s controller chain needs next and ``read`` lacks,
    or None when ``read`` holds all it needs. The webhook reads it (in ``obj``'s namespace) and asks again:
    Kueue reads the chain one owner at a time, as far as it walks. An owner that does not exist ends it:
    :func:`owner_not_found_message`."""
    wanted: list[Mapping[str, Any]] = []
    workloads.walk_owners(
        _job_ref(obj), _owner_lookup(read, wanted), manage_jobs_without_queue_name=manage_jobs_without_queue_name
    )
    return wanted[0] if wanted else None


def walk(
    obj: Mapping[str, Any], read: Mapping[OwnerKey, workloads.Owner], *, manage_jobs_without_queue_name: bool
) -> workloads.Ancestry:
    """What walking ``obj``'s controller chain through the owners ``read`` finds (:func:`workloads.walk_owners`,
    the watcher's rule): an owner of a kind that is not a job, or not read, ends it."""
    return workloads.walk_owners(
        _job_ref(obj), _owner_lookup(read), manage_jobs_without_queue_name=manage_jobs_without_queue_name
    )


def walk_refusal(ancestry: workloads.Ancestry) -> str | None:
    """The message Kueue's webhook denies a request with when walking the owners failed (a chain deeper than
    :data:`workloads.MANAGED_OWNERS_CHAIN_LIMIT` or one that loops), else None. controller-runtime denies a
    defaulter's plain error with 403 Forbidden and the error's text."""
    if ancestry.too_deep:
        return CHAIN_LIMIT_MESSAGE
    if ancestry.cyclic:
        return CYCLIC_MESSAGE
    return None


def owner_not_found_message(reference: Mapping[str, Any]) -> str:
    """The message of the 404 NotFound Kueue's webhook answers when an owner of the chain does not exist: the
    API server's for the GET (``jobsets.jobset.x-k8s.io "parent" not found``), which controller-runtime passes
    on as the denial's status (ErrWorkloadOwnerNotFound joined with it)."""
    api_version, kind, name = owner_key(reference)
    served = target(api_version, kind)
    plural = served.plural if served is not None else kind.lower() + "s"
    group = api_version.rpartition("/")[0]
    return f'{plural}.{group} "{name}" not found' if group else f'{plural} "{name}" not found'


def _job_ref(obj: Mapping[str, Any]) -> workloads.JobRef:
    meta = _meta(obj)
    return workloads.JobRef(kind="", api_version="", group="", meta=meta)


def ancestor_managed(obj: Mapping[str, Any], context: Context) -> bool:
    """Whether Kueue's webhook leaves ``obj`` alone as part of another job's workload (WorkloadShouldBeSuspended's
    "ancestor is already managed by Kueue"): with ``context.owners`` read, :func:`walk` finds a managed ancestor
    (or fails, and the webhook refused the request: :func:`walk_refusal`); without them, the controller is of a
    job kind (:func:`owner_managed`)."""
    if context.owners is None:
        return owner_managed(obj)
    return walk(obj, context.owners, manage_jobs_without_queue_name=context.manage_jobs_without_queue_name).child


def suspended(target_kind: Target, obj: Mapping[str, Any]) -> bool:
    """Whether the object is suspended as Kueue's GenericJob.IsSuspended sees it: a Job's ``spec.suspend``,
    an integration's suspend field, a Pod still holding the admission gate; False for kinds run through
    their pods (a Deployment's)."""
    if target_kind == JOB:
        spec = obj.get("spec")
        return isinstance(spec, dict) and spec.get("suspend") is True
    if target_kind == POD:
        return pods.is_gated(obj)
    integration = target_kind.integration
    return integration is not None and integrations.suspended(integration, obj)


# -- Default (mutating) --------------------------------------------------------------------------


def default(api_version: str, kind: str, obj: Mapping[str, Any], *, context: Context | None = None) -> dict[str, Any]:
    """The object as Kueue's mutating webhook leaves it at creation, and on update for the kinds of
    :func:`defaults_on_update` (a new dict; ``obj`` is not changed).

    For a kind not served (:func:`target`) the object comes back unchanged. A Pod with a managed ancestor
    (:func:`ancestor_managed`: its owners walked when ``context.owners`` holds them, else its controller's kind)
    is left alone, after the suspendByParent and namespace checks, as pod_webhook.go Default orders them.
    Otherwise:

    - without the queue-name label, in a namespace with a ``default`` LocalQueue that
      ``managedJobsNamespaceSelector`` selects (``context.namespace_managed``), the label is set to
      ``default`` (:func:`default_local_queue_applies`; a plain Pod too; not when the controller is a job,
      by its kind alone);
    - unless the object has a managed ancestor (:func:`ancestor_managed`: its owners walked as Kueue's
      WorkloadShouldBeSuspended does) or is being deleted (skipped then, WithDeletingObjectTolerance),
      a job with the queue-name label, or any job with ``manageJobsWithoutQueueName`` in a selected
      namespace, is suspended (utils.go WorkloadShouldBeSuspended: the selector is not asked about a
      queue-labelled job, which is suspended wherever it is): a Job's ``spec.suspend``, an
      integration's ``suspend_path``, then the integration's ``on_create`` changes (for kinds run
      through their pods: their templates' labels);
    - such a Pod gets the ``kueue.x-k8s.io/managed: "true"`` label, the ``kueue.x-k8s.io/managed``
      finalizer, the ``kueue.x-k8s.io/admission`` scheduling gate, with TopologyAwareScheduling the
      ``kueue.x-k8s.io/topology`` gate, and the ``kueue.x-k8s.io/role-hash`` annotation (pod_webhook.go
      Default; :func:`gate_pod`); a pod whose template a managed Deployment, StatefulSet or
      LeaderWorkerSet marked (``kueue.x-k8s.io/pod-suspending-parent``) gets the gates and the role hash
      whatever its labels and namespace, but neither the label nor the finalizer (suspendByParent); any
      other Pod in a namespace the selector does not select is left as it is, queue label or not (the pod
      webhook's namespace filter comes first).

    - a Job or JobSet with a queue whose ClusterQueue has a MultiKueue check (``context.multikueue_queue``)
      and no ``spec.managedBy`` gets ``kueue.x-k8s.io/multikueue`` (ApplyDefaultForManagedBy).

    - after the queue label, an object of the kinds :func:`default_priority_class_applies` names gets the
      ``kueue.x-k8s.io/priority-class: default`` label when a WorkloadPriorityClass ``default`` exists
      (``context.default_priority_class``), queued or not, suspended or not (ApplyDefaultWorkloadPriorityClass).
    """
    out = copy.deepcopy(dict(obj))
    served = target(api_version, kind)
    context = context or Context()
    if served is None:
        return out
    if context.elastic_jobs and _is_ray(served) and slices.is_elastic(_annotations(out)):
        # raycluster_webhook.go / rayservice_webhook.go Default: gated whatever the queue or the owner (a
        # RayJob's RayCluster carries the RayJob's annotations)
        ray.gate_templates(served.kind, out)
    if served == POD and serving.parent_framework(out):
        # suspendByParent: a managed Deployment, StatefulSet or LeaderWorkerSet marked its template; the
        # pod is gated whatever its labels (its serving group's labels come from the parent: serving.py)
        gate_pod(out, topology=context.topology_aware_scheduling, managed=False)
        return out
    if served == POD and not context.namespace_managed:
        return out  # pod_webhook.go Default: the namespace filter, before the queue is even looked at
    if served == POD and ancestor_managed(out, context):
        return out  # pod_webhook.go Default: "Do not suspend a Pod whose owner is already managed by Kueue"
    apply_default_local_queue(served, out, context=context)
    apply_default_priority_class(served, out, context=context)
    if served != POD and (_meta(out).get("deletionTimestamp") or ancestor_managed(out, context)):
        return out
    if not queue_name(out) and not (context.manage_jobs_without_queue_name and context.namespace_managed):
        return out
    if context.multikueue_queue and (served.api_version, served.kind) in MULTIKUEUE_KINDS:
        spec = out.setdefault("spec", {})
        if not spec.get("managedBy"):  # ApplyDefaultForManagedBy: only when the user set none
            spec["managedBy"] = MULTIKUEUE_MANAGED_BY
    if served == JOB:
        out.setdefault("spec", {})["suspend"] = True
        if context.elastic_jobs and slices.is_elastic(_annotations(out)):
            _gate_template(out)
    elif served == POD:
        gate_pod(out, topology=context.topology_aware_scheduling)
    elif served.integration is not None:
        if served.integration.suspend_path is not None:
            integrations.set_at(out, served.integration.suspend_path, True)
        if served.integration.on_create is not None:
            served.integration.on_create(out)
    return out


def default_local_queue_applies(served: Target, obj: Mapping[str, Any], *, context: Context) -> bool:
    """Whether Kueue's mutating webhook of ``served`` gives ``obj`` the ``kueue.x-k8s.io/queue-name: default``
    label (LocalQueueDefaulting, on since Kueue v0.19; defaults.go ApplyDefaultLocalQueue, and the pod
    webhook's own "Local queue defaulting" in pod_webhook.go Default): for every served kind, a plain Pod
    included, when the object names no queue, its namespace has a LocalQueue ``default``
    (``context.default_local_queue``) and ``managedJobsNamespaceSelector`` selects the namespace
    (``context.namespace_managed``); never for an object whose controller is a job (:func:`owner_managed`: its
    kind alone, Kueue's IsOwnerManagedByKueueForObject, managed or not), nor a Pod with a managed ancestor
    (:func:`ancestor_managed`), a
    pod whose Deployment, StatefulSet or LeaderWorkerSet marked it (suspendByParent: the pod webhook skips
    everything else), nor a StatefulSet another framework manages (a LeaderWorkerSet's: its webhook returns
    first, statefulset_webhook.go Default)."""
    if queue_name(obj) or not context.default_local_queue or not context.namespace_managed:
        return False
    if owner_managed(obj) if served != POD else ancestor_managed(obj, context):
        return False  # the pod webhook defaults the queue after its walk of the owners (pod_webhook.go Default)
    if served == POD and serving.parent_framework(obj):
        return False
    return not (served.kind == "StatefulSet" and serving.statefulset_managed_by_other(obj))


def apply_default_local_queue(served: Target, obj: dict[str, Any], *, context: Context) -> bool:
    """Set ``obj``'s queue-name label to ``default`` (in place) when :func:`default_local_queue_applies`;
    True when set. :func:`default` does it, and so does the emulated API server's create hook, so both
    label the same objects."""
    if not default_local_queue_applies(served, obj, context=context):
        return False
    metadata = obj.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), QUEUE_LABEL: workloads.DEFAULT_LOCAL_QUEUE}
    return True


def default_priority_class_applies(served: Target, obj: Mapping[str, Any]) -> bool:
    """Whether Kueue's mutating webhook of ``served`` would give ``obj`` the ``default`` WorkloadPriorityClass
    label if that class exists (the one thing left to look up): ``obj`` has no
    ``kueue.x-k8s.io/priority-class`` label and its controller is not a job (jobframework/defaults.go
    ApplyDefaultWorkloadPriorityClass, IsOwnerManagedByKueueForObject: its kind alone); not a pod whose
    Deployment, StatefulSet or LeaderWorkerSet marked it, nor a StatefulSet another framework manages (their
    webhooks return first). The namespace selector and the queue do not matter here, as in Kueue; a Pod's own
    webhook asks only for pods of a selected namespace (:func:`default` returns before)."""
    if _labels(obj).get(PRIORITY_CLASS_LABEL) or owner_managed(obj):
        return False
    if served == POD and serving.parent_framework(obj):
        return False
    return not (served.kind == "StatefulSet" and serving.statefulset_managed_by_other(obj))


def apply_default_priority_class(served: Target, obj: dict[str, Any], *, context: Context) -> bool:
    """Set ``obj``'s ``kueue.x-k8s.io/priority-class`` label to ``default`` (in place) when
    ``context.default_priority_class`` and :func:`default_priority_class_applies`; True when set. The Workload
    of the job then names the class as Kueue's does (:func:`workloads.priority` reads the label)."""
    if not context.default_priority_class or not default_priority_class_applies(served, obj):
        return False
    metadata = obj.setdefault("metadata", {})
    labels = {**(metadata.get("labels") or {}), PRIORITY_CLASS_LABEL: workloads.DEFAULT_WORKLOAD_PRIORITY_CLASS}
    metadata["labels"] = labels
    return True


def namespace_decides(
    served: Target,
    obj: Mapping[str, Any],
    *,
    manage_jobs_without_queue_name: bool,
    default_local_queue: bool,
    owners: Mapping[OwnerKey, workloads.Owner] | None = None,
) -> bool:
    """Whether :func:`default` of ``obj`` (a CREATE of kind ``served``, or an UPDATE of a kind
    :func:`defaults_on_update`) can depend on
    ``Context.namespace_managed``, so a webhook reads the Namespace only then, as Kueue's does (its pod
    webhook reads it for every pod it may gate; ApplyDefaultLocalQueue only when the label is about to be
    set; WorkloadShouldBeSuspended only for a job without the queue-name label under
    ``manageJobsWithoutQueueName``): a Pod not marked by its parent (suspendByParent) nor with a managed ancestor,
    or any other kind without the queue-name label when the namespace has a ``default`` LocalQueue and its
    controller is not a job (:func:`owner_managed`), or that option is on and it has no managed ancestor
    among ``owners`` (:func:`ancestor_managed`; None: not read, the controller's kind decides)."""
    context = Context(manage_jobs_without_queue_name=manage_jobs_without_queue_name, owners=owners)
    if served == POD:
        return not serving.parent_framework(obj) and not ancestor_managed(obj, context)
    if queue_name(obj):
        return False
    return (default_local_queue and not owner_managed(obj)) or (
        manage_jobs_without_queue_name and not ancestor_managed(obj, context)
    )


def namespace_decides_update(
    served: Target,
    new: Mapping[str, Any],
    *,
    manage_jobs_without_queue_name: bool,
    owners: Mapping[OwnerKey, workloads.Owner] | None = None,
) -> bool:
    """Whether :func:`validate_update` of ``new`` can depend on ``Context.namespace_managed``, so a validating
    webhook reads the Namespace only then: a StatefulSet or LeaderWorkerSet without the queue-name label under
    ``manageJobsWithoutQueueName``, whose pod template and size rules hold only while Kueue manages it
    (:func:`_managed_by_kueue`; their webhooks ask WorkloadShouldBeSuspended, which reads the Namespace then),
    without a managed ancestor among ``owners`` (:func:`ancestor_managed`)."""
    return (
        served.kind in ("StatefulSet", "LeaderWorkerSet")
        and defaults_on_update(served)
        and manage_jobs_without_queue_name
        and not queue_name(new)
        and not ancestor_managed(
            new, Context(manage_jobs_without_queue_name=manage_jobs_without_queue_name, owners=owners)
        )
    )


def _gate_template(job: dict[str, Any]) -> None:
    """An elastic Job's pods wait for a slice holding quota for them: the ``kueue.x-k8s.io/elastic-job``
    scheduling gate on its pod template (job_webhook.go applyWorkloadSliceSchedulingGate)."""
    spec = job.setdefault("spec", {})
    template = spec.setdefault("template", {}) if isinstance(spec, dict) else None
    if not isinstance(template, dict):
        return
    pod_spec = template.setdefault("spec", {})
    if not isinstance(pod_spec, dict):
        return
    gates = pod_spec.setdefault("schedulingGates", [])
    if isinstance(gates, list) and not any(
        isinstance(g, dict) and g.get("name") == slices.ELASTIC_JOB_GATE for g in gates
    ):
        gates.append({"name": slices.ELASTIC_JOB_GATE})


def gate_pod(pod: dict[str, Any], *, topology: bool, managed: bool = True) -> None:
    """Suspend a Pod as Kueue's pod webhook does (in place; pod_webhook.go Default, its ``suspend`` branch).

    ``managed`` (False for a pod whose Deployment, StatefulSet or LeaderWorkerSet marked it: suspendByParent):
    the ``kueue.x-k8s.io/managed: "true"`` label and the ``kueue.x-k8s.io/managed`` finalizer
    (:data:`pods.POD_FINALIZER`), which keeps the pod until Kueue's pod reconciler lets it go
    (:func:`pods.finalizer_released`). Always: the ``kueue.x-k8s.io/admission`` scheduling gate; with
    ``topology`` (TopologyAwareScheduling) the ``kueue.x-k8s.io/topology`` gate and, for a pod annotated
    ``kueue.x-k8s.io/pod-group-pod-index-label: <label>``, the ``kueue.x-k8s.io/pod-group-pod-index`` label
    copied from that label (empty when the pod lacks it, as Kueue's map lookup gives); last, the
    ``kueue.x-k8s.io/role-hash`` annotation: kept when the pod has one, else the hash of its spec's shape
    (:func:`pods.spec_role_hash`, Kueue getRoleHash). A pod whose shape holds a bad quantity gets no hash:
    the API server refuses such a pod before any webhook sees it."""
    metadata = pod.setdefault("metadata", {})
    if managed:
        metadata["labels"] = {**(metadata.get("labels") or {}), MANAGED_LABEL: "true"}
        finalizers = list(metadata.get("finalizers") or [])
        if pods.POD_FINALIZER not in finalizers:  # controllerutil.AddFinalizer: appended once
            metadata["finalizers"] = [*finalizers, pods.POD_FINALIZER]
    gates = pod.setdefault("spec", {}).setdefault("schedulingGates", [])
    for gate in (ADMISSION_GATE, TOPOLOGY_GATE) if topology else (ADMISSION_GATE,):
        if not any(isinstance(g, dict) and g.get("name") == gate for g in gates):
            gates.append({"name": gate})
    annotations = dict(metadata.get("annotations") or {})
    if topology and (index_label := annotations.get(serving.POD_INDEX_LABEL_ANNOTATION)) is not None:
        labels = dict(metadata.get("labels") or {})
        labels[POD_GROUP_POD_INDEX_LABEL] = str(labels.get(str(index_label)) or "")
        metadata["labels"] = labels
    if pods.ROLE_HASH_ANNOTATION not in annotations:
        role = pods.spec_role_hash(pod.get("spec"))
        if role is not None:
            metadata["annotations"] = {**annotations, pods.ROLE_HASH_ANNOTATION: role}


# -- ValidateCreate ------------------------------------------------------------------------------


def validate_create(
    api_version: str, kind: str, obj: Mapping[str, Any], *, context: Context | None = None
) -> list[FieldError]:
    """What Kueue's validating webhook refuses when ``obj`` is created (empty: allowed).

    Every kind (jobframework ValidateJobOnCreate): the queue-name label and the prebuilt-workload
    name are DNS-1123 subdomains, a prebuilt Workload only on the kinds Kueue supports it for; the
    ``max-exec-time-seconds`` label is a positive integer; each pod
    template's TAS annotations are valid (tas_validation.go ValidateTASPodSetRequest, through
    :func:`kueue_es.jobframework.workloads.topology_request`). A Job: the partial-admission annotation
    ``job-min-parallelism`` is an integer between 1 and its pods - 1, ``job-completions-equal-parallelism``
    a boolean, only on Indexed Jobs whose completions equal parallelism (job_webhook.go). A Pod: the
    managed label is ``"true"``, a pod group has both its name and total count, and names no prebuilt
    Workload but its group (pod_webhook.go). A Deployment, StatefulSet or LeaderWorkerSet has its kind's
    own, narrower rules (:func:`_through_pods_create`).
    """
    context = context or Context()
    served = target(api_version, kind)
    if served is None:
        return []
    if defaults_on_update(served):
        return _through_pods_create(served, obj, context)
    errors: list[FieldError] = []
    if _is_ray(served) and _ray_managed(obj, context):
        # the kind's own rules come first in Kueue's list, and a RayJob's cluster choice ends it
        kind_errors, done = _ray_create(served, obj, context)
        if done:
            return kind_errors
        errors += kind_errors
    errors += _common_create(obj) + _prebuilt_kind(served, obj)
    if context.elastic_jobs:
        errors += _elastic_kind(served, obj)
    if served == JOB:
        errors += _job_create(obj)
        if context.elastic_jobs:
            errors += _elastic_partial_admission(obj)
    elif served == POD:
        errors += _pod_create(obj)
    if context.topology_aware_scheduling:
        errors += _topology(served, obj) or _elastic_topology(served, obj, context)
    if served == POD:
        errors += _pod_prebuilt(obj)
    integration = served.integration
    if (
        integration is not None
        and integration.refused_at_create
        and not _is_ray(served)
        and queue_name(obj)
        and not ancestor_managed(obj, context)
    ):
        errors += _pod_set_rules(integration, obj)
    return _in_kind_order(served, errors)


def _in_kind_order(served: Target, errors: list[FieldError]) -> list[FieldError]:
    """``errors`` in the order the kind's webhook lists them: an MPIJob's sorted by field path, stably, on create
    and on update (mpijob_webhook.go ValidateCreate and ValidateUpdate; Kueue #14483 made the update sort the list
    it returns); every other kind's in the order its checks found them."""
    return sorted(errors, key=lambda e: e.field) if _sorts_by_field(served) else errors


def _sorts_by_field(served: Target) -> bool:
    """Whether the kind's webhook sorts its errors by field path (mpijob_webhook.go, alone)."""
    return (served.api_version, served.kind) == ("kubeflow.org/v2beta1", "MPIJob")


def _ray_managed(obj: Mapping[str, Any], context: Context) -> bool:
    """Whether Kueue's RayJob, RayCluster or RayService webhook applies its kind's rules to ``obj``: queue-labelled
    or under ``manageJobsWithoutQueueName`` (validateCreate: the namespace selector is not asked). A RayCluster
    a managed RayJob or RayService owns is left out here: it is made from a spec its owner's webhook checked."""
    return (bool(queue_name(obj)) or context.manage_jobs_without_queue_name) and not ancestor_managed(obj, context)


def _ray_create(served: Target, obj: Mapping[str, Any], context: Context) -> tuple[list[FieldError], bool]:
    """The kind's own rules of Kueue's Ray webhooks for a managed ``obj``, and whether Kueue stops there.

    RayJob (rayjob_webhook.go validateCreate): a ``clusterSelector`` with a ``rayClusterSpec`` is Invalid, and
    one without it is not Kueue's job at all -- both end the validation; no ``rayClusterSpec`` is Required and
    ends it too; ``shutdownAfterJobFinishes`` must be true. Then for a RayJob's or RayService's
    ``spec.rayClusterSpec`` (raycluster/common.go ValidateCreate; a RayService's is ``rayClusterConfig`` in
    YAML, Kueue names it by its Go field) and a RayCluster's ``spec`` (raycluster_webhook.go validateCreate):
    the autoscaling and elastic rules (:func:`_ray_autoscaling`), at most 18 pod sets with the head
    (``Too many``), and no worker group named ``head``."""
    spec = _mapping(obj.get("spec"))
    errors: list[FieldError] = []
    if served.kind == "RayJob":
        selector = spec.get("clusterSelector")
        if selector and spec.get("rayClusterSpec") is not None:
            detail = "a kueue managed job should not use an existing cluster"
            return [
                FieldError(type="Invalid", field="spec.clusterSelector", value=_go_map(selector), detail=detail)
            ], True
        if selector:
            return [], True  # runs on an existing cluster: not Kueue's (rayjob_controller.go Skip)
        if spec.get("rayClusterSpec") is None:
            detail = "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector"
            return [FieldError(type="Required", field="spec.rayClusterSpec", detail=detail)], True
        shutdown = spec.get("shutdownAfterJobFinishes", False)
        if shutdown is not True:
            detail = "a kueue managed job should delete the cluster after finishing"
            errors.append(
                FieldError(type="Invalid", field="spec.shutdownAfterJobFinishes", value=shutdown, detail=detail)
            )
    cluster = (
        spec
        if served.kind == "RayCluster"
        else _mapping(spec.get("rayClusterSpec" if served.kind == "RayJob" else "rayClusterConfig"))
    )
    where = "spec" if served.kind == "RayCluster" else "spec.rayClusterSpec"
    errors += _ray_autoscaling(served, obj, context)
    groups = cluster.get("workerGroupSpecs")
    groups = groups if isinstance(groups, list) else []
    if len(groups) + 1 > workloads.MAX_POD_SETS:
        errors.append(
            FieldError(
                type="TooMany",
                field=f"{where}.workerGroupSpecs",
                value=len(groups) + 1,
                detail=f"must have at most {workloads.MAX_POD_SETS} items",
            )
        )
    for index, group in enumerate(groups):
        if _mapping(group).get("groupName") == ray.HEAD:
            errors.append(
                FieldError(
                    type="Forbidden",
                    field=f"{where}.workerGroupSpecs[{index}].groupName",
                    detail=f'"{ray.HEAD}" is reserved for the head group',
                )
            )
    return errors, False


def _go_map(value: Any) -> GoLiteral:
    """A ``map[string]string`` as Go prints it with ``%#v`` (keys sorted): ``map[string]string{"a":"b"}``."""
    items = ", ".join(f"{json.dumps(str(k))}:{json.dumps(str(v))}" for k, v in sorted(_mapping(value).items()))
    return GoLiteral(f"map[string]string{{{items}}}")


def _through_pods_create(served: Target, obj: Mapping[str, Any], context: Context) -> list[FieldError]:
    """ValidateCreate of Kueue's Deployment, StatefulSet and LeaderWorkerSet webhooks, which call none of
    ValidateJobOnCreate's other rules (no prebuilt-workload or max-exec-time check): the queue name is a
    DNS-1123 subdomain and only the elastic kinds may be elastic (deployment_webhook.go,
    statefulset_webhook.go); a LeaderWorkerSet's ``spec.replicas`` is between 0 and 1,000,000 and, with
    TopologyAwareScheduling, its templates' TAS annotations are valid (leaderworkerset_webhook.go
    validateCreate). A StatefulSet a LeaderWorkerSet manages is left to that one's webhook."""
    if served.kind == "StatefulSet" and serving.statefulset_managed_by_other(obj):
        return []
    labels = _labels(obj)
    errors = _subdomain(labels[QUEUE_LABEL], _label_path(QUEUE_LABEL)) if QUEUE_LABEL in labels else []
    if context.elastic_jobs:
        errors += _elastic_kind(served, obj)
    if served.kind == "LeaderWorkerSet":
        errors += _lws_replicas(obj)
        if context.topology_aware_scheduling:
            errors += _topology(served, obj)
    return errors


#: leaderworkerset_controller.go maxLeaderWorkerSetReplicas: a sanity bound on the Workloads one LWS makes.
_LWS_MAX_REPLICAS: Final = 1_000_000


def _lws_replicas(lws: Mapping[str, Any]) -> list[FieldError]:
    """leaderworkerset_webhook.go validateReplicasField: ``spec.replicas`` (default 1) in [0, 1,000,000]."""
    spec = lws.get("spec")
    raw = spec.get("replicas") if isinstance(spec, dict) else None
    replicas = 1 if raw is None else workloads.parse_int(raw)
    if replicas is None:
        return []  # not an integer: the CRD's schema refuses it first
    if replicas < 0:
        detail = f"invalid LeaderWorkerSet replicas: must be >= 0, got {replicas}"
    elif replicas > _LWS_MAX_REPLICAS:
        detail = f"invalid LeaderWorkerSet replicas: must be <= {_LWS_MAX_REPLICAS}, got {replicas}"
    else:
        return []
    return [FieldError(type="Invalid", field="spec.replicas", value=replicas, detail=detail)]


def target_is_ray(served: Target) -> bool:
    """Whether ``served`` is a Ray kind (RayCluster, RayJob, RayService), whose webhooks have rules of their own."""
    return _is_ray(served)


def _is_ray(served: Target) -> bool:
    return served.api_version == ray.API_VERSION and served.kind in ("RayCluster", "RayJob", "RayService")


def _ray_autoscaling(served: Target, obj: Mapping[str, Any], context: Context) -> list[FieldError]:
    """raycluster_webhook.go validateCreate/validateElasticJob and raycluster/common.go ValidateCreate: a Ray
    job's in-tree autoscaling only as an elastic job (:func:`kueue_es.jobframework.integrations.ray.
    autoscaling_errors`)."""
    elastic = context.elastic_jobs and slices.is_elastic(_annotations(obj))
    out = []
    for e in ray.autoscaling_errors(served.kind, obj, elastic=elastic):
        value = e.value
        if e.field.endswith("schedulingGates"):
            value = _go_gates(value)
        out.append(
            FieldError(type=e.type, field=e.field, detail=e.detail, value=value if e.type == "Invalid" else OMIT)
        )
    return out


def _go_gates(gates: Any) -> GoLiteral:
    """A pod template's ``schedulingGates`` as Go prints a []corev1.PodSchedulingGate with ``%#v``."""
    if not isinstance(gates, list):
        return GoLiteral("[]v1.PodSchedulingGate(nil)")
    items = ", ".join(
        f"v1.PodSchedulingGate{{Name:{json.dumps(str(g.get('name', '')))}}}" for g in gates if isinstance(g, dict)
    )
    return GoLiteral(f"[]v1.PodSchedulingGate{{{items}}}")


#: The kinds that may be elastic (validation.go supportedElasticJobGVKs), as Go prints their GVK.
_ELASTIC_KINDS: Final = frozenset(
    {
        ("batch/v1", "Job"),
        ("ray.io/v1", "RayCluster"),
        ("ray.io/v1", "RayJob"),
        ("ray.io/v1", "RayService"),
    }
)


#: The kinds a job may name a prebuilt Workload on (validation.go supportedPrebuiltWlJobGVKs).
_PREBUILT_KINDS: Final = frozenset(
    {
        ("batch/v1", "Job"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("kubeflow.org/v1", "TFJob"),
        ("kubeflow.org/v1", "PaddleJob"),
        ("kubeflow.org/v1", "PyTorchJob"),
        ("kubeflow.org/v1", "XGBoostJob"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ("kubeflow.org/v2beta1", "MPIJob"),
        ("ray.io/v1", "RayJob"),
        ("v1", "Pod"),
        ("ray.io/v1", "RayCluster"),
        ("ray.io/v1", "RayService"),
        ("workload.codeflare.dev/v1beta2", "AppWrapper"),
    }
)


def _prebuilt_kind(served: Target, obj: Mapping[str, Any]) -> list[FieldError]:
    """validation.go validateCreateForPrebuiltWorkload: only the kinds Kueue runs on a prebuilt Workload may name one
    (a JAXJob, a SparkApplication may not)."""
    path, name = _prebuilt(obj)
    if not name or (served.api_version, served.kind) in _PREBUILT_KINDS:
        return []
    return [FieldError(type="Forbidden", field=path, detail=f'Is not supported for "{_gvk(served)}"')]


def _gvk(served: Target) -> str:
    """A kind's GroupVersionKind as Go prints it (``batch/v1, Kind=Job``, ``/v1, Kind=Pod``)."""
    group, _, version = served.api_version.rpartition("/")
    return f"{group}/{version}, Kind={served.kind}"


def _elastic_kind(served: Target, obj: Mapping[str, Any]) -> list[FieldError]:
    """validation.go ValidateElasticJobAnnotation: only a Job and the Ray kinds may be elastic."""
    if not slices.is_elastic(_annotations(obj)) or (served.api_version, served.kind) in _ELASTIC_KINDS:
        return []
    gvk = _gvk(served)
    return [
        FieldError(
            type="Forbidden",
            field=_annotation_path(slices.ELASTIC_JOB_ANNOTATION),
            detail=f'elastic job is not supported for "{gvk}"',
        )
    ]


def _elastic_partial_admission(job: Mapping[str, Any]) -> list[FieldError]:
    """job_webhook.go validatePartialAdmissionCreate: an elastic Job may not ask for partial admission."""
    annotations = _annotations(job)
    if not slices.is_elastic(annotations) or jobs.MIN_PARALLELISM_ANNOTATION not in annotations:
        return []
    return [
        FieldError(
            type="Invalid",
            field=_annotation_path(jobs.MIN_PARALLELISM_ANNOTATION),
            value=str(annotations[jobs.MIN_PARALLELISM_ANNOTATION]),
            detail="partial admission and elastic job cannot be used together",
        )
    ]


def _elastic_topology(served: Target, job: Mapping[str, Any], context: Context) -> list[FieldError]:
    """job_webhook.go validateTopologyRequest (with TopologyAwareScheduling, after the TAS annotation
    checks passed): an elastic Job (gate ElasticJobsViaWorkloadSlices and the elastic-job annotation)
    supports only unconstrained topology, so a required or preferred topology annotation on its pod
    template is Forbidden; the admitter refuses such a workload too (scheduling/tas, Kueue's
    flavorassigner errors) when it did not pass through the webhook."""
    if served != JOB or not context.elastic_jobs or not slices.is_elastic(_annotations(job)):
        return []
    spec = job.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    metadata = template.get("metadata") if isinstance(template, dict) else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict):
        return []
    for annotation, mode in (
        (tas_requests.REQUIRED_ANNOTATION, "required"),
        (tas_requests.PREFERRED_ANNOTATION, "preferred"),
    ):
        if annotation in annotations:
            return [
                FieldError(
                    type="Forbidden",
                    field=f"spec.template.metadata.annotations[{annotation}]",
                    detail=f"{mode} topology is not supported with elastic jobs",
                )
            ]
    return []


def _pod_set_rules(integration: integrations.Integration, obj: Mapping[str, Any]) -> list[FieldError]:
    """The kind's own webhook rules, which its pod sets enforce (``Integration.refused_at_create``): the first
    one broken as an Invalid FieldError naming the field (Kueue's rayjob_webhook.go, raycluster_webhook.go,
    rayservice_webhook.go, sparkapplication_webhook.go ValidateOnCreate)."""
    if not isinstance(obj.get("spec"), dict):
        return []
    try:
        integrations.pod_set_sources(integration, obj)
    except manifests.ManifestError as err:
        return [FieldError(type="Forbidden", field=err.field, detail=err.problem)]
    return []


def _common_create(obj: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    labels = _labels(obj)
    for key in (QUEUE_LABEL, PREBUILT_WORKLOAD_KEY):
        if key in labels:
            errors += _subdomain(labels[key], _label_path(key))
    if PREBUILT_WORKLOAD_KEY in _annotations(obj):
        errors += _subdomain(_annotations(obj)[PREBUILT_WORKLOAD_KEY], _annotation_path(PREBUILT_WORKLOAD_KEY))
    if MAX_EXEC_TIME_LABEL in labels:
        raw = str(labels[MAX_EXEC_TIME_LABEL])
        where = _label_path(MAX_EXEC_TIME_LABEL)
        try:
            value = goint.atoi(raw)
        except goint.GoNumError as err:  # validation.go validateCreateForMaxExecTime: strconv.Atoi's words
            errors.append(FieldError(type="Invalid", field=where, value=raw, detail=str(err)))
        else:
            if value <= 0:
                errors.append(FieldError(type="Invalid", field=where, value=value, detail="should be greater than 0"))
    return errors


def _subdomain(value: Any, field: str) -> list[FieldError]:
    text = str(value)
    problems = []
    if len(text) > 253:
        problems.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.fullmatch(text):
        problems.append(_DNS1123_SUBDOMAIN_MESSAGE)
    return [FieldError(type="Invalid", field=field, value=text, detail=",".join(problems))] if problems else []


def _go_int32(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 32) (:func:`goint.parse_int`), None where it gives an error."""
    try:
        return goint.parse_int(text, bits=32)
    except goint.GoNumError:
        return None


def _job_pods_count(job: Mapping[str, Any]) -> int:
    """min(parallelism, completions), parallelism 1 when absent (job_controller.go podsCount)."""
    spec = job.get("spec") if isinstance(job.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    parallelism = workloads.parse_int(spec.get("parallelism"))
    count = 1 if parallelism is None else parallelism
    completions = workloads.parse_int(spec.get("completions"))
    return min(count, completions) if completions is not None else count


def _job_create(job: Mapping[str, Any]) -> list[FieldError]:
    return _job_partial_admission(job) + _job_sync_completions(job)


def _job_partial_admission(job: Mapping[str, Any]) -> list[FieldError]:
    annotations = _annotations(job)
    if jobs.MIN_PARALLELISM_ANNOTATION not in annotations:
        return []
    raw = str(annotations[jobs.MIN_PARALLELISM_ANNOTATION])
    where = _annotation_path(jobs.MIN_PARALLELISM_ANNOTATION)
    try:
        value = goint.atoi(raw)
    except goint.GoNumError as err:  # job_webhook.go validatePartialAdmissionCreate: strconv.Atoi's words
        return [FieldError(type="Invalid", field=where, value=raw, detail=str(err))]
    count = _job_pods_count(job)
    if goint.int32(value) >= count or value <= 0:  # Kueue compares int32(v), which wraps
        return [FieldError(type="Invalid", field=where, value=value, detail=f"should be between 0 and {count - 1}")]
    return []


def _job_sync_completions(job: Mapping[str, Any]) -> list[FieldError]:
    annotations = _annotations(job)
    key = jobs.COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION
    if key not in annotations:
        return []
    raw = str(annotations[key])
    where = _annotation_path(key)
    enabled = _GO_BOOL.get(raw)
    errors: list[FieldError] = []
    if enabled is None:
        errors.append(
            FieldError(
                type="Invalid", field=where, value=raw, detail=f'strconv.ParseBool: parsing "{raw}": invalid syntax'
            )
        )
    if enabled:
        spec = job.get("spec") if isinstance(job.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        if spec.get("completionMode") in (None, "NonIndexed"):
            errors.append(
                FieldError(type="Invalid", field=where, value=raw, detail="should not be enabled for NonIndexed jobs")
            )
        parallelism = workloads.parse_int(spec.get("parallelism"))
        completions = workloads.parse_int(spec.get("completions"))
        if (1 if parallelism is None else parallelism) != (1 if completions is None else completions):
            errors.append(
                FieldError(
                    type="Invalid",
                    field="spec.completions",
                    value=completions,
                    detail=f"should be equal to parallelism when {key} annotation is true",
                )
            )
    return errors


def _pod_create(pod: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    labels, annotations = _labels(pod), _annotations(pod)
    if MANAGED_LABEL in labels and labels[MANAGED_LABEL] != "true":
        errors.append(
            FieldError(
                type="Forbidden", field=_label_path(MANAGED_LABEL), detail="managed label value can only be 'true'"
            )
        )
    group = annotations.get(pods.GROUP_NAME_KEY) or labels.get(pods.GROUP_NAME_KEY)
    group_field = (
        _annotation_path(pods.GROUP_NAME_KEY)
        if annotations.get(pods.GROUP_NAME_KEY)
        else _label_path(pods.GROUP_NAME_KEY)
    )
    total_field = _annotation_path(pods.GROUP_TOTAL_COUNT_ANNOTATION)
    has_total = pods.GROUP_TOTAL_COUNT_ANNOTATION in annotations
    detail = (
        f"both the '{pods.GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the '{pods.GROUP_NAME_KEY}' "
        + ("annotation" if annotations.get(pods.GROUP_NAME_KEY) else "label")
        + " should be set"
    )
    if not group:
        if has_total:
            return [*errors, FieldError(type="Required", field=group_field, detail=detail)]
        return errors
    errors += _subdomain(group, group_field)
    if not has_total:
        return [*errors, FieldError(type="Required", field=total_field, detail=detail)]
    raw = str(annotations[pods.GROUP_TOTAL_COUNT_ANNOTATION])
    try:
        pods.parse_group_total_count(raw)
    except ValueError as err:  # pod_webhook.go validatePodGroupMetadata: groupTotalCount's error, as it words it
        errors.append(FieldError(type="Invalid", field=total_field, value=raw, detail=str(err)))
    return errors


def _pod_prebuilt(pod: Mapping[str, Any]) -> list[FieldError]:
    """pod_webhook.go validatePrebuiltWorkloadName: a pod of a group names its group as its prebuilt Workload."""
    try:
        pods.check_prebuilt_group(pod)
    except manifests.ManifestError as err:
        path, prebuilt = _prebuilt(pod)
        return [FieldError(type="Invalid", field=path, value=prebuilt, detail=err.problem)]
    return []


def _templates(served: Target, obj: Mapping[str, Any]) -> Iterator[tuple[str, Any, int]]:
    """``(annotations' field path, template-like object with metadata, pod count)`` of each pod set."""
    if served == JOB:
        spec = obj.get("spec")
        yield (
            "spec.template.metadata.annotations",
            (spec or {}).get("template") if isinstance(spec, dict) else None,
            (_job_pods_count(obj)),
        )
    elif served == POD:
        yield "metadata.annotations", obj, 1
    elif served.integration is not None:
        integration = served.integration
        try:
            sources = integration.pod_sets(integration.ref(obj), obj) if isinstance(obj.get("spec"), dict) else []
        except manifests.ManifestError:
            return  # the kind's own schema refuses it; the watcher reports it
        for source in sources:
            where = integrations.field_name(source.template_path)
            yield f"{where}.metadata.annotations", integrations.get_at(obj, source.template_path), source.count


def _topology(served: Target, obj: Mapping[str, Any]) -> list[FieldError]:
    """Each pod set template's topology annotations as Kueue's job webhooks check them: Kueue's own rules and
    words first (:func:`_tas_request`, :func:`_slice_size_bound`; a Job stops at the first, job_webhook.go
    validateTopologyRequest), then what the watcher's reading of the annotations refuses besides
    (:func:`workloads.topology_request`: the multi-layer slice constraints)."""
    ref = workloads.job_ref(obj, kind=served.kind, api_version=served.api_version)
    errors: list[FieldError] = []
    for where, template, count in _templates(served, obj):
        template_where = where.removesuffix("metadata.annotations").removesuffix(".") or "metadata"
        try:
            annotations = workloads.template_annotations(ref, template, where=template_where)
        except manifests.ManifestError as err:
            errors.append(FieldError(type="Invalid", field=err.field or where, value=OMIT, detail=err.problem))
            continue
        found = _tas_request(where, annotations)
        if served == POD:
            # a Pod is one pod of its pod set (a Job's, a JobSet's, a group's) and carries that pod set's slice
            # size: the pod webhook checks the annotations alone (pod_webhook.go validateTopologyRequest), the
            # owner's webhook the bound
            count = max(count, _go_int32(str(annotations.get(tas_requests.SLICE_SIZE_ANNOTATION, ""))) or 1)
        elif not found or served != JOB:
            found += _slice_size_bound(where, annotations, count)
        if found:
            errors += found
            continue
        try:
            workloads.topology_request(ref, annotations, where=where, count=count)
        except manifests.ManifestError as err:
            errors.append(FieldError(type="Invalid", field=err.field or where, value=OMIT, detail=err.problem))
    return errors


_TAS_MODES: Final = (
    tas_requests.REQUIRED_ANNOTATION,
    tas_requests.PREFERRED_ANNOTATION,
    tas_requests.UNCONSTRAINED_ANNOTATION,
)
#: The spellings Go's strconv.ParseBool reads.
_GO_BOOLS: Final = frozenset({"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"})


def _tas_request(where: str, annotations: Mapping[str, Any]) -> list[FieldError]:
    """Kueue jobframework/tas_validation.go ValidateTASPodSetRequest over one template's annotations
    (``where``: their field path): at most one of required, preferred and unconstrained; label keys for the
    levels; a group name that is no number, only with required or preferred, never with slices; a boolean
    unconstrained; a slice size that is an integer of at least 1, set exactly when the slice level is."""

    def key(annotation: str) -> str:
        return f"{where}[{annotation}]"

    def label_key(annotation: str) -> list[FieldError]:
        value = str(annotations[annotation])
        return [_invalid(key(annotation), value, problem) for problem in labels.qualified_name_problems(value)]

    required, preferred = tas_requests.REQUIRED_ANNOTATION, tas_requests.PREFERRED_ANNOTATION
    slice_level, slice_size = tas_requests.SLICE_REQUIRED_ANNOTATION, tas_requests.SLICE_SIZE_ANNOTATION
    group = tas_requests.GROUP_NAME_ANNOTATION
    errors: list[FieldError] = []
    if sum(mode in annotations for mode in _TAS_MODES) > 1:
        listed = ", ".join(json.dumps(mode) for mode in _TAS_MODES)
        detail = f"must not contain more than one topology annotation: [{listed}]"
        errors.append(FieldError(type="Invalid", field=where, value=OMIT, detail=detail))
    for annotation in (required, preferred, slice_level):
        if annotation in annotations:
            errors += label_key(annotation)
    if group in annotations:
        if re.fullmatch(r"[0-9]+", str(annotations[group])) and int(str(annotations[group])) < 2**64:  # ParseUint
            errors.append(_invalid(key(group), str(annotations[group]), "must not be a number"))
        for annotation in (slice_size, slice_level):
            if annotation in annotations:
                detail = f"may not be set when '{annotation}' is specified"
                errors.append(FieldError(type="Forbidden", field=key(group), detail=detail))
        if required not in annotations and preferred not in annotations:
            detail = f"may not be set when neither '{preferred}' nor '{required}' is specified"
            errors.append(FieldError(type="Forbidden", field=key(group), detail=detail))
    unconstrained = tas_requests.UNCONSTRAINED_ANNOTATION
    if unconstrained in annotations and str(annotations[unconstrained]) not in _GO_BOOLS:
        errors.append(_invalid(key(unconstrained), str(annotations[unconstrained]), "must be a boolean value"))
    if slice_size in annotations:
        size = str(annotations[slice_size])
        parsed = _go_int32(size)  # tas_validation.go: strconv.ParseInt(value, 10, 32)
        if parsed is None:
            errors.append(_invalid(key(slice_size), size, "must be a numeric value"))
        elif parsed < 1:
            errors.append(_invalid(key(slice_size), size, "must be greater than or equal to 1"))
    if slice_level in annotations and slice_size not in annotations:
        detail = f"must be set when '{slice_level}' is specified"
        errors.append(FieldError(type="Required", field=key(slice_size), detail=detail))
    if slice_size in annotations and slice_level not in annotations:
        detail = f"may not be set when '{slice_level}' is not specified"
        errors.append(FieldError(type="Forbidden", field=key(slice_size), detail=detail))
    return errors + _slice_constraints(where, annotations)


def _slice_constraints(where: str, annotations: Mapping[str, Any]) -> list[FieldError]:
    """Kueue tas_validation.go validateSliceRequiredTopologyConstraintsAnnotation, the multi-layer slice
    annotation of one template (``where``: its annotations' field path): not with the single-layer slice
    annotations nor a group name; Go's JSON (:func:`tas_requests.decode_slice_constraints`) of 1 to 3 layers,
    each a label key and a size of at least 1, no level twice, each size dividing the one above it. The gate
    TASMultiLayerTopology is taken as on (its default since Kueue v0.19)."""
    constraints = tas_requests.SLICE_CONSTRAINTS_ANNOTATION
    if constraints not in annotations:
        return []
    path, raw = f"{where}[{constraints}]", str(annotations[constraints])
    errors = [
        FieldError(type="Forbidden", field=path, detail=f"may not be set when '{single}' is specified")
        for single in (tas_requests.SLICE_REQUIRED_ANNOTATION, tas_requests.SLICE_SIZE_ANNOTATION)
        if single in annotations
    ]
    if tas_requests.GROUP_NAME_ANNOTATION in annotations:
        detail = f"may not be set when '{constraints}' is specified"
        errors.append(
            FieldError(type="Forbidden", field=f"{where}[{tas_requests.GROUP_NAME_ANNOTATION}]", detail=detail)
        )
    try:
        layers = tas_requests.decode_slice_constraints(raw)
    except gojson.GoJSONError as err:
        return [*errors, _invalid(path, raw, f"must be a valid JSON array: {err}")]
    if not 1 <= len(layers) <= 3:
        return [*errors, _invalid(path, raw, tas_requests.CONSTRAINT_LAYERS_PROBLEM)]
    for index, layer in enumerate(layers):
        topology, size = layer["topology"], layer["size"]
        errors += [_invalid(f"{path}[{index}].topology", topology, p) for p in labels.qualified_name_problems(topology)]
        if size < 1:
            errors.append(_invalid(f"{path}[{index}].size", size, "must be greater than or equal to 1"))
    first_at: dict[str, int] = {}
    for index, layer in enumerate(layers):
        topology = layer["topology"]
        if topology in first_at:
            value = f"{topology} (also at index {first_at[topology]})"
            errors.append(FieldError(type="Duplicate", field=f"{path}[{index}].topology", value=value, detail=""))
        first_at.setdefault(topology, index)
    for index, (outer, inner) in enumerate(zip(layers, layers[1:], strict=False), start=1):
        if inner["size"] > 0 and outer["size"] % inner["size"]:
            detail = f"must evenly divide the parent layer size {outer['size']}"
            errors.append(_invalid(f"{path}[{index}].size", inner["size"], detail))
    return errors


def _slice_size_bound(where: str, annotations: Mapping[str, Any], count: int) -> list[FieldError]:
    """Kueue tas_validation.go ValidateSliceSizeAnnotationUpperBound: a slice size no larger than the pod set's
    ``count``, the single layer's and the outermost layer's of the multi-layer slices (an unreadable one is
    :func:`_tas_request`'s)."""
    errors: list[FieldError] = []
    annotation = tas_requests.SLICE_SIZE_ANNOTATION
    size = str(annotations.get(annotation, ""))
    parsed = _go_int32(size) if annotation in annotations else None
    if parsed is not None and parsed > count:
        errors.append(_invalid(f"{where}[{annotation}]", size, f"must not be greater than pod set count {count}"))
    constraints = tas_requests.SLICE_CONSTRAINTS_ANNOTATION
    try:
        layers = (
            tas_requests.decode_slice_constraints(str(annotations[constraints])) if constraints in annotations else []
        )
    except gojson.GoJSONError:
        layers = []
    if layers and layers[0]["size"] > count:
        outer = layers[0]["size"]
        errors.append(_invalid(f"{where}[{constraints}]", outer, f"must not be greater than pod set count {count}"))
    return errors


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(type="Invalid", field=path, value=value, detail=detail)


# -- ValidateUpdate ------------------------------------------------------------------------------


def validate_update(
    api_version: str,
    kind: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    context: Context | None = None,
) -> list[FieldError]:
    """What Kueue's validating webhook refuses when ``old`` is changed into ``new`` (empty: allowed).

    :func:`validate_create`'s rules on ``new``, then (jobframework ValidateJobOnUpdate): the queue-name
    label is immutable while the job is not suspended (``field is immutable``: an admitted job cannot
    move queues), and may not be removed in a namespace with a ``default`` LocalQueue; the prebuilt
    workload is immutable while it runs; the max-exec-time label is immutable unless the job is
    suspended before and after; the ``kueue.x-k8s.io/priority-class`` label may not be added to a
    running job nor removed from any. A Job: ``spec.parallelism`` may not change while it runs with
    partial admission, nor ``job-completions-equal-parallelism``. A Pod: its group name is immutable, and
    a pod that is not retriable in its group may not become so. A Deployment, StatefulSet or
    LeaderWorkerSet has its kind's rules instead of ValidateJobOnUpdate (:func:`_through_pods_update`); a
    StatefulSet another framework manages (a LeaderWorkerSet's) none.
    """
    context = context or Context()
    served = target(api_version, kind)
    if served is None:
        return []
    if served.kind == "StatefulSet" and serving.statefulset_managed_by_other(new):
        return []  # statefulset_webhook.go ValidateUpdate: left to the LeaderWorkerSet's webhook
    if _validated_only_when_managed(served) and not (
        context.manage_jobs_without_queue_name or queue_name(new) or queue_name(old)
    ):
        return []  # validation.go ShouldValidateRayOrSparkJobOnUpdate (ValidateRayAndSparkJobUpdates, on)
    errors = validate_create(api_version, kind, new, context=context) if served != JOB else []
    created = len(errors)
    if defaults_on_update(served):
        return errors + _through_pods_update(served, old, new, context)
    if served == JOB:
        # Kueue's Job webhook re-checks the partial admission annotation only when it changed
        errors = _common_create(new) + _job_sync_completions(new)
        if _annotations(new).get(jobs.MIN_PARALLELISM_ANNOTATION) != _annotations(old).get(
            jobs.MIN_PARALLELISM_ANNOTATION
        ):
            errors += _job_partial_admission(new)
            if context.elastic_jobs:
                errors += _elastic_partial_admission(new)
        if context.topology_aware_scheduling:
            errors += _topology(served, new) or _elastic_topology(served, new, context)
    new_suspended, old_suspended = suspended(served, new), suspended(served, old)
    old_queue, new_queue = queue_name(old), queue_name(new)
    if not new_suspended and old_queue != new_queue:
        errors.append(FieldError(type="Invalid", field=_label_path(QUEUE_LABEL), value=new_queue, detail=_IMMUTABLE))
    if not new_queue and old_queue and context.default_local_queue:
        errors.append(
            FieldError(
                type="Invalid",
                field=_label_path(QUEUE_LABEL),
                value="",
                detail="queue-name must not be empty in namespace with default queue",
            )
        )
    if not new_suspended:
        old_prebuilt, new_prebuilt = _prebuilt(old), _prebuilt(new)
        if old_prebuilt[1] != new_prebuilt[1]:
            errors.append(FieldError(type="Invalid", field=new_prebuilt[0], value=new_prebuilt[1], detail=_IMMUTABLE))
    if not new_suspended or not old_suspended:
        old_max, new_max = _labels(old).get(MAX_EXEC_TIME_LABEL, ""), _labels(new).get(MAX_EXEC_TIME_LABEL, "")
        if old_max != new_max:
            errors.append(
                FieldError(type="Invalid", field=_label_path(MAX_EXEC_TIME_LABEL), value=new_max, detail=_IMMUTABLE)
            )
    errors += _priority_class_update(old, new, suspended=new_suspended)
    if context.elastic_jobs and slices.is_elastic(_annotations(old)) != slices.is_elastic(_annotations(new)):
        # validation.go validatedUpdateForEnabledWorkloadSlice
        errors.append(
            FieldError(
                type="Invalid",
                field=_annotation_path(slices.ELASTIC_JOB_ANNOTATION),
                value=slices.is_elastic(_annotations(new)),
                detail=_IMMUTABLE,
            )
        )
    if served == JOB:
        errors += _job_update(old, new, old_suspended=old_suspended, new_suspended=new_suspended)
    elif served == POD:
        errors += _pod_update(old, new)
    if _validated_only_when_managed(served) or _sorts_by_field(served):
        # their ValidateUpdate lists ValidateJobOnUpdate's errors before validateCreate's (an MPIJob's then sorted)
        return _in_kind_order(served, errors[created:] + errors[:created])
    return errors


def _validated_only_when_managed(served: Target) -> bool:
    """The kinds whose ValidateUpdate Kueue skips for a job it does not manage (neither the old nor the new one
    queue-labelled, without ``manageJobsWithoutQueueName``): RayJob, RayCluster, RayService, SparkApplication
    (validation.go ShouldValidateRayOrSparkJobOnUpdate, with ValidateRayAndSparkJobUpdates on by default)."""
    return _is_ray(served) or served.kind == "SparkApplication"


def _through_pods_update(
    served: Target, old: Mapping[str, Any], new: Mapping[str, Any], context: Context
) -> list[FieldError]:
    """The update rules of Kueue's Deployment, StatefulSet and LeaderWorkerSet webhooks (ValidateUpdate of
    deployment_webhook.go, statefulset_webhook.go, leaderworkerset_webhook.go), which count the object
    suspended while none of its replicas is ready (old ``status.readyReplicas`` 0): the queue-name label
    may not change once a replica was ready, nor be removed at all (``field is immutable``), so a running
    one is refused the ``default`` LocalQueue its mutating webhook gives on update; the
    ``kueue.x-k8s.io/priority-class`` label may not be added once a replica was ready, nor removed.

    While the new object is one Kueue manages (:func:`_managed_by_kueue`), a StatefulSet's and a
    LeaderWorkerSet's pods must stay what its Workload was admitted for (:func:`_statefulset_managed_update`,
    :func:`_lws_managed_update`). Not checked: the AdmissionGatedBy rules (gate AdmissionGatedBy)."""
    status = old.get("status")
    ready = workloads.parse_int(status.get("readyReplicas")) if isinstance(status, dict) else None
    suspended = not ready
    errors: list[FieldError] = []
    old_queue, new_queue = queue_name(old), queue_name(new)
    if (not suspended or not new_queue) and old_queue != new_queue:
        errors.append(FieldError(type="Invalid", field=_label_path(QUEUE_LABEL), value=new_queue, detail=_IMMUTABLE))
    errors += _priority_class_update(old, new, suspended=suspended)
    if not _managed_by_kueue(new, context):
        return errors
    if served.kind == "StatefulSet":
        errors += _statefulset_managed_update(old, new, context)
    elif served.kind == "LeaderWorkerSet":
        errors += _lws_managed_update(old, new, context)
    return errors


def _managed_by_kueue(obj: Mapping[str, Any], context: Context) -> bool:
    """Whether Kueue's webhooks count ``obj`` (a Deployment, StatefulSet or LeaderWorkerSet) as one whose pods
    it suspends (utils.go WorkloadShouldBeSuspended, with the deleting-object tolerance these webhooks ask
    for): not one being deleted (SkipAncestorCheckForDeletedWorkloads, on by default), nor one with a managed
    ancestor (:func:`ancestor_managed`), and either queue-labelled or, under ``manageJobsWithoutQueueName``, in a namespace
    ``managedJobsNamespaceSelector`` selects."""
    if _meta(obj).get("deletionTimestamp") or ancestor_managed(obj, context):
        return False
    return bool(queue_name(obj)) or (context.manage_jobs_without_queue_name and context.namespace_managed)


def _replicas(obj: Mapping[str, Any]) -> int | None:
    """A StatefulSet's ``spec.replicas`` (default 1), None when it is not an integer."""
    raw = _spec(obj).get("replicas")
    return 1 if raw is None else workloads.parse_int(raw)


def _scaled_up_from_zero(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``old`` has ``spec.replicas`` 0 and ``new`` more."""
    new_replicas = _replicas(new)
    return _replicas(old) == 0 and new_replicas is not None and new_replicas > 0


def _scale_down_pods(new: Mapping[str, Any]) -> int:
    """The pods the StatefulSet still has (``status.replicas``, 0 when absent or not an integer)."""
    return workloads.parse_int(_mapping(new.get("status")).get("replicas")) or 0


def scale_up_workload(served: Target, old: Mapping[str, Any], new: Mapping[str, Any], context: Context) -> str | None:
    """The name of the Workload Kueue's StatefulSet webhook reads for the update of ``old`` into ``new`` in their
    namespace, so that a webhook reads it only then (``Context.statefulset_workload``): a StatefulSet Kueue
    manages (:func:`_managed_by_kueue`, in ``context``) and no other framework does, scaled up from 0
    (``spec.replicas``) with no pod of the scale-down left (``status.replicas`` 0), whose group's Workload is
    ``statefulset-<old's name>-<hash of old's UID>`` (statefulset_reconciler.go findWorkload; the legacy name
    without a UID that Kueue also tries is never made by kueue-es). None otherwise."""
    if served.kind != "StatefulSet" or served.api_version != serving.APPS_API:
        return None
    if serving.statefulset_managed_by_other(new) or not _managed_by_kueue(new, context):
        return None
    if not _scaled_up_from_zero(old, new) or _scale_down_pods(new) > 0:
        return None
    meta = _meta(old)
    return serving.statefulset_workload_name(str(meta.get("name") or ""), str(meta.get("uid") or ""))


def workload_on_hold(workload: Mapping[str, Any]) -> bool:
    """Whether a Workload object (as the API server has it) is on hold: its ``QuotaReserved`` condition is False
    with reason ``OnHold``, as the StatefulSet reconciler leaves the Workload of a StatefulSet scaled to zero
    (Kueue pkg/workload/workload.go IsOnHold)."""
    conditions = _mapping(workload.get("status")).get("conditions")
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") == "QuotaReserved":
            return condition.get("status") == "False" and condition.get("reason") == "OnHold"
    return False


def _statefulset_managed_update(old: Mapping[str, Any], new: Mapping[str, Any], context: Context) -> list[FieldError]:
    """statefulset_webhook.go ValidateUpdate, while Kueue manages the StatefulSet: the pod spec's
    admission-relevant shape is immutable (jobframework ValidateImmutablePodGroupPodSpec over
    :func:`pods.spec_shape`), and ``spec.replicas`` (default 1) changes only to or from 0 (Kueue's
    TODO #3279: no custom resizes); a scale-up from 0 while pods of the scale-down are still there
    (``status.replicas`` > 0) is Forbidden, and so is one while the Workload of the scale-down
    (``context.statefulset_workload``) is there but not on hold (:func:`workload_on_hold`): Kueue #7479 counts
    it as still being deleted, and a Workload on hold is the one the scale-up lets go."""
    old_spec, new_spec = _spec(old), _spec(new)
    errors = _pod_spec_changes(_template_spec(new_spec.get("template")), _template_spec(old_spec.get("template")))
    errors = [dataclasses.replace(e, field=f"spec.template.spec{e.field}") for e in errors]
    old_raw, new_raw = old_spec.get("replicas"), new_spec.get("replicas")
    old_replicas, new_replicas = _replicas(old), _replicas(new)
    if new_replicas != 0 and old_replicas != 0 and old_raw != new_raw:
        errors.append(FieldError(type="Invalid", field="spec.replicas", value=new_raw, detail=_IMMUTABLE))
    if _scaled_up_from_zero(old, new):
        if _scale_down_pods(new) > 0:
            errors.append(
                FieldError(type="Forbidden", field="spec.replicas", detail="scaling down is still in progress")
            )
        elif context.statefulset_workload is not None and not workload_on_hold(context.statefulset_workload):
            errors.append(
                FieldError(
                    type="Forbidden",
                    field="spec.replicas",
                    detail="workload from previous scale-down is still being deleted",
                )
            )
    return errors


def _lws_managed_update(old: Mapping[str, Any], new: Mapping[str, Any], context: Context) -> list[FieldError]:
    """leaderworkerset_webhook.go ValidateUpdate, while Kueue manages the LeaderWorkerSet: a leader template
    may be neither added nor removed, the leader's and the workers' pod specs keep their admission-relevant
    shape (validateImmutablePodTemplateSpec), and with LWSImmutableGroupSize (on by default)
    ``spec.leaderWorkerTemplate.size`` (default 1) is immutable: a Workload's pod sets are never recomputed,
    so a larger group would start pods no quota was reserved for."""
    base = "spec.leaderWorkerTemplate"
    old_lwt, new_lwt = (
        _mapping(_spec(old).get("leaderWorkerTemplate")),
        _mapping(_spec(new).get("leaderWorkerTemplate")),
    )
    errors: list[FieldError] = []
    for name in ("leaderTemplate", "workerTemplate"):
        old_template, new_template = old_lwt.get(name), new_lwt.get(name)
        if name == "leaderTemplate" and (old_template is None) != (new_template is None):
            # ValidateImmutableField of the templates themselves: Go prints a nil one as null
            value = None if new_template is None else GoLiteral("v1.PodTemplateSpec{...}")
            errors.append(FieldError(type="Invalid", field=f"{base}.{name}", value=value, detail=_IMMUTABLE))
            continue
        if new_template is None:
            continue
        changes = _pod_spec_changes(_template_spec(new_template), _template_spec(old_template))
        errors += [dataclasses.replace(e, field=f"{base}.{name}.spec{e.field}") for e in changes]
    if context.lws_immutable_group_size:
        old_size, new_size = old_lwt.get("size", 1), new_lwt.get("size", 1)
        if old_size != new_size:
            errors.append(FieldError(type="Invalid", field=f"{base}.size", value=new_size, detail=_IMMUTABLE))
    return errors


def _pod_spec_changes(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """The fields of the admission-relevant shapes of two pod specs (:func:`pods.spec_shape`) that differ, each
    ``Invalid value: <new>: field is immutable`` at its path below the pod spec (``.containers[0].resources.
    requests.cpu``; jobframework validation.go validateImmutablePodGroupPodSpecPath), in path order."""
    return [
        FieldError(type="Invalid", field=path, value=value, detail=_IMMUTABLE)
        for path, value in _shape_changes(pods.spec_shape(new), pods.spec_shape(old), "")
    ]


def _shape_changes(new: Any, old: Any, path: str, *, structural: bool = True) -> list[tuple[str, Any]]:
    """``(path, new value)`` of each field that differs between two spec shapes. Kueue walks only the shape's
    own maps -- the spec's fields, each container's and its ``resources`` -- and lists of containers of one
    length item by item; any other value (a ResourceList, a nodeSelector, tolerations) is compared whole, so
    a changed request is reported at ``...resources.requests`` (the type switch of
    validateImmutablePodGroupPodSpecPath sees only ``map[string]any`` and ``[]map[string]any``)."""
    if structural and isinstance(new, dict) and isinstance(old, dict):
        out: list[tuple[str, Any]] = []
        for key in sorted(set(new) | set(old)):
            # the shape's own: the container lists of the spec, and each container's resources map
            own = key in ("containers", "initContainers") if not path else path.endswith("]") and key == "resources"
            out += _shape_changes(new.get(key), old.get(key), f"{path}.{key}", structural=own)
        return out
    if structural and isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        if all(isinstance(item, dict) for item in new + old):
            return [
                c for i, (n, o) in enumerate(zip(new, old, strict=True)) for c in _shape_changes(n, o, f"{path}[{i}]")
            ]
    return [] if new == old else [(path, new)]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(obj.get("spec"))


def _template_spec(template: Any) -> Mapping[str, Any]:
    return _mapping(_mapping(template).get("spec"))


def _prebuilt(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(field path, name)`` of the prebuilt workload the object names (annotation first)."""
    annotation = _annotations(obj).get(PREBUILT_WORKLOAD_KEY)
    if annotation:
        return _annotation_path(PREBUILT_WORKLOAD_KEY), str(annotation)
    return _label_path(PREBUILT_WORKLOAD_KEY), str(_labels(obj).get(PREBUILT_WORKLOAD_KEY) or "")


def _priority_class_update(old: Mapping[str, Any], new: Mapping[str, Any], *, suspended: bool) -> list[FieldError]:
    """validation.go ValidateUpdateForWorkloadPriorityClassName."""
    old_class = str(_labels(old).get(PRIORITY_CLASS_LABEL) or "")
    new_class = str(_labels(new).get(PRIORITY_CLASS_LABEL) or "")
    where = _label_path(PRIORITY_CLASS_LABEL)
    if not suspended and not old_class and new_class:
        return [
            FieldError(
                type="Invalid",
                field=where,
                value=new_class,
                detail="WorkloadPriorityClass cannot be added to a non-suspended workload",
            )
        ]
    if old_class and not new_class:
        return [
            FieldError(
                type="Invalid", field=where, value="", detail="WorkloadPriorityClass cannot be removed from a workload"
            )
        ]
    return []


def _job_update(
    old: Mapping[str, Any], new: Mapping[str, Any], *, old_suspended: bool, new_suspended: bool
) -> list[FieldError]:
    """job_webhook.go validatePartialAdmissionUpdate.

    One difference: Kueue refuses a parallelism change whenever the old Job runs, because its Job
    Stop suspends in one write and restores the parallelism in a second; kueue-es's dispatcher does
    both in one write (suspend and restore), so a change made together with suspending is allowed.
    """
    errors: list[FieldError] = []
    old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    new_spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
    assert isinstance(old_spec, dict) and isinstance(new_spec, dict)
    if jobs.MIN_PARALLELISM_ANNOTATION in _annotations(old) and not old_suspended and not new_suspended:
        old_parallelism = workloads.parse_int(old_spec.get("parallelism"))
        new_parallelism = workloads.parse_int(new_spec.get("parallelism"))
        if (1 if old_parallelism is None else old_parallelism) != (1 if new_parallelism is None else new_parallelism):
            errors.append(
                FieldError(
                    type="Forbidden",
                    field="spec.parallelism",
                    detail="cannot change when partial admission is enabled and the job is not suspended",
                )
            )
    if old_suspended == new_suspended and not new_suspended:
        if jobs.completions_follow_parallelism(_annotations(old)) != jobs.completions_follow_parallelism(
            _annotations(new)
        ):
            errors.append(
                FieldError(
                    type="Forbidden",
                    field=_annotation_path(jobs.COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION),
                    detail=f"{_IMMUTABLE} while the job is not suspended",
                )
            )
    return errors


def _pod_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """pod_webhook.go ValidateUpdate: the group name, and retriable-in-group."""
    errors: list[FieldError] = []
    old_group, new_group = pods.group_name(old), pods.group_name(new)
    if old_group and old_group != new_group:
        field = (
            _annotation_path(pods.GROUP_NAME_KEY)
            if _annotations(new).get(pods.GROUP_NAME_KEY)
            else _label_path(pods.GROUP_NAME_KEY)
        )
        errors.append(FieldError(type="Invalid", field=field, value=new_group, detail=_IMMUTABLE))
    if new_group and _unretriable(old) and not _unretriable(new):
        errors.append(
            FieldError(
                type="Forbidden",
                field=_annotation_path(pods.RETRIABLE_IN_GROUP_ANNOTATION),
                detail="unretriable pod group can't be converted to retriable",
            )
        )
    return errors


def _unretriable(pod: Mapping[str, Any]) -> bool:
    """The pod says it may not be retried within its group (``retriable-in-group: "false"``)."""
    return str(_annotations(pod).get(pods.RETRIABLE_IN_GROUP_ANNOTATION, "")).lower() == "false"
