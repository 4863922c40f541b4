"""What the watcher watches, kind by kind, and what each kind's conversion has to read first.

Why this module exists: the runner (:mod:`kueue_es.services.watcher.service`) and
its collaborators each handle a family of kinds -- Kueue's objects, the jobs, the
objects a job's conversion reads, the Workload objects, the TAS kinds -- and all
of them need the same names for those families, where each kind is served and in
which order they are started. Kept apart so the collaborators need not import the
runner.
"""

from __future__ import annotations

from kueue_es.jobframework import integrations, jobs, jobsets, pods, webhooks
from kueue_es.services.kube import resources
from kueue_es.services.watcher import nodes

Key = tuple[str, str]
"""``(namespace, name)`` of an object or a workload (namespace "" for cluster-scoped kinds)."""

KUEUE_KINDS = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")
#: Put on the log as they are, like Kueue's objects: AdmissionChecks (their Active condition, as the check's
#: controller sets it), Namespaces (their labels, for ClusterQueue namespaceSelectors and, read by the job
#: conversions, for managedJobsNamespaceSelector) and MultiKueue's MultiKueueClusters and MultiKueueConfigs.
OBSERVED_KINDS = (*KUEUE_KINDS, "AdmissionCheck", "Namespace", "MultiKueueCluster", "MultiKueueConfig")
#: The kinds of the table-driven integrations (:mod:`kueue_es.jobframework.integrations`) but the JobSet, by name.
INTEGRATION_KINDS = tuple(kind for kind in integrations.kinds_of(None) if kind != "JobSet")
JOB_KINDS = ("JobSet", "Job", "Pod", *INTEGRATION_KINDS)
#: Kueue's integrations.frameworks names of the job kinds (pkg/controller/jobs/*: FrameworkName).
FRAMEWORK_KINDS = {target.framework: target.kind for target in webhooks.targets()}
#: The Workload objects the dispatcher writes: read back for admission check states and spec.active.
WORKLOAD_KIND = "Workload"
#: What the integrations' conversions read besides the job (a TrainJob's TrainingRuntimes), by kind.
INTEGRATION_INPUTS = {
    ik.kind: resources.ref_for(ik.api_version, ik.kind)
    for integration in integrations.registry().values()
    for ik in integration.inputs
}
#: Cluster objects a job's conversion reads, kept in memory and never put on the log.
_POD_INPUTS = ("PriorityClass", "RuntimeClass", "LimitRange")
INPUT_KINDS = (*_POD_INPUTS, *INTEGRATION_INPUTS)
#: What Topology-Aware Scheduling reads: Topologies, Nodes and the pods bound to nodes (:mod:`.nodes`).
TAS_KINDS = nodes.TAS_KINDS
BOUND_PODS_REF = nodes.BOUND_PODS_REF
#: What DRA device quota reads (SEMANTICS-ADVANCED F), put on the log as facts (:mod:`.dra_tracking`).
DRA_KINDS = ("DeviceClass", "ResourceClaimTemplate", "ResourceSlice")
DRA_REFS = {
    "DeviceClass": resources.DEVICE_CLASSES,
    "ResourceClaimTemplate": resources.RESOURCE_CLAIM_TEMPLATES,
    "ResourceSlice": resources.RESOURCE_SLICES,
}
WATCHED_KINDS = (*OBSERVED_KINDS, *INPUT_KINDS, *JOB_KINDS, WORKLOAD_KIND, *TAS_KINDS, *DRA_KINDS)
#: The kinds whose objects the log holds, so their deletion while no watcher ran can be found.
LOGGED_KINDS = (*OBSERVED_KINDS, "Workload", "Topology", "Node", "Pod", *DRA_KINDS)

#: scheduling.k8s.io/v1 PriorityClass: read for the priority of jobs naming one (SEMANTICS §2.4).
PRIORITY_CLASSES = resources.PRIORITY_CLASSES
#: node.k8s.io/v1 RuntimeClass: its fixed pod overhead counts for pods naming it (SEMANTICS §2.3 step 1).
RUNTIME_CLASSES = resources.ResourceRef(
    group="node.k8s.io", version="v1", plural="runtimeclasses", kind="RuntimeClass", namespaced=False
)
#: v1 LimitRange: container defaults and bounds in a namespace (SEMANTICS §2.3 step 2).
LIMIT_RANGES = resources.ResourceRef(group="", version="v1", plural="limitranges", kind="LimitRange", namespaced=True)
INPUT_REFS = {
    "PriorityClass": PRIORITY_CLASSES,
    "RuntimeClass": RUNTIME_CLASSES,
    "LimitRange": LIMIT_RANGES,
    **INTEGRATION_INPUTS,
}
API_VERSIONS = {
    "Namespace": "v1",
    "Job": jobs.JOB_API,
    "JobSet": jobsets.JOBSET_API,
    "Pod": pods.POD_API,
    **{kind: integrations.registry()[kind].api_version for kind in INTEGRATION_KINDS},
}
_SHARED_READS = ("LocalQueue", "WorkloadPriorityClass", "Namespace", *_POD_INPUTS)
#: What each kind's conversion reads; Watcher.run lists these first.
#: A job owned by a managed job is part of it (jobframework FindAncestorJobManagedByKueue), so the kinds
#: that may own another are listed first: every integration may own a Job or pods, a TrainJob owns a JobSet,
#: a RayJob or RayService owns a RayCluster (:attr:`Integration.owner_kinds`), an AppWrapper owns what it
#: wraps, of any kind (:attr:`Integration.owns_any_kind`).
_WRAPPER_KINDS = tuple(kind for kind, i in integrations.registry().items() if i.owns_any_kind)
READS: dict[str, tuple[str, ...]] = {
    "Job": (*_SHARED_READS, "JobSet", *INTEGRATION_KINDS),
    "Pod": (*_SHARED_READS, "JobSet", "Job", *INTEGRATION_KINDS),
    **{
        kind: (
            *_SHARED_READS,
            *(read.kind for read in i.inputs),
            *i.owner_kinds,
            *(w for w in _WRAPPER_KINDS if w != kind),
        )
        for kind, i in integrations.registry().items()
    },
    # a Workload made by hand is counted and checked with the RuntimeClasses and LimitRanges
    # (services/watcher/standalone.py): listed first, no workload is published before they are known
    WORKLOAD_KIND: (*JOB_KINDS, *_POD_INPUTS),
}
