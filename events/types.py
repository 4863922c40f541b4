"""Every event kueue-es puts on the log: facts, decisions and dispatch results.

Facts (watcher, ``kueue-es apply``) are full-state snapshots of what the cluster
holds, so folding one twice is harmless. Decisions (admitter, preemptor, TAS
placer) are committed in atomic batches headed by a :class:`DecisionRecord`.
Dispatch results (dispatcher) say what was written to Kubernetes.
ARCHITECTURE.md §2-§3 and research/event-sourcing.md §5.4 are the catalogue.

All events are frozen, keyword-only msgspec Structs tagged by an explicit ``type``
string that never changes when a class is renamed. Integers only: amounts
(millicores, bytes), times in milliseconds since the epoch. Evolution policy
(docs/events.md): add fields only with defaults, never change a field's type or a tag.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Final, Literal

import msgspec

from kueue_es.events import models

SCHEMA_VERSION = 20
"""The version of the event payloads' JSON Schema (``codec.json_schema``, the ``Kq-Schema`` header,
``DecisionRecord.schema_version``). 1: the first published schema; 2: ``WorkloadAdmitted`` carries
its ``podSetAssignments``; 3: DRA (DeviceClassObserved, ResourceClaimTemplateObserved, a pod set's
``resourceClaims``, the Configuration's ``deviceClassMappings``), MultiKueue's events (issue 20) and
``AdmissionCheck.spec.parameters``; 4: DRA's ResourceSliceObserved, CEL selectors on device classes and
requests, and counter and capacity ``sources`` in ``deviceClassMappings``; 5: ``DispatchBatchApplied``,
the dispatcher's results of one DecisionRecord's decisions in one message (issue 18); 6:
``DecisionRecord.released``, the finished workloads' releases a record carries (``FinishedRelease``,
admitter logic 15, issue 18); 7: ``ObjectDeleted.reason`` (``NoMatchingWorkload`` for a running job's
workload that no longer matches it, Kueue's ensureOneWorkload) and ``ObjectDeleted.at_ms``, and the
Configuration's ``objectRetentionPolicies`` (the workloads' retention, which the dispatcher carries out);
8: ``Workload.onHold`` (a StatefulSet scaled to zero holds its workload: QuotaReleased reason ``OnHold``);
9: ``WorkloadFinished.ownerDeleting`` (the OwnerNotFound finish of a job being deleted, whose Workload keeps
its owner reference); 10: ``ChildJobObserved``, a job of a Kueue-managed ancestor seen running (the dispatcher
suspends it while that ancestor's workload is not admitted); 11: ``Workload.spec.preemptionGates`` and
``Workload.openPreemptionGates`` (a closed gate holds a preemption back); 12:
``RemoteWorkloadObserved.topologyAssigned`` (the pod sets a MultiKueue worker placed); 13: a LocalQueue's
``spec.clusterQueue`` and ``spec`` are optional, as Kueue's (a LocalQueue naming no ClusterQueue); 14:
``Configuration.localQueueMetrics`` (which LocalQueues the admitter exports ``kueue_local_queue_*`` series of);
15: ``WorkloadEvictionObserved`` (an Evicted=True condition someone other than kueue-es wrote on a Workload) and
``EvictionRequested.observed`` (the eviction that carries it out, admitter logic 45); 16: ``FactBatch``, several
workloads' ``WorkloadObserved`` and ``WorkloadFinished`` facts in one message (issue 18); 17:
``DecisionRecord.decisions``, a cycle's per-workload decisions carried in its record instead of as a
message each (issue 18); 18: ``Node.progressingWorkloads``, the workloads with pods still running on a node
that may count as failed (TAS placer logic 11); 19: ``Configuration.enableClusterQueueResources`` (the admitter
exports the ClusterQueue resource gauges only with it, as Kueue); 20: ``Workload.waitingForReplacementPods`` (a pod
group lacking pods against its Workload's pod sets, Kueue's WaitingForReplacementPods True: not queued, admitter
logic 57).
docs/events.md holds the history and the stability policy."""

EARLIER_SCHEMA_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
"""Schema versions whose payloads this kueue-es still decodes (tests/fixtures/events/v1)."""


class _Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", rename="camel", gc=False):
    """Base of all events. Never tracked by Python's cyclic garbage collector (msgspec ``gc=False``,
    as every Struct here): frozen, holding scalars, models and containers of them, an event can be
    in no reference cycle (tests/unit/test_gc_untracked.py, services/collector.py)."""


class WorkloadRef(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """Which workload a decision is about: namespace, name and UID."""

    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


# --- facts -----------------------------------------------------------------------------------


class ResourceFlavorObserved(_Event, frozen=True, kw_only=True, tag="ResourceFlavorObserved"):
    """A ResourceFlavor as it now is."""

    flavor: models.ResourceFlavor


class ClusterQueueObserved(_Event, frozen=True, kw_only=True, tag="ClusterQueueObserved"):
    """A ClusterQueue as it now is."""

    cluster_queue: models.ClusterQueue


class CohortObserved(_Event, frozen=True, kw_only=True, tag="CohortObserved"):
    """A Cohort object as it now is."""

    cohort: models.Cohort


class LocalQueueObserved(_Event, frozen=True, kw_only=True, tag="LocalQueueObserved"):
    """A LocalQueue as it now is."""

    local_queue: models.LocalQueue


class WorkloadPriorityClassObserved(_Event, frozen=True, kw_only=True, tag="WorkloadPriorityClassObserved"):
    """A WorkloadPriorityClass as it now is."""

    priority_class: models.WorkloadPriorityClass


class WorkloadObserved(_Event, frozen=True, kw_only=True, tag="WorkloadObserved"):
    """A workload as it now is: submitted, or changed while pending."""

    workload: models.Workload


class AdmissionCheckObserved(_Event, frozen=True, kw_only=True, tag="AdmissionCheckObserved"):
    """An AdmissionCheck as it now is."""

    admission_check: models.AdmissionCheck


class NamespaceObserved(_Event, frozen=True, kw_only=True, tag="NamespaceObserved"):
    """A Namespace as it now is (its labels feed namespaceSelector)."""

    namespace: models.Namespace


class ConfigurationObserved(_Event, frozen=True, kw_only=True, tag="ConfigurationObserved"):
    """The manager Configuration now in force (fair sharing, resources, feature gates)."""

    configuration: models.Configuration


class TopologyObserved(_Event, frozen=True, kw_only=True, tag="TopologyObserved"):
    """A kueue.x-k8s.io Topology as it now is (SEMANTICS-ADVANCED A.1)."""

    topology: models.Topology


class NodeObserved(_Event, frozen=True, kw_only=True, tag="NodeObserved"):
    """A v1 Node as TAS sees it now: labels, taints, allocatable, Ready, unschedulable (A.2.1)."""

    node: models.Node


class PodObserved(_Event, frozen=True, kw_only=True, tag="PodObserved"):
    """A pod kueue-es does not manage (and not a TAS pod), taking node capacity (A.2.2)."""

    pod: models.PodUsage


class DeviceClassObserved(_Event, frozen=True, kw_only=True, tag="DeviceClassObserved"):
    """A resource.k8s.io/v1 DeviceClass as it now is (DRA, SEMANTICS-ADVANCED F)."""

    device_class: models.DeviceClass


class ResourceClaimTemplateObserved(_Event, frozen=True, kw_only=True, tag="ResourceClaimTemplateObserved"):
    """A resource.k8s.io/v1 ResourceClaimTemplate as it now is: its device requests (DRA, F)."""

    resource_claim_template: models.ResourceClaimTemplate


class ResourceSliceObserved(_Event, frozen=True, kw_only=True, tag="ResourceSliceObserved"):
    """A resource.k8s.io/v1 ResourceSlice as it now is: a driver's devices (DRA CEL selectors, F)."""

    resource_slice: models.ResourceSlice


class MultiKueueClusterObserved(_Event, frozen=True, kw_only=True, tag="MultiKueueClusterObserved"):
    """A MultiKueueCluster as it now is (SEMANTICS-ADVANCED E.1); subject ``kq.in.multikueuecluster._.<name>``."""

    cluster: models.MultiKueueCluster


class MultiKueueConfigObserved(_Event, frozen=True, kw_only=True, tag="MultiKueueConfigObserved"):
    """A MultiKueueConfig as it now is (E.1); subject ``kq.in.multikueueconfig._.<name>``."""

    config: models.MultiKueueConfig


class RemoteWorkloadObserved(_Event, frozen=True, kw_only=True, tag="RemoteWorkloadObserved"):
    """The copy of manager workload ``workload`` on worker ``cluster`` as it now is (SEMANTICS-ADVANCED
    E.2, E.3), written by the MultiKueue edge (NATS user ``multikueue-edge``) on
    ``kq.in.remote.<cluster>.<ns>.<name>``.

    ``present`` False: the worker has no copy (deleted, or never made); then every other field is
    its default. ``quota_reserved`` / ``admitted`` / ``evicted`` / ``finished``: the copy's
    QuotaReserved, Admitted, Evicted and Finished conditions are True; ``admitted_at_ms`` is the
    Admitted condition's lastTransitionTime (ms since the epoch; the earliest wins, E.2 step 5);
    ``eviction_reason`` the Evicted condition's reason; ``finish_reason`` / ``finish_message`` the
    Finished condition's (``OutOfSync`` asks the manager to dispatch again, E.2 step 7). ``at_ms``:
    when the edge saw it.

    ``topology_assigned`` (schema version 12): the names of the pod sets whose assignment in the copy's
    ``status.admission`` has a ``topologyAssignment`` (sorted): the ones the worker placed, whose delayed
    topology request the manager marks Ready (multikueue/workload.go updateDelayedTopologyRequest). ``UNSET``
    (left out when encoded, so earlier payloads keep their bytes) when it placed none, and in a payload of an
    earlier schema version."""

    workload: WorkloadRef
    cluster: str
    present: bool = True
    quota_reserved: bool = False
    admitted: bool = False
    admitted_at_ms: int = 0
    evicted: bool = False
    eviction_reason: str = ""
    finished: bool = False
    finish_reason: str = ""
    finish_message: str = ""
    at_ms: int = 0
    topology_assigned: list[str] | msgspec.UnsetType = msgspec.UNSET


class WorkerClusterConnectivity(_Event, frozen=True, kw_only=True, tag="WorkerClusterConnectivity"):
    """Whether the manager is connected to worker ``cluster`` (its MultiKueueCluster's Active condition:
    ``reason`` / ``message`` as Kueue writes them), written by the MultiKueue edge on
    ``kq.in.worker.<cluster>`` when it changes. ``at_ms`` is when it changed: the workerLostTimeout of an
    admitting worker that went away runs from it (SEMANTICS-ADVANCED E.3)."""

    cluster: str
    active: bool
    reason: str = ""
    message: str = ""
    at_ms: int = 0


class SchedulingRequested(_Event, frozen=True, kw_only=True, tag="SchedulingRequested"):
    """An operator (or the scenario runner) asks a decider for one cycle or to settle.

    ``mode`` ``cycle``: the decider's next cycle, committed even when empty, answers
    it; ``settle``: the first cycle that decides nothing answers it. Either way the
    answer is a DecisionRecord whose ``answers`` is ``request_id``.
    """

    request_id: str
    mode: Literal["cycle", "settle"]
    role: str = "admit"


class ObjectDeleted(_Event, frozen=True, kw_only=True, tag="ObjectDeleted"):
    """An object of ``kind`` is gone from the cluster (namespace "" for cluster-scoped).

    ``reason``: unset for a deletion; :data:`NO_MATCHING_WORKLOAD` for a job's workload the running job no
    longer matches, dropped by the job framework as Kueue's ensureOneWorkload drops it (its job is
    stopped with Kueue's StopReasonNoMatchingWorkload message and the Workload object deleted).
    ``at_ms``: when (ms since the epoch), set on a Workload the retention policies deleted. Both schema
    version 7; ``UNSET`` (left out when encoded, so earlier payloads keep their bytes) where not told."""

    kind: str
    namespace: str = ""
    name: str
    uid: str = ""
    reason: str | msgspec.UnsetType = msgspec.UNSET
    at_ms: int | msgspec.UnsetType = msgspec.UNSET


NO_MATCHING_WORKLOAD: Final = "NoMatchingWorkload"
"""The ObjectDeleted ``reason`` of a running job's workload that no longer matches it (Kueue's
jobframework StopReasonNoMatchingWorkload)."""
REJECTED_OBJECT_GONE: Final = "Rejected"
"""The ObjectDeleted ``reason`` of an object the log knew only by its ObjectRejected (a job refused, a pod
group's first pod while the group was short of pods, a ClusterQueue never valid), deleted since: the fold
forgets its rejection (``ClusterState.rejections``) and nothing else changes."""


class WorkloadFinished(_Event, frozen=True, kw_only=True, tag="WorkloadFinished"):
    """The workload's job finished (succeeded or failed): its quota may be released.

    ``owner_deleting`` (only with reason ``OwnerNotFound``): the finish of a job being deleted, not of one
    already gone (Kueue's job reconciler finalizes a job with a ``deletionTimestamp``: reconciler.go finalize,
    workload.go FinalizeOrphanedWorkload), so its Workload keeps its owner reference and goes with the job.
    Left out of the encoded fact otherwise."""

    workload: WorkloadRef
    succeeded: bool = True
    reason: str = "Succeeded"
    message: str = ""
    at_ms: int = 0
    owner_deleting: bool | msgspec.UnsetType = msgspec.UNSET


class WorkloadStopped(_Event, frozen=True, kw_only=True, tag="WorkloadStopped"):
    """After an eviction, the workload's job no longer runs (Kueue's ``!job.IsActive()``).

    Reported by the watcher once the evicted job is suspended and has no active
    pods (or by whatever stands in for the job, such as the scenario runner); the
    admitter then releases the quota and the workload goes back to its queue
    (jobframework/reconciler.go, SEMANTICS §7.8). ``reason`` is the eviction's.
    """

    workload: WorkloadRef
    reason: str = "Preempted"
    at_ms: int = 0


class WorkloadEvictionObserved(_Event, frozen=True, kw_only=True, tag="WorkloadEvictionObserved"):
    """Someone other than kueue-es set the Workload's ``Evicted`` condition True while it held quota.

    Kueue's tests and users evict a workload so (test/util SetEvictedCondition and a status update; the
    MultiKueue e2e "Should re-do admission process when workload gets evicted in the worker"), and Kueue acts
    on the condition whoever wrote it: the job reconciler stops the job and, once it no longer runs, clears
    the reservation (jobframework/reconciler.go, "6. handle eviction"); a Workload with no job waits for its
    user to clear QuotaReserved. Reported by the watcher once per condition (its ``lastTransitionTime`` and
    ``reason``), not for one the dispatcher wrote. ``reason`` and ``message`` are the condition's, ``at_ms``
    its ``lastTransitionTime`` (ms since the epoch). The admitter carries it out as an EvictionRequested with
    ``observed`` set (logic 45); the fold ignores one for a workload holding no quota or already evicted.
    """

    workload: WorkloadRef
    reason: str
    message: str = ""
    at_ms: int = 0


CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]


class AdmissionCheckStateChanged(_Event, frozen=True, kw_only=True, tag="AdmissionCheckStateChanged"):
    """An admission check controller set ``check`` of ``workload`` to ``state``
    (Workload ``status.admissionChecks[]``, SEMANTICS §9.5, SEMANTICS-ADVANCED B.2, B.5).

    ``requeue_after_seconds`` (Retry only) is the backoff the controller asks for before
    the workload may be admitted again; ``pod_set_updates`` (Ready only) what it adds to the
    pod templates at start. Reported by the watcher from the Workload object, or published
    by an outside check controller; ``at_ms`` is the state's lastTransitionTime.
    """

    workload: WorkloadRef
    check: str
    state: CheckState
    message: str = ""
    requeue_after_seconds: int | None = None
    pod_set_updates: list[models.PodSetUpdate] = []
    at_ms: int = 0


class WorkloadPodsReady(_Event, frozen=True, kw_only=True, tag="WorkloadPodsReady"):
    """The workload's PodsReady condition as its job reports it (SEMANTICS-ADVANCED C.2).

    ``ready`` True: every pod the job needs is running or done (reason ``Started`` or
    ``Recovered``); False: not yet (``WaitForStart``) or no longer (``WaitForRecovery``).
    Reported by the watcher from the job's status; ``at_ms`` is the transition time.
    """

    workload: WorkloadRef
    ready: bool
    reason: str = ""
    at_ms: int = 0


class ReclaimablePod(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """Kueue's ``status.reclaimablePods[]`` entry: ``count`` pods of pod set ``name`` no longer need
    their quota (apis/kueue/v1beta2 workload_types.go ReclaimablePod)."""

    name: str
    count: Annotated[int, msgspec.Meta(ge=0)]


class WorkloadReclaimablePods(_Event, frozen=True, kw_only=True, tag="WorkloadReclaimablePods"):
    """The workload's reclaimable pods as its job reports them (Kueue's dynamic reclaim).

    ``reclaimable_pods``: per pod set, how many of its pods finished and will not run again,
    sorted by name, each count at most the pod set's (an empty list: none). Kueue's job
    reconciler writes them to the Workload's ``status.reclaimablePods`` (jobframework
    reconciler.go step 4, JobWithReclaimablePods); the quota of those pods is freed at once
    (pkg/workload podSetsCountsAfterReclaim). While the workload holds quota a count never
    goes down (Kueue's Workload webhook refuses it), but for a pod set an elastic slice was
    scaled down in; the fold keeps the last one it took.
    Reported by the watcher when the job's count changes; ``at_ms`` is when it saw it.
    """

    workload: WorkloadRef
    reclaimable_pods: list[ReclaimablePod] = []
    at_ms: int = 0

    def counts(self) -> dict[str, int]:
        """``{pod set name: count}`` of the entries with a count above 0."""
        return {p.name: p.count for p in self.reclaimable_pods if p.count > 0}


class ObjectRejected(_Event, frozen=True, kw_only=True, tag="ObjectRejected"):
    """Bad input seen in the cluster: kept on the log so a user can see why nothing happened.

    The previously observed valid version of the object (if any) stays in force.
    """

    kind: str
    namespace: str = ""
    name: str
    field: str = ""
    problem: str
    at_ms: int = 0


class ChildJobObserved(_Event, frozen=True, kw_only=True, tag="ChildJobObserved"):
    """A job whose controller chain reaches a job Kueue manages (its ``ancestor``, Kueue's
    FindAncestorJobManagedByKueue) is running: not suspended, not finished, not being deleted, in a namespace
    Kueue manages (schema version 10).

    Such a job has no Workload of its own; Kueue's job reconciler suspends it while its ancestor's latest
    not-finished Workload is missing or not admitted (evicted, for a workload of slices), with the Event
    ``Suspended`` "Kueue managed child job suspended" on it (jobframework/reconciler.go ReconcileGenericJob,
    shouldSuspendChildJob). The watcher reports it when it sees the child so; the dispatcher decides from the
    fold and writes. ``api_version``, ``kind``, ``namespace``, ``name``, ``uid``: the child's; ``at_ms``: when
    the watcher saw it."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""
    ancestor: models.OwnerReference
    at_ms: int = 0


# --- decisions -------------------------------------------------------------------------------


class DecisionRecord(_Event, frozen=True, kw_only=True, tag="DecisionRecord"):
    """Head of one committed decision batch: what the decider saw and what it output.

    ``basis_seq`` is the last log sequence folded into the state it decided on;
    ``now_ms`` the one clock reading of the cycle; ``output_count`` and
    ``outputs_sha256`` (hex SHA-256 over the encoded outputs, in order) let replay
    check the batch byte for byte. ``answers`` names the SchedulingRequested this
    batch completes ("" for none).

    ``max_outputs`` is the cut the decider applied to its outputs (0: none; the
    services cut at ``runtime.MAX_BATCH``), so replay re-runs the same cut;
    ``kueue_es_version`` is the version of kueue-es that made the record, so a
    record replay cannot re-check (another logic version) names the release to
    install. ``pending`` (issue 15) holds the cycle's pending outcomes that change no
    workload's pending reason (:class:`PendingOutcome`: a head tried again and parked
    again, a new "N more needed"), which the admitter records here rather than as a
    WorkloadInadmissible message each; every reader of the log folds them as those
    WorkloadInadmissible decisions, after the batch's outputs
    (``projections.batches``). ``released`` (issue 18, admitter logic 15) holds the cycle's
    releases of finished workloads (:class:`FinishedRelease`), folded as those QuotaReleased
    decisions before the batch's outputs. ``decisions`` (schema 17, issue 18) holds the cycle's
    per-workload decisions themselves, in the order the decider output them: a record that carries
    them has no output messages (``output_count`` 0, ``outputs_sha256`` the digest of none), and
    every reader folds them at the record's sequence, after its finished releases and before its
    pending outcomes (:meth:`all_decisions`), exactly as it folded them one message each. All of
    these came later: records written before them lack them, and the ``UNSET`` default is never
    encoded, so those records still re-encode to their stored bytes.
    """

    decision_id: str
    partition: str
    role: str
    basis_seq: int
    expected_head_seq: int
    now_ms: int
    logic_version: int
    schema_version: int = SCHEMA_VERSION
    output_count: int
    outputs_sha256: str
    answers: str = ""
    max_outputs: int | msgspec.UnsetType = msgspec.UNSET
    kueue_es_version: str | msgspec.UnsetType = msgspec.UNSET
    pending: tuple[PendingOutcome, ...] | msgspec.UnsetType = msgspec.UNSET
    released: tuple[FinishedRelease, ...] | msgspec.UnsetType = msgspec.UNSET
    decisions: tuple[CarriedDecision, ...] | msgspec.UnsetType = msgspec.UNSET

    @property
    def decided(self) -> bool:
        """Whether the batch decides anything: outputs, or outcomes or decisions the record carries."""
        return self.output_count > 0 or bool(self.pending) or bool(self.released) or bool(self.decisions)

    @property
    def carried(self) -> tuple[CarriedDecision, ...]:
        """The per-workload decisions the record carries (``decisions``; empty when it carries none)."""
        return self.decisions or ()

    def all_decisions(self) -> list[Decision]:
        """Every decision the record stands for besides its output messages, in the order every fold takes
        them at the record's sequence: its finished releases, its carried decisions, its pending outcomes."""
        return [*self.released_decisions(), *self.carried, *self.pending_decisions()]

    def released_decisions(self) -> list[QuotaReleased]:
        """The QuotaReleased decisions ``released`` stands for (reason ``Finished``), in order: the fold
        takes them before the batch's outputs, where the admitter's releases stood when each was a
        message (:class:`FinishedRelease`)."""
        if not self.released:
            return []
        return [release.quota_released() for release in self.released]

    def pending_decisions(self) -> list[WorkloadInadmissible]:
        """The WorkloadInadmissible decisions ``pending`` stands for, in order, each at ``now_ms``
        (the fold takes them as it takes a WorkloadInadmissible message: :class:`PendingOutcome`)."""
        if not self.pending:
            return []
        return [outcome.inadmissible(at_ms=self.now_ms) for outcome in self.pending]


class PodSetAssignment(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """Kueue's podSetAssignment: flavor per resource, total quota held, admitted pod count.

    ``delayed_topology_request`` is Kueue's ``delayedTopologyRequest``: ``"Pending"`` when the
    pod set's topology assignment waits for the second pass (its TAS flavor is covered by a
    ProvisioningRequest admission check, SEMANTICS-ADVANCED A.9); ``""`` (omitted from the
    encoding) otherwise. It turns Ready once a TopologyAssigned names the pod set.
    """

    name: str
    flavors: dict[str, str]
    resource_usage: dict[str, int]
    count: int
    delayed_topology_request: str = ""


class QuotaReserved(_Event, frozen=True, kw_only=True, tag="QuotaReserved"):
    """The workload holds quota in ``cluster_queue`` (Kueue's QuotaReserved=True)."""

    workload: WorkloadRef
    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment]
    at_ms: int


class WorkloadAdmitted(_Event, frozen=True, kw_only=True, tag="WorkloadAdmitted"):
    """The workload is admitted (quota reserved and every admission check Ready): it may start.

    ``pod_set_assignments`` (schema version 2) are the flavors it was admitted with, so a subscriber
    need not pair this event with the QuotaReserved before it: the reservation's assignments (flavor
    per resource, quota held, pod count, as QuotaReserved has them), a delayed topology request
    reading ``Ready`` (admission waits for the placement, SEMANTICS-ADVANCED A.9), as Kueue's
    Workload ``status.admission.podSetAssignments`` reads once admitted. Made by ``admitted()``. A
    payload of schema version 1 leaves the field out (the QuotaReserved before it on the same
    subject has the assignments); decoded by kueue-es it is ``UNSET``, which is falsy.
    """

    workload: WorkloadRef
    cluster_queue: str
    at_ms: int
    pod_set_assignments: list[PodSetAssignment] | msgspec.UnsetType = msgspec.UNSET


def admitted(reservation: QuotaReserved, *, at_ms: int) -> WorkloadAdmitted:
    """The WorkloadAdmitted of the workload holding ``reservation``, at ``at_ms`` (ms since the epoch),
    carrying the reservation's pod set assignments (a delayed topology request ``Pending`` reads
    ``Ready``: a workload is admitted only once the second pass placed it, SEMANTICS-ADVANCED A.9)."""
    return WorkloadAdmitted(
        workload=reservation.workload,
        cluster_queue=reservation.cluster_queue,
        at_ms=at_ms,
        pod_set_assignments=[
            msgspec.structs.replace(a, delayed_topology_request="Ready") if a.delayed_topology_request else a
            for a in reservation.pod_set_assignments
        ],
    )


def reservation_of(admission: WorkloadAdmitted) -> QuotaReserved:
    """The QuotaReserved a WorkloadAdmitted stands for when the workload held no quota before it.

    Since admitter logic version 13 (issue 18), a workload that needs no admission check and no
    delayed topology placement is reserved and admitted by ONE WorkloadAdmitted, with no
    QuotaReserved before it: Kueue too writes the reservation and the Admitted condition in one
    status update then (scheduler.go admit). Every reader takes such a WorkloadAdmitted as this
    QuotaReserved (same workload, ClusterQueue, assignments and time) followed by itself, which is
    what the admitter wrote before as two messages. ``admission.pod_set_assignments`` must be set
    (schema version 2); raises ValueError naming the workload otherwise.
    """
    if isinstance(admission.pod_set_assignments, msgspec.UnsetType) or not admission.pod_set_assignments:
        raise ValueError(
            f"WorkloadAdmitted of {admission.workload.key}: podSetAssignments is missing, so it cannot stand"
            " for its reservation"
        )
    return QuotaReserved(
        workload=admission.workload,
        cluster_queue=admission.cluster_queue,
        pod_set_assignments=admission.pod_set_assignments,
        at_ms=admission.at_ms,
    )


def reserves(admission: WorkloadAdmitted, holding: bool) -> bool:
    """Whether ``admission`` also reserves quota: it carries its pod set assignments and the workload
    held no reservation just before it (``holding`` False). See :func:`reservation_of`."""
    return not holding and bool(admission.pod_set_assignments)


class FlavorBookmark(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """Kueue's flavor-scan bookmark (``LastTriedFlavorIdx``, SEMANTICS §5.3): where the next
    flavor scan of a workload resumes (FlavorFungibility + FlavorFungibilityPreserveScanProgress).

    ``tried[i]`` maps each resource of the i-th pod set (spec order) to the index, in its
    resource group's flavor list, of the last flavor the scan examined; the next scan starts
    at that index + 1. A scan that reached the last flavor records -1 (start over); a pod set
    no flavor was chosen for has an empty map. Only bookmarks with some index other than -1
    ("pending flavors") are recorded: any other starts over like no bookmark at all.
    ``cycle`` is the admitter cycle it was computed in (the count of admitter DecisionRecords
    that decide something, this one included) and ``generation`` its ClusterQueue's allocatable-resource
    generation at the decision's basis (``ClusterState.cq_generations``); both decide when it
    expires. Source: pkg/workload/workload.go AssignmentClusterQueueState,
    pkg/scheduler/scheduler.go lastAssignmentOutdated.
    """

    tried: tuple[dict[str, int], ...]
    cycle: int
    generation: int
    resumes: int = 0  # ours: scans in a row that resumed from a bookmark (see scheduling/cycle.py)

    @property
    def pending(self) -> bool:
        """Kueue's PendingFlavors: some index is not -1."""
        return any(idx != -1 for per_pod_set in self.tried for idx in per_pod_set.values())


class WorkloadInadmissible(_Event, frozen=True, kw_only=True, tag="WorkloadInadmissible"):
    """Why the workload still waits. A message on the workload's decision subject when its
    pending reason changes (the first time it waits, and from one reason to another); the
    admitter's other pending outcomes, with the reason unchanged, travel in the cycle's
    DecisionRecord (``DecisionRecord.pending``) and are folded as this event too.

    ``reason`` is Kueue's condition reason (``Pending``, ``Inadmissible``);
    ``message`` the sentence Kueue would write on the QuotaReserved=False condition.
    ``SecondPassFailed`` (admitter logic 23): a workload holding quota whose second pass (A.9)
    found no placement; Kueue writes no condition for it, only a Warning Event of that reason
    with ``message``, so it changes no condition here either.
    ``parked`` says the workload moved to its ClusterQueue's inadmissible list: it is
    not tried again until something that could let it fit happens (SEMANTICS §3.6).
    ``bookmark`` is the workload's flavor-scan bookmark after this decision (None: the next
    scan starts at the first flavor); recorded whenever it changes (SEMANTICS §5.3).
    """

    workload: WorkloadRef
    reason: str
    message: str
    at_ms: int
    parked: bool = False
    bookmark: FlavorBookmark | None = None


class PendingOutcome(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """A WorkloadInadmissible carried in its cycle's DecisionRecord (``DecisionRecord.pending``)
    instead of as a message of its own (issue 15: a pending workload's reason is recorded,
    on its own subject, only when it changes). Its fields are that decision's, ``at_ms``
    being the record's ``now_ms``; ``parked`` and ``bookmark`` are left out of the encoding
    when false and None.

    The admitter writes one when the workload's pending reason stays the one the log
    already holds for it: a head tried again and parked again, a message that changed
    ("N more needed", "no longer fits after processing another workload"), a new
    bookmark. Every reader folds it as the WorkloadInadmissible it stands for, so the
    state and the Workload's condition follow each one as before; the dispatcher's
    consumer hands it over after the record's carried decisions, for its Kubernetes Event
    (``services/dispatcher/carried.py``).
    """

    workload: WorkloadRef
    reason: str
    message: str
    parked: bool = False
    bookmark: FlavorBookmark | None = None

    def inadmissible(self, *, at_ms: int) -> WorkloadInadmissible:
        """The WorkloadInadmissible this outcome stands for, decided at ``at_ms`` (ms since the epoch)."""
        return WorkloadInadmissible(
            workload=self.workload,
            reason=self.reason,
            message=self.message,
            at_ms=at_ms,
            parked=self.parked,
            bookmark=self.bookmark,
        )


class QuotaReleased(_Event, frozen=True, kw_only=True, tag="QuotaReleased"):
    """The workload no longer holds quota; ``cause_seq`` is the fact that justified it."""

    workload: WorkloadRef
    cluster_queue: str
    reason: str
    cause_seq: int
    at_ms: int


class FinishedRelease(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """A QuotaReleased reason ``Finished`` carried in its cycle's DecisionRecord
    (``DecisionRecord.released``) instead of as a message of its own (issue 18, admitter logic 15).

    A finished workload's release restates a fact already on the log (its WorkloadFinished, at
    ``cause_seq``), as Kueue's cache drops a finished workload's usage without a write of its own;
    one message per finished workload was a quarter of the large-scale log, stored by nats-server
    and parsed by every reader. Its fields are that decision's (``at_ms``: the record's
    ``now_ms``). Every reader of the log folds it as the QuotaReleased it stands for, before the
    batch's outputs; on ``KQ_PUB`` it is in the record (docs/subscribing.md).
    """

    workload: WorkloadRef
    cluster_queue: str
    cause_seq: int
    at_ms: int

    def quota_released(self) -> QuotaReleased:
        """The QuotaReleased this release stands for."""
        return QuotaReleased(
            workload=self.workload,
            cluster_queue=self.cluster_queue,
            reason="Finished",
            cause_seq=self.cause_seq,
            at_ms=self.at_ms,
        )


class PreemptionTarget(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """One victim of a preemption: where it holds quota and Kueue's preemption reason.

    ``reason`` is one of ``InClusterQueue``, ``InCohortReclamation``,
    ``InCohortFairSharing``, ``InCohortReclaimWhileBorrowing`` (SEMANTICS §7.3, §7.11).
    """

    workload: WorkloadRef
    cluster_queue: str
    reason: str


class PreemptionRequired(_Event, frozen=True, kw_only=True, tag="PreemptionRequired"):
    """The admitter's nomination: the workload fits only if ``targets`` are evicted.

    ``pod_set_assignments`` is the flavor assignment it would then take; ``targets``
    the victims Kueue's scheduler would choose in this cycle (SEMANTICS §4.3.1, §7).
    The preemptor answers it with a PreemptionIssued; the admitter honours the
    nomination (the freed capacity is kept for this workload). ``message`` is the
    workload's pending message meanwhile.
    """

    workload: WorkloadRef
    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment]
    targets: list[PreemptionTarget]
    message: str
    at_ms: int


class PreemptionIssued(_Event, frozen=True, kw_only=True, tag="PreemptionIssued"):
    """The preemptor's answer to the nomination logged at ``nomination_seq``.

    ``targets`` are the victims evicted for ``workload`` (the preemptor); each one not
    already evicted gets an EvictionRequested in the same batch. Empty ``targets``
    means the nomination was no longer current (``message`` says why) and the
    admitter decides again.
    """

    workload: WorkloadRef
    cluster_queue: str
    nomination_seq: int
    targets: list[PreemptionTarget]
    message: str = ""
    at_ms: int


class EvictionRequested(_Event, frozen=True, kw_only=True, tag="EvictionRequested"):
    """Evict ``workload``: Kueue's Evicted=True with ``reason`` (``Preempted``, or
    ``ClusterQueueStopped`` / ``LocalQueueStopped`` for HoldAndDrain) and, for a
    preemption, Preempted=True with ``preemption_reason`` for ``preemptor``. It keeps its
    quota until its job stops (a WorkloadStopped fact); the dispatcher suspends the job
    (SEMANTICS §7.8, §10.1). Other reasons: ``AdmissionCheck`` (a check in Retry),
    ``PodsReadyTimeout``, ``DeactivatedDueTo<cause>`` (with a WorkloadDeactivated), ``Deactivated``
    (``spec.active`` set false by hand, admitter logic 16).
    ``requeue_at_ms`` (0: none) is when the workload may be admitted again (Kueue's
    ``requeueState.requeueAt``, SEMANTICS §3.7); ``requeue_count`` its
    ``requeueState.count`` after a PodsReady timeout.
    ``observed`` (schema 15, admitter logic 45): the eviction is an Evicted condition someone else wrote (a
    WorkloadEvictionObserved, whose reason, message and time it carries); kueue-es only carries it out, as
    Kueue's job reconciler does: the job is stopped and the quota released once it no longer runs, with no
    Evicted Event, no eviction counted (schedulingStats, kueue_evicted_workloads_total), no Preempted
    condition and the admission checks and MultiKueue nomination left as they are (only Kueue's evict.go
    Evict does those). Left out of the encoded decision when False.
    """

    workload: WorkloadRef
    cluster_queue: str
    preemptor: WorkloadRef | None = None
    reason: str = "Preempted"
    preemption_reason: str = ""
    message: str
    at_ms: int
    requeue_at_ms: int = 0
    requeue_count: int = 0
    observed: bool | msgspec.UnsetType = msgspec.UNSET


class WorkloadDeactivated(_Event, frozen=True, kw_only=True, tag="WorkloadDeactivated"):
    """Kueue sets the workload's ``spec.active`` to false (its DeactivationTarget condition):
    ``reason`` ``AdmissionCheck`` (a check was Rejected), ``RequeuingLimitExceeded`` (too many
    PodsReady timeouts) or ``MaximumExecutionTimeExceeded`` (SEMANTICS §9.2, §9.4-§9.6).

    A deactivated workload is not queued again until it is reactivated (``spec.active``
    set back to true, seen by the watcher). If it holds quota, an EvictionRequested with
    reason ``DeactivatedDueTo<reason>`` is in the same batch.
    """

    workload: WorkloadRef
    reason: str
    message: str
    at_ms: int


class WorkloadRequeued(_Event, frozen=True, kw_only=True, tag="WorkloadRequeued"):
    """The workload's backoff after an eviction is over: it goes back to its queue
    (Kueue's Requeued=True, reason ``BackoffFinished``; SEMANTICS §3.7). Until then it
    waits out of the queue from the QuotaReleased that ended its eviction."""

    workload: WorkloadRef
    reason: str = "BackoffFinished"
    message: str = "The workload backoff was finished"
    at_ms: int


class TopologyAssigned(_Event, frozen=True, kw_only=True, tag="TopologyAssigned"):
    """The TAS placement of a workload holding (or taking) quota in ``cluster_queue``: per pod
    set name, its topology assignment in Kueue's v1beta2 encoding (SEMANTICS-ADVANCED A.6, A.8;
    decode with :func:`kueue_es.events.tas.decode`). Pod sets without TAS are absent."""

    workload: WorkloadRef
    cluster_queue: str
    assignments: dict[str, models.TopologyAssignment]
    at_ms: int


class WorkersNominated(_Event, frozen=True, kw_only=True, tag="WorkersNominated"):
    """The multikueue decider nominates worker ``clusters`` (sorted names) for ``workload``, whose
    MultiKueue admission check ``check`` is Pending (SEMANTICS-ADVANCED E.2 step 3): Kueue's
    ``status.nominatedClusterNames``. AllAtOnce: every configured, connected worker (``step`` 0);
    Incremental: the first ``stepSize`` in the MultiKueueConfig's order, then the next ``stepSize``
    every 5 minutes without an admission (``step`` 0, 1, ...). The MultiKueue edge makes a remote
    copy on each nominated worker and removes the copies on the others."""

    workload: WorkloadRef
    check: str
    clusters: list[str]
    step: int = 0
    at_ms: int = 0


class RemoteAdmissionChosen(_Event, frozen=True, kw_only=True, tag="RemoteAdmissionChosen"):
    """The remote copy on ``cluster`` won (the earliest Admitted, ties by cluster name; E.2 step 5):
    check ``check`` is Ready with ``message`` ("The workload was admitted on "<c>""), the workload's
    ``status.clusterName`` is ``cluster`` and its nominatedClusterNames are cleared. The edge deletes
    the other copies and creates the job on ``cluster``."""

    workload: WorkloadRef
    check: str
    cluster: str
    message: str
    at_ms: int = 0


class MultiKueueCheckRetry(_Event, frozen=True, kw_only=True, tag="MultiKueueCheckRetry"):
    """Check ``check`` goes to Retry (SEMANTICS-ADVANCED E.3): the copy was evicted on the worker, the
    admitting worker stayed unreachable past workerLostTimeout, its copy is gone, or it finished
    ``OutOfSync``. The admitter evicts the workload (reason AdmissionCheck) as for any Retry check."""

    workload: WorkloadRef
    check: str
    message: str
    at_ms: int = 0


class MultiKueueCheckRejected(_Event, frozen=True, kw_only=True, tag="MultiKueueCheckRejected"):
    """Check ``check`` goes to Rejected: the job is not managed by MultiKueue, or no MultiKueue
    adapter supports its kind (E.2 step 1). The admitter deactivates the workload."""

    workload: WorkloadRef
    check: str
    message: str
    at_ms: int = 0


# --- dispatch results ------------------------------------------------------------------------


class DispatchApplied(_Event, frozen=True, kw_only=True, tag="DispatchApplied"):
    """The dispatcher wrote decision ``decision_seq`` to Kubernetes (``action`` says what)."""

    workload: WorkloadRef
    decision_seq: int
    action: str
    target: str = ""
    node_selector: dict[str, str] = {}


class DispatchFailed(_Event, frozen=True, kw_only=True, tag="DispatchFailed"):
    """The dispatcher could not write decision ``decision_seq``; ``status`` is the HTTP status."""

    workload: WorkloadRef
    decision_seq: int
    action: str
    status: int
    reason: str
    message: str = ""
    retryable: bool = False


class DispatchEntry(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """One decision a :class:`DispatchBatchApplied` answers: what its :class:`DispatchApplied` would say.
    ``decision_index`` (schema 17, left out when 0): the decision's 1-based place among the decisions its
    DecisionRecord carries (``DecisionRecord.decisions``, all at the record's sequence ``decision_seq``);
    0 for a decision of its own message."""

    decision_seq: int
    decision_index: int = 0
    workload: WorkloadRef
    action: str
    target: str = ""
    node_selector: dict[str, str] = {}


class DispatchBatchApplied(_Event, frozen=True, kw_only=True, tag="DispatchBatchApplied"):
    """The dispatcher wrote these decisions of one DecisionRecord (at ``record_seq`` in ``partition``)
    to Kubernetes in one pass (schema version 5, issue 18): each entry stands for the DispatchApplied
    of its decision (:meth:`applied`). Published on ``kq.disp.<cluster>.rec.<partition>.<record_seq>``
    expecting that subject's last sequence, so no decision is answered twice
    (services/dispatcher/record_results.py)."""

    partition: str
    record_seq: int
    entries: list[DispatchEntry]

    def applied(self) -> list[DispatchApplied]:
        """Each entry as the DispatchApplied of its decision, in order."""
        return [
            DispatchApplied(
                workload=e.workload,
                decision_seq=e.decision_seq,
                action=e.action,
                target=e.target,
                node_selector=e.node_selector,
            )
            for e in self.entries
        ]


def dispatch_results(event: Event) -> Sequence[DispatchApplied | DispatchFailed]:
    """The single dispatch results ``event`` stands for: itself for a DispatchApplied or
    DispatchFailed, its entries for a DispatchBatchApplied, none for any other event."""
    if isinstance(event, DispatchApplied | DispatchFailed):
        return (event,)
    if isinstance(event, DispatchBatchApplied):
        return event.applied()
    return ()


Fact = (
    ResourceFlavorObserved
    | ClusterQueueObserved
    | CohortObserved
    | LocalQueueObserved
    | WorkloadPriorityClassObserved
    | WorkloadObserved
    | AdmissionCheckObserved
    | NamespaceObserved
    | ConfigurationObserved
    | SchedulingRequested
    | ObjectDeleted
    | WorkloadFinished
    | WorkloadStopped
    | WorkloadEvictionObserved
    | AdmissionCheckStateChanged
    | WorkloadPodsReady
    | WorkloadReclaimablePods
    | ObjectRejected
    | ChildJobObserved
    | TopologyObserved
    | NodeObserved
    | PodObserved
    | DeviceClassObserved
    | ResourceClaimTemplateObserved
    | ResourceSliceObserved
    | MultiKueueClusterObserved
    | MultiKueueConfigObserved
    | RemoteWorkloadObserved
    | WorkerClusterConnectivity
)
CarriedDecision = (
    QuotaReserved
    | WorkloadAdmitted
    | WorkloadInadmissible
    | QuotaReleased
    | PreemptionRequired
    | PreemptionIssued
    | EvictionRequested
    | WorkloadDeactivated
    | WorkloadRequeued
    | TopologyAssigned
    | WorkersNominated
    | RemoteAdmissionChosen
    | MultiKueueCheckRetry
    | MultiKueueCheckRejected
)
"""The per-workload decisions: every :data:`Decision` but the DecisionRecord, which since schema 17 carries
them (``DecisionRecord.decisions``)."""
Decision = DecisionRecord | CarriedDecision
DispatchResult = DispatchApplied | DispatchFailed | DispatchBatchApplied


BatchedFact = WorkloadObserved | WorkloadFinished
"""The facts a :class:`FactBatch` may carry: the two a workload's life makes once each, in bursts."""


class FactBatch(_Event, frozen=True, kw_only=True, tag="FactBatch"):
    """Several workloads' facts published together as one message on ``kq.in.batch.<source>`` (schema 16).

    A burst of workloads created or finished (a thousand Jobs applied at once, Kueue's scheduler
    benchmark) was a message per fact, each stored by nats-server and read, parsed and acked by every
    reader: that per-message cost, not the fold, was most of the CPU of the processes that only carry
    facts (docs/benchmarks.md, issue 18). ``facts`` (at least one) fold in order, each exactly as it
    would alone at the batch's sequence; only :data:`BatchedFact` types may be in it (a payload with any
    other does not decode). Each workload's facts keep their order, as every publisher sends its
    facts in order; a fact on its own subject and one in a batch are the same fact to every fold."""

    facts: list[BatchedFact]


Event = Fact | FactBatch | Decision | DispatchResult

Output = Decision | PendingOutcome | FinishedRelease
"""What a decider's ``decide`` returns: decisions, each a message of its batch, and (the admitter)
pending outcomes and finished workloads' releases, which its DecisionRecord carries
(``runtime.build_batch``)."""


def with_carried(event: Event) -> list[Event]:
    """``event``, then (a DecisionRecord carrying finished releases, admitter logic 15, or decisions,
    schema 17) the QuotaReleased decisions those stand for and the decisions it carries: what a fold
    takes for that message, for a reader that decodes messages one by one (the batch verifier releases
    them so itself, ``projections.batches``; pending outcomes are left out here, as they restate a
    reason). A :class:`FactBatch` is its facts, in order, without itself."""
    if isinstance(event, DecisionRecord) and (event.released or event.decisions):
        return [event, *event.released_decisions(), *event.carried]
    if isinstance(event, FactBatch):
        return list(event.facts)
    return [event]


def unbatched(event: Event) -> Sequence[Event]:
    """The facts a :class:`FactBatch` carries, in order; any other event alone (a fold's per-fact view)."""
    return event.facts if isinstance(event, FactBatch) else (event,)


FACT_TYPES: tuple[type[Fact], ...] = Fact.__args__
DECISION_TYPES: tuple[type[Decision], ...] = Decision.__args__
DISPATCH_TYPES: tuple[type[DispatchResult], ...] = DispatchResult.__args__
ALL_TYPES: tuple[type[Event], ...] = FACT_TYPES + (FactBatch,) + DECISION_TYPES + DISPATCH_TYPES
