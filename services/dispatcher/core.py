"""The dispatcher's pure core: a logged decision in, the Kubernetes write it calls for out.

Kueue's job reconciler starts an admitted Job by unsuspending it and injecting the
assigned flavors' ``nodeLabels`` into the pod template's ``nodeSelector`` and the
flavors' ``tolerations`` into its tolerations (SEMANTICS §1.2, §2.1; Kueue
pkg/controller/jobframework/reconciler.go startJob, podset.go Merge). It stops an
evicted one by suspending it and restoring the pod template it had before
(SEMANTICS §7.8; reconciler.go step 6 "handle eviction", stopJob;
pkg/controller/jobs/job/job_controller.go Stop, RestorePodSetsInfo). This module
decides those writes from the folded state; the runner (``kueue_es.services.dispatcher.service``)
has them performed (:mod:`kueue_es.services.dispatcher.job_writes`) and records the result on
the log. :func:`plan` names the events it acts on (:data:`PLAN_HANDLED`) and those it ignores
(:data:`PLAN_IGNORED`); any other fails it.

The same for the table-driven integrations (a JobSet, Kubeflow's jobs, ...:
:mod:`kueue_es.jobframework.integrations`, one pod template per pod set, each job's own
suspend field) and for plain Pods and pod groups (pkg/controller/jobs/pod:
start = remove the ``kueue.x-k8s.io/admission`` scheduling gate and merge the pod set's
node selector and tolerations into each pod; stop = delete the pods that run). What a
start adds to a pod template is Kueue's PodSetInfo (:class:`PodSetInfo`): the assigned
flavors' node labels and tolerations, merged with the podSetUpdates of the Ready
admission checks; a conflicting key means the job cannot start (:class:`FailStart`,
SEMANTICS-ADVANCED B.3; reconciler.go getPodSetsInfoFromStatus, podset.go Merge).
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, assert_never

from kueue_es.events import job_owners, models, slices, tas, types
from kueue_es.jobframework import integrations, jobs, prebuilt
from kueue_es.jobframework.annotations import (
    EVICTED_ANNOTATION,
    EVICTED_WORKLOAD_ANNOTATION,
    EVICTION_SEQ_ANNOTATION,
    PODSET_LABEL,
    RUNNING_VARIANT_ANNOTATION,
    SCHEDULING_GATE,
)
from kueue_es.jobframework.annotations import IS_GROUP_WORKLOAD_ANNOTATION as GROUP_WORKLOAD_ANNOTATION
from kueue_es.jobframework.workloads import QUEUE_LABEL
from kueue_es.projections import multikueue
from kueue_es.projections.cluster import ClusterState, WorkloadState, apply
from kueue_es.scheduling import concurrent_admission
from kueue_es.scheduling.queues import required_checks
from kueue_es.scheduling.tas import replacement
from kueue_es.services.dispatcher import lean, status, ungater


@dataclass(frozen=True, kw_only=True)
class StartJob:
    """Unsuspend Job ``namespace/name`` with the flavors' node labels and tolerations added."""

    workload: types.WorkloadRef
    namespace: str
    name: str
    uid: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduling_gates: list[str] = field(default_factory=list)
    count: int = 0
    variant: str = ""
    """The ConcurrentAdmission variant this start is for ("": the job's own workload): the job is marked with it,
    and an earlier variant's stop mark taken off."""

    def conflict(self, template: Mapping[str, Any]) -> str | None:
        """Kueue's message when the Job's pod ``template`` (as the API server has it) sets a label, annotation
        or nodeSelector key this start sets to another value, else None (:func:`template_conflict`)."""
        return template_conflict(
            template,
            labels=self.labels,
            annotations=self.annotations,
            node_selector=self.node_selector,
        )

    def patch(
        self,
        *,
        current_tolerations: list[dict[str, Any]],
        current_gates: list[dict[str, Any]] | None = None,
        job_annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The JSON merge patch for the Job: keeps the template's own tolerations, adds ours once,
        adds the admission checks' labels and annotations to the template (and, for a TAS pod set,
        the pod set label, workload annotation and the topology scheduling gate, kept once next to
        the template's ``current_gates``), and removes the eviction marks of an earlier stop so a
        later eviction is seen afresh. A Job whose ``job_annotations`` accept partial admission runs
        with the admitted ``count`` pods (:func:`kueue_es.jobframework.jobs.started_pod_counts`)."""
        # no flavor label: no nodeSelector written (an empty one would stay on the template after the stop)
        template_spec: dict[str, Any] = {"nodeSelector": self.node_selector} if self.node_selector else {}
        merged = merged_tolerations(current_tolerations, self.tolerations)
        if merged != list(current_tolerations):
            template_spec["tolerations"] = merged
        gates = with_gates(list(current_gates or []), self.scheduling_gates)
        if gates != list(current_gates or []):
            template_spec["schedulingGates"] = gates
        template: dict[str, Any] = {"spec": template_spec}
        template_meta = {k: v for k, v in (("labels", self.labels), ("annotations", self.annotations)) if v}
        if template_meta:
            template["metadata"] = template_meta
        spec: dict[str, Any] = {"suspend": False, "template": template}
        if self.count:
            spec.update(jobs.started_pod_counts(job_annotations or {}, admitted=self.count))
        return {"metadata": {"annotations": _eviction_marks(None, 0, variant=self.variant)}, "spec": spec}


def template_conflict(
    template: Mapping[str, Any],
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    node_selector: Mapping[str, str],
) -> str | None:
    """Why a start cannot be merged into a pod ``template`` (``metadata`` and ``spec`` of a job's template as
    the API server has it), or None: the template sets an annotation, label or nodeSelector key (checked in
    that order, keys sorted) that the start sets to another value, as a Ready admission check's podSetUpdate
    may. Kueue's message, ``invalid admission check PodSetUpdate: conflict for labels: conflict for key=k,
    value1=<the template's>, value2=<the start's>``, finishes the workload FailedToStart and leaves the job
    suspended (pkg/podset/podset.go Merge; reconciler.go startJob, podset.IsPermanent). The start of an elastic
    job's slice (it sets the workload-slice name, which it does only with the gate ElasticJobsViaWorkloadSlices)
    replaces a stale slice name or Workload name Kueue put there for an earlier chain (podset.go
    overrideableAnnotations; without that annotation the start sets neither key Kueue would let it replace). A
    template that is no mapping holds nothing to conflict with."""
    meta = template.get("metadata") if isinstance(template, Mapping) else None
    spec = template.get("spec") if isinstance(template, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    spec = spec if isinstance(spec, Mapping) else {}
    elastic = slices.SLICE_NAME_ANNOTATION in annotations
    overridable = (slices.SLICE_NAME_ANNOTATION, WORKLOAD_ANNOTATION) if elastic else ()

    def strings(value: Any, *, skip: Collection[str] = ()) -> dict[str, str]:
        return {str(k): str(v) for k, v in value.items() if k not in skip} if isinstance(value, Mapping) else {}

    for what, theirs, mine in (
        ("annotations", strings(meta.get("annotations"), skip=overridable), annotations),
        ("labels", strings(meta.get("labels")), labels),
        ("nodeSelector", strings(spec.get("nodeSelector")), node_selector),
    ):
        conflict = _conflict(theirs, dict(mine))
        if conflict is not None:
            return f"invalid admission check PodSetUpdate: conflict for {what}: {conflict}"
    return None


def with_gates(current: list[dict[str, Any]], added: list[str]) -> list[dict[str, Any]]:
    """``current`` scheduling gates with each gate named in ``added`` appended unless there (podset.go Merge)."""
    names = {g.get("name") for g in current if isinstance(g, dict)}
    return [*current, *({"name": name} for name in added if name not in names)]


def without_gates(current: list[dict[str, Any]], removed: list[str]) -> list[dict[str, Any]]:
    """``current`` scheduling gates without those named in ``removed``."""
    return [g for g in current if not (isinstance(g, dict) and g.get("name") in removed)]


def merged_tolerations(current: list[dict[str, Any]], added: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``current`` with each toleration of ``added`` not already there appended (podset.go Merge)."""
    present = {_toleration_key(t) for t in current}
    out = list(current)
    for toleration in added:
        if _toleration_key(toleration) not in present:
            present.add(_toleration_key(toleration))
            out.append(toleration)
    return out


def restored_pod_spec(
    pod_spec: Mapping[str, Any],
    *,
    node_selector: dict[str, str | None],
    tolerations: list[dict[str, Any]],
    own_tolerations: list[dict[str, Any]],
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """(nodeSelector, tolerations) of a started pod spec given back: each key in ``node_selector`` set to the
    template's own value (None: removed), each of ``tolerations`` removed unless the template had it itself
    (``own_tolerations``, counted)."""
    selector = dict(pod_spec.get("nodeSelector") or {})
    for key, own in node_selector.items():
        if own is None:
            selector.pop(key, None)
        else:
            selector[key] = own
    added = {_toleration_key(t) for t in tolerations}
    budget = Counter(_toleration_key(t) for t in own_tolerations)
    kept: list[dict[str, Any]] = []
    for toleration in pod_spec.get("tolerations") or []:
        same = _toleration_key(toleration)
        if same in added and budget[same] <= 0:
            continue  # a copy the start added
        budget[same] -= 1
        kept.append(toleration)
    return selector, kept


@dataclass(frozen=True, kw_only=True)
class StopJob:
    """Suspend Job ``namespace/name`` (UID ``uid``) for an eviction and give its pod template back.

    Kueue's Job.Stop suspends the Job and restores the pod template from the
    Workload's pod sets (job_controller.go Stop, RestorePodSetsInfo; podset.go
    RestorePodSpec). Here the restore takes back exactly what StartJob added:
    ``node_selector`` maps each key the flavors injected to the template's own
    value (None: the template had none, remove it); ``tolerations`` are the flavors'
    tolerations, removed unless the template had them itself (``own_tolerations``,
    counted, so a toleration the template and a flavor share stays once).
    ``reason`` (the eviction's, e.g. ``Preempted``) goes into the
    :data:`EVICTED_ANNOTATION`, ``decision_seq`` (the EvictionRequested's log
    sequence) into the :data:`EVICTION_SEQ_ANNOTATION`.
    """

    workload: types.WorkloadRef
    namespace: str
    name: str
    uid: str = ""
    reason: str
    decision_seq: int
    node_selector: dict[str, str | None] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    own_tolerations: list[dict[str, Any]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)
    scheduling_gates: list[str] = field(default_factory=list)
    count: int = 0
    evicted_workload: str = ""
    """The ConcurrentAdmission variant whose eviction this is ("": the job's own workload's)."""

    def patch(self, *, current_pod_spec: Mapping[str, Any], job: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The JSON merge patch for the Job, given its pod template's current ``spec`` (and the whole
        ``job`` as it is now, for its annotations and pod counts).

        Suspends it, marks it evicted and restores nodeSelector and tolerations, and the
        parallelism of a partially admitted Job to the Workload's pod set ``count``
        (:func:`kueue_es.jobframework.jobs.restored_pod_counts`); the same patch applied
        twice changes nothing the second time. With ``uid`` the patch carries it as a
        precondition: a re-created namesake Job is refused.
        """
        current = list(current_pod_spec.get("tolerations") or [])
        selector, kept = restored_pod_spec(
            current_pod_spec,
            node_selector=self.node_selector,
            tolerations=self.tolerations,
            own_tolerations=self.own_tolerations,
        )
        template_spec: dict[str, Any] = {}
        if self.node_selector:
            template_spec["nodeSelector"] = dict(self.node_selector) if selector else None
        if kept != current:
            template_spec["tolerations"] = kept or None
        gates = list(current_pod_spec.get("schedulingGates") or [])
        remaining = without_gates(gates, self.scheduling_gates)
        if remaining != gates:
            template_spec["schedulingGates"] = remaining or None
        annotations = _eviction_marks(self.reason, self.decision_seq, evicted_workload=self.evicted_workload)
        metadata: dict[str, Any] = {"annotations": annotations}
        if self.uid:
            metadata["uid"] = self.uid
        spec: dict[str, Any] = {"suspend": True}
        if self.count and job is not None:
            job_meta, job_spec = job.get("metadata") or {}, job.get("spec") or {}
            spec.update(jobs.restored_pod_counts(job_meta.get("annotations") or {}, job_spec, count=self.count))
        template: dict[str, Any] = {"spec": template_spec} if template_spec else {}
        current_meta = (((job or {}).get("spec") or {}).get("template") or {}).get("metadata") or {}
        restored, template_meta = _restored_template_meta(
            current_meta if job is not None else None, labels=self.labels, annotations=self.annotations
        )
        if restored:
            template["metadata"] = template_meta
        if template:
            spec["template"] = template
        return {"metadata": metadata, "spec": spec}


def _restored_template_meta(current: Any, *, labels: list[str], annotations: list[str]) -> tuple[bool, Any]:
    """(whether to patch, the merge patch) of a pod template's ``metadata`` taking out the ``labels`` and
    ``annotations`` keys a start added. Given the template's ``current`` metadata, a map left empty goes, and so
    does a metadata left empty (patched to null), as Kueue's restore writes the template's own maps back and
    Go's JSON drops empty ones; without it (None: unknown), only the keys go."""
    taken = {kind: keys for kind, keys in (("labels", labels), ("annotations", annotations)) if keys}
    if not taken:
        return False, None
    if not isinstance(current, dict):
        return True, {kind: dict.fromkeys(keys) for kind, keys in taken.items()}
    patch: dict[str, Any] = {}
    for kind, keys in taken.items():
        present = current.get(kind) or {}
        if not set(keys) & set(present):
            continue  # none of them there (stopped already): nothing to write
        patch[kind] = dict.fromkeys(keys) if set(present) - set(keys) else None
    if not patch:
        return False, None
    if not (set(current) - set(patch)) and all(value is None for value in patch.values()):
        return True, None  # nothing of the template's own metadata left
    return True, patch


@dataclass(frozen=True, kw_only=True)
class PodSetInfo:
    """What starting a job puts into the pod template of pod set ``name`` (Kueue podset.PodSetInfo), and what
    stopping it takes out again.

    ``node_selector`` / ``tolerations``: the assigned flavors' node labels and tolerations
    with the Ready checks' podSetUpdates merged in; ``labels`` / ``annotations``: the
    checks'. ``own_node_selector`` / ``own_tolerations``: the template's own (from the
    workload's pod set), which a stop gives back. ``count``: the pods admitted for it (the
    admission's count, below the pod set's own for a partial admission).
    """

    name: str
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    own_node_selector: dict[str, str] = field(default_factory=dict)
    own_tolerations: list[dict[str, Any]] = field(default_factory=list)
    scheduling_gates: list[str] = field(default_factory=list)
    count: int = 0

    def started(self, template: dict[str, Any]) -> dict[str, Any]:
        """A copy of pod ``template`` (``metadata`` and ``spec``) with this pod set's additions merged in."""
        out = copy.deepcopy(template)
        meta, spec = out.setdefault("metadata", {}), out.setdefault("spec", {})
        for kind, added in (("labels", self.labels), ("annotations", self.annotations)):
            if added:
                meta[kind] = {**(meta.get(kind) or {}), **added}
        if self.node_selector:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **self.node_selector}
        tolerations = merged_tolerations(list(spec.get("tolerations") or []), self.tolerations)
        if tolerations:
            spec["tolerations"] = tolerations
        gates = with_gates(list(spec.get("schedulingGates") or []), self.scheduling_gates)
        if gates:
            spec["schedulingGates"] = gates
        return out

    def stopped(self, template: dict[str, Any]) -> dict[str, Any]:
        """A copy of a started pod ``template`` with what :meth:`started` added taken out again."""
        out = copy.deepcopy(template)
        meta, spec = out.setdefault("metadata", {}), out.setdefault("spec", {})
        for kind, added in (("labels", self.labels), ("annotations", self.annotations)):
            if not added:
                continue  # untouched by the start: given back as it is, even an empty map
            kept = {k: v for k, v in (meta.get(kind) or {}).items() if k not in added}
            if kept:
                meta[kind] = kept
            else:
                meta.pop(kind, None)
        selector, tolerations = restored_pod_spec(
            spec,
            node_selector={key: self.own_node_selector.get(key) for key in self.node_selector},
            tolerations=self.tolerations,
            own_tolerations=self.own_tolerations,
        )
        gates = without_gates(list(spec.get("schedulingGates") or []), self.scheduling_gates)
        for key, value in (("nodeSelector", selector), ("tolerations", tolerations), ("schedulingGates", gates)):
            if value:
                spec[key] = value
            else:
                spec.pop(key, None)
        if not meta:
            out.pop("metadata")
        return out


def _eviction_marks(
    reason: str | None, seq: int, *, variant: str = "", evicted_workload: str = ""
) -> dict[str, str | None]:
    """The eviction marks of a stop (``reason``, the EvictionRequested's ``seq``; ``evicted_workload``: the
    ConcurrentAdmission variant evicted, when not the job's own workload), or with ``reason`` None their removal by
    a start (``variant``: the variant it is for, which also takes off an earlier variant's mark and names itself)."""
    if reason is None:
        marks: dict[str, str | None] = {EVICTED_ANNOTATION: None, EVICTION_SEQ_ANNOTATION: None}
        if variant:
            marks[EVICTED_WORKLOAD_ANNOTATION] = None
            marks[RUNNING_VARIANT_ANNOTATION] = variant
        return marks
    marks = {EVICTED_ANNOTATION: reason, EVICTION_SEQ_ANNOTATION: str(seq)}
    if evicted_workload:
        marks[EVICTED_WORKLOAD_ANNOTATION] = evicted_workload
    return marks


@dataclass(frozen=True, kw_only=True)
class StartIntegration:
    """Unsuspend job ``namespace/name`` of a table-driven integration (``kind``: a JobSet, a PyTorchJob, a
    RayJob, ...) with each pod set's template started (Kueue's RunWithPodSetsInfo: one PodSetInfo per pod set,
    matched by name; :mod:`kueue_es.jobframework.integrations`)."""

    workload: types.WorkloadRef
    kind: str
    namespace: str
    name: str
    uid: str = ""
    pod_sets: list[PodSetInfo] = field(default_factory=list)
    variant: str = ""
    """As :attr:`StartJob.variant`."""

    def patch(self, current: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON merge patch for the job as it is now: the changed fields only (a list, such as a JobSet's
        ``replicatedJobs``, is sent whole), the eviction marks of an earlier stop removed, the UID as a
        precondition. Raises ManifestError when the job no longer converts, TemplateConflict when a pod set's
        template sets a label, annotation or nodeSelector key its start sets otherwise (podset.go Merge, run
        by every integration's RunWithPodSetsInfo)."""
        integration = integrations.registry()[self.kind]
        desired = integrations.changed_job(
            integration,
            current,
            templates={info.name: _merged_into(info) for info in self.pod_sets},
            suspend=False,
            counts={info.name: info.count for info in self.pod_sets},
        )
        return _integration_patch(current, desired, marks=_eviction_marks(None, 0, variant=self.variant), uid=self.uid)


class TemplateConflict(Exception):
    """A start that cannot be merged into a job's pod template; the message is Kueue's (:func:`template_conflict`)."""


def _merged_into(info: PodSetInfo) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``info.started``, refusing a template it conflicts with (TemplateConflict)."""

    def started(template: dict[str, Any]) -> dict[str, Any]:
        conflict = template_conflict(
            template, labels=info.labels, annotations=info.annotations, node_selector=info.node_selector
        )
        if conflict is not None:
            raise TemplateConflict(conflict)
        return info.started(template)

    return started


@dataclass(frozen=True, kw_only=True)
class StopIntegration:
    """Suspend job ``namespace/name`` of a table-driven integration for an eviction and give each pod set's
    template back (Kueue's Suspend + RestorePodSetsInfo); marked as a stopped Job is
    (:data:`EVICTED_ANNOTATION` with ``reason``, :data:`EVICTION_SEQ_ANNOTATION` with ``decision_seq``)."""

    workload: types.WorkloadRef
    kind: str
    namespace: str
    name: str
    uid: str = ""
    reason: str
    decision_seq: int
    pod_sets: list[PodSetInfo] = field(default_factory=list)
    evicted_workload: str = ""
    """As :attr:`StopJob.evicted_workload`."""

    def patch(self, current: Mapping[str, Any]) -> dict[str, Any]:
        """The merge patch for the job as it is now; applied twice it changes nothing the second time.
        Raises ManifestError when the job no longer converts."""
        integration = integrations.registry()[self.kind]
        desired = integrations.changed_job(
            integration, current, templates={info.name: info.stopped for info in self.pod_sets}, suspend=True
        )
        marks = _eviction_marks(self.reason, self.decision_seq, evicted_workload=self.evicted_workload)
        return _integration_patch(current, desired, marks=marks, uid=self.uid)


def _integration_patch(
    current: Mapping[str, Any], desired: Mapping[str, Any], *, marks: dict[str, str | None], uid: str
) -> dict[str, Any]:
    """The merge patch from ``current`` to ``desired`` with the eviction ``marks`` and ``uid`` in its metadata."""
    patch = {key: value for key, value in integrations.merge_patch(current, desired).items() if key != "metadata"}
    metadata: dict[str, Any] = {"annotations": marks}
    if uid:
        metadata["uid"] = uid
    return {"metadata": metadata, **patch}


@dataclass(frozen=True, kw_only=True)
class StartPods:
    """Start the pods of a plain-Pod workload (``pod_name``) or of pod group ``group``: each gated pod loses
    Kueue's scheduling gate and gets its pod set's additions (pod_controller.go Run, prepare). A group's pod
    belongs to the pod set named by its role hash; the runner finds the pods and their roles."""

    workload: types.WorkloadRef
    namespace: str
    pod_name: str = ""
    group: str = ""
    uid: str = ""
    pod_sets: list[PodSetInfo] = field(default_factory=list)
    total: int = 0  # a group's pod count (its pod sets' counts): active pods beyond it are deleted, not started
    # a group on a prebuilt Workload (:func:`prebuilt.group_on_prebuilt`: one it adopted, a StatefulSet's or a
    # LeaderWorkerSet's): those beyond its count are left gated, not deleted (Kueue's prebuilt path deletes none)
    keep_excess: bool = False
    # a StatefulSet's group: the LocalQueue its pods are labelled with before they start (its Workload's), as Kueue's
    # StatefulSet reconciler runs syncQueueLabel before it ungates them (statefulset_reconciler.go Reconcile)
    queue: str = ""
    # a serving parent's group (StatefulSet, LeaderWorkerSet): its Workload outlives its pods, so an admission with
    # no pod yet (scaled up again, the controller not there yet) is not a job gone; the pods to come start late
    serving: bool = False

    def relabel(self, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        """The merge patch giving a gated ``pod`` the group's :attr:`queue` label, to be written before its start
        (a separate write: Kueue's pod webhook refuses a queue-name change on a pod that is not gated,
        jobframework validateUpdateForQueueName); None when there is nothing to change."""
        meta = pod.get("metadata") or {}
        gates = (pod.get("spec") or {}).get("schedulingGates") or []
        gated = any(isinstance(g, dict) and g.get("name") == SCHEDULING_GATE for g in gates)
        if not self.queue or not gated or (meta.get("labels") or {}).get(QUEUE_LABEL) == self.queue:
            return None
        return {"metadata": {"labels": {QUEUE_LABEL: self.queue}}}

    def patch(self, pod: Mapping[str, Any], *, pod_set: str) -> dict[str, Any] | None:
        """The merge patch that starts ``pod`` as a member of ``pod_set``; None for a pod no longer gated
        (already started) or a pod set this workload does not have."""
        info = next((i for i in self.pod_sets if i.name == pod_set), None)
        spec = pod.get("spec") or {}
        gates = [g for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]
        if info is None or not any(g.get("name") == SCHEDULING_GATE for g in gates):
            return None
        new_spec = info.started({"spec": spec})["spec"]
        metadata: dict[str, Any] = {"annotations": {**_eviction_marks(None, 0), **info.annotations}}
        if info.labels:
            metadata["labels"] = dict(info.labels)
        if uid := (pod.get("metadata") or {}).get("uid"):
            metadata["uid"] = uid
        # The pod webhook gave every managed pod the topology gate too: it stays only for a pod set with a TA (A.12).
        dropped = [SCHEDULING_GATE] + ([] if TOPOLOGY_GATE in info.scheduling_gates else [TOPOLOGY_GATE])
        remaining = without_gates(gates, dropped)
        patch_spec: dict[str, Any] = {"schedulingGates": remaining or None}
        for key in ("nodeSelector", "tolerations"):
            if new_spec.get(key) != spec.get(key):
                patch_spec[key] = new_spec.get(key)
        return {"metadata": metadata, "spec": patch_spec}


@dataclass(frozen=True, kw_only=True)
class StopPods:
    """Stop the pods of a plain-Pod workload or pod group for an eviction: every pod is marked as a stopped
    Job is, and each one that runs (not gated, not terminated) is deleted (pod_controller.go Stop: Kueue
    stops pods by deleting them; gated pods never ran and stay)."""

    workload: types.WorkloadRef
    namespace: str
    pod_name: str = ""
    group: str = ""
    reason: str
    decision_seq: int

    def mark(self) -> dict[str, Any]:
        """The merge patch marking one pod with the eviction (reason and sequence)."""
        return {"metadata": {"annotations": _eviction_marks(self.reason, self.decision_seq)}}


@dataclass(frozen=True, kw_only=True)
class FailStart:
    """An admitted workload whose job cannot start: its pod set information conflicts (a podSetUpdate of a
    Ready admission check against a flavor, another check or the template). Kueue finishes it with reason
    ``FailedToStart`` and the conflict as message (reconciler.go, podset.IsPermanent)."""

    workload: types.WorkloadRef
    namespace: str
    name: str
    kind: str
    message: str


TOPOLOGY_GATE = ungater.TOPOLOGY_GATE
"""The scheduling gate that holds a TAS pod until the ungater gives it its domain (SEMANTICS-ADVANCED A.12)."""
WORKLOAD_ANNOTATION = ungater.WORKLOAD_ANNOTATION
"""The pod annotation naming a started pod's Workload (Kueue WorkloadAnnotation)."""
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
"""The pod labels naming a started pod's LocalQueue and ClusterQueue (Kueue constants.LocalQueueLabel and
ClusterQueueLabel, gate AssignQueueLabelsForPods, on by default since Kueue 0.17)."""
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _queue_labels(state: ClusterState, wl: WorkloadState, cluster_queue: str) -> dict[str, str]:
    """reconciler.go assignQueueLabels: the LocalQueue's name, and the ClusterQueue's when it is a valid label
    value (a DNS-1123 label); none with the gate AssignQueueLabelsForPods off."""
    if not state.configuration.feature_gates.get("AssignQueueLabelsForPods", True):
        return {}
    labels = {LOCAL_QUEUE_LABEL: wl.workload.spec.queue_name}
    if len(cluster_queue) <= 63 and _DNS1123_LABEL.fullmatch(cluster_queue):
        labels[CLUSTER_QUEUE_LABEL] = cluster_queue
    return labels


def startable(api_version: str, kind: str) -> bool:
    """Whether the dispatcher starts and stops jobs of this kind: a batch/v1 Job, Pods, or a registered
    integration's kind at its apiVersion."""
    if (api_version, kind) in (("batch/v1", "Job"), ("v1", "Pod")):
        return True
    integration = integrations.by_kind(kind)
    return integration is not None and integration.api_version == api_version and integration.suspend_path is not None


def ancestor_workload(state: ClusterState, namespace: str, ancestor: models.OwnerReference) -> WorkloadState | None:
    """The latest not-finished workload of job ``ancestor`` in ``namespace`` as the fold has it (Kueue's
    getLatestNotFinishedWorkloadForObject, reconciler.go: its Workloads by owner, the newest last): owned by it
    (same kind and UID; a prebuilt Workload it adopted too), neither finished nor deleted. None when it has none."""
    found: WorkloadState | None = None
    for wl in state.workloads.values():
        owner = wl.workload.owner
        if (
            owner is None
            or owner.uid != ancestor.uid
            or owner.kind != ancestor.kind
            or wl.workload.metadata.namespace != namespace
            or wl.gone
        ):
            continue
        if found is None or (wl.workload.metadata.creation_timestamp_ms, wl.key) > (
            found.workload.metadata.creation_timestamp_ms,
            found.key,
        ):
            found = wl
    return found


def child_to_suspend(state: ClusterState, child: types.ChildJobObserved) -> bool:
    """Whether ``child``, a job seen running under its managed ``ancestor``, is to be suspended, as Kueue's job
    reconciler decides for a job that is not top-level (jobframework/reconciler.go ReconcileGenericJob,
    shouldSuspendChildJob): when the ancestor has no not-finished workload (:func:`ancestor_workload`), or it
    is not admitted (quota reserved and every check Ready: the fold's ``admitted`` with its reservation); for an
    elastic ancestor (its workload slices: ``kueue.x-k8s.io/elastic-job``), only when that workload is evicted,
    as a slice waiting to replace an admitted one is admitted by none."""
    wl = ancestor_workload(state, child.namespace, child.ancestor)
    if wl is None:
        return True
    if wl.workload.metadata.annotations.get(slices.ELASTIC_JOB_ANNOTATION) == "true":
        return wl.eviction is not None
    return not (wl.admitted and wl.reservation is not None)


Action = StartJob | StopJob | StartIntegration | StopIntegration | StartPods | StopPods | FailStart


@dataclass
class DispatchState:
    """What the dispatcher folds: the cluster, as every service folds it, plus the log
    sequence at which each workload's live reservation was recorded, the Kueue status
    of each workload, and what changed since the runner last wrote.

    ``reserved_seq[workload key]`` lets :func:`plan` tell a redelivered eviction from
    a current one: an EvictionRequested logged before the workload's live
    reservation was about an earlier admission, long since stopped.
    ``records[workload key]`` is the workload's Kueue status (:mod:`.status`).
    ``started[workload key]``: what its admission puts into the pod templates (one
    :class:`PodSetInfo` per pod set, fixed when WorkloadAdmitted is folded, so a stop
    takes out exactly that even after the checks were reset), or the conflict that
    keeps it from starting.
    ``dirty_workloads`` (workload key -> the last sequence that changed it) and
    ``dirty_queues`` (``("ClusterQueue", "", name)``, ``("LocalQueue", namespace,
    name)`` or ``("Cohort", "", name)``) are the objects whose Kubernetes state may have to change; the runner
    takes them (:meth:`take_dirty_workloads`, :meth:`take_dirty_queues`) when it writes.
    ``unwritten_releases`` (workload key -> the sequence of its QuotaReleased): workloads whose quota was
    released on the log and whose Workload status has not been written since; the runner writes these
    before any other workload (:class:`~kueue_es.services.dispatcher.object_sync.WorkloadSync`), so the API
    never shows a workload admitted into quota that another one still holds there.
    ``deleted_stops`` (workload key -> (the sequence of its QuotaReleased ``Deleted``, the stop)): the stop of
    the job of a started workload whose Workload was deleted, fixed when the release is folded (the fold
    forgets the workload then) and taken by :func:`plan` for that release; at most
    :data:`DELETED_STOPS_KEPT`, the oldest dropped (a runner that refolds the log keeps those of releases
    it answered long ago). Not in snapshots: a snapshot never passes what the runner has answered.
    ``deleted_workloads``: the workloads an ObjectDeleted named since the runner last wrote them: the Workload
    object it keeps of one is stale (a job's Workload deleted by hand is made again under the same name), and
    Kueue's finalizer on it is to be taken off before the new one is written; at most
    :data:`DELETED_STOPS_KEPT`, the oldest dropped; in snapshots (a runner restarted from one still lets go of
    the old objects).
    ``not_matching``: those of ``deleted_workloads`` whose last ObjectDeleted was a running job's workload that
    no longer matches it (``reason`` :data:`~kueue_es.events.types.NO_MATCHING_WORKLOAD`): its job's Stopped
    Event and the DeletedWorkload Event on the old object's deletion say so, as Kueue's ensureOneWorkload
    does; kept and bounded as ``deleted_workloads``, in snapshots.
    ``adopted_admitted`` (workload key -> the sequence of the WorkloadObserved that gave it its job): prebuilt
    Workloads a job adopted while they were admitted already (:func:`kueue_es.jobframework.prebuilt.is_adopted`).
    Their job is started by the runner's :class:`~kueue_es.services.dispatcher.suspension.Suspension` when it
    folds the adoption, not by the plan of an admission logged before it (which a fold that ran ahead shows
    with the job already): one start, one ``Started`` Event. In snapshots.
    ``object_versions`` (workload key -> a count): how many times the fold changed what the workload's Workload
    object shows (its status, spec or owner; its deletion), each change a write of the object, which gives it a
    new resourceVersion on a real cluster. Kueue's event recorder folds an Event into an earlier one only when
    both are about the object at one resourceVersion, so the runner's Events are keyed by the count a decision
    was folded on (:class:`~kueue_es.services.dispatcher.recording.Recording`), however the runner's writes
    coalesce. In snapshots (a view from one is the view folded from the start); a workload's count goes when
    the fold forgets it.
    ``checks_reported``: the workloads a check controller's report (AdmissionCheckStateChanged) was folded for since
    the runner last wrote them: their Workload object's ``status.admissionChecks`` was written by someone else, an
    entry the ClusterQueue does not name added or one it names taken out, maybe, so the runner reads it and writes the
    list again where it differs (:meth:`~kueue_es.services.dispatcher.object_sync.WorkloadSync._sync_status`), as
    Kueue's workload controller syncs it at the reconcile each such write brings. Not in snapshots: a runner
    restarted lists the objects, and compares with what the server has.
    ``track_objects`` False is for a runner that writes no Workload objects and no queue
    status (the bench's simulated API): :func:`fold` then keeps only what :func:`plan`
    reads (:mod:`kueue_es.services.dispatcher.lean`: no cluster fold, records only with
    admission checks or a topology, no dirty sets, a finished workload kept as its UID; the
    events of :data:`LEAN_SKIPPED` only count), so the same decisions plan to the same writes.
    """

    cluster: ClusterState = field(default_factory=ClusterState)
    reserved_seq: dict[str, int] = field(default_factory=dict)
    records: dict[str, status.WorkloadRecord] = field(default_factory=dict)
    started: dict[str, list[PodSetInfo] | str] = field(default_factory=dict)
    dirty_workloads: dict[str, int] = field(default_factory=dict)
    dirty_queues: dict[tuple[str, str, str], None] = field(default_factory=dict)
    track_objects: bool = True
    unwritten_releases: dict[str, int] = field(default_factory=dict)
    deleted_stops: dict[str, tuple[int, StopJob | StopIntegration]] = field(default_factory=dict)
    deleted_workloads: dict[str, None] = field(default_factory=dict)
    not_matching: dict[str, None] = field(default_factory=dict)
    adopted_admitted: dict[str, int] = field(default_factory=dict)
    object_versions: dict[str, int] = field(default_factory=dict)
    checks_reported: dict[str, None] = field(default_factory=dict)

    def changed(self, key: str, seq: int) -> None:
        """The Workload object of ``key`` is to show a change folded at ``seq``: written again, a new version."""
        self.dirty_workloads[key] = seq
        self.object_versions[key] = self.object_versions.get(key, 0) + 1

    def take_dirty_workloads(self) -> dict[str, int]:
        """The dirty workloads (key -> sequence), in the order they changed; the set is emptied."""
        taken, self.dirty_workloads = self.dirty_workloads, {}
        return taken

    def take_dirty_queues(self) -> list[tuple[str, str, str]]:
        """The dirty queues, in the order they changed; the set is emptied."""
        taken, self.dirty_queues = list(self.dirty_queues), {}
        return taken

    @property
    def last_seq(self) -> int:
        """The last sequence folded."""
        return self.cluster.last_seq


LEAN_SKIPPED = (
    types.SchedulingRequested,
    types.DispatchApplied,
    types.DispatchFailed,
    types.DispatchBatchApplied,
)
"""Events a view without objects (``track_objects`` False) does not fold (only their sequence counts):
the deciders' open requests and the dispatcher's own results, which change nothing :func:`plan` or
the batch verifier reads."""


DELETED_STOPS_KEPT = 10_000
"""The most :attr:`DispatchState.deleted_stops` kept (each is one job's stop, about a kilobyte)."""


def node_of_event(event: types.Event) -> str | None:
    """The Node a fact or deletion is about, None for any other event."""
    if isinstance(event, types.NodeObserved):
        return event.node.metadata.name
    if isinstance(event, types.ObjectDeleted) and event.kind == "Node":
        return event.name
    return None


def _refresh_unhealthy_nodes(view: DispatchState, node: str, before: models.Node | None, *, seq: int) -> None:
    """After a fact about Node ``node`` (``before``: as it was; None: unknown): the ``status.unhealthyNodes`` of
    the TAS workloads it may fail or heal, as Kueue's TAS node controller looks at a node's workloads on each of
    its changes. A node healthy before and after (Ready, no NoSchedule/NoExecute taint) fails none, so only the
    workloads listing a node look again then (a node deleted and made anew)."""
    state = view.cluster
    after = state.topology.nodes.get(node)
    every = replacement.node_suspect(after) or (before is not None and replacement.node_suspect(before))
    for wl_key, wl in state.workloads.items():
        listed = (record := view.records.get(wl_key)) is not None and record.unhealthy_nodes
        if ((every and wl.topology) or listed) and status.refresh_unhealthy_nodes(view.records, state, wl_key):
            view.changed(wl_key, seq)


def fold(view: DispatchState, event: types.Event, *, seq: int) -> DispatchState:
    """Fold one event stored at ``seq`` into ``view`` (in place) and return it (a FactBatch: its facts in
    order, each as if alone at ``seq``)."""
    if isinstance(event, types.FactBatch):
        for fact in event.facts:
            fold(view, fact, seq=seq)
        return view
    state = view.cluster
    if isinstance(event, types.QuotaReleased) and event.reason == DELETED_REASON:
        _keep_deleted_stop(view, event, seq=seq)
    if not view.track_objects:
        return _fold_lean(view, event, seq=seq)
    if isinstance(event, types.ObjectDeleted) and event.reason == types.REJECTED_OBJECT_GONE:
        apply(state, event, seq=seq)  # an object known only by its rejection: no Workload, no status to write
        return view
    key = status.workload_key(event)
    if key is None:
        queues = _queues_of_object_event(state, event) + _held_of_object_event(state, event)
        node = node_of_event(event)
        node_before = state.topology.nodes.get(node) if node is not None else None
        checks_before = _checks_spec(state, event)
        apply(state, event, seq=seq)
        if isinstance(event, types.ClusterQueueObserved) and checks_before != _checks_spec(state, event):
            _resync_checks_of(view, event, seq=seq)
        queues += _queues_of_object_event(state, event) + _held_of_object_event(state, event)
        view.dirty_queues.update(dict.fromkeys(queues))
        if node is not None:
            _refresh_unhealthy_nodes(view, node, node_before, seq=seq)
        for name in _priority_class_of(event):  # the Workloads' spec.priority follows the class's value
            for wl_key, wl in state.workloads.items():
                ref = wl.workload.spec.priority_class_ref
                if ref is not None and ref.kind == "WorkloadPriorityClass" and ref.name == name:
                    view.changed(wl_key, seq)
        return view
    current = state.workloads.get(key)
    before = status.Before.of(current)
    queues_before, counted_before = _queues_of_workload(state, current), _queue_view(current)
    owner_before = current.workload.owner if current is not None else None
    observed_before = current.workload if current is not None else None
    apply(state, event, seq=seq)
    after = state.workloads.get(key)
    if isinstance(event, types.WorkloadObserved) and after is not None and after.workload.owner != owner_before:
        if after.admitted and after.reservation is not None and prebuilt.is_adopted(after.workload):
            view.adopted_admitted[key] = seq
    elif after is None:
        view.adopted_admitted.pop(key, None)
    if isinstance(event, types.QuotaReserved | types.WorkloadAdmitted) and before.reservation is None:
        if after is not None and after.reservation is not None:
            # a new reservation (a second copy of a live one changes nothing), or one message for both
            view.reserved_seq[key] = seq
    if current is not None and after is not None and after is not current and isinstance(event, types.QuotaReleased):
        # re-created at the release of the deleted one it replaces (cluster._recreate): a new Workload,
        # whose status starts as a just-observed one's, and nothing of the old one's start
        view.records.pop(key, None)
        view.started.pop(key, None)
        changed = status.fold_record(
            view.records, types.WorkloadObserved(workload=after.workload), key=key, before=status.Before(), state=state
        )
    else:
        changed = status.fold_record(view.records, event, key=key, before=before, state=state)
    # its admission, topology, eviction or finish decide its status.unhealthyNodes too (a replacement clears them)
    changed = status.refresh_unhealthy_nodes(view.records, state, key) or changed
    if isinstance(event, types.WorkloadAdmitted) and after is not None and after.admitted and not before.admitted:
        if after.reservation is not None:
            view.started[key] = pod_set_infos(state, after, view.records.get(key))
    elif after is None:
        view.started.pop(key, None)
    if isinstance(event, types.ObjectDeleted):
        view.deleted_workloads.pop(key, None)
        view.deleted_workloads[key] = None
        while len(view.deleted_workloads) > DELETED_STOPS_KEPT:  # a fold no runner writes from keeps them all
            del view.deleted_workloads[next(iter(view.deleted_workloads))]
        view.not_matching.pop(key, None)
        if event.reason == types.NO_MATCHING_WORKLOAD:
            view.not_matching[key] = None
            while len(view.not_matching) > DELETED_STOPS_KEPT:
                del view.not_matching[next(iter(view.not_matching))]
    if isinstance(event, types.AdmissionCheckStateChanged) and after is not None:
        view.checks_reported[key] = None  # written by someone else: the list is read and synced again
        changed = True
    if changed or isinstance(event, types.WorkloadObserved | types.ObjectDeleted):
        view.dirty_workloads.pop(key, None)
        if after is None:  # gone: its count goes with it (one made again under its name is another object)
            view.dirty_workloads[key] = seq
            view.object_versions.pop(key, None)
        elif changed or observed_before is None or after.workload != observed_before:
            view.changed(key, seq)
        else:  # observed as it was: written only if the server's copy differs (nothing Kueue would write)
            view.dirty_workloads[key] = seq
    if before.reservation is not None and (after is None or after.reservation is None):
        view.unwritten_releases[key] = seq  # its status shows the quota until written: before any admission
    elif after is not None and after.reservation is not None:
        view.unwritten_releases.pop(key, None)  # reserved again before the release was written: nothing to show
    if counted_before != _queue_view(after):
        view.dirty_queues.update(dict.fromkeys(queues_before + _queues_of_workload(state, after)))
    return view


def _fold_lean(view: DispatchState, event: types.Event, *, seq: int) -> DispatchState:
    """:func:`fold` for a view that keeps no objects: what :func:`plan` reads, the same as the full fold
    (:func:`kueue_es.services.dispatcher.lean.fold`: no cluster fold, no status records but the admission
    checks and topology assignments, no dirty sets; the events of :data:`LEAN_SKIPPED` only count their
    sequence)."""
    state = view.cluster
    if isinstance(event, LEAN_SKIPPED):
        state.last_seq = max(state.last_seq, seq)
        return view
    admitted = lean.fold(view, event, seq=seq)
    if admitted is not None:
        wl = state.workloads[admitted]
        assert wl.reservation is not None
        view.started[admitted] = pod_set_infos(state, wl, view.records.get(admitted))
    return view


def _checks_spec(state: ClusterState, event: types.Event) -> tuple[Any, ...] | None:
    """What of the ClusterQueue a ClusterQueueObserved names decides its workloads' admission checks (its
    checks strategy and flavors), as ``state`` has it; None for any other event."""
    if not isinstance(event, types.ClusterQueueObserved):
        return None
    cq = state.cluster_queues.get(event.cluster_queue.metadata.name)
    if cq is None:
        return ()
    return (cq.spec.admission_checks_strategy, cq.spec.resource_groups)


def _resync_checks_of(view: DispatchState, event: types.ClusterQueueObserved, *, seq: int) -> None:
    """The ClusterQueue of ``event`` changed its checks or flavors: the ``status.admissionChecks`` of its
    workloads (pending through one of its LocalQueues, or holding quota in it, admitted or not) follow
    (:func:`status.resync_checks`), as Kueue's workload controller requeues a ClusterQueue's workloads on its
    change (workload_controller.go clusterQueueHandler)."""
    state = view.cluster
    name = event.cluster_queue.metadata.name
    for wl_key, wl in state.workloads.items():
        if wl.reservation is not None:
            mine = wl.reservation.cluster_queue == name
        else:
            lq = state.local_queues.get((wl.workload.metadata.namespace, wl.workload.spec.queue_name))
            mine = lq is not None and lq.spec.cluster_queue == name
        if mine and status.resync_checks(view.records, state, wl_key):
            view.changed(wl_key, seq)


def _priority_class_of(event: types.Event) -> list[str]:
    match event:
        case types.WorkloadPriorityClassObserved(priority_class=obj):
            return [obj.metadata.name]
        case types.ObjectDeleted(kind="WorkloadPriorityClass"):
            return [event.name]
    return []


def _queues_of_workload(state: ClusterState, wl: WorkloadState | None) -> list[tuple[str, str, str]]:
    """The LocalQueue a workload names, the ClusterQueue behind it and the one it holds quota in."""
    if wl is None:
        return []
    namespace, queue = wl.workload.metadata.namespace, wl.workload.spec.queue_name
    out = [("LocalQueue", namespace, queue)]
    lq = state.local_queues.get((namespace, queue))
    if lq is not None:
        out.append(("ClusterQueue", "", lq.spec.cluster_queue))
    if wl.reservation is not None:
        out.append(("ClusterQueue", "", wl.reservation.cluster_queue))
    return out


def _queue_view(wl: WorkloadState | None) -> tuple[Any, ...]:
    """What of a workload the queues' status counts: where it queues, whether it waits, its quota, admitted."""
    if wl is None:
        return ()
    meta, spec = wl.workload.metadata, wl.workload.spec
    waiting = wl.reservation is None and not wl.gone and spec.active
    return (meta.uid, meta.namespace, spec.queue_name, waiting, wl.reservation, wl.held, wl.admitted)


def _queues_of_object_event(state: ClusterState, event: types.Event) -> list[tuple[str, str, str]]:
    """The queues and Cohorts whose status an object event can change: a ClusterQueue or LocalQueue event
    its own and the ClusterQueue's or LocalQueues' behind it (counts, ``Active``); a ResourceFlavor,
    AdmissionCheck or Topology event the ClusterQueues that name it and their LocalQueues (``Active``); a
    Cohort event every Cohort (a cycle); the Configuration every ClusterQueue and Cohort (fair sharing); the
    Configuration and a DRA object's event the queues holding queued workloads (pending counts: a workload
    refused for DRA reasons counts in none)."""
    match event:
        case types.ClusterQueueObserved(cluster_queue=obj):
            name = obj.metadata.name
        case types.ObjectDeleted(kind="ClusterQueue"):
            name = event.name
        case types.LocalQueueObserved(local_queue=obj):
            lq = state.local_queues.get((obj.metadata.namespace, obj.metadata.name))
            out = [
                ("LocalQueue", obj.metadata.namespace, obj.metadata.name),
                ("ClusterQueue", "", obj.spec.cluster_queue),
            ]
            return out + ([("ClusterQueue", "", lq.spec.cluster_queue)] if lq is not None else [])
        case types.ObjectDeleted(kind="LocalQueue"):
            lq = state.local_queues.get((event.namespace, event.name))
            return [("ClusterQueue", "", lq.spec.cluster_queue)] if lq is not None else []
        case types.ResourceFlavorObserved(flavor=obj):
            return _naming(state, lambda cq: obj.metadata.name in _flavors_of(cq))
        case types.ObjectDeleted(kind="ResourceFlavor"):
            return _naming(state, lambda cq: event.name in _flavors_of(cq))
        case types.AdmissionCheckObserved(admission_check=obj):
            mine = [("AdmissionCheck", "", obj.metadata.name)] if obj.metadata.name in state.multikueue.checks else []
            return mine + _naming(state, lambda cq: obj.metadata.name in required_checks(cq))
        case (
            types.MultiKueueClusterObserved()
            | types.MultiKueueConfigObserved()
            | types.WorkerClusterConnectivity()
            | types.ObjectDeleted(kind="MultiKueueCluster" | "MultiKueueConfig")
        ):
            # MultiKueue's checks' Active condition follows their workers, and the ClusterQueues' theirs;
            # a worker's own Active condition follows the edge's report of the connection
            checks = set(state.multikueue.checks)
            worker = (
                [("MultiKueueCluster", "", event.cluster)] if isinstance(event, types.WorkerClusterConnectivity) else []
            )
            return (
                worker
                + [("AdmissionCheck", "", n) for n in sorted(checks)]
                + _naming(state, lambda cq: any(c in checks for c in required_checks(cq)))
            )
        case types.ObjectDeleted(kind="AdmissionCheck"):
            return _naming(state, lambda cq: event.name in required_checks(cq))
        case types.TopologyObserved(topology=obj):
            return _naming(state, lambda cq: obj.metadata.name in _topologies_of(state, cq))
        case types.ObjectDeleted(kind="Topology"):
            return _naming(state, lambda cq: event.name in _topologies_of(state, cq))
        case types.CohortObserved() | types.ObjectDeleted(kind="Cohort"):
            return [("Cohort", "", name) for name in state.cohorts]
        case types.ConfigurationObserved():
            # fair sharing, and the DRA mappings and gates that decide which workloads count as pending
            every = [("ClusterQueue", "", n) for n in state.cluster_queues] + [("Cohort", "", n) for n in state.cohorts]
            return every + _holding_queued(state)
        case (
            types.DeviceClassObserved()
            | types.ResourceClaimTemplateObserved()
            | types.ResourceSliceObserved()
            | types.ObjectDeleted(kind="DeviceClass" | "ResourceClaimTemplate" | "ResourceSlice")
        ):
            # a workload's devices charged or refused now: it counts as pending, or no longer (visibility.counted)
            return _holding_queued(state)
        case _:
            return []
    lqs = [("LocalQueue", ns, n) for (ns, n), lq in state.local_queues.items() if lq.spec.cluster_queue == name]
    return [("ClusterQueue", "", name), *lqs]


def _holding_queued(state: ClusterState) -> list[tuple[str, str, str]]:
    """The LocalQueues that hold queued workloads and the ClusterQueues they feed: whose pending counts change
    when what decides a workload's DRA refusal changes (:func:`kueue_es.scheduling.visibility.counted`)."""
    out: list[tuple[str, str, str]] = []
    for namespace, name in state.queued:
        out.append(("LocalQueue", namespace, name))
        lq = state.local_queues.get((namespace, name))
        if lq is not None:
            out.append(("ClusterQueue", "", lq.spec.cluster_queue))
    return out


def _held_of_object_event(state: ClusterState, event: types.Event) -> list[tuple[str, str, str]]:
    """The ResourceFlavors, AdmissionChecks and Topologies whose ``resource-in-use`` finalizer an object event
    can put on or let go of (:func:`~kueue_es.services.dispatcher.status.in_use_by`): the object itself, the
    Topology a ResourceFlavor names, and the flavors and checks a ClusterQueue names (called before and
    after the event is folded, so those it named before count too)."""
    match event:
        case types.ResourceFlavorObserved(flavor=models.ResourceFlavor(metadata=models.ObjectMeta(name=name))) | (
            types.ObjectDeleted(kind="ResourceFlavor", name=name)
        ):
            topologies = {
                f.spec.topology_name
                for f in (state.flavors.get(name), getattr(event, "flavor", None))
                if f is not None and f.spec.topology_name
            }
            return [("ResourceFlavor", "", name), *(("Topology", "", t) for t in sorted(topologies))]
        case types.AdmissionCheckObserved(
            admission_check=models.AdmissionCheck(metadata=models.ObjectMeta(name=name))
        ) | (types.ObjectDeleted(kind="AdmissionCheck", name=name)):
            return [("AdmissionCheck", "", name)]
        case types.TopologyObserved(topology=models.Topology(metadata=models.ObjectMeta(name=name))) | (
            types.ObjectDeleted(kind="Topology", name=name)
        ):
            return [("Topology", "", name)]
        case types.ClusterQueueObserved(cluster_queue=models.ClusterQueue(metadata=models.ObjectMeta(name=name))) | (
            types.ObjectDeleted(kind="ClusterQueue", name=name)
        ):
            cq = state.cluster_queues.get(name)
            if cq is None:
                return []
            flavors = [("ResourceFlavor", "", f) for f in _flavors_of(cq)]
            return flavors + [("AdmissionCheck", "", c) for c in required_checks(cq)]
        case _:
            return []


def _naming(state: ClusterState, names: Callable[[models.ClusterQueue], bool]) -> list[tuple[str, str, str]]:
    """The ClusterQueues for which ``names`` holds and the LocalQueues that feed them."""
    cqs = [name for name, cq in state.cluster_queues.items() if names(cq)]
    if not cqs:
        return []
    chosen = dict.fromkeys(cqs)
    lqs = [("LocalQueue", ns, n) for (ns, n), lq in state.local_queues.items() if lq.spec.cluster_queue in chosen]
    return [*(("ClusterQueue", "", name) for name in cqs), *lqs]


def _flavors_of(cq: models.ClusterQueue) -> list[str]:
    return [fq.name for group in cq.spec.resource_groups for fq in group.flavors]


def _topologies_of(state: ClusterState, cq: models.ClusterQueue) -> list[str]:
    return [
        f.spec.topology_name
        for name in _flavors_of(cq)
        if (f := state.flavors.get(name)) is not None and f.spec.topology_name
    ]


PLAN_HANDLED = (types.WorkloadAdmitted, types.EvictionRequested, types.QuotaReleased)
"""The events :func:`plan` turns into a write: an admission starts a job, an eviction stops it, and so does
the release of a workload deactivated by hand."""

PLAN_IGNORED = (
    # facts: the cluster as the watcher saw it; the dispatcher folds them, writes nothing for them
    types.FactBatch,
    types.ResourceFlavorObserved,
    types.ClusterQueueObserved,
    types.CohortObserved,
    types.LocalQueueObserved,
    types.WorkloadPriorityClassObserved,
    types.WorkloadObserved,
    types.AdmissionCheckObserved,
    types.NamespaceObserved,
    types.ConfigurationObserved,
    types.SchedulingRequested,
    types.ObjectDeleted,
    types.WorkloadFinished,
    types.WorkloadStopped,
    types.WorkloadEvictionObserved,
    types.AdmissionCheckStateChanged,
    types.WorkloadPodsReady,
    types.WorkloadReclaimablePods,
    types.ObjectRejected,
    types.ChildJobObserved,  # its suspension is no decision's (suspension.py), as a job started by hand
    types.TopologyObserved,
    types.NodeObserved,
    types.PodObserved,
    types.DeviceClassObserved,
    types.ResourceClaimTemplateObserved,
    types.ResourceSliceObserved,
    # MultiKueue: the workers and the copies on them are the MultiKueue edge's to write
    types.MultiKueueClusterObserved,
    types.MultiKueueConfigObserved,
    types.RemoteWorkloadObserved,
    types.WorkerClusterConnectivity,
    types.WorkersNominated,
    types.RemoteAdmissionChosen,
    types.MultiKueueCheckRetry,
    types.MultiKueueCheckRejected,
    # decisions that write no job (the Workload's status, if any, is object_sync's): a reservation is not
    # an admission until WorkloadAdmitted; a release follows the eviction that stopped the job (but the
    # release of a workload deactivated by hand: plan); a deactivation by Kueue stops it through the
    # EvictionRequested that follows
    types.DecisionRecord,
    types.QuotaReserved,
    types.WorkloadInadmissible,
    types.PreemptionRequired,
    types.PreemptionIssued,
    types.WorkloadDeactivated,
    types.WorkloadRequeued,
    types.TopologyAssigned,
    # the dispatcher's own results
    types.DispatchApplied,
    types.DispatchFailed,
    types.DispatchBatchApplied,
)
"""The events :func:`plan` ignores, named: an event type in neither tuple fails :func:`plan` (and the
unit test that walks the event union), so a new one is classified before it is dispatched."""


def plan(view: DispatchState, event: types.Event, *, seq: int = 0) -> Action | None:
    """The write ``event`` (logged at ``seq``) calls for, given ``view`` folded at least up to it; None if none.

    WorkloadAdmitted of a workload made for a batch/v1 Job, Pods or a registered integration's job starts
    it (FailStart when its pod set information conflicts); EvictionRequested of one
    that still holds quota stops it, and so does the QuotaReleased ``Deactivated`` of one whose
    ``spec.active`` was set false by hand (:func:`_plan_deactivated_stop`). The events of :data:`PLAN_IGNORED` call for
    nothing; any other raises AssertionError.
    """
    if isinstance(event, PLAN_IGNORED):
        return None
    match event:
        case types.EvictionRequested():
            return _plan_stop(view, event, seq=seq)
        case types.WorkloadAdmitted():
            return _plan_start(view, event, seq=seq)
        case types.QuotaReleased(reason="Deleted"):
            return _plan_deleted_stop(view, event, seq=seq)
        case types.QuotaReleased():
            return _plan_deactivated_stop(view, event, seq=seq)
        case _:
            assert_never(event)


def _plan_start(view: DispatchState, event: types.WorkloadAdmitted, *, seq: int = 0) -> Action | None:
    """The start of an admitted workload's job (see :func:`plan`); none for the admission of a prebuilt Workload
    its job adopted only after it (:attr:`DispatchState.adopted_admitted`: that adoption starts it)."""
    current = view.cluster.workloads.get(event.workload.key)
    if current is None or current.reservation is None or current.gone or current.eviction is not None:
        return None  # an eviction already on the log: Kueue's reconciler does not start it either
    if seq and view.adopted_admitted.get(current.key, 0) > seq:
        return None
    return start_of(view, current, event.workload)


def start_of(
    view: DispatchState,
    current: WorkloadState,
    ref: types.WorkloadRef | None = None,
    *,
    replacement_starts: bool = False,
) -> Action | None:
    """The start of ``current``'s job, holding its reservation (``ref``: the decision's reference to it, its
    own by default): StartJob, StartIntegration or StartPods with its pod set information (as the admission
    put it in, :data:`DispatchState.started`, else computed), FailStart when that conflicts; None for a
    workload of no job this dispatcher starts, or a replacement slice of an elastic job (unless
    ``replacement_starts``: its job, read suspended, was never started, its earlier slice replaced first)."""
    state = view.cluster
    ref = ref or current.ref
    owner, for_variant = job_owner(view, current)
    if owner is None or not startable(owner.api_version, owner.kind):
        return None
    variant = current.workload.metadata.name if for_variant else ""
    if slices.replacement_for(current.workload) is not None and not replacement_starts:
        # A replacement slice of an elastic job: the job runs on, never suspended; its new pods are
        # released by the ungater (SEMANTICS-ADVANCED D.4).
        return None
    infos = view.started.get(ref.key)
    if infos is None:
        infos = pod_set_infos(state, current, view.records.get(ref.key))
    namespace = current.workload.metadata.namespace
    if isinstance(infos, str):
        return FailStart(workload=ref, namespace=namespace, name=owner.name, kind=owner.kind, message=infos)
    if owner.kind not in ("Job", "Pod"):
        return StartIntegration(
            workload=ref,
            kind=owner.kind,
            namespace=namespace,
            name=owner.name,
            uid=owner.uid,
            pod_sets=infos,
            variant=variant,
        )
    if owner.kind == "Pod":
        if multikueue.has_multikueue_check(current, state.admission_checks):
            # Pods are Kueue's one ComposableJob: with a MultiKueue check they run on the worker only, the
            # manager's stay gated (reconciler.go startJob, admissioncheck.go ShouldSkipLocalExecution); a
            # Job or another integration is started here, its managedBy keeping its controller off it
            return None
        group = _group_of(current)
        return StartPods(
            workload=ref,
            namespace=namespace,
            pod_name="" if group else owner.name,
            group=group,
            uid="" if group else owner.uid,
            pod_sets=infos,
            total=sum(ps.count for ps in current.workload.spec.pod_sets) if group else 0,
            keep_excess=prebuilt.group_on_prebuilt(current.workload),
            queue=_statefulset_queue(current),
            serving=job_owners.serving_parent(current.workload) is not None,
        )
    info = infos[0] if infos else PodSetInfo(name="main")
    return StartJob(
        workload=ref,
        namespace=namespace,
        name=owner.name,
        uid=owner.uid,
        node_selector=info.node_selector,
        tolerations=info.tolerations,
        labels=info.labels,
        annotations=info.annotations,
        scheduling_gates=info.scheduling_gates,
        count=info.count,
        variant=variant,
    )


def job_owner(view: DispatchState, current: WorkloadState) -> tuple[models.OwnerReference | None, bool]:
    """The job ``current``'s decisions start and stop, and whether it is a ConcurrentAdmission variant's: its own
    owner, or for a variant (which has none) its parent's, when the parent stands for a job and is neither finished
    nor deleted. Kueue's concurrent-admission controller copies the admitted variant's admission onto the parent, and
    the job reconciler starts the parent's job with it (pkg/controller/concurrentadmission syncAdmissionStatus,
    jobframework/reconciler.go); here the variant's own decisions start and stop that job."""
    owner = current.workload.owner
    if owner is not None:
        return owner, False
    key = concurrent_admission.parent_key(current.workload)
    parent = view.cluster.workloads.get(f"{key[0]}/{key[1]}") if key is not None else None
    if parent is None or parent.gone or parent.workload.owner is None:
        return None, False
    return parent.workload.owner, True


def variant_holds_quota(view: DispatchState, parent: WorkloadState) -> bool:
    """Whether ``parent`` is a ConcurrentAdmission parent (the gate on) one of whose variants holds quota: its job
    then runs or stops by that variant's decisions (:func:`job_owner`), not by the parent's own admission, which the
    log never has. Scans the fold's workloads: only for a parent."""
    if not concurrent_admission.queued_parent(parent.workload, view.cluster.configuration.feature_gates):
        return False
    return any(
        wl.reservation is not None for wl in concurrent_admission.variants_of(view.cluster.workloads, parent.workload)
    )


def running_variant(view: DispatchState, parent: WorkloadState) -> WorkloadState | None:
    """The variant of ConcurrentAdmission parent ``parent`` that is admitted, holds quota and is not being evicted:
    the one its job runs for (Kueue: the parent is admitted with its admission); None when there is none."""
    if not concurrent_admission.queued_parent(parent.workload, view.cluster.configuration.feature_gates):
        return None
    return next(
        (
            wl
            for wl in concurrent_admission.variants_of(view.cluster.workloads, parent.workload)
            if wl.admitted and wl.reservation is not None and wl.eviction is None
        ),
        None,
    )


def late_start(view: DispatchState, key: str) -> StartPods | None:
    """The start of the pods of an admitted pod group that came after its start, or None.

    A serving group's controller (a StatefulSet, a LeaderWorkerSet) creates pods one by one or
    replaces them; Kueue's pod group reconciler ungates every gated pod of a group whose workload
    is admitted (pod_controller.go Run for a workload already admitted). None unless workload
    ``key`` (``namespace/name``) is a Pod group's, admitted with a reservation, not being evicted,
    and started (its :attr:`DispatchState.started` pod set information), nor with a MultiKueue check.
    """
    wl = view.cluster.workloads.get(key)
    if wl is None or wl.gone or not wl.admitted or wl.reservation is None or wl.eviction is not None:
        return None
    owner = wl.workload.owner
    infos = view.started.get(key)
    group = _group_of(wl)
    if owner is None or owner.kind != "Pod" or not group or not isinstance(infos, list):
        return None
    if multikueue.has_multikueue_check(wl, view.cluster.admission_checks):
        # a MultiKueue group runs on its worker: its Pods here stay gated as they take the copies' statuses, as
        # at its start (reconciler.go startJob skips a ComposableJob's local run, ShouldSkipLocalExecution)
        return None
    meta = wl.workload.metadata
    return StartPods(
        workload=types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid),
        namespace=meta.namespace,
        group=group,
        pod_sets=infos,
        total=sum(ps.count for ps in wl.workload.spec.pod_sets),
        keep_excess=prebuilt.group_on_prebuilt(wl.workload),
        queue=_statefulset_queue(wl),
        serving=job_owners.serving_parent(wl.workload) is not None,
    )


def _statefulset_queue(wl: WorkloadState) -> str:
    """The LocalQueue a StatefulSet's group's pods carry once started: its Workload's, which is the StatefulSet's
    (:func:`~kueue_es.jobframework.integrations.serving.statefulset_queue`); "" for another workload."""
    parent = job_owners.serving_parent(wl.workload)
    return wl.workload.spec.queue_name if parent is not None and parent.kind == "StatefulSet" else ""


def _group_of(wl: WorkloadState) -> str:
    """The pod group of a Pod workload (its name), or "" for a single pod."""
    meta = wl.workload.metadata
    return meta.name if meta.annotations.get(GROUP_WORKLOAD_ANNOTATION) == "true" else ""


def pod_set_infos(
    state: ClusterState, wl: WorkloadState, record: status.WorkloadRecord | None
) -> list[PodSetInfo] | str:
    """One PodSetInfo per pod set of ``wl``'s reservation, or the conflict message (a string) when a Ready
    check's podSetUpdate sets a label, annotation or nodeSelector key another source sets to another value.

    Kueue reconciler.go getPodSetsInfoFromStatus: the flavors of the pod set's assignment
    (podset.FromAssignment), then each Ready check's update for that pod set, checks in
    name order (podset.Merge; a conflict is ``in admission check "<check>": invalid
    admission check PodSetUpdate: conflict for <field>: conflict for key=<k>,
    value1=<v1>, value2=<v2>``); a nodeSelector key the template itself sets to another
    value conflicts too (podset.Merge into the template). Maps are compared key by key in
    sorted order, so the conflict named is always the same one.
    """
    assert wl.reservation is not None
    own = {ps.name: ps for ps in wl.workload.spec.pod_sets}
    updates = status.ready_pod_set_updates(record)
    queue_labels = _queue_labels(state, wl, wl.reservation.cluster_queue)
    tas_gate = state.configuration.feature_gates.get("TopologyAwareScheduling", True)
    out: list[PodSetInfo] = []
    for assignment in wl.reservation.pod_set_assignments:
        node_selector: dict[str, str] = {}
        tolerations: list[dict[str, Any]] = []
        seen: list[str] = []
        for flavor_name in assignment.flavors.values():
            flavor = state.flavors.get(flavor_name)
            if flavor_name in seen or flavor is None:
                continue
            seen.append(flavor_name)
            node_selector.update(flavor.spec.node_labels)
            tolerations.extend(status.toleration_dict(t) for t in flavor.spec.tolerations)
        # reconciler.go getPodSetsInfoFromStatus: every started pod names its pod set, its Workload (gate
        # TopologyAwareScheduling, on by default) and its queues
        labels: dict[str, str] = {PODSET_LABEL: assignment.name, **queue_labels}
        annotations: dict[str, str] = {WORKLOAD_ANNOTATION: wl.workload.metadata.name} if tas_gate else {}
        pod_set = own.get(assignment.name)
        own_selector = dict(pod_set.node_selector) if pod_set is not None else {}
        gates: list[str] = []
        if slices.is_elastic(wl.workload.metadata.annotations):
            # An elastic Job's pods name their pod set and the chain's first slice (SEMANTICS-ADVANCED D.1):
            # the ungater finds them by these and releases them up to the newest admitted slice's count.
            labels[PODSET_LABEL] = assignment.name
            annotations[WORKLOAD_ANNOTATION] = wl.workload.metadata.name
            annotations[slices.SLICE_NAME_ANNOTATION] = slices.slice_name(wl.workload)
        if record is not None and assignment.name in record.topology:
            gates.append(TOPOLOGY_GATE)
            labels[PODSET_LABEL] = assignment.name
            annotations[WORKLOAD_ANNOTATION] = wl.workload.metadata.name
            request = pod_set.topology_request if pod_set is not None else None
            if request is None or (request.required, request.preferred, request.unconstrained) == (None, None, None):
                annotations[tas.UNCONSTRAINED_ANNOTATION] = "true"  # implied TAS: its pods are TAS pods (A.4.3)
        for check, update in updates:
            if update.name != assignment.name:
                continue
            for what, mine, theirs in (
                ("annotations", annotations, update.annotations),
                ("labels", labels, update.labels),
                ("nodeSelector", node_selector, update.node_selector),
            ):
                conflict = _conflict(mine, theirs)
                if conflict is None and what == "nodeSelector":
                    conflict = _conflict(own_selector, theirs)
                if conflict is not None:
                    return (
                        f'in admission check "{check}": invalid admission check PodSetUpdate: '
                        f"conflict for {what}: {conflict}"
                    )
                mine.update(theirs)
            tolerations = merged_tolerations(tolerations, [status.toleration_dict(t) for t in update.tolerations])
        out.append(
            PodSetInfo(
                name=assignment.name,
                node_selector=dict(sorted(node_selector.items())),
                tolerations=tolerations,
                labels=labels,
                annotations=annotations,
                own_node_selector=own_selector,
                own_tolerations=[status.toleration_dict(t) for t in pod_set.tolerations] if pod_set else [],
                scheduling_gates=gates,
                count=assignment.count,
            )
        )
    return out


def _conflict(a: dict[str, str], b: dict[str, str]) -> str | None:
    """utilmaps.HaveConflict: the first key (sorted) both maps set to different values, as Kueue words it."""
    for key in sorted(a):
        if key in b and a[key] != b[key]:
            return f"conflict for key={key}, value1={a[key]}, value2={b[key]}"
    return None


def _plan_stop(view: DispatchState, event: types.EvictionRequested, *, seq: int) -> Action | None:
    """The stop for an eviction of a job's workload that still holds the quota it was evicted from.

    Nothing when the workload is unknown, finished or deleted (nothing runs), holds
    no quota (already stopped and released), is a namesake with another UID, holds a
    reservation recorded after the eviction (a redelivery of an old eviction), or is
    not a batch/v1 Job's, Pods' or a registered integration's job. What is taken out of the templates is
    what the admission put in (``view.started``), or, for a workload never started,
    what its flavors would have put in.
    """
    current = _decided_for(view, event.workload, seq=seq)
    if current is None or current.reservation is None:
        return None
    return stop_of(view, current, event.workload, reason=event.reason, seq=seq)


def _decided_for(view: DispatchState, ref: types.WorkloadRef, *, seq: int) -> WorkloadState | None:
    """The workload a decision at ``seq`` about ``ref`` is about, as folded; None when it is unknown or gone, a
    namesake with another UID, or holds a reservation recorded after ``seq`` (the decision is a redelivery)."""
    current = view.cluster.workloads.get(ref.key)
    if current is None or current.gone:
        return None
    if ref.uid and current.workload.metadata.uid and ref.uid != current.workload.metadata.uid:
        return None
    if seq and view.reserved_seq.get(ref.key, 0) > seq:
        return None
    return current


def _plan_deactivated_stop(view: DispatchState, event: types.QuotaReleased, *, seq: int) -> Action | None:
    """The stop of the job of a workload whose ``spec.active`` was set false by hand, released with no eviction
    before it (admitter logic 15 and earlier released its quota at once: this release is what stops the job;
    Kueue: workload_controller.go evicts it Deactivated and the job reconciler stops it). Nothing for another
    release, for a workload unknown, gone or a namesake, one holding a reservation recorded after the release
    (a redelivery), one never admitted, or one evicted before the release (logic 16 evicts it ``Deactivated``
    first, Kueue's own deactivations ``DeactivatedDueTo<cause>``): that eviction's stop stopped the job. The
    stop of a Job found suspended with no pod active writes nothing
    (:meth:`~kueue_es.services.dispatcher.job_writes.JobWrites.stop_never_started`)."""
    if event.reason != "Deactivated":
        return None
    current = _decided_for(view, event.workload, seq=seq)
    if current is None or current.reservation is not None:
        return None
    record = view.records.get(current.key)
    evicted = record.conditions.get("Evicted") if record is not None else None
    if evicted is not None and evicted.status and evicted.since_ms != event.at_ms:
        return None  # evicted before this release (the release itself evicts it only with no eviction before)
    if not isinstance(view.started.get(current.key), list):
        return None  # never admitted (a reservation waiting for its checks): its job never ran
    return stop_of(view, current, event.workload, reason=event.reason, seq=seq)


DELETED_REASON = "Deleted"
"""The QuotaReleased reason of a workload whose Workload (or job) was deleted (scheduling/cycle.py _release)."""


def _keep_deleted_stop(view: DispatchState, event: types.QuotaReleased, *, seq: int) -> None:
    """Before the QuotaReleased ``Deleted`` at ``seq`` is folded (the fold forgets the workload then): keep the
    stop of its job when the workload was started (admitted and its job unsuspended), for :func:`plan`.

    Kueue's job reconciler stops the job of a Workload marked for deletion (reconciler.go, step 1.1:
    stopJob with StopReasonWorkloadDeleted, "Workload is deleted") and creates a new Workload for it. The
    job itself may be gone (deleting the job is what deleted its workload): the runner reads it first.
    Only batch/v1 Jobs and the registered integrations' jobs; a Pod workload's pods are deleted on the Workload's
    deletion itself (:meth:`~kueue_es.services.dispatcher.suspension.Suspension.workload_deleted`)."""
    current = view.cluster.workloads.get(event.workload.key)
    if current is None or not current.deleted_seq or current.finished is not None or current.reservation is None:
        return  # not a deleted workload holding quota (a finished one's job has ended)
    if not isinstance(view.started.get(current.key), list):
        return  # never started: its job never ran
    action = stop_of(view, current, event.workload, reason=DELETED_REASON, seq=seq)
    if not isinstance(action, StopJob | StopIntegration):
        return
    stops = view.deleted_stops
    stops.pop(current.key, None)
    stops[current.key] = (seq, action)
    while len(stops) > DELETED_STOPS_KEPT:
        del stops[next(iter(stops))]


def _plan_deleted_stop(view: DispatchState, event: types.QuotaReleased, *, seq: int) -> Action | None:
    """The stop kept for the QuotaReleased ``Deleted`` at ``seq`` (:func:`_keep_deleted_stop`); None for another
    release, or one whose workload never started. The runner forgets it once carried out
    (:func:`forget_deleted_stop`): a write tried again later plans it again."""
    kept = view.deleted_stops.get(event.workload.key)
    return kept[1] if kept is not None and kept[0] == seq else None


def forget_deleted_stop(view: DispatchState, key: str, *, seq: int) -> None:
    """The stop kept for workload ``key``'s QuotaReleased ``Deleted`` at ``seq`` was carried out (or found not
    needed): forget it."""
    kept = view.deleted_stops.get(key)
    if kept is not None and kept[0] == seq:
        del view.deleted_stops[key]
        if view.track_objects:  # its Workload object, held by Kueue's finalizer until this stop, may go now
            view.dirty_workloads[key] = seq


def stop_of(
    view: DispatchState, current: WorkloadState, ref: types.WorkloadRef, *, reason: str, seq: int
) -> Action | None:
    """The stop of ``current``'s job for the decision at ``seq`` (``reason`` its eviction's), giving back what
    its start put into the templates; None when it is not a batch/v1 Job's, Pods' or a registered
    integration's job."""
    state = view.cluster
    owner, variant = job_owner(view, current)
    if owner is None or not startable(owner.api_version, owner.kind):
        return None
    evicted_workload = current.workload.metadata.name if variant else ""
    namespace = current.workload.metadata.namespace
    if owner.kind == "Pod":
        group = _group_of(current)
        return StopPods(
            workload=ref,
            namespace=namespace,
            pod_name="" if group else owner.name,
            group=group,
            reason=reason,
            decision_seq=seq,
        )
    infos = view.started.get(current.key)
    if not isinstance(infos, list):
        computed = pod_set_infos(state, current, None) if current.reservation is not None else []
        infos = computed if isinstance(computed, list) else []
    if owner.kind != "Job":
        return StopIntegration(
            workload=ref,
            kind=owner.kind,
            namespace=namespace,
            name=owner.name,
            uid=owner.uid,
            reason=reason,
            decision_seq=seq,
            pod_sets=infos,
            evicted_workload=evicted_workload,
        )
    info = infos[0] if infos else PodSetInfo(name="main")
    own_selector: dict[str, str] = {}
    own_tolerations: list[dict[str, Any]] = []
    for pod_set in current.workload.spec.pod_sets:
        own_selector.update(pod_set.node_selector)
        own_tolerations.extend(status.toleration_dict(t) for t in pod_set.tolerations)
    return StopJob(
        workload=ref,
        namespace=namespace,
        name=owner.name,
        uid=owner.uid,
        reason=reason,
        decision_seq=seq,
        node_selector={key: own_selector.get(key) for key in info.node_selector},
        tolerations=info.tolerations,
        own_tolerations=own_tolerations,
        labels=sorted(info.labels),
        annotations=sorted(info.annotations),
        scheduling_gates=info.scheduling_gates,
        count=current.workload.spec.pod_sets[0].count if current.workload.spec.pod_sets else 0,
        evicted_workload=evicted_workload,
    )


def _toleration_key(raw: dict[str, Any]) -> tuple[str, str, str, str, int | None]:
    """A toleration as Kubernetes reads it (operator defaults to ``Equal``), for comparisons."""
    return (
        str(raw.get("key") or ""),
        str(raw.get("operator") or "Equal"),
        str(raw.get("value") or ""),
        str(raw.get("effect") or ""),
        raw.get("tolerationSeconds"),
    )
