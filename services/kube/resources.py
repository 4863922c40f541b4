"""The kinds kueue-es reads and writes, and how each is addressed over HTTP.

Why this module exists: both sides of the Kubernetes edge need the same facts
about a kind -- its plural (the URL segment), whether it is namespaced, and
whether it has a ``status`` subresource.  The client uses them to build URLs
(``ResourceRef.path``); the emulator registers exactly these kinds so that its
discovery documents and 404s are right.  Keeping one table avoids the two
drifting apart.  A kind that is not in ``RESOURCES`` is refused with
``errors.UnknownKindError`` rather than guessed.
"""

from __future__ import annotations

import dataclasses
import urllib.parse

from kueue_es.jobframework import integrations
from kueue_es.services.kube import errors


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceRef:
    """How to address one kind in the Kubernetes API.

    ``group`` is ``""`` for the core API (``/api/v1``); ``plural`` is the
    lowercase URL segment; ``status_subresource`` says whether writes to the
    main resource leave ``.status`` alone (and ``.../NAME/status`` exists).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` string of objects of this kind, e.g. ``batch/v1``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        """The singular resource name used in discovery, e.g. ``job``."""
        return self.kind.lower()

    @property
    def qualified_plural(self) -> str:
        """``plural.group`` as Kubernetes names a resource in messages, e.g. ``jobs.batch``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """Return the URL path for a collection, an object or a subresource.

        ``namespace`` is ignored for cluster-scoped kinds; without it a
        namespaced kind gives the all-namespaces collection path.
        """
        parts = ["/api", self.version] if not self.group else ["/apis", self.group, self.version]
        if self.namespaced and namespace:
            parts += ["namespaces", urllib.parse.quote(namespace, safe="")]
        parts.append(self.plural)
        if name is not None:
            parts.append(urllib.parse.quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


def _ref(api_version: str, kind: str, plural: str, *, namespaced: bool, status: bool) -> ResourceRef:
    group, _, version = api_version.rpartition("/")
    return ResourceRef(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        status_subresource=status,
    )


KUEUE_V1BETA2 = "kueue.x-k8s.io/v1beta2"
RESOURCE_V1 = "resource.k8s.io/v1"
#: The cluster-autoscaler's ProvisioningRequest API, the version Kueue's provisioning controller uses.
AUTOSCALING_V1 = "autoscaling.x-k8s.io/v1"

#: Every kind kueue-es knows, keyed by (apiVersion, kind).
RESOURCES: dict[tuple[str, str], ResourceRef] = {
    (ref.api_version, ref.kind): ref
    for ref in (
        _ref("v1", "Namespace", "namespaces", namespaced=False, status=True),
        _ref("v1", "Node", "nodes", namespaced=False, status=True),
        _ref("v1", "Pod", "pods", namespaced=True, status=True),
        _ref("v1", "Event", "events", namespaced=True, status=False),
        _ref("v1", "Secret", "secrets", namespaced=True, status=False),
        # served so that Kueue's examples that mount one apply (the all-or-nothing page's job template)
        _ref("v1", "ConfigMap", "configmaps", namespaced=True, status=False),
        _ref("batch/v1", "Job", "jobs", namespaced=True, status=True),
        _ref("batch/v1", "CronJob", "cronjobs", namespaced=True, status=True),
        # read for the priority of jobs naming one (services/watcher/kinds.py); no status
        _ref("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False, status=False),
        _ref("apps/v1", "Deployment", "deployments", namespaced=True, status=True),
        _ref("apps/v1", "ReplicaSet", "replicasets", namespaced=True, status=True),
        _ref("apps/v1", "StatefulSet", "statefulsets", namespaced=True, status=True),
        _ref("coordination.k8s.io/v1", "Lease", "leases", namespaced=True, status=False),
        _ref("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", namespaced=True, status=True),
        _ref(KUEUE_V1BETA2, "ResourceFlavor", "resourceflavors", namespaced=False, status=False),
        _ref(KUEUE_V1BETA2, "ClusterQueue", "clusterqueues", namespaced=False, status=True),
        _ref(KUEUE_V1BETA2, "LocalQueue", "localqueues", namespaced=True, status=True),
        _ref(KUEUE_V1BETA2, "Cohort", "cohorts", namespaced=False, status=True),
        _ref(KUEUE_V1BETA2, "WorkloadPriorityClass", "workloadpriorityclasses", namespaced=False, status=False),
        _ref(KUEUE_V1BETA2, "Workload", "workloads", namespaced=True, status=True),
        _ref(KUEUE_V1BETA2, "AdmissionCheck", "admissionchecks", namespaced=False, status=True),
        _ref(KUEUE_V1BETA2, "Topology", "topologies", namespaced=False, status=False),
        # DRA (SEMANTICS-ADVANCED F): what device quota reads (ResourceClaims are served so a DRA
        # manifest applies; Kueue refuses a pod naming one without reading it)
        _ref(RESOURCE_V1, "DeviceClass", "deviceclasses", namespaced=False, status=False),
        _ref(RESOURCE_V1, "ResourceClaimTemplate", "resourceclaimtemplates", namespaced=True, status=False),
        _ref(RESOURCE_V1, "ResourceClaim", "resourceclaims", namespaced=True, status=True),
        _ref(RESOURCE_V1, "ResourceSlice", "resourceslices", namespaced=False, status=False),
        _ref(KUEUE_V1BETA2, "ProvisioningRequestConfig", "provisioningrequestconfigs", namespaced=False, status=False),
        _ref("v1", "PodTemplate", "podtemplates", namespaced=True, status=False),
        _ref(AUTOSCALING_V1, "ProvisioningRequest", "provisioningrequests", namespaced=True, status=True),
        _ref(KUEUE_V1BETA2, "MultiKueueCluster", "multikueueclusters", namespaced=False, status=True),
        _ref(KUEUE_V1BETA2, "MultiKueueConfig", "multikueueconfigs", namespaced=False, status=False),
    )
}

NAMESPACES = RESOURCES["v1", "Namespace"]
NODES = RESOURCES["v1", "Node"]
DEVICE_CLASSES = RESOURCES[RESOURCE_V1, "DeviceClass"]
RESOURCE_CLAIM_TEMPLATES = RESOURCES[RESOURCE_V1, "ResourceClaimTemplate"]
RESOURCE_SLICES = RESOURCES[RESOURCE_V1, "ResourceSlice"]
PODS = RESOURCES["v1", "Pod"]
EVENTS = RESOURCES["v1", "Event"]
SECRETS = RESOURCES["v1", "Secret"]
CONFIG_MAPS = RESOURCES["v1", "ConfigMap"]
JOBS = RESOURCES["batch/v1", "Job"]
CRON_JOBS = RESOURCES["batch/v1", "CronJob"]
PRIORITY_CLASSES = RESOURCES["scheduling.k8s.io/v1", "PriorityClass"]
DEPLOYMENTS = RESOURCES["apps/v1", "Deployment"]
REPLICA_SETS = RESOURCES["apps/v1", "ReplicaSet"]
STATEFUL_SETS = RESOURCES["apps/v1", "StatefulSet"]
LEASES = RESOURCES["coordination.k8s.io/v1", "Lease"]
JOBSETS = RESOURCES["jobset.x-k8s.io/v1alpha2", "JobSet"]
RESOURCE_FLAVORS = RESOURCES[KUEUE_V1BETA2, "ResourceFlavor"]
CLUSTER_QUEUES = RESOURCES[KUEUE_V1BETA2, "ClusterQueue"]
LOCAL_QUEUES = RESOURCES[KUEUE_V1BETA2, "LocalQueue"]
COHORTS = RESOURCES[KUEUE_V1BETA2, "Cohort"]
WORKLOAD_PRIORITY_CLASSES = RESOURCES[KUEUE_V1BETA2, "WorkloadPriorityClass"]
WORKLOADS = RESOURCES[KUEUE_V1BETA2, "Workload"]
ADMISSION_CHECKS = RESOURCES[KUEUE_V1BETA2, "AdmissionCheck"]
TOPOLOGIES = RESOURCES[KUEUE_V1BETA2, "Topology"]
PROVISIONING_REQUEST_CONFIGS = RESOURCES[KUEUE_V1BETA2, "ProvisioningRequestConfig"]
POD_TEMPLATES = RESOURCES["v1", "PodTemplate"]
PROVISIONING_REQUESTS = RESOURCES[AUTOSCALING_V1, "ProvisioningRequest"]
MULTIKUEUE_CLUSTERS = RESOURCES[KUEUE_V1BETA2, "MultiKueueCluster"]
MULTIKUEUE_CONFIGS = RESOURCES[KUEUE_V1BETA2, "MultiKueueConfig"]


def ref_for(api_version: str, kind: str) -> ResourceRef:
    """Return the ResourceRef of a kind: one of ``RESOURCES``, or a job integration's kind
    (:func:`kueue_es.jobframework.integrations.by_kind`, served once its CRD is installed) or one
    its conversion reads (``Integration.inputs``: a TrainingRuntime).

    Raises ``errors.UnknownKindError`` (naming the kind) for any other, e.g. ``example.com/v1 Widget``.
    """
    try:
        return RESOURCES[api_version, kind]
    except KeyError:
        integration = integrations.by_kind(kind)
        if integration is not None and integration.api_version == api_version:
            return _ref(api_version, kind, integration.plural, namespaced=integration.namespaced, status=True)
        for read in (ik for i in integrations.registry().values() for ik in i.inputs):
            if (read.api_version, read.kind) == (api_version, kind):
                return _ref(api_version, kind, read.plural, namespaced=read.namespaced, status=False)
        known = ", ".join(sorted(f"{av} {k}" for av, k in RESOURCES))
        raise errors.UnknownKindError(
            f"kind {kind!r} of apiVersion {api_version!r} is not one kueue-es handles;"
            f" the object is not applied. Known kinds: {known}."
        ) from None
