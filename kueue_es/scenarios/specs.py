"""What a loaded scenario is: frozen structs, validated and converted once.

:mod:`kueue_es.scenarios.loading` builds these from a YAML file; every engine and
the checker read them. Manifests are kept next to the facts made from them, so an
engine that goes through a (emulated) Kubernetes API can apply the manifest while
the core engine logs the fact. Amounts are integers (cpu in millicores, memory in
bytes), times milliseconds since the epoch, as in :mod:`kueue_es.events.types`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kueue_es.events import manifests, models, types

ENGINE_NAMES: tuple[str, ...] = ("core", "bus", "cluster")
"""Every engine a scenario may name in ``engines:`` (whether available or not)."""


class ScenarioObject(msgspec.Struct, frozen=True, kw_only=True):
    """One manifest of the scenario and the fact it becomes.

    ``fact`` is None for an object that gives no fact (a TAS pod: its usage comes from its
    workload's topology assignment): such an object stays out of the fact stream and is
    listed in :attr:`Scenario.ignored_objects`.
    """

    manifest: dict[str, Any]
    fact: types.Fact | None

    @property
    def kind(self) -> str:
        """The manifest's kind."""
        return manifests.describe(self.manifest)[0]

    @property
    def name(self) -> str:
        """``name``, or ``namespace/name`` for a namespaced object."""
        return manifests.describe(self.manifest)[1]

    @property
    def workload(self) -> models.Workload | None:
        """The Workload model when this object is a Workload, else None."""
        return self.fact.workload if isinstance(self.fact, types.WorkloadObserved) else None


class AdmittedWorkload(msgspec.Struct, frozen=True, kw_only=True):
    """A workload that holds quota when the run starts (scenario ``admitted:``).

    ``pod_set_assignments`` carry ``resource_usage`` as amounts: the given
    ``resourceUsage``, else per-pod requests x count. ``reserved_at_ms`` is the
    QuotaReserved condition's lastTransitionTime, else the creation time.
    ``eviction`` (ours): an ``Evicted`` condition with status True makes the workload one being
    evicted when the run starts, its job not stopped yet, so it still holds its quota: the seed
    logs that eviction (reason, message, lastTransitionTime in ms), and nothing completes it.
    """

    workload: ScenarioObject
    cluster_queue: str
    pod_set_assignments: tuple[types.PodSetAssignment, ...]
    reserved_at_ms: int
    eviction: tuple[str, str, int] | None = None


class FinishEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``{finish: ns/name}``: the workload's job finished (it releases its quota)."""

    workload: str


class DeleteEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``{delete: ns/name}`` or ``{delete: {kind, name, namespace?}}``: the object is gone.

    ``modelled`` is False for a kind kueue-es does not model yet, or one that is no fact of its own (a v1
    LimitRange): no ObjectDeleted is logged. ``refreshed``: as :attr:`ApplyEvent.refreshed`.
    """

    kind: str
    namespace: str = ""
    name: str
    modelled: bool = True
    refreshed: tuple[types.Fact, ...] = ()

    @property
    def key(self) -> str:
        """``namespace/name`` (or ``name`` for a cluster-scoped object)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class ApplyEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``{apply: manifest}``: an object is created or updated. ``refreshed``: the facts the watcher
    publishes again because of it (a v1 LimitRange: the namespace's Workloads checked against it anew,
    :mod:`kueue_es.services.watcher.standalone`), logged after the object's own."""

    object: ScenarioObject
    refreshed: tuple[types.Fact, ...] = ()


class CheckEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``{check: {workload: ns/name, name: CHECK, state: Ready|Retry|Rejected|Pending, message?,
    requeueAfterSeconds?, podSetUpdates?}}``: an admission check controller sets the check's state
    (ours); ``podSetUpdates`` as in the Workload status (SEMANTICS-ADVANCED B.3)."""

    workload: str
    check: str
    state: str
    message: str = ""
    requeue_after_seconds: int | None = None
    pod_set_updates: tuple[models.PodSetUpdate, ...] = ()


class PodsReadyEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``{podsReady: ns/name}`` or ``{podsReady: {workload: ns/name, ready: false}}``: the
    workload's job reports its pods ready (or no longer ready) (ours)."""

    workload: str
    ready: bool = True


class WaitEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``{wait: 31m}``: time passes (a Go duration) with nothing else happening (ours)."""

    ms: int


class DecideEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``{decide: ROLE}``: one decider alone (``admit``, ``preempt`` or ``place``) takes one step on
    the log as it stands, then the evictions it requested complete (ours: the deciders are
    separate services, and a fact can land between the admitter's nomination and the
    preemptor's answer; Kueue's single scheduler loop has no such moment)."""

    role: str


class RemoteEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``{remote: {workload: ns/name, cluster: WORKER, state: QuotaReserved|Admitted|Evicted|Finished|Gone,
    reason?, message?, admittedAgo?, topologyAssigned?}}``: the MultiKueue edge reports the workload's copy on
    worker ``cluster`` (ours, SEMANTICS-ADVANCED E): a RemoteWorkloadObserved. ``Admitted`` is admitted
    ``admitted_ago_ms`` before now; ``Evicted`` / ``Finished`` take ``reason`` and ``message``; ``Gone``:
    no copy on the worker. ``topology_assigned``: the pod sets the copy's admission gives a topology
    assignment (the worker placed them)."""

    workload: str
    cluster: str
    state: str
    reason: str = ""
    message: str = ""
    admitted_ago_ms: int = 0
    topology_assigned: tuple[str, ...] = ()


class WorkerEvent(msgspec.Struct, frozen=True, kw_only=True):
    """``{worker: {cluster: WORKER, active: true|false, reason?, message?}}``: the MultiKueue edge reports
    whether the manager reaches worker ``cluster`` (ours): a WorkerClusterConnectivity at the time it runs."""

    cluster: str
    active: bool
    reason: str = ""
    message: str = ""


ScenarioEvent = (
    FinishEvent
    | DeleteEvent
    | ApplyEvent
    | CheckEvent
    | PodsReadyEvent
    | WaitEvent
    | DecideEvent
    | RemoteEvent
    | WorkerEvent
)


class RunSpec(msgspec.Struct, frozen=True, kw_only=True):
    """How many scheduling cycles a run phase has: ``cycles`` None means settle."""

    cycles: int | None = None


class PodSetExpectation(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """What an admitted pod set must look like; None means "not checked"."""

    flavors: dict[str, str] | None = None
    count: int | None = None
    topology: dict[str, int] | None = None


class AdmittedExpectation(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """An ``expect.admitted`` entry; None fields are not checked."""

    cluster_queue: str | None = None
    pod_sets: dict[str, PodSetExpectation] | None = None


class MultiKueueExpectation(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """An ``expect.multikueue`` entry (ours): the workload's ``status.clusterName`` ("": none) and
    ``status.nominatedClusterNames`` at the end; None fields are not checked."""

    cluster_name: str | None = None
    nominated: list[str] | None = None


class Expect(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The scenario's ``expect``: None lists are absent (not checked); keys are ``ns/name``."""

    admitted: dict[str, AdmittedExpectation] = {}
    multikueue: dict[str, MultiKueueExpectation] = {}
    reserved: list[str] | None = None  # ours: holding quota, waiting for admission checks
    preempted: list[str] | None = None
    pending: list[str] | None = None


class Scenario(msgspec.Struct, frozen=True, kw_only=True):
    """One scenario file, loaded: ``path`` is the file it came from (for messages).

    ``xfail`` is a reason the scenario is known to fail (test suites mark it so);
    ``engines`` the engines it may run on (default: all of :data:`ENGINE_NAMES`).
    """

    path: str
    name: str
    source: str = ""
    description: str = ""
    objects: tuple[ScenarioObject, ...] = ()
    admitted: tuple[AdmittedWorkload, ...] = ()
    pending: tuple[ScenarioObject, ...] = ()
    events: tuple[ScenarioEvent, ...] = ()
    run: RunSpec = RunSpec()
    expect: Expect = Expect()
    xfail: str | None = None
    engines: tuple[str, ...] = ENGINE_NAMES
    pods_ready: str = "auto"  # "auto": the runner reports PodsReady when a workload is admitted

    def runs_on(self, engine: str) -> bool:
        """Whether the scenario may run on ``engine``."""
        return engine in self.engines

    @property
    def workloads(self) -> list[models.Workload]:
        """Every Workload the scenario submits, in submission order (objects, admitted, pending, events)."""
        found = [o.workload for o in self.objects]
        found += [a.workload.workload for a in self.admitted]
        found += [p.workload for p in self.pending]
        found += [e.object.workload for e in self.events if isinstance(e, ApplyEvent)]
        return [w for w in found if w is not None]

    @property
    def submitted(self) -> list[str]:
        """``ns/name`` of every submitted workload, first submission order, no repeats."""
        return list(dict.fromkeys(w.key for w in self.workloads))

    @property
    def ignored_objects(self) -> list[ScenarioObject]:
        """Objects of kinds kueue-es does not model yet (kept for the engines that will)."""
        applied = [e.object for e in self.events if isinstance(e, ApplyEvent)]
        return [o for o in (*self.objects, *applied) if o.fact is None]
