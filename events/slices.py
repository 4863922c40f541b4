"""Elastic workloads' vocabulary: the annotations that chain workload slices, and reading them.

Why this module exists: Kueue's elastic jobs (gate ElasticJobsViaWorkloadSlices, beta and on by
default since Kueue v0.18; SEMANTICS-ADVANCED §D) run a job that scales up as a chain of Workloads, each slice replacing
the one before it. The watcher writes the chain's annotations, the fold and the admitter read
them and the dispatcher follows them, so their names and readers live here, below every layer
(Kueue pkg/workloadslicing/workloadslicing.go, apis/kueue/v1beta2 WorkloadSliceNameAnnotation).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kueue_es.events import models

GATE = "ElasticJobsViaWorkloadSlices"
"""Kueue's feature gate (alpha and off by default in v0.13 to v0.17, beta and on by default since v0.18:
pkg/features/kube_features.go defaultVersionedFeatureGates)."""

GATE_DEFAULT = True
""":data:`GATE`'s value when a Configuration does not set it (Kueue v0.18+). Admitter logic 48 and
preemptor logic 20 and earlier took it as off (:func:`kueue_es.scheduling.slices.with_gate_off_unless_set`)."""

TAS_GATE = "ElasticJobsViaWorkloadSlicesWithTAS"
"""Kueue's feature gate for elastic slices with Topology-Aware Scheduling (alpha since v0.17, off
by default; needs ElasticJobsViaWorkloadSlices and TopologyAwareScheduling)."""

TAS_DEPENDENCIES = (GATE, "TopologyAwareScheduling")
"""The gates :data:`TAS_GATE` depends on, both on by default (ElasticJobsViaWorkloadSlices since Kueue
v0.18, TopologyAwareScheduling since v0.14), so :data:`TAS_GATE` on alone is valid; either set off with
it on is refused (:func:`kueue_es.events.manager_config.feature_gate_problem`)."""

ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
"""On a job (``"true"``) and on every slice of its chain: the job is elastic."""

ELASTIC_JOB_GATE = "kueue.x-k8s.io/elastic-job"
"""The scheduling gate Kueue's job webhooks put on an elastic job's pod template: each pod waits
until a slice that holds quota for it is admitted (elastic_job_ungater.go)."""

SLICE_NAME_ANNOTATION = "kueue.x-k8s.io/workload-slice-name"
"""On every slice (and on the job's pods): the name of the chain's first slice."""

REPLACEMENT_FOR_ANNOTATION = "kueue.x-k8s.io/workload-slice-replacement-for"
"""On a replacement slice: ``<namespace>/<name>`` of the slice it replaces."""

REPLACED_REASON = "WorkloadSliceReplaced"
"""The Finished reason of a slice a newer one replaced (kueue.WorkloadSliceReplaced)."""

OUT_OF_SYNC_REASON = "OutOfSync"
"""The Finished reason of an extra slice the job reconciler drops (workloadslicing.go)."""


def gate_enabled(gates: Mapping[str, bool]) -> bool:
    """Whether ElasticJobsViaWorkloadSlices is on in ``gates`` (the Configuration's feature gates, name
    to bool): on unless set ``false`` (:data:`GATE_DEFAULT`, Kueue v0.18+ kube_features.go)."""
    return bool(gates.get(GATE, GATE_DEFAULT))


def tas_gate_enabled(gates: Mapping[str, bool]) -> bool:
    """Whether ElasticJobsViaWorkloadSlicesWithTAS is on in ``gates``, with both gates it depends
    on (the Configuration's parser refuses it without them,
    :func:`kueue_es.events.manager_config.feature_gate_problem`)."""
    return bool(gates.get(TAS_GATE, False)) and gate_enabled(gates) and gates.get("TopologyAwareScheduling", True)


def is_elastic(annotations: Mapping[str, str]) -> bool:
    """Whether an object carries ``kueue.x-k8s.io/elastic-job: "true"`` (workloadslicing.Enabled)."""
    return annotations.get(ELASTIC_JOB_ANNOTATION) == "true"


def replacement_for(workload: models.Workload) -> str | None:
    """The ``namespace/name`` key of the slice an elastic ``workload`` replaces, or None: its
    ``workload-slice-replacement-for`` annotation, read only with ``elastic-job: "true"`` too. What
    the dispatcher and admitter logic 35 and earlier read; every slice Kueue's job reconciler makes
    carries both, so they differ from :func:`replacement_key` only on a Workload made by hand."""
    annotations = workload.metadata.annotations
    if not is_elastic(annotations):
        return None
    return annotations.get(REPLACEMENT_FOR_ANNOTATION) or None


def replacement_key(workload: models.Workload) -> str | None:
    """The ``namespace/name`` key of the slice ``workload`` replaces, or None: its
    ``kueue.x-k8s.io/workload-slice-replacement-for`` annotation alone, as Kueue's scheduler reads it
    (workloadslicing.go ReplacementForKey, called by ReplacedWorkloadSlice and
    FindReplacedSliceTarget under the gate ElasticJobsViaWorkloadSlices, whatever the
    ``elastic-job`` annotation says)."""
    return workload.metadata.annotations.get(REPLACEMENT_FOR_ANNOTATION) or None


def slice_name(workload: models.Workload) -> str:
    """The name of the first slice of ``workload``'s chain: its annotation, else its own name
    (workloadslicing.SliceName)."""
    return workload.metadata.annotations.get(SLICE_NAME_ANNOTATION) or workload.metadata.name


def replacement_uid(*, job_uid: str, name: str) -> str:
    """The UID replacement slice ``name`` of the job of UID ``job_uid`` has on the log: one of its own, as
    Kueue's job reconciler creates a new Workload object for it. A job's first workload has the job's UID on
    the log (the watcher sees the job before any Workload object exists; the dispatcher maps it to that
    object's UID by its ``kueue.x-k8s.io/job-uid`` label); a replacement a UUID made from the job's UID and
    its name, the same wherever it is computed (a restarted watcher, the dispatcher mapping it to its object's
    UID), so the messages that name it (a preemption's) name it and not the slice it replaces."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kueue-es:workload-slice:{job_uid}/{name}"))


def replaced_message(*, uid: str, job_uid: str) -> str:
    """The Finished message Kueue writes on a replaced slice's Workload object: ``uid`` is the new
    slice's Workload object UID (the API server's, not the job's), ``job_uid`` its
    ``kueue.x-k8s.io/job-uid`` label (scheduler.go replaceWorkloadSlice)."""
    return f"Replaced to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to workload slice aggregation"


def replaced_by_message(*, new_key: str, job_uid: str) -> str:
    """The Finished message of a replaced slice as the log can say it: the log names the new slice's
    Workload by ``namespace/name`` (``new_key``), as its object's UID is the API server's and on no
    event; the dispatcher writes Kueue's :func:`replaced_message` with that UID on the object."""
    return f"Replaced to accommodate workload {new_key} (JobUID: {job_uid}) due to workload slice aggregation"


WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
"""On a started job's pods: the Workload the job was started for (Kueue jobframework reconciler.go)."""


def pod_slice_name(annotations: Mapping[str, str]) -> str | None:
    """The name Kueue finds a pod's workload by, from the pod's annotations: its
    ``workload-slice-name`` (an elastic job's pods: the chain's first slice), else its
    ``kueue.x-k8s.io/workload``, None with neither (Kueue indexer.go IndexPodWorkloadSliceName)."""
    if SLICE_NAME_ANNOTATION in annotations:
        return str(annotations[SLICE_NAME_ANNOTATION])
    found = annotations.get(WORKLOAD_ANNOTATION)
    return None if found is None else str(found)


def workload_slice_name(workload: models.Workload) -> str:
    """The name a workload's pods carry (:func:`pod_slice_name`): its ``workload-slice-name`` annotation,
    else its own name (Kueue workloadslicing.SliceName)."""
    return workload.metadata.annotations.get(SLICE_NAME_ANNOTATION) or workload.metadata.name
