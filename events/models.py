"""The Kueue v1beta2 objects, as kueue-es carries them inside events.

Each model keeps the Kubernetes shape (``metadata`` + ``spec``, camelCase on the
wire) so a Kueue user reads an event like a manifest, with three differences that
make folding exact: quantities are integer amounts (CPU in millicores, memory in
bytes, SEMANTICS §0.1), times are integer milliseconds since the epoch
(``creationTimestampMs``), and a Workload's pod set carries its per-pod requests
instead of a pod template (events stay far below NATS's 1 MiB limit).

Defaults are Kueue's (SEMANTICS §1; Kueue apis/kueue/v1beta2/*_types.go).
:mod:`kueue_es.events.manifests` builds these models from YAML manifests and validates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

import msgspec

#: Kueue's API limits (kubebuilder markers in apis/kueue/v1beta2/*_types.go), as msgspec
#: constraints: ``msgspec.convert`` enforces them and kueue_es.crds carries them into the CRDs.
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
KIND_PATTERN = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"
#: A reference to a cluster-scoped object by name (ClusterQueue, Cohort, ResourceFlavor, LocalQueue, Topology).
ObjectName = Annotated[str, msgspec.Meta(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)]
#: An optional reference to a cluster-scoped object: a name as :data:`ObjectName`, or "" for none (a field Kueue
#: marks ``+optional`` with ``omitempty``, so "" is how an absent one reads; a present one is still a name).
OptionalObjectName = Annotated[str, msgspec.Meta(pattern="^$|" + DNS_SUBDOMAIN_PATTERN, max_length=253)]
#: A pod set name: a DNS label (Kueue's PodSetReference).
PodSetName = Annotated[str, msgspec.Meta(pattern=DNS_LABEL_PATTERN, max_length=63)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]

StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
QueueingStrategy = Literal["StrictFIFO", "BestEffortFIFO"]


class _Model(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """Base of the API models: frozen, keyword-only, camelCase on the wire; never tracked by the
    cyclic garbage collector (``gc=False``: a model holds no reference cycle, tests/unit/test_gc_untracked.py)."""


class ObjectMeta(_Model, frozen=True, kw_only=True):
    """The metadata that changes outcomes; ``creationTimestampMs`` is ms since the epoch (0 = zero time)."""

    name: str
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    generation: int = 0
    creation_timestamp_ms: int = 0


class Taint(_Model, frozen=True, kw_only=True):
    """A node taint (ResourceFlavor ``nodeTaints``)."""

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(_Model, frozen=True, kw_only=True):
    """A pod or flavor toleration; an empty key with ``Exists`` tolerates everything."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class ResourceFlavorSpec(_Model, frozen=True, kw_only=True):
    """ResourceFlavor spec: node labels injected on admission, taints, tolerations, TAS topology."""

    node_labels: Annotated[dict[str, str], msgspec.Meta(max_length=8)] = {}
    node_taints: Annotated[list[Taint], msgspec.Meta(max_length=8)] = []
    tolerations: Annotated[list[Toleration], msgspec.Meta(max_length=8)] = []
    topology_name: ObjectName | None = None


class ResourceFlavor(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 ResourceFlavor (cluster-scoped)."""

    metadata: ObjectMeta
    spec: ResourceFlavorSpec = ResourceFlavorSpec()


class ResourceQuota(_Model, frozen=True, kw_only=True):
    """Quota of one resource in one flavor; amounts are integers (cpu: millicores).

    ``None`` limits mean unlimited borrowing / lend everything (Kueue's nil).
    """

    name: str
    nominal_quota: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


class FlavorQuotas(_Model, frozen=True, kw_only=True):
    """The quotas a ClusterQueue or Cohort holds in one flavor, in coveredResources order."""

    name: ObjectName
    resources: Annotated[list[ResourceQuota], msgspec.Meta(min_length=1, max_length=64)]


class ResourceGroup(_Model, frozen=True, kw_only=True):
    """Resources that share one flavor choice, with the flavors tried in order."""

    covered_resources: Annotated[list[str], msgspec.Meta(min_length=1, max_length=64)]
    flavors: Annotated[list[FlavorQuotas], msgspec.Meta(min_length=1, max_length=64)]


class LabelSelectorRequirement(_Model, frozen=True, kw_only=True):
    """One ``matchExpressions`` entry of a Kubernetes LabelSelector."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = []


class LabelSelector(_Model, frozen=True, kw_only=True):
    """A Kubernetes LabelSelector; the empty selector matches everything."""

    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes LabelSelector semantics (apimachinery labels.Selector): every ``matchLabels``
        pair and every ``matchExpressions`` requirement holds (``NotIn`` and ``DoesNotExist`` hold
        for a missing key)."""
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for expr in self.match_expressions:
            present = expr.key in labels
            if expr.operator == "In" and labels.get(expr.key) not in expr.values:
                return False
            if expr.operator == "NotIn" and present and labels[expr.key] in expr.values:
                return False
            if expr.operator == "Exists" and not present:
                return False
            if expr.operator == "DoesNotExist" and present:
                return False
        return True


class BorrowWithinCohort(_Model, frozen=True, kw_only=True):
    """Preemption while borrowing (SEMANTICS §7.2)."""

    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(_Model, frozen=True, kw_only=True):
    """ClusterQueue preemption policies; Kueue's default is Never everywhere."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort()


class FlavorFungibility(_Model, frozen=True, kw_only=True):
    """When to try the next flavor (SEMANTICS §5.7); defaults as Kueue's defaulting."""

    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor"] = "MayStopSearch"
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor"] = "TryNextFlavor"
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = None


class AdmissionCheckStrategyRule(_Model, frozen=True, kw_only=True):
    """An admission check a ClusterQueue requires, optionally only on some flavors."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=316)]
    on_flavors: Annotated[list[ObjectName], msgspec.Meta(max_length=64)] = []


class AdmissionChecksStrategy(_Model, frozen=True, kw_only=True):
    """``spec.admissionChecksStrategy`` of a ClusterQueue."""

    admission_checks: Annotated[list[AdmissionCheckStrategyRule], msgspec.Meta(min_length=1, max_length=64)] = []


class FairSharing(_Model, frozen=True, kw_only=True):
    """Fair-sharing weight, kept as the exact Quantity string (default ``1``)."""

    weight: str = "1"


class AdmissionScope(_Model, frozen=True, kw_only=True):
    """Admission fair sharing mode of a ClusterQueue (SEMANTICS §8)."""

    admission_mode: Literal["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"] = "NoAdmissionFairSharing"


class ClusterQueueSpec(_Model, frozen=True, kw_only=True):
    """ClusterQueue spec (SEMANTICS §1.3). ``namespaceSelector`` None matches no namespace."""

    resource_groups: Annotated[list[ResourceGroup], msgspec.Meta(max_length=16)] = []
    cohort_name: ObjectName | None = None
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = None
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    preemption: ClusterQueuePreemption = ClusterQueuePreemption()
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: StopPolicy = "None"
    fair_sharing: FairSharing | None = None
    admission_scope: AdmissionScope | None = None


class ClusterQueue(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 ClusterQueue (cluster-scoped)."""

    metadata: ObjectMeta
    spec: ClusterQueueSpec = ClusterQueueSpec()

    @property
    def terminating(self) -> bool:
        """Marked for deletion and held by Kueue's finalizer (:data:`TERMINATING_ANNOTATION`)."""
        return TERMINATING_ANNOTATION in self.metadata.annotations


TERMINATING_ANNOTATION = "kueue-es.dev/terminating"
"""Set by the watcher on an object of :data:`FINALIZED_KINDS` marked for deletion (its
``deletionTimestamp``, RFC 3339) while a finalizer holds it; the watcher drops a value a user set. A
terminating ClusterQueue admits nothing more and its usage stays in its cohort until it is gone (Kueue's
cache terminates it); a terminating ResourceFlavor, AdmissionCheck or Topology stays in use as it was,
as Kueue's cache keeps it, until nothing names it and its finalizer comes off."""

FINALIZED_KINDS = ("ClusterQueue", "ResourceFlavor", "AdmissionCheck", "Topology")
"""The kinds Kueue holds with its ``kueue.x-k8s.io/resource-in-use`` finalizer while in use (its
clusterqueue, resourceflavor, admissioncheck and tas topology controllers)."""


OWN_PRIORITY_ANNOTATION = "kueue-es.dev/own-priority"
"""Set (value ``"true"``) by the watcher on a Workload observed as an object (a Workload made by hand, a prebuilt
one) that names a WorkloadPriorityClass and has a ``spec.priority``, and on a job's workload whose Workload object
has a ``spec.priority`` its user set (services/watcher/publishing.py ``Publisher.own_priority``: kept while the job
names the same class and keeps its shape); a value a user set is dropped. Its ``spec.priority`` is then its
priority, as Kueue's scheduler reads it (pkg/util/priority Priority), a change of it by hand included, until the
class's value changes, when the fold writes that value in, as Kueue's WorkloadPriorityClass controller rewrites
``spec.priority`` of every Workload naming the class. Without it (every log before it) a WorkloadPriorityClass's
current value is the priority."""


PRIORITY_BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"
"""Kueue's effective-priority adjustment of a Workload (gate PriorityBoost; KEP 7990), set on the Workload object
by another controller. On a job's workload the watcher copies it from the object onto the log's workload and the
dispatcher leaves it out of what it writes, so that controller alone owns it."""

POD_GROUP_MEMBERS_ANNOTATION = "kueue-es.dev/pod-group-members"
"""Set by the watcher on a pod group's workload (``kueue.x-k8s.io/is-group-workload``): the names of the
group's pods it was made from, sorted, joined with ``,``. Kueue's Workload of a pod group is owned by every
pod of it (pod_controller.go EnsureWorkloadOwnedByAllMembers), while the log's ``owner`` is the first pod
only; ``kueue-es list workload`` names them all, as ``kubectl kueue list workload`` reads the owner
references. Not written on the Workload object (Kueue has no such annotation)."""


def pod_group_members(meta: ObjectMeta) -> list[str]:
    """The pod names of :data:`POD_GROUP_MEMBERS_ANNOTATION` (``[]`` without it)."""
    text = meta.annotations.get(POD_GROUP_MEMBERS_ANNOTATION, "")
    return [name for name in text.split(",") if name]


def is_terminating(meta: ObjectMeta) -> bool:
    """Whether the object with ``meta`` is marked for deletion and held (:data:`TERMINATING_ANNOTATION`)."""
    return TERMINATING_ANNOTATION in meta.annotations


class CohortSpec(_Model, frozen=True, kw_only=True):
    """Cohort spec: an optional parent, extra shared quota, a fair-sharing weight (SEMANTICS §1.4)."""

    parent_name: ObjectName | None = None
    resource_groups: Annotated[list[ResourceGroup], msgspec.Meta(max_length=16)] = []
    fair_sharing: FairSharing | None = None


class Cohort(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 Cohort (cluster-scoped)."""

    metadata: ObjectMeta
    spec: CohortSpec = CohortSpec()


class LocalQueueSpec(_Model, frozen=True, kw_only=True):
    """LocalQueue spec: the ClusterQueue it feeds and its stop policy.

    ``cluster_queue`` is optional, as Kueue's (localqueue_types.go ``+optional``, schema version 13): "" when the
    LocalQueue names none, left out when encoded, so a payload that names one keeps its bytes. Such a LocalQueue
    is inactive (``ClusterQueueDoesNotExist``) and its workloads pend ``ClusterQueue  doesn't exist``, as one
    naming a ClusterQueue that does not exist (localqueue_controller.go Reconcile, workload_controller.go
    getQueueBlocker); the CEL rule ``self == oldSelf`` lets an update name one later (docs/lifecycle.md)."""

    cluster_queue: OptionalObjectName = ""
    stop_policy: StopPolicy = "None"
    fair_sharing: FairSharing | None = None


class LocalQueue(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 LocalQueue (namespaced); ``spec`` is optional, as Kueue's (schema version 13)."""

    metadata: ObjectMeta
    spec: LocalQueueSpec = LocalQueueSpec()


class WorkloadPriorityClass(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 WorkloadPriorityClass: a named priority ``value``."""

    metadata: ObjectMeta
    value: int
    description: Annotated[str, msgspec.Meta(max_length=2048)] = ""


class PriorityClassRef(_Model, frozen=True, kw_only=True):
    """``spec.priorityClassRef`` of a Workload."""

    group: Literal["kueue.x-k8s.io", "scheduling.k8s.io"] = "kueue.x-k8s.io"
    kind: Literal["WorkloadPriorityClass", "PriorityClass"] = "WorkloadPriorityClass"
    name: Annotated[str, msgspec.Meta(pattern=DNS_SUBDOMAIN_PATTERN, min_length=1, max_length=253)]


class NodeSelectorRequirement(_Model, frozen=True, kw_only=True):
    """One expression of a required node affinity term."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = []


class NodeSelectorTerm(_Model, frozen=True, kw_only=True):
    """A required node affinity term: its expressions are ANDed; terms are ORed."""

    match_expressions: list[NodeSelectorRequirement] = []


class PreferredSchedulingTerm(_Model, frozen=True, kw_only=True):
    """A preferred node affinity term: ``weight`` (1-100) counts for a node its ``preference``
    matches (TAS scoring under the alpha gate TASRespectNodeAffinityPreferred, A.3.4)."""

    weight: int
    preference: NodeSelectorTerm


class PodsetSliceRequiredTopologyConstraint(_Model, frozen=True, kw_only=True):
    """One slice layer of a multi-layer slice request: groups of ``size`` pods in one domain of
    level ``topology`` (SEMANTICS-ADVANCED A.4.1, A.6.7; Kueue apis/kueue/v1beta2/workload_types.go)."""

    topology: Annotated[str, msgspec.Meta(min_length=1, max_length=63)]
    size: Positive


class PodSetTopologyRequest(_Model, frozen=True, kw_only=True):
    """``spec.podSets[].topologyRequest`` of a Workload (Kueue v1beta2 PodSetTopologyRequest).

    At most one of ``required`` / ``preferred`` (a level's node label) / ``unconstrained``;
    slices: ``podSetSliceRequiredTopology`` + ``podSetSliceSize`` (single layer) or
    ``podsetSliceRequiredTopologyConstraints`` (1..3 layers, outermost first); a leader+workers
    group shares ``podSetGroupName``. ``podIndexLabel`` / ``subGroupIndexLabel`` /
    ``subGroupCount`` are rank hints for ungating (SEMANTICS-ADVANCED A.4, A.12).
    Validated by :func:`kueue_es.events.tas.validate_topology_request`.
    """

    required: Annotated[str, msgspec.Meta(max_length=63)] | None = None
    preferred: Annotated[str, msgspec.Meta(max_length=63)] | None = None
    unconstrained: bool | None = None
    pod_index_label: Annotated[str, msgspec.Meta(max_length=317)] | None = None
    sub_group_index_label: Annotated[str, msgspec.Meta(max_length=317)] | None = None
    sub_group_count: NonNegative | None = None
    pod_set_group_name: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    pod_set_slice_required_topology: Annotated[str, msgspec.Meta(max_length=63)] | None = None
    pod_set_slice_size: Positive | None = None
    podset_slice_required_topology_constraints: Annotated[
        list[PodsetSliceRequiredTopologyConstraint], msgspec.Meta(max_length=3)
    ] = []


class PodSet(_Model, frozen=True, kw_only=True):
    """One pod set: ``count`` pods, each requesting ``requests`` (amounts per pod).

    ``requests`` is the effective per-pod request (SEMANTICS §2.3: containers summed,
    init containers maxed, overhead added, limits used where requests are missing).
    ``minCount`` enables partial admission.
    """

    name: PodSetName = "main"
    count: NonNegative = 1
    min_count: Positive | None = None
    requests: dict[str, int] = {}
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    required_node_affinity: list[NodeSelectorTerm] = []
    preferred_node_affinity: list[PreferredSchedulingTerm] = []  # read by TAS only (A.3.4, alpha gate)
    topology_request: PodSetTopologyRequest | None = None
    misconfigured: str = ""  # why the pod set fails Kueue's admissibility checks, e.g. requests over limits
    resource_claims: list[PodResourceClaim] = []  # the template's spec.resourceClaims (DRA, SEMANTICS-ADVANCED F)


class PodResourceClaim(_Model, frozen=True, kw_only=True):
    """One ``spec.resourceClaims[]`` entry of a pod template: a claim made per pod from the
    ResourceClaimTemplate ``resource_claim_template_name``, or the existing ResourceClaim
    ``resource_claim_name`` every pod shares (Kueue refuses that one: SEMANTICS-ADVANCED F)."""

    name: str
    resource_claim_template_name: str | None = None
    resource_claim_name: str | None = None


class PodSetUpdate(_Model, frozen=True, kw_only=True):
    """What a Ready admission check adds to one pod set's template at start (SEMANTICS-ADVANCED B.3)."""

    name: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []


class OwnerReference(_Model, frozen=True, kw_only=True):
    """The job a Workload was made for (Kueue sets the Workload's owner reference to it)."""

    api_version: str
    kind: str
    name: str
    uid: str = ""


class PreemptionGate(_Model, frozen=True, kw_only=True):
    """One of a Workload's ``spec.preemptionGates``: while it is closed the workload may not preempt
    (Kueue apis/kueue/v1beta2/workload_types.go PreemptionGate)."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=63)]


class WorkloadSpec(_Model, frozen=True, kw_only=True):
    """Workload spec (SEMANTICS §1.6); ``priority`` None means 0."""

    pod_sets: Annotated[list[PodSet], msgspec.Meta(min_length=1, max_length=18)]
    queue_name: Annotated[str, msgspec.Meta(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)] = ""
    priority_class_ref: PriorityClassRef | None = None
    priority: int | None = None
    active: bool = True
    maximum_execution_time_seconds: Positive | None = None
    # Left out when empty (omit_defaults), so every payload written before the field keeps its bytes.
    preemption_gates: Annotated[list[PreemptionGate], msgspec.Meta(max_length=8)] = []


class Workload(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 Workload (namespaced), with the job it stands for in ``owner``."""

    metadata: ObjectMeta
    spec: WorkloadSpec
    owner: OwnerReference | None = None
    # Why its job puts it on hold ("" none; left out then, so every older payload keeps its bytes): a
    # StatefulSet scaled to zero (Kueue statefulset_reconciler.go releaseScaleDownReservation). A reservation
    # it holds is released with reason OnHold and it is not queued again until a WorkloadObserved without it.
    on_hold: str = ""
    # The names of the ``status.preemptionGates`` whose position is ``Open`` (sorted; their controllers
    # open them, MultiKueue's or ConcurrentAdmission's). A gate of ``spec.preemptionGates`` not listed is
    # closed, as a gate with no status entry is (Kueue workload.go HasClosedPreemptionGate). Left out when
    # empty, as ``on_hold``.
    open_preemption_gates: list[str] = []
    # A pod group's Workload whose group lacks pods against its pod sets (members Failed, or deleted before they
    # got a node, not yet replaced): Kueue's WaitingForReplacementPods condition True, which IsAdmissible refuses
    # (pkg/workload/workload.go), so it is not queued until its pods are back. The watcher sets it from the
    # group's pods (:func:`kueue_es.jobframework.pods.absent_pods`). Left out when false, as ``on_hold``.
    waiting_for_replacement_pods: bool = False

    @property
    def key(self) -> str:
        """``namespace/name``, how Kueue and kubectl name a workload."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def effective_priority(self) -> int:
        """The priority used for ordering and preemption (nil counts as 0, SEMANTICS §2.4)."""
        return self.spec.priority or 0

    @property
    def has_closed_preemption_gate(self) -> bool:
        """Whether a gate of ``spec.preemptionGates`` is not open: one with no status entry counts as
        closed, so a workload can be created gated (Kueue pkg/workload/workload.go HasClosedPreemptionGate)."""
        return any(gate.name not in self.open_preemption_gates for gate in self.spec.preemption_gates)


class AdmissionCheckParametersReference(_Model, frozen=True, kw_only=True):
    """``spec.parameters`` of an AdmissionCheck: the controller's configuration object (for MultiKueue
    ``kueue.x-k8s.io`` / ``MultiKueueConfig`` / its name; Kueue admissioncheck_types.go)."""

    api_group: Annotated[str, msgspec.Meta(pattern=DNS_SUBDOMAIN_PATTERN, min_length=1, max_length=253)]
    # Kueue's ``^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$`` without the inline flag Python's re refuses there
    kind: Annotated[str, msgspec.Meta(pattern=KIND_PATTERN, min_length=1, max_length=63)]
    name: Annotated[str, msgspec.Meta(pattern=DNS_LABEL_PATTERN, min_length=1, max_length=63)]


class AdmissionCheckSpec(_Model, frozen=True, kw_only=True):
    """AdmissionCheck spec: the controller that decides it, and its parameters object."""

    controller_name: Annotated[str, msgspec.Meta(min_length=1, max_length=253)] = ""
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheck(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 AdmissionCheck (cluster-scoped); ``active`` mirrors its Active
    condition: True only once its controller set Active=True (SEMANTICS §1.8, §10.2)."""

    metadata: ObjectMeta
    spec: AdmissionCheckSpec = AdmissionCheckSpec()
    active: bool = True


PodSetMergePolicy = Literal["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"]


class ProvisioningRequestRetryStrategy(_Model, frozen=True, kw_only=True):
    """How often a failed ProvisioningRequest is retried, and the backoff between tries (seconds)."""

    backoff_limit_count: int = 3
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 1800


class ProvisioningRequestPodSetUpdatesNodeSelector(_Model, frozen=True, kw_only=True):
    """A nodeSelector key whose value comes from the request's ``status.provisioningClassDetails``."""

    key: Annotated[str, msgspec.Meta(min_length=1, max_length=317, pattern=LABEL_KEY_PATTERN)]
    value_from_provisioning_class_detail: Annotated[str, msgspec.Meta(min_length=1, max_length=32768)]


class ProvisioningRequestPodSetUpdates(_Model, frozen=True, kw_only=True):
    """What a Provisioned request adds to the pod sets besides Kueue's two annotations."""

    node_selector: Annotated[list[ProvisioningRequestPodSetUpdatesNodeSelector], msgspec.Meta(max_length=8)] = []


class ProvisioningRequestConfigSpec(_Model, frozen=True, kw_only=True):
    """ProvisioningRequestConfig spec (Kueue apis/kueue/v1beta2/provisioningrequestconfig_types.go).

    ``managed_resources`` empty: every resource is managed. ``retry_strategy`` None: Kueue's
    default (3 tries, 60 s base, 1800 s cap); ``pod_set_merge_policy`` None: no merging.
    """

    provisioning_class_name: Annotated[str, msgspec.Meta(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
    parameters: Annotated[dict[str, Annotated[str, msgspec.Meta(max_length=255)]], msgspec.Meta(max_length=100)] = {}
    managed_resources: Annotated[list[str], msgspec.Meta(max_length=100)] = []
    retry_strategy: ProvisioningRequestRetryStrategy | None = None
    pod_set_updates: ProvisioningRequestPodSetUpdates | None = None
    pod_set_merge_policy: PodSetMergePolicy | None = None


class ProvisioningRequestConfig(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 ProvisioningRequestConfig (cluster-scoped): the parameters of an
    AdmissionCheck of controller ``kueue.x-k8s.io/provisioning-request`` (SEMANTICS-ADVANCED B.4).
    Read by the provisioning service from the API, not carried on the log."""

    metadata: ObjectMeta
    spec: ProvisioningRequestConfigSpec


#: The controllerName of MultiKueue's admission checks (Kueue multikueue_types.go MultiKueueControllerName).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
#: The label a remote copy carries with the manager's ``multiKueue.origin`` (MultiKueueOriginLabel).
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"


class KubeConfig(_Model, frozen=True, kw_only=True):
    """``clusterSource.kubeConfig`` of a MultiKueueCluster: where the worker's kubeconfig is.

    ``Secret`` (default): ``location`` names a Secret in Kueue's namespace whose key ``kubeconfig``
    holds it; ``Path``: a file path on the manager (SEMANTICS-ADVANCED E.1)."""

    location: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    location_type: Literal["Secret", "Path"] = "Secret"


class ClusterProfileReference(_Model, frozen=True, kw_only=True):
    """``clusterSource.clusterProfileRef``: a ClusterProfile (sigs.k8s.io cluster-inventory API) by name."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class ClusterSource(_Model, frozen=True, kw_only=True):
    """How the manager reaches a worker: exactly one of ``kubeConfig`` or ``clusterProfileRef``
    (Kueue's ExactlyOneOf marker; checked by kueue_es.validation)."""

    kube_config: KubeConfig | None = None
    cluster_profile_ref: ClusterProfileReference | None = None


class MultiKueueClusterSpec(_Model, frozen=True, kw_only=True):
    """MultiKueueCluster spec."""

    cluster_source: ClusterSource


class Condition(_Model, frozen=True, kw_only=True):
    """A status condition without its timestamps (they would make a new fact at every heartbeat)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""


class MultiKueueClusterStatus(_Model, frozen=True, kw_only=True):
    """MultiKueueCluster status: ``Active`` says whether the manager is connected to the worker."""

    conditions: Annotated[list[Condition], msgspec.Meta(max_length=16)] = []


class MultiKueueCluster(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 MultiKueueCluster (cluster-scoped): one worker cluster."""

    metadata: ObjectMeta
    spec: MultiKueueClusterSpec
    status: MultiKueueClusterStatus = MultiKueueClusterStatus()

    @property
    def active(self) -> bool:
        """Whether its ``Active`` condition is True."""
        return any(c.type == "Active" and c.status == "True" for c in self.status.conditions)


class MultiKueueConfigSpec(_Model, frozen=True, kw_only=True):
    """MultiKueueConfig spec: 1..20 unique MultiKueueCluster names, in preference order (the
    Incremental dispatcher nominates them in this order), and the quota management mode."""

    clusters: Annotated[list[Annotated[str, msgspec.Meta(max_length=256)]], msgspec.Meta(min_length=1, max_length=20)]
    quota_management: Literal["Manual", "Automated"] = "Manual"


class MultiKueueConfig(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io/v1beta2 MultiKueueConfig (cluster-scoped): the workers of a MultiKueue check."""

    metadata: ObjectMeta
    spec: MultiKueueConfigSpec


class Namespace(_Model, frozen=True, kw_only=True):
    """A v1 Namespace: only its labels matter (ClusterQueue ``namespaceSelector``)."""

    metadata: ObjectMeta


class FairSharingConfig(_Model, frozen=True, kw_only=True):
    """Configuration ``fairSharing``: present means fair sharing is on (SEMANTICS §0.2)."""

    preemption_strategies: list[Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]] = msgspec.field(
        default_factory=lambda: ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    )


class AdmissionFairSharingConfig(_Model, frozen=True, kw_only=True):
    """Configuration ``admissionFairSharing`` (SEMANTICS §8); durations as Go duration strings."""

    usage_half_life_time: str = "168h"
    usage_sampling_interval: str = "5m"
    resource_weights: dict[str, str] = {}


class RequeuingStrategy(_Model, frozen=True, kw_only=True):
    """``waitForPodsReady.requeuingStrategy`` (SEMANTICS-ADVANCED C.1): where a workload evicted for
    PodsReadyTimeout goes back in its queue (``Eviction``: by eviction time, ``Creation``: its old
    place) and the backoff before it may be admitted again: base·2^(n−1) seconds, at most max;
    after ``backoff_limit_count`` timeouts it is deactivated (None: never)."""

    timestamp: Literal["Eviction", "Creation"] = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


class WaitForPodsReadyConfig(_Model, frozen=True, kw_only=True):
    """Configuration ``waitForPodsReady`` (SEMANTICS §9.4, SEMANTICS-ADVANCED C.1); durations as Go
    duration strings (``30m``, ``90s``); ``recovery_timeout`` None means the same as ``timeout``
    and ``0s`` turns recovery checking off."""

    enable: bool = True
    timeout: str = "30m"
    recovery_timeout: str | None = None
    block_admission: bool = False
    requeuing_strategy: RequeuingStrategy = RequeuingStrategy()


class ResourceTransformation(_Model, frozen=True, kw_only=True):
    """One ``resources.transformations`` entry (SEMANTICS §10.4); factors as Quantity strings."""

    input: str
    strategy: Literal["Retain", "Replace"] = "Retain"
    outputs: dict[str, str] = {}
    multiply_by: str | None = None


class CounterSource(_Model, frozen=True, kw_only=True):
    """A ``deviceClassMappings[].sources[].counter``: counter ``name`` in the ``consumesCounters`` of
    the devices of ``driver`` that CEL expression ``device_selector`` matches."""

    name: str
    driver: str
    device_selector: str


class CapacitySource(_Model, frozen=True, kw_only=True):
    """A ``deviceClassMappings[].sources[].capacity``: capacity dimension ``name`` of the devices of
    ``driver`` that CEL expression ``device_selector`` matches (consumable capacity)."""

    name: str
    driver: str
    device_selector: str


class DeviceClassMapping(_Model, frozen=True, kw_only=True):
    """One ``resources.deviceClassMappings`` entry (SEMANTICS-ADVANCED F): the devices of the
    DeviceClasses ``device_class_names`` are charged as quota resource ``name``, one unit a device,
    or, with ``counters`` (its counter ``sources``, partitionable devices), by the counters the
    matching devices consume (Kueue's capacity sources are refused by
    :mod:`kueue_es.events.manager_config`)."""

    name: str
    device_class_names: list[str]
    counters: list[CounterSource] = []
    capacities: list[CapacitySource] = []


class ResourcesConfig(_Model, frozen=True, kw_only=True):
    """Configuration ``resources``: excluded prefixes, transformations, undeclared-resource policy,
    DRA device classes mapped to quota resources."""

    exclude_resource_prefixes: list[str] = []
    transformations: list[ResourceTransformation] = []
    quota_check_strategy: Literal["BlockUndeclared", "IgnoreUndeclared"] = "BlockUndeclared"
    device_class_mappings: list[DeviceClassMapping] = []


class ExactDeviceRequest(_Model, frozen=True, kw_only=True):
    """resource.k8s.io/v1 ExactDeviceRequest, the part quota reads: the class, how many devices
    (``allocation_mode`` ExactCount with ``count``, or All), admin access; ``selectors``: how many
    selectors it has, ``cel``: their CEL expressions in order (Kueue compiles them and matches
    them against the cluster's ResourceSlices, :mod:`kueue_es.scheduling.dra_cel`)."""

    device_class_name: str = ""
    allocation_mode: str = "ExactCount"
    count: int = 1
    admin_access: bool = False
    selectors: int = 0
    cel: list[str] = []
    capacity_requests: dict[str, str] = {}  # ``capacity.requests``: dimension -> quantity (consumable capacity)


class DeviceRequest(_Model, frozen=True, kw_only=True):
    """One ``spec.devices.requests[]`` entry of a ResourceClaim(Template): ``exactly`` one kind of
    device, or ``first_available`` (the number of alternatives; Kueue refuses those)."""

    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: int = 0


class ResourceClaimTemplate(_Model, frozen=True, kw_only=True):
    """A resource.k8s.io/v1 ResourceClaimTemplate: ``requests`` is its ``spec.spec.devices.requests``
    (each pod that names the template gets a claim for those devices)."""

    metadata: ObjectMeta
    requests: list[DeviceRequest] = []


class DeviceClass(_Model, frozen=True, kw_only=True):
    """A resource.k8s.io/v1 DeviceClass (cluster-scoped), the part quota reads: the extended
    resource name its devices may be requested by (``spec.extendedResourceName``, "" when none)
    and the CEL expressions of its ``spec.selectors`` (a device of the class matches them all)."""

    metadata: ObjectMeta
    extended_resource_name: str = ""
    selectors: list[str] = []


class DeviceAttribute(_Model, frozen=True, kw_only=True):
    """One ``attributes`` value of a ResourceSlice device: exactly one of an integer, a boolean, a
    string or a semantic version (``version``, e.g. ``1.2.3``)."""

    int_value: int | None = msgspec.field(default=None, name="int")
    bool_value: bool | None = msgspec.field(default=None, name="bool")
    string_value: str | None = msgspec.field(default=None, name="string")
    version_value: str | None = msgspec.field(default=None, name="version")


class CapacityPolicy(_Model, frozen=True, kw_only=True):
    """A device capacity's ``requestPolicy`` (quantity strings): the ``default`` charged when a request
    names no amount, and the amounts a request is rounded up to: ``valid_values`` (ascending) or the
    range ``valid_min`` + n x ``valid_step`` up to ``valid_max``."""

    default: str | None = None
    valid_values: list[str] = []
    valid_min: str | None = None
    valid_max: str | None = None
    valid_step: str | None = None


class SliceDevice(_Model, frozen=True, kw_only=True):
    """One device a ResourceSlice publishes, the part quota reads: ``attributes`` and ``capacity``
    (quantity strings, e.g. ``80Gi``) by qualified name (``domain/id``; a bare ``id`` is in the
    driver's domain), and ``consumes_counters``: counter name -> quantity string, over all its
    ``consumesCounters`` counter sets (the largest where several sets name one counter)."""

    name: str
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, str] = {}
    capacity_policies: dict[str, CapacityPolicy] = {}
    consumes_counters: dict[str, str] = {}


class ResourceSlice(_Model, frozen=True, kw_only=True):
    """A resource.k8s.io/v1 ResourceSlice (cluster-scoped): the devices one ``driver`` publishes in
    pool ``pool`` (Kueue matches device selectors against them, SEMANTICS-ADVANCED F)."""

    metadata: ObjectMeta
    driver: str
    pool: str = ""
    pool_generation: int = 0
    pool_slice_count: int = 1
    devices: list[SliceDevice] = []


#: Kueue's MultiKueue dispatcher names (apis/config/v1beta2 configuration_types.go).
DISPATCHER_ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
DISPATCHER_INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"


class IncrementalDispatcherConfig(_Model, frozen=True, kw_only=True):
    """``multiKueue.incrementalDispatcherConfig``: how many workers each step nominates (default 3)."""

    step_size: Positive = 3


class MultiKueueConfiguration(_Model, frozen=True, kw_only=True):
    """Configuration ``multiKueue`` with Kueue's defaults (apis/config/v1beta2 defaults.go): durations
    as Go duration strings; ``gc_interval`` ``0s`` turns the garbage collector off; ``dispatcher_name``
    :data:`DISPATCHER_ALL_AT_ONCE`, :data:`DISPATCHER_INCREMENTAL` or another controller's (External:
    kueue-es only synchronises the nominations it writes); ``incremental_dispatcher_config`` is set
    (step 3 by default) only for the Incremental dispatcher."""

    gc_interval: str = "1m"
    origin: str = "multikueue"
    worker_lost_timeout: str = "15m"
    dispatcher_name: str = DISPATCHER_ALL_AT_ONCE
    incremental_dispatcher_config: IncrementalDispatcherConfig | None = None


class WorkloadRetentionPolicy(_Model, frozen=True, kw_only=True):
    """Configuration ``objectRetentionPolicies.workloads``: how long a Workload is kept once finished, and once
    deactivated by Kueue, as Go duration strings (``1h``, ``90s``, ``1m30s``; ``0s`` deletes at once); None keeps
    it for good (Kueue's default). The dispatcher deletes them (docs/lifecycle.md, "Retention")."""

    after_finished: str | None = None
    after_deactivated_by_kueue: str | None = None


class ObjectRetentionPolicies(_Model, frozen=True, kw_only=True):
    """Configuration ``objectRetentionPolicies``: automatic deletion of Kueue's objects (only Workloads so far);
    ``workloads`` None deletes nothing."""

    workloads: WorkloadRetentionPolicy | None = None


class LocalQueueMetricsConfig(_Model, frozen=True, kw_only=True):
    """Configuration ``metrics.localQueueMetrics``: whether the ``kueue_local_queue_*`` series are exported, and
    of which LocalQueues (``localQueueSelector`` on their labels; None: every one). Kueue
    pkg/metrics/localqueue.go NewLocalQueueMetricsConfig, ShouldExposeLocalQueueMetrics."""

    enable: bool = False
    local_queue_selector: LabelSelector | None = None


class Configuration(_Model, frozen=True, kw_only=True):
    """config.kueue.x-k8s.io/v1beta2 Configuration: the manager settings that change admission, and those the
    dispatcher acts on (``objectRetentionPolicies``), and the admitter's metrics export
    (``metrics.localQueueMetrics``, ``metrics.enableClusterQueueResources``).

    Absent sections keep Kueue's defaults (fair sharing off, admission fair sharing off, nothing deleted).
    """

    metadata: ObjectMeta = ObjectMeta(name="config")
    fair_sharing: FairSharingConfig | None = None
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
    wait_for_pods_ready: WaitForPodsReadyConfig | None = None
    resources: ResourcesConfig | None = None
    feature_gates: dict[str, bool] = {}
    multi_kueue: MultiKueueConfiguration | None = None  # None: Kueue's defaults (MultiKueueConfiguration())
    object_retention_policies: ObjectRetentionPolicies | None = None  # None: Workloads are kept (Kueue's default)
    # None: Kueue's default (defaults.go: enabled, every LocalQueue); left out when None (schema version 14)
    local_queue_metrics: LocalQueueMetricsConfig | None = None
    # metrics.enableClusterQueueResources: the admitter exports the ClusterQueue resource gauges (quotas, limits,
    # reservation, usage, pending requests, weighted share); Kueue's default off, left out when false (schema 19)
    enable_cluster_queue_resources: bool = False


class TopologyLevel(_Model, frozen=True, kw_only=True):
    """One level of a Topology: the node label whose value names the level's domains."""

    node_label: Annotated[str, msgspec.Meta(pattern=LABEL_KEY_PATTERN, min_length=1, max_length=316)]


class TopologySpec(_Model, frozen=True, kw_only=True):
    """Topology spec: 1..16 levels, widest first (SEMANTICS-ADVANCED A.1)."""

    levels: Annotated[list[TopologyLevel], msgspec.Meta(min_length=1, max_length=16)]


class Topology(_Model, frozen=True, kw_only=True):
    """kueue.x-k8s.io Topology (v1beta2 or v1alpha1, same shape; cluster-scoped)."""

    metadata: ObjectMeta
    spec: TopologySpec

    @property
    def level_keys(self) -> list[str]:
        """The levels' node labels, widest first."""
        return [level.node_label for level in self.spec.levels]


class NodeSpec(_Model, frozen=True, kw_only=True):
    """The part of a v1 Node's spec TAS reads: taints and ``unschedulable``."""

    taints: list[Taint] = []
    unschedulable: bool = False


class NodeStatus(_Model, frozen=True, kw_only=True):
    """The part of a v1 Node's status TAS reads.

    ``allocatable``: integer amounts per resource (cpu in millicores, memory in bytes, ``pods``
    a count; kueue_es.events.quantities). ``ready``: the status of the ``Ready`` condition (``True``,
    ``False``, ``Unknown``), ``""`` when the node has no Ready condition. Condition timestamps
    are left out on purpose: kubelet heartbeats must not make new facts (A.2.3).
    """

    allocatable: dict[str, int] = {}
    ready: str = ""


class Node(_Model, frozen=True, kw_only=True):
    """A v1 Node as TAS sees it (SEMANTICS-ADVANCED A.2.1): labels, taints, allocatable, Ready.

    ``progressing_workloads`` (schema 18; not part of the v1 Node): while the node may count as failed (not
    Ready, or a NoSchedule / NoExecute taint), the ``namespace/slice-name`` keys of the workloads that still
    have a pod on it neither terminated nor being deleted, sorted; empty otherwise. Kueue's node controller
    (TASReplaceNodeOnPodTermination, on by default) waits for those pods before it fails the node for their
    workload (A.13.2; pkg/controller/tas/node_controller.go hasProgressingPods).
    """

    metadata: ObjectMeta
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()
    progressing_workloads: list[str] = []

    @property
    def schedulable_and_ready(self) -> bool:
        """Kueue's nodes cache test: Ready=True and not ``spec.unschedulable`` (tas_nodes_cache.go)."""
        return self.status.ready == "True" and not self.spec.unschedulable


class PodUsage(_Model, frozen=True, kw_only=True):
    """A v1 Pod that kueue-es does not manage and that is not a TAS pod, as Kueue's non-TAS pod
    cache counts it (SEMANTICS-ADVANCED A.2.2; pkg/cache/scheduler/tas_non_tas_pod_cache.go).

    ``requests`` is the standard pod request formula of its spec plus ``pods: 1`` (integer
    amounts). The pod takes capacity on ``node_name`` while that is set and ``phase`` is not
    terminal (``Succeeded`` / ``Failed``).
    """

    namespace: str
    name: str
    node_name: str = ""
    phase: str = ""
    requests: dict[str, int] = {}

    @property
    def takes_capacity(self) -> bool:
        """Scheduled to a node and not terminated (pod_usage_controller.go belongsToNonTASCache)."""
        return bool(self.node_name) and self.phase not in ("Succeeded", "Failed")


class TopologyAssignmentIndividualValues(_Model, frozen=True, kw_only=True):
    """Per-domain values of one level in one slice: value i = prefix + roots[i] + suffix."""

    prefix: str | None = None
    suffix: str | None = None
    roots: list[str] = []


class TopologyAssignmentLevelValues(_Model, frozen=True, kw_only=True):
    """The values of one level in one slice: exactly one of ``universal`` or ``individual``."""

    universal: str | None = None
    individual: TopologyAssignmentIndividualValues | None = None


class TopologyAssignmentPodCounts(_Model, frozen=True, kw_only=True):
    """Pod counts of one slice: exactly one of ``universal`` (every domain) or ``individual``."""

    universal: int | None = None
    individual: list[int] = []


class TopologyAssignmentSlice(_Model, frozen=True, kw_only=True):
    """``domainCount`` consecutive domains of a TopologyAssignment, compactly encoded (A.8.1)."""

    domain_count: int
    values_per_level: list[TopologyAssignmentLevelValues]
    pod_counts: TopologyAssignmentPodCounts


class TopologyAssignment(_Model, frozen=True, kw_only=True):
    """Kueue v1beta2 ``podSetAssignments[].topologyAssignment`` (SEMANTICS-ADVANCED A.8).

    The domains are the concatenation of the slices' domains; :mod:`kueue_es.events.tas` encodes
    (byte-identical to Kueue) and decodes (any valid encoding).
    """

    levels: list[str]
    slices: list[TopologyAssignmentSlice] = []


APIObject = (
    ResourceFlavor
    | ClusterQueue
    | Cohort
    | LocalQueue
    | WorkloadPriorityClass
    | Workload
    | AdmissionCheck
    | MultiKueueCluster
    | MultiKueueConfig
)
