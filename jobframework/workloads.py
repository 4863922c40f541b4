"""What every job integration shares when a job becomes a Workload (Kueue pkg/controller/jobframework).

Why this module exists: a batch/v1 Job (:mod:`kueue_es.jobframework.jobs`), a JobSet
(:mod:`kueue_es.jobframework.jobsets`) and plain Pods or pod groups
(:mod:`kueue_es.jobframework.pods`) differ only in how they describe their pod sets and
when they are finished. Everything else Kueue does the same way for all of them,
and lives here: which jobs are managed at all (the queue-name label,
``manageJobsWithoutQueueName``, jobs owned by a managed job), the Workload's name,
its queue, its priority (SEMANTICS §2.4), its maximum execution time, and one pod
set from a pod template (SEMANTICS §2.3).

Everything is pure: what the conversion needs to know about the rest of the
cluster (LocalQueues, priority classes, managed owners, the workload published
before) comes in a :class:`Context` the watcher builds. Bad input raises
:class:`kueue_es.events.manifests.ManifestError` naming the object and the field; the
callers turn it into an ObjectRejected fact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Collection, Container, Mapping, Sequence
from typing import Any, Final

import msgspec

from kueue_es.events import manifests, models, slices, tas, types
from kueue_es.jobframework import adjust, goint

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MISSING_WPC_FIELD = f"metadata.labels[{PRIORITY_CLASS_LABEL}]"
"""The field a job's rejection names when its WorkloadPriorityClass does not exist (see :func:`priority`)."""
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
#: Job annotations Kueue copies onto the Workload: the parameters of its ProvisioningRequests.
PROVREQ_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
#: Kueue's webhooks put it on the pods (and only the pods) they manage (pkg/constants).
MANAGED_LABEL = "kueue.x-k8s.io/managed"
#: The LocalQueue a job without the queue-name label goes to (jobframework/defaults.go).
DEFAULT_LOCAL_QUEUE = "default"
#: The WorkloadPriorityClass a job without the priority-class label gets (WorkloadPriorityClassDefaulting).
DEFAULT_WORKLOAD_PRIORITY_CLASS = "default"
#: The label every Namespace carries with its own name (the API server sets it).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: Kueue's default managedJobsNamespaceSelector: ``kubernetes.io/metadata.name NotIn [kube-system, kueue-system]``
#: (apis/config/v1beta2/defaults.go).
DEFAULT_MANAGED_JOBS_NAMESPACE_SELECTOR = models.LabelSelector(
    match_expressions=[
        models.LabelSelectorRequirement(
            key=NAMESPACE_NAME_LABEL, operator="NotIn", values=["kube-system", "kueue-system"]
        )
    ]
)
#: At most this many pod sets in one Workload (jobframework/constants.go MaxPodSets, the Workload CRD).
MAX_POD_SETS = 18
POD_PRIORITY_GROUP: Final = "scheduling.k8s.io"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_HASH_LENGTH = 5
_MAX_WORKLOAD_NAME = 253  # ShortWorkloadNames is off by default (alpha): names may use all 253 characters


@dataclasses.dataclass(frozen=True, kw_only=True)
class PriorityClass:
    """A scheduling.k8s.io/v1 PriorityClass: its ``value`` and whether it is the ``globalDefault``."""

    name: str
    value: int
    global_default: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class Owner:
    """A job seen that may be another job's ancestor: what Kueue's FindAncestorJobManagedByKueue reads of it.

    ``api_version`` and ``kind`` as its manifest has them, ``namespace``, ``name`` and ``uid`` from its
    metadata, its ``labels`` (the queue-name label makes it managed) and ``controller``, its own owner
    reference with ``controller: true`` (None without one), through which the walk goes on. ``enabled``:
    its kind's integration is enabled; Kueue walks through an owner of a disabled one but never takes it as
    the ancestor (IntegrationManager.GetEmptyOwnerObject is nil for it). Built by :func:`owner_record`.
    """

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    controller: Mapping[str, Any] | None = None
    enabled: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class Context:
    """What converting one job needs to know besides the job itself.

    ``manage_jobs_without_queue_name``: Kueue's option of that name (default false:
    a job without the queue-name label is not managed). ``local_queues``:
    ``(namespace, name)`` of the LocalQueues that exist. ``workload_priority_classes``:
    names of the WorkloadPriorityClasses that exist. ``priority_classes``: the
    PriorityClasses by name. ``owners``: the jobs seen that may control another, by UID
    (:class:`Owner`); a job or pod whose controller chain reaches a managed one is part of it,
    not a workload of its own (:func:`ancestry`).
    ``runtime_classes``: each RuntimeClass's ``overhead.podFixed`` by name.
    ``limit_ranges``: the ``spec.limits`` items of the job's namespace's LimitRanges,
    in name order (:mod:`kueue_es.jobframework.adjust`).
    ``previous_reserved``: whether ``previous``'s Workload object holds quota (QuotaReserved, not finished).
    ``previous``: the Workload last published for this job, which keeps what Kueue's
    webhook or workload creation fixed once (the defaulted queue and priority class,
    a PriorityClass value), or None.
    ``managed_jobs_namespace_selector``: Kueue's option of that name (its default leaves out
    kube-system and kueue-system), matched against ``namespace_labels``, the labels of the
    Namespaces seen by name (one not seen has only its ``kubernetes.io/metadata.name``):
    :meth:`namespace_managed`.
    ``external_owners``: ``(apiVersion, kind)`` of the Configuration's
    ``integrations.externalFrameworks``: a pod such an object controls is part of its
    owner's workload, run by an outside controller, not a workload of its own.
    ``objects``: the objects of the kinds integrations read besides the job (a TrainJob's
    TrainingRuntimes: ``Integration.inputs``), by kind, then ``(namespace, name)`` (namespace
    "" for cluster-scoped kinds).
    ``elastic_jobs``: Kueue's feature gate ElasticJobsViaWorkloadSlices (on by default; a Ray job annotated
    ``kueue.x-k8s.io/elastic-job: "true"`` may then use ``enableInTreeAutoscaling``).
    ``pod_integration_implicit``: the pod integration is on only because ``integrations.frameworks``
    lists ``deployment``, ``statefulset`` or ``leaderworkerset.x-k8s.io/leaderworkerset`` and not
    ``pod`` (Kueue's ImplicitlyEnabledFrameworkNames): its reconciler then takes only the pods such a
    parent marked (:func:`kueue_es.jobframework.pods.is_managed`).
    ``topology_aware_scheduling``: Kueue's feature gate TopologyAwareScheduling (on by default); off, a pod
    set asks for no topology whatever its template's TAS annotations say, and they are not checked
    (the job controllers' PodSets build a PodSetTopologyRequest only with the gate on; Kueue PR #4742).
    ``label_keys_to_copy``, ``annotations_to_copy``: the job's labels and annotations a new Workload gets
    (:func:`kueue_es.events.manager_config.keys_to_copy`: ``integrations.labelKeysToCopy`` and, with the gate
    CustomMetricLabels, the Workload sources of ``metrics.customLabels``).
    ``concurrent_parent_queues``: the LocalQueues ``(namespace, name)`` of the ClusterQueues with a
    ``concurrentAdmissionPolicy``, while the gate ConcurrentAdmission is on: a job's Workload queued to one is a
    parent, labelled :data:`CONCURRENT_ADMISSION_PARENT_LABEL` (:func:`new_workload`).
    """

    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: models.LabelSelector = DEFAULT_MANAGED_JOBS_NAMESPACE_SELECTOR
    namespace_labels: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    local_queues: Collection[tuple[str, str]] = frozenset()
    workload_priority_classes: Collection[str] = frozenset()
    priority_classes: Mapping[str, PriorityClass] = dataclasses.field(default_factory=dict)
    owners: Mapping[str, Owner] = dataclasses.field(default_factory=dict)
    runtime_classes: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    limit_ranges: Sequence[Mapping[str, Any]] = ()
    previous: models.Workload | None = None
    previous_reserved: bool = False
    objects: Mapping[str, Mapping[tuple[str, str], Mapping[str, Any]]] = dataclasses.field(default_factory=dict)
    external_owners: Collection[tuple[str, str]] = frozenset()
    elastic_jobs: bool = slices.GATE_DEFAULT
    pod_integration_implicit: bool = False
    topology_aware_scheduling: bool = True
    label_keys_to_copy: Collection[str] = frozenset()
    annotations_to_copy: Collection[str] = frozenset()
    concurrent_parent_queues: Container[tuple[str, str]] = frozenset()

    def namespace_managed(self, namespace: str) -> bool:
        """Whether ``managedJobsNamespaceSelector`` selects ``namespace`` (:func:`namespace_selected`
        on the labels seen): Kueue's job reconciler ignores every job elsewhere, queue-labelled or not
        (jobframework/reconciler.go; the gate ManagedJobsNamespaceSelectorAlwaysRespected is GA and
        locked on since v0.19), and its pod webhook every pod (pod_webhook.go Default)."""
        return namespace_selected(self.managed_jobs_namespace_selector, namespace, self.namespace_labels.get(namespace))


def namespace_selected(selector: models.LabelSelector, namespace: str, labels: Mapping[str, str] | None) -> bool:
    """Whether ``managedJobsNamespaceSelector`` (``selector``) selects the Namespace ``namespace`` whose
    ``metadata.labels`` are ``labels`` (None: a Namespace not seen). The API server gives every Namespace
    its ``kubernetes.io/metadata.name`` label, so that one is matched whatever ``labels`` holds, and a
    Namespace not seen has it alone. The one rule of the watcher (:meth:`Context.namespace_managed`),
    the webhook server and the emulated API server's webhooks (Kueue jobframework/utils.go
    namespaceMatchesSelector, reconciler.go, pods/pod_webhook.go)."""
    return selector.matches({**(labels or {}), NAMESPACE_NAME_LABEL: namespace})


def selector_reads_labels(selector: models.LabelSelector) -> bool:
    """Whether ``selector`` looks at any Namespace label besides ``kubernetes.io/metadata.name``: only then
    must a webhook read the Namespace to apply it (Kueue's default selector names namespaces only)."""
    keys = {*selector.match_labels, *(e.key for e in selector.match_expressions)}
    return bool(keys - {NAMESPACE_NAME_LABEL})


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobRef:
    """Which object a conversion is about: its kind, ``namespace/name`` for messages, and metadata."""

    kind: str
    api_version: str
    group: str
    meta: Mapping[str, Any]

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return str(self.meta.get("name") or "")

    @property
    def namespace(self) -> str:
        """``metadata.namespace`` (``default`` when missing)."""
        return str(self.meta.get("namespace") or "default")

    @property
    def uid(self) -> str:
        """``metadata.uid``."""
        return str(self.meta.get("uid") or "")

    @property
    def labels(self) -> Mapping[str, str]:
        """``metadata.labels`` (empty when missing)."""
        labels = self.meta.get("labels")
        return labels if isinstance(labels, dict) else {}

    @property
    def annotations(self) -> Mapping[str, str]:
        """``metadata.annotations`` (empty when missing)."""
        annotations = self.meta.get("annotations")
        return annotations if isinstance(annotations, dict) else {}

    @property
    def display(self) -> str:
        """``namespace/name``, how ManifestError names a namespaced object."""
        return f"{self.namespace}/{self.name}"

    def error(self, *, field: str, problem: str) -> manifests.ManifestError:
        """A ManifestError about ``field`` of this object."""
        return manifests.ManifestError(kind=self.kind, name=self.display, field=field, problem=problem)


def job_ref(obj: Mapping[str, Any], *, kind: str, api_version: str) -> JobRef:
    """The JobRef of a manifest (its metadata, or an empty one when that is not a mapping)."""
    meta = obj.get("metadata")
    group = api_version.rpartition("/")[0]
    return JobRef(kind=kind, api_version=api_version, group=group, meta=meta if isinstance(meta, dict) else {})


# -- names ----------------------------------------------------------------------------------------


def workload_name(*, owner_name: str, owner_uid: str, kind: str, group: str) -> str:
    """The Workload name Kueue gives a job: ``<kind>-<name>-<5 hex>``, within 253 characters.

    Kueue jobframework/workload_names.go GetWorkloadNameForOwnerWithGVK: the prefix is
    the lower-case kind and the owner's name, cut to 247 characters; the suffix the
    first 5 hex digits of SHA-1 over kind, group, name and UID, one per line (so a
    re-created job of the same name gets a new workload). Kueue's own test:
    ``job-name-ef3a1`` for Job ``name`` with UID ``uid``.
    """
    digest = hashlib.sha1(f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode()).hexdigest()
    prefix = f"{kind.lower()}-{owner_name}"[: _MAX_WORKLOAD_NAME - 1 - _NAME_HASH_LENGTH]
    return f"{prefix}-{digest[:_NAME_HASH_LENGTH]}"


# -- managed or not -------------------------------------------------------------------------------


def controller_owner(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference with ``controller: true`` (metav1.GetControllerOf), or None."""
    for owner in meta.get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller") is True:
            return owner
    return None


#: Kueue's managedOwnersChainLimit (jobframework/reconciler.go): the most controller owners walked up.
MANAGED_OWNERS_CHAIN_LIMIT = 10
#: The field a job's rejection names when its owner chain is too deep (see :func:`managed_ancestor`).
NESTING_FIELD = "metadata.ownerReferences"
#: Kueue's Warning Event reason and message then (jobframework/events.go, reconciler.go ReconcileGenericJob).
NESTING_REASON = "JobNestingTooDeep"
NESTING_MESSAGE = (
    f"Terminated search for Kueue-managed Job because ancestor depth exceeded limit of {MANAGED_OWNERS_CHAIN_LIMIT}"
)


def owner_record(obj: Mapping[str, Any], *, kind: str, api_version: str, enabled: bool = True) -> Owner:
    """The :class:`Owner` of a job manifest ``obj`` of ``kind``; ``api_version`` is its integration's, which an
    owner reference must name (Kueue ownerReferenceMatchingGVK); ``enabled``: whether that integration is
    (:attr:`Owner.enabled`). Labels that are not a mapping count as none."""
    meta = as_mapping(obj.get("metadata"))
    labels = meta.get("labels")
    return Owner(
        api_version=api_version,
        kind=kind,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        controller=controller_owner(meta),
        enabled=enabled,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Ancestry:
    """What walking a job's controller owners found (:func:`ancestry`).

    ``ancestor``: the top-most managed one, or None; ``too_deep``: the walk passed
    :data:`MANAGED_OWNERS_CHAIN_LIMIT` owners; ``cyclic``: it came back to an object it had walked. Either
    of the last two is an error in Kueue: the job gets no Workload and is not suspended.
    """

    ancestor: Owner | None = None
    too_deep: bool = False
    cyclic: bool = False

    @property
    def child(self) -> bool:
        """Whether the job gets no Workload of its own: it has a managed ancestor, or the walk failed."""
        return self.ancestor is not None or self.too_deep or self.cyclic


#: How a walk reads the object an owner reference names (:func:`walk_owners`): the :class:`Owner` it has, or None
#: when it has none to give (a kind no integration has, an object not seen).
OwnerLookup = Callable[[Mapping[str, Any]], Owner | None]


def ancestry(ref: JobRef, context: Context) -> Ancestry:
    """Walk the object's controller owners through ``context.owners``, the jobs the watcher has seen by UID
    (:func:`walk_owners`).

    An owner not seen ends the walk as one of a kind no integration has does: Kueue stops there too, and
    fails when the owner does not exist; here an unseen owner may also be one the watcher does not watch
    (a kind whose integration is off). While ``manageJobsWithoutQueueName`` is off the watcher sees the
    jobs without the queue-name label through a watch of its own, keeping those that have a controller
    (:mod:`kueue_es.services.watcher.inputs`), so the walk goes through them as Kueue's does.
    """
    owners = context.owners
    return walk_owners(
        ref,
        lambda reference: owners.get(str(reference.get("uid") or "")),
        manage_jobs_without_queue_name=context.manage_jobs_without_queue_name,
    )


def walk_owners(ref: JobRef, lookup: OwnerLookup, *, manage_jobs_without_queue_name: bool) -> Ancestry:
    """Walk the object's controller owners (Kueue jobframework/reconciler.go FindAncestorJobManagedByKueue):
    the one rule of the watcher (:func:`ancestry`, owners it has seen) and the webhooks
    (:func:`kueue_es.jobframework.webhooks.walk`, owners read from the API server).

    Each step follows the current object's ``controller: true`` owner reference to what ``lookup`` gives for
    it, which must be of that apiVersion, kind and UID, in the object's namespace. The walk stops (keeping what
    it found) at an object without a controller, where ``lookup`` gives None, and at an owner that does not
    match the reference (Kueue: "the owner reference UID does not match the referenced object"). An owner is
    managed when its integration is enabled and it names a queue or ``manage_jobs_without_queue_name`` is on;
    the last managed one found is the ancestor. More than :data:`MANAGED_OWNERS_CHAIN_LIMIT` owners:
    ``too_deep`` (Kueue's ErrManagedOwnersChainLimitReached); an owner already walked: ``cyclic``
    (ErrCyclicOwnership).
    """
    seen = {ref.uid}
    found: Owner | None = None
    current: Mapping[str, Any] | None = controller_owner(ref.meta)
    while current is not None:
        owner = lookup(current)
        if (
            owner is None
            or owner.namespace != ref.namespace
            or (owner.api_version, owner.kind) != (current.get("apiVersion"), current.get("kind"))
            or owner.uid != str(current.get("uid") or "")
        ):
            break
        if owner.uid in seen:
            return Ancestry(cyclic=True)
        seen.add(owner.uid)
        if owner.enabled and (manage_jobs_without_queue_name or owner.labels.get(QUEUE_LABEL)):
            found = owner
        if len(seen) - 1 > MANAGED_OWNERS_CHAIN_LIMIT:
            return Ancestry(too_deep=True)
        current = owner.controller
    return Ancestry(ancestor=found)


def managed_ancestor(ref: JobRef, context: Context) -> bool:
    """Whether the job is a child of a job Kueue manages (:func:`ancestry`), so gets no Workload of its own;
    also True when the owner chain loops (Kueue's reconcile fails then, silently).

    Raises ManifestError on :data:`NESTING_FIELD` with :data:`NESTING_MESSAGE` when the chain is longer than
    :data:`MANAGED_OWNERS_CHAIN_LIMIT`: Kueue records the Warning Event :data:`NESTING_REASON` on the job and
    fails the reconcile, so the job gets no Workload (one it had stays) and is not suspended.
    """
    found = ancestry(ref, context)
    if found.too_deep:
        raise ref.error(field=NESTING_FIELD, problem=NESTING_MESSAGE)
    return found.child


def owned_by_managed_job(ref: JobRef, context: Context) -> bool:
    """Whether the object gets no workload of its own because of its owners (:func:`ancestry`): a managed
    ancestor (a JobSet's Job, a Job's Pod: part of that workload, which is what is admitted), or an owner
    chain Kueue fails to walk. Never raises: for the callers that record no Event (pods, the watcher's
    bookkeeping); a job's conversion uses :func:`managed_ancestor`.
    """
    return ancestry(ref, context).child


def queue_name(ref: JobRef, context: Context, *, managed_without_queue: bool | None = None) -> str | None:
    """The LocalQueue a job's workload goes to, or None when Kueue does not manage the job.

    None in a namespace ``managedJobsNamespaceSelector`` does not select
    (:meth:`Context.namespace_managed`), whatever the job's labels. Else the
    ``kueue.x-k8s.io/queue-name`` label (validated as a DNS subdomain, as
    Kueue's webhook does: jobframework/validation.go ValidateQueueName). Without it
    the job is managed only with ``manageJobsWithoutQueueName`` (jobframework
    reconciler.go ReconcileGenericJob), and its workload goes to no queue, where it
    waits until the label is set (a job created while its namespace has a ``default``
    LocalQueue gets that label from Kueue's webhook: defaults.go ApplyDefaultLocalQueue;
    one created before keeps no queue). ``managed_without_queue`` overrides the option
    (pods carry their own mark).
    """
    if not context.namespace_managed(ref.namespace):
        return None
    name = ref.labels.get(QUEUE_LABEL) or ""
    if name:
        if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            raise ref.error(field=f"metadata.labels[{QUEUE_LABEL}]", problem=f"{name!r} is not a valid LocalQueue name")
        return name
    manage = context.manage_jobs_without_queue_name if managed_without_queue is None else managed_without_queue
    if not manage:
        return None
    return ""


def max_execution_time(ref: JobRef) -> int | None:
    """``kueue.x-k8s.io/max-exec-time-seconds``: a positive integer, or None when absent.

    Kueue's webhook refuses what Go's strconv.Atoi refuses and a value below 1 (jobframework/validation.go
    validateCreateForMaxExecTime): raises ManifestError with its words (a job no webhook saw). A value it lets
    through that is beyond the Workload's int32 field gives no maximum, as Kueue's reconciler reads the label
    with strconv.ParseInt(value, 10, 32) and takes none on its error (utils.go MaximumExecutionTimeSecondsForObject).
    """
    raw = ref.labels.get(MAX_EXEC_TIME_LABEL)
    if raw is None:
        return None
    field = f"metadata.labels[{MAX_EXEC_TIME_LABEL}]"
    try:
        value = goint.atoi(str(raw))
    except goint.GoNumError as err:
        raise ref.error(field=field, problem=str(err)) from err
    if value <= 0:
        raise ref.error(field=field, problem=f"{raw!r} is not a positive integer")
    return value if value <= goint.INT32_MAX else None


# -- priority -------------------------------------------------------------------------------------


def priority(
    ref: JobRef,
    *,
    pod_specs: list[tuple[str, Mapping[str, Any]]],
    context: Context,
    job_priority_class: tuple[str, str] | None = None,
) -> tuple[models.PriorityClassRef | None, int | None]:
    """The workload's ``priorityClassRef`` and ``priority`` (SEMANTICS §2.4).

    Kueue jobframework/reconciler.go ExtractPriority, util/priority/priority.go:
    0. a workload already published (``context.previous``) keeps its priority where Kueue's
       UpdateWorkloadPriority leaves it (reconciler.go classifyWorkloadsForPriorityUpdate): one that
       reserved quota with no class (``context.previous_reserved``: the API refuses to add one), one
       backed by a pod PriorityClass (it does not follow the label), and one whose class name is the
       label's already (none and no label; the same WorkloadPriorityClass: the fold reads its value);
    1. the ``kueue.x-k8s.io/priority-class`` label names a WorkloadPriorityClass (a job
       without it gets ``default`` only from Kueue's webhook, at its creation, when that
       class exists: WorkloadPriorityClassDefaulting). The priority is left None: the fold
       reads the class's current value. A class that does not exist raises ManifestError
       on :data:`MISSING_WPC_FIELD` (Kueue ExtractPriority: no workload, Warning
       WorkloadPriorityClassNotFound), unless ``context.previous`` names it already: the
       class was deleted since, and a workload with a priority pinned (the watcher pins
       the class's last value at its deletion) keeps it.
    2. else the first pod template (``pod_specs``: field path and pod spec, in pod set
       order) with a ``priorityClassName`` names a PriorityClass, which must exist
       (Kueue creates no workload until it does: ManifestError here);
    3. else the global-default PriorityClass (the lowest value if several);
    4. else no class and priority None (0).
    A PriorityClass value is fixed when the workload is created (Kueue never updates
    it), so the one in ``context.previous`` wins while the class name is unchanged.
    ``job_priority_class``: (field path, PriorityClass name) a job names for all its pods
    (Kubeflow's ``runPolicy.schedulingPolicy.priorityClass``), which wins over step 2's templates.
    """
    previous = context.previous.spec.priority_class_ref if context.previous is not None else None
    wpc = str(ref.labels.get(PRIORITY_CLASS_LABEL) or "")
    if context.previous is not None and (
        (previous is None and (context.previous_reserved or not wpc))
        or (previous is not None and previous.kind == "PriorityClass")
    ):
        return previous, context.previous.spec.priority
    if wpc:
        ref_wpc = models.PriorityClassRef(name=str(wpc))
        if wpc not in context.workload_priority_classes:
            if context.previous is None or previous != ref_wpc:
                # Kueue resolves the class to create a workload, or to move one to it (UpdateWorkloadPriority),
                # and fails the reconcile with a WorkloadPriorityClassNotFound Event when it is missing: no
                # Workload yet, or the one there left as it is, until the class is created
                raise ref.error(field=MISSING_WPC_FIELD, problem=f'WorkloadPriorityClass "{wpc}" not found')
            if context.previous.spec.priority is not None:
                # the class was deleted: the workload keeps the priority it had (Kueue leaves spec.priority as
                # its WorkloadPriorityClass controller last wrote it), pinned by the watcher at the deletion
                return ref_wpc, context.previous.spec.priority
        return ref_wpc, None
    pinned = previous if previous is not None and previous.kind == "PriorityClass" else None
    named = [(f"{where}.priorityClassName", spec.get("priorityClassName") or "") for where, spec in pod_specs]
    if job_priority_class is not None:
        named.insert(0, job_priority_class)
    for where, name in named:
        if not name:
            continue
        if pinned is not None and pinned.name == name and context.previous is not None:
            return pinned, context.previous.spec.priority
        found = context.priority_classes.get(str(name))
        if found is None:
            raise ref.error(field=where, problem=f'PriorityClass "{name}" not found')
        return _pod_priority_ref(found.name), found.value
    if pinned is not None and context.previous is not None:
        return pinned, context.previous.spec.priority
    defaults = [pc for pc in context.priority_classes.values() if pc.global_default]
    if defaults:
        chosen = min(defaults, key=lambda pc: (pc.value, pc.name))  # Kueue: the lowest value; ties by name
        return _pod_priority_ref(chosen.name), chosen.value
    return None, None


def _pod_priority_ref(name: str) -> models.PriorityClassRef:
    return models.PriorityClassRef(group=POD_PRIORITY_GROUP, kind="PriorityClass", name=name)


# -- pod sets -------------------------------------------------------------------------------------


def pod_spec_at(ref: JobRef, template: Any, *, where: str) -> Mapping[str, Any]:
    """``template.spec`` of a pod template at field ``where``; ManifestError when either is not a mapping."""
    if template is None:
        template = {}
    if not isinstance(template, dict):
        raise ref.error(field=where, problem="must be a mapping (a pod template)")
    spec = template.get("spec")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise ref.error(field=f"{where}.spec", problem="must be a mapping (a pod spec)")
    return spec


def pod_set(
    ref: JobRef,
    *,
    name: str,
    count: int,
    pod_spec: Mapping[str, Any],
    where: str,
    min_count: int | None = None,
    context: Context | None = None,
    topology_request: models.PodSetTopologyRequest | None = None,
    index: int = 0,
) -> models.PodSet:
    """One pod set: ``count`` pods of ``pod_spec`` (found at field ``where``; the Workload's pod set
    ``index``), with the TAS
    ``topology_request`` its template's annotations ask for (:func:`topology_request`), dropped when
    ``context`` has the gate TopologyAwareScheduling off.

    Per-pod requests follow SEMANTICS §2.3 (Kueue pkg/workload/resources.go and the
    Kubernetes pod request formula): the RuntimeClass overhead and LimitRange
    defaults of ``context`` first (:mod:`kueue_es.jobframework.adjust`), then containers
    summed, each init container maxed with them, sidecars (restartable init
    containers) added, pod overhead added, limits standing in for missing requests,
    pod-level resources winning. Amounts are integers (cpu in millicores, memory in
    bytes). Requests above limits or outside the LimitRanges make the pod set
    ``misconfigured``, with Kueue's message on the Workload's field ``spec.podSets[index].template.spec``
    (:func:`adjust.admissibility_problem`). The nodeSelector, tolerations and required node affinity are
    kept for flavor assignment.
    """
    context = context or Context()
    if not context.topology_aware_scheduling:
        topology_request = None  # no TAS without the gate (Kueue PR #4742)
    for what, value in (("count", count), ("minCount", min_count)):
        # the Workload's int32 fields: a count read from an object (a replica count times a parallelism, a pod
        # group's total count) beyond them makes no Workload, nor an event the codec could read back
        if value is not None and not 0 <= value <= goint.INT32_MAX:
            raise ref.error(
                field=f"spec.podSets[{index}].{what}",
                problem=f"{value} pods is out of the range of a Workload's pod set (0 to {goint.INT32_MAX})",
            )
    for group in ("containers", "initContainers"):
        containers = pod_spec.get(group)
        if containers is not None and not isinstance(containers, list):
            raise ref.error(field=f"{where}.{group}", problem="must be a list")
        for i, container in enumerate(containers or []):
            if not isinstance(container, dict):
                raise ref.error(field=f"{where}.{group}[{i}]", problem="must be a mapping")
    node_selector = pod_spec.get("nodeSelector") or {}
    if not isinstance(node_selector, dict) or not all(isinstance(v, str) for v in node_selector.values()):
        raise ref.error(field=f"{where}.nodeSelector", problem="must map label keys to strings")
    limit_ranges = context.limit_ranges
    spec = adjust.adjusted_pod_spec(pod_spec, runtime_classes=context.runtime_classes, limit_ranges=limit_ranges)
    requests = manifests.pod_requests(spec, where=where, kind=ref.kind, name=ref.display)
    # Kueue validates the Workload it made of the job, so its messages name the Workload's fields.
    misconfigured = adjust.admissibility_problem(
        spec, limit_ranges=limit_ranges, pod_requests=requests, where=f"spec.podSets[{index}].template.spec"
    )
    return models.PodSet(
        name=name,
        count=count,
        min_count=min_count,
        requests=requests,
        node_selector=dict(node_selector),
        tolerations=_converted(ref, pod_spec.get("tolerations") or [], list[models.Toleration], f"{where}.tolerations"),
        required_node_affinity=_converted(
            ref, manifests.required_node_affinity(spec), list[models.NodeSelectorTerm], f"{where}.affinity.nodeAffinity"
        ),
        preferred_node_affinity=_converted(
            ref,
            manifests.preferred_node_affinity(spec),
            list[models.PreferredSchedulingTerm],
            f"{where}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        ),
        topology_request=topology_request,
        misconfigured=misconfigured,
        resource_claims=_converted(
            ref,
            manifests.pod_resource_claims(pod_spec, where=where, kind=ref.kind, name=ref.display),
            list[models.PodResourceClaim],
            f"{where}.resourceClaims",
        ),
    )


#: The validation fields of a topology request and the pod-template annotation each comes from (A.4.1).
_REQUEST_FIELD_ANNOTATIONS = {
    "required": tas.REQUIRED_ANNOTATION,
    "preferred": tas.PREFERRED_ANNOTATION,
    "unconstrained": tas.UNCONSTRAINED_ANNOTATION,
    "podSetSliceRequiredTopology": tas.SLICE_REQUIRED_ANNOTATION,
    "podSetSliceSize": tas.SLICE_SIZE_ANNOTATION,
    "podSetGroupName": tas.GROUP_NAME_ANNOTATION,
    "podsetSliceRequiredTopologyConstraints": tas.SLICE_CONSTRAINTS_ANNOTATION,
}
#: The pod label Kubernetes' Job controller puts on each pod of an Indexed Job (batchv1.JobCompletionIndexAnnotation).
JOB_COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def template_annotations(ref: JobRef, template: Any, *, where: str) -> Mapping[str, str]:
    """``metadata.annotations`` of the pod template at field ``where`` (empty when absent)."""
    meta = template.get("metadata") if isinstance(template, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if annotations is None:
        return {}
    if not isinstance(annotations, dict):
        raise ref.error(field=f"{where}.metadata.annotations", problem="must map keys to strings")
    return {str(k): str(v) for k, v in annotations.items()}


def topology_request(
    ref: JobRef,
    annotations: Mapping[str, str],
    *,
    where: str,
    count: int,
    pod_index_label: str | None = None,
    sub_group_index_label: str | None = None,
    sub_group_count: int | None = None,
    context: Context | None = None,
) -> models.PodSetTopologyRequest | None:
    """The TAS request of one pod set from its pod template's annotations (SEMANTICS-ADVANCED A.4.1; Kueue
    jobframework/tas.go NewPodSetTopologyRequest), or None when it asks for none, or when ``context`` has the
    gate TopologyAwareScheduling off (then the annotations are not read at all, as Kueue's job controllers
    and webhooks read them only with the gate on).

    ``where`` is the field path of the annotations (``spec.template.metadata.annotations``); the rank hints
    (``pod_index_label``, ``sub_group_*``) are the integration's (Job: the completion index label; JobSet: plus
    the job index label and the replica count). With the gate on, a pod set whose annotations ask for no
    topology still gets a request holding those hints alone, as Kueue writes on every Job's Workload (its
    builder's Build returns nil only when there are no hints either); such a request is not a TAS request
    (:func:`kueue_es.events.tas_requests.requests_tas`). Raises ManifestError naming the annotation for what
    Kueue's job webhooks reject (A.4.2; jobframework/tas_validation.go).
    """
    if context is not None and not context.topology_aware_scheduling:
        return None
    hints = {
        "pod_index_label": pod_index_label,
        "sub_group_index_label": sub_group_index_label,
        "sub_group_count": sub_group_count if sub_group_index_label else None,
    }
    given = {k: v for k, v in hints.items() if v is not None}
    try:
        request = tas.topology_request_from_annotations(annotations)
        if request is None and not given:
            return None
        if request is None:
            request = models.PodSetTopologyRequest()  # the hints alone
        else:
            tas.validate_topology_request(request, count=count, field="topologyRequest")
    except tas.TopologyRequestError as err:
        raise ref.error(field=f"{where}[{_annotation_of(err.field)}]", problem=err.problem) from err
    return msgspec.structs.replace(request, **given)


def _annotation_of(field: str) -> str:
    """The annotation behind a TopologyRequestError's field (the annotation itself, or ``topologyRequest.<f>``)."""
    name = field.removeprefix("topologyRequest.").split("[", 1)[0]
    return _REQUEST_FIELD_ANNOTATIONS.get(name, field)


def check_topology_groups(ref: JobRef, pod_sets: list[models.PodSet], *, where: Sequence[str]) -> None:
    """Leader+workers groups (``podset-group-name``, A.4.2): exactly 2 pod sets with the same level, one of
    count 1. ``where[i]`` is the annotations' field path of pod set i. Raises ManifestError."""
    try:
        tas.validate_pod_set_groups(pod_sets)
    except tas.TopologyRequestError as err:
        index = int(err.field.split("[", 1)[1].split("]", 1)[0])
        raise ref.error(field=f"{where[index]}[{tas.GROUP_NAME_ANNOTATION}]", problem=err.problem) from err


def _converted(ref: JobRef, raw: Any, into: Any, field: str) -> Any:
    try:
        return msgspec.convert(raw, into, str_keys=True)
    except (msgspec.ValidationError, AttributeError, TypeError) as err:
        raise ref.error(field=field, problem=str(err)) from err


def count_field(ref: JobRef, value: Any, *, field: str, default: int) -> int:
    """A non-negative integer field (parallelism, completions, replicas), ``default`` when absent."""
    if value is None:
        return default
    number = parse_int(value)
    if number is None or number < 0:
        raise ref.error(field=field, problem=f"{value!r} is not a non-negative integer")
    if number > goint.INT32_MAX:  # the API's int32: a count beyond it is no count a Workload can hold
        raise ref.error(field=field, problem=f"{value!r} is out of the int32 range (at most {goint.INT32_MAX})")
    return number


def check_pod_sets(ref: JobRef, pod_sets: list[models.PodSet], *, field: str) -> None:
    """A Workload holds 1 to 18 pod sets with distinct names (the Workload CRD, MaxPodSets)."""
    if not pod_sets:
        raise ref.error(field=field, problem="has no pod sets: a Workload needs at least one")
    if len(pod_sets) > MAX_POD_SETS:
        raise ref.error(field=field, problem=f"has {len(pod_sets)} pod sets; a Workload holds at most {MAX_POD_SETS}")
    names = [ps.name for ps in pod_sets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ref.error(field=field, problem=f"pod set names must be unique; repeated: {', '.join(duplicates)}")


# -- the workload ---------------------------------------------------------------------------------


CONCURRENT_ADMISSION_PARENT_LABEL = "kueue.x-k8s.io/concurrent-admission-parent"
"""Kueue's ConcurrentAdmissionParentLabelKey (the deciders' name: scheduling.concurrent_admission.PARENT_LABEL)."""


def new_workload(
    ref: JobRef,
    *,
    name: str,
    pod_sets: list[models.PodSet],
    queue: str,
    pod_specs: list[tuple[str, Mapping[str, Any]]],
    context: Context,
    owner: models.OwnerReference,
    uid: str | None = None,
    creation_timestamp_ms: int | None = None,
    annotations: Mapping[str, str] | None = None,
    job_uid_label: bool = True,
    job_priority_class: tuple[str, str] | None = None,
) -> models.Workload:
    """The Workload Kueue creates for a job (jobframework ConstructWorkload, utils.go NewWorkload).

    Annotations: the job's ``provreq.kueue.x-k8s.io/`` ones (a ProvisioningRequest's parameters) and those
    ``context.annotations_to_copy`` names, plus ``annotations``. Labels: the job's labels
    ``context.label_keys_to_copy`` names, plus ``kueue.x-k8s.io/job-uid`` (``job_uid_label``; pod groups have
    none); the copies are made once, when the Workload is made: a Workload already published
    (``context.previous``) keeps the ones it got (utils.go NewWorkload; job_controller_test.go "Should reconcile
    workload and job for all jobs": "the workload label is not updated when the job label is"); and
    :data:`CONCURRENT_ADMISSION_PARENT_LABEL` when its LocalQueue is one of ``context.concurrent_parent_queues``
    or ``context.previous`` had it (workload_controller.go labels it once), but for Pods. ``uid`` and
    creation time are the job's unless given (a pod group has neither of its own). Raises ManifestError.
    """
    priority_class_ref, priority_value = priority(
        ref, pod_specs=pod_specs, context=context, job_priority_class=job_priority_class
    )
    job_annotations = {str(k): str(v) for k, v in (ref.meta.get("annotations") or {}).items()}
    labels, copied = _copied(ref, job_annotations, context)
    # the job's ProvisioningRequest parameters (Kueue admissioncheck.FilterProvReqAnnotations)
    provreq = {k: v for k, v in job_annotations.items() if k.startswith(PROVREQ_ANNOTATION_PREFIX)}
    provreq.update(copied)
    if job_uid_label and ref.uid:
        labels[JOB_UID_LABEL] = ref.uid
    previous = context.previous
    if owner.kind != "Pod" and (
        (ref.namespace, queue) in context.concurrent_parent_queues
        or (previous is not None and previous.metadata.labels.get(CONCURRENT_ADMISSION_PARENT_LABEL) == "true")
    ):
        # Kueue's workload controller labels a Workload of an opted-in ClusterQueue once, and it stays a parent;
        # not a Pod's or a pod group's here (docs/design.md: their stops do not name the variant)
        labels[CONCURRENT_ADMISSION_PARENT_LABEL] = "true"
    if creation_timestamp_ms is None:
        creation_timestamp_ms = manifests.parse_time_ms(
            ref.meta.get("creationTimestamp"), kind=ref.kind, name=ref.display, field="metadata.creationTimestamp"
        )
    return models.Workload(
        metadata=models.ObjectMeta(
            name=name,
            namespace=ref.namespace,
            uid=ref.uid if uid is None else uid,
            labels=labels,
            annotations={**provreq, **(annotations or {})},
            creation_timestamp_ms=creation_timestamp_ms,
        ),
        spec=models.WorkloadSpec(
            pod_sets=pod_sets,
            queue_name=queue,
            priority_class_ref=priority_class_ref,
            priority=priority_value,
            maximum_execution_time_seconds=max_execution_time(ref),
        ),
        owner=owner,
    )


def _copied(ref: JobRef, job_annotations: Mapping[str, str], context: Context) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations of the job a new Workload copies (``context.label_keys_to_copy``,
    ``annotations_to_copy``), or those ``context.previous`` got when it was made (Kueue copies them only into the
    Workload it constructs, never onto one that exists)."""
    previous = context.previous
    if previous is not None:
        labels = {k: v for k, v in previous.metadata.labels.items() if k in context.label_keys_to_copy}
        annotations = {k: v for k, v in previous.metadata.annotations.items() if k in context.annotations_to_copy}
        return labels, annotations
    labels = {str(k): str(v) for k, v in ref.labels.items() if str(k) in context.label_keys_to_copy}
    annotations = {k: v for k, v in job_annotations.items() if k in context.annotations_to_copy}
    return labels, annotations


def owner_of(ref: JobRef) -> models.OwnerReference:
    """The owner reference a workload carries to its job."""
    return models.OwnerReference(api_version=ref.api_version, kind=ref.kind, name=ref.name, uid=ref.uid)


def true_condition(obj: Mapping[str, Any], types: tuple[str, ...]) -> Mapping[str, Any] | None:
    """The first ``status.conditions`` entry whose type is one of ``types`` and whose status is True."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, dict) and condition.get("type") in types and condition.get("status") == "True":
            return condition
    return None


def status_time_ms(value: Any, *, default: int) -> int:
    """A status time (RFC 3339, e.g. a condition's ``lastTransitionTime``) in ms since the epoch, or
    ``default`` when absent or not a time: a controller's odd status must not keep a fact from being given."""
    try:
        return manifests.parse_time_ms(value) or default
    except manifests.ManifestError:
        return default


PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
"""The label naming the Workload a job uses instead of one made for it (Kueue constants.go)."""


def prebuilt_workload(job: Mapping[str, Any]) -> str:
    """The prebuilt Workload a job names by ``kueue.x-k8s.io/prebuilt-workload-name`` ("" none): the annotation,
    read first (WorkloadIdentifierAnnotations, on by default), else the label (jobframework utils.go
    PrebuiltWorkloadNameFor). MultiKueue's remote job names its remote Workload so (SEMANTICS-ADVANCED E.2
    step 5); a user may name one too (:mod:`kueue_es.jobframework.prebuilt`)."""
    meta = job.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    for where in ("annotations", "labels"):
        values = meta.get(where)
        if isinstance(values, dict) and values.get(PREBUILT_WORKLOAD_LABEL):
            return str(values[PREBUILT_WORKLOAD_LABEL])
    return ""


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping (a JSON object), else an empty one: for fields the API server may leave out."""
    return value if isinstance(value, dict) else {}


def parse_int(value: Any) -> int | None:
    """An integer from an int or a decimal string (as Go's strconv.Atoi reads it), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value):
        return int(value)
    return None


# -- facts every integration gives --------------------------------------------------------------


def rejected(manifest: Mapping[str, Any], err: manifests.ManifestError, *, now_ms: int = 0) -> types.ObjectRejected:
    """An ObjectRejected fact for a manifest that failed conversion."""
    meta = manifest.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return types.ObjectRejected(
        kind=str(manifest.get("kind") or err.kind),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or err.name),
        field=err.field,
        problem=err.problem,
        at_ms=now_ms,
    )


OWNER_NOT_FOUND_REASON = "OwnerNotFound"
"""The Finished reason of an orphaned Workload (kueue.WorkloadFinishedReasonOwnerNotFound)."""
OWNER_NOT_FOUND_MESSAGE = "The workload's owner no longer exists"
"""The Finished message of an orphaned Workload (pkg/workload/workload.go FinalizeOrphanedWorkload)."""


def is_orphaned(obj: Mapping[str, Any]) -> bool:
    """Whether a Workload object (a manifest) is a job's Workload left without an owner: no
    ``metadata.ownerReferences`` but the ``kueue.x-k8s.io/job-uid`` label its job's reconciler put on it --
    what the garbage collector leaves of it when its job is deleted with ``propagationPolicy: Orphan``
    (``kubectl delete job --cascade=orphan``). Kueue finishes such a Workload ``OwnerNotFound`` and keeps it
    (pkg/controller/core/workload_controller.go isOrphanedWorkload, feature gate FinishOrphanedWorkloads,
    Beta and on by default since v0.18). A Workload being deleted counts too (Kueue then only lets go of it).
    """
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    labels = meta.get("labels")
    return not meta.get("ownerReferences") and bool(isinstance(labels, dict) and labels.get(JOB_UID_LABEL))


def object_gone_version(object_uid: str) -> str:
    """The Msg-Id version of the ObjectDeleted of a Workload object that went (deleted, or marked for deletion):
    ``gone@<object UID>``. Every service that tells of that deletion gives it -- the dispatcher that deleted the
    object (the retention policies), the watcher that saw it go, whichever way it reads the deletion (a job's
    Workload, a Pod's or a pod group's, a prebuilt or a standalone one) -- so the deletion is one fact on the log,
    whoever tells first. An object is deleted once: its UID names that deletion."""
    return f"gone@{object_uid}"


def owner_not_found(workload: types.WorkloadRef, *, at_ms: int, owner_deleting: bool = False) -> types.WorkloadFinished:
    """WorkloadFinished for an orphaned workload (:func:`is_orphaned`): reason ``OwnerNotFound``, message
    "The workload's owner no longer exists", neither succeeded nor failed (``succeeded`` False: its job did
    not succeed), at ``at_ms`` (ms since the epoch). Kueue: pkg/workload/workload.go FinalizeOrphanedWorkload
    (the Finished condition, its quota released, Kueue's finalizer taken off; the object stays).
    ``owner_deleting``: the workload of a job being deleted (Kueue's job reconciler finalizes it,
    reconciler.go finalize), whose Workload object keeps its owner reference and goes with the job."""
    return types.WorkloadFinished(
        workload=workload,
        succeeded=False,
        reason=OWNER_NOT_FOUND_REASON,
        message=OWNER_NOT_FOUND_MESSAGE,
        at_ms=at_ms,
        owner_deleting=True if owner_deleting else msgspec.UNSET,
    )


FINISH_ORPHANED_WORKLOADS_GATE = "FinishOrphanedWorkloads"
"""Kueue's feature gate (pkg/features/kube_features.go): Beta and on by default since v0.18, not locked, so
``--feature-gates=FinishOrphanedWorkloads=false`` (or the Configuration's ``featureGates``) turns it off."""


def finish_orphans(gates: Mapping[str, bool]) -> bool:
    """Whether FinishOrphanedWorkloads is on in ``gates`` (a Configuration's feature gates; missing: Kueue's
    default, on). Off, Kueue finishes no Workload ``OwnerNotFound``: one whose job is gone or being deleted
    only loses Kueue's finalizer and keeps its quota, and one made with a job's UID label and no owner is
    admitted as any Workload (workload_controller.go isOrphanedWorkload, workload.go
    FinalizeOrphanedWorkload)."""
    return gates.get(FINISH_ORPHANED_WORKLOADS_GATE, True)


def finished_fact(
    ref: JobRef, *, name: str, succeeded: bool, message: str, at_ms: int, uid: str | None = None
) -> types.WorkloadFinished:
    """WorkloadFinished for the workload ``name`` of a job that succeeded or failed.

    ``reason`` Succeeded or Failed, as Kueue's Finished condition (jobframework reconciler.go).
    """
    workload = types.WorkloadRef(namespace=ref.namespace, name=name, uid=ref.uid if uid is None else uid)
    reason = "Succeeded" if succeeded else "Failed"
    return types.WorkloadFinished(workload=workload, succeeded=succeeded, reason=reason, message=message, at_ms=at_ms)
