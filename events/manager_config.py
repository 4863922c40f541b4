"""Kueue's manager configuration file (``controller_manager_config.yaml``) to a Configuration.

Why this module exists: Kueue reads its settings -- fair sharing, admission fair
sharing, waitForPodsReady, resource transformations, feature gates, the job
integrations, manageJobsWithoutQueueName -- from one file in its own format,
``apiVersion: config.kueue.x-k8s.io/v1beta2`` (or the older ``v1beta1``) ``kind:
Configuration``, usually a ConfigMap mounted at ``/controller_manager_config.yaml``
(Kueue config/components/manager, apis/config/*/configuration_types.go). kueue-es
reads the same file: every section Kueue knows is typed here, so a misspelt or
unknown field is refused with a :class:`~kueue_es.events.manifests.ManifestError`
naming the file and the field, as Kueue's strict decoding does; the settings the
deciders use become a :class:`kueue_es.events.models.Configuration` (what a
ConfigurationObserved fact carries), and the watcher's own settings
(manageJobsWithoutQueueName, managedJobsNamespaceSelector, integrations.frameworks)
stay beside it in :class:`ManagerConfig`. The sections that configure Kueue's
process (webhook, metrics, leader election, client connection, ...) are checked for
shape and by Kueue's rules for them (:func:`_process_sections`) and otherwise ignored:
kueue-es has its own flags for those. ``multiKueue`` is read
(gcInterval, origin, workerLostTimeout, the dispatcher) into the Configuration.

Defaults are Kueue's (apis/config/*/defaults.go): in v1beta2 a present ``fairSharing``
turns fair sharing on (its ``preemptionStrategies`` are required: the defaults do not fill
them) and waitForPodsReady is always on (timeout 30m unless set or zero); in v1beta1 both
need ``enable: true`` (fair sharing's strategies then default to both rules). A zero
``admissionFairSharing.usageSamplingInterval`` is 5m and an empty transformation ``strategy``
Retain, as Kueue's defaults (``cmp.Or``) make them. Pure: no I/O (the watcher reads the file).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

import celpy
import msgspec
import yaml

from kueue_es.events import labels, models, slices
from kueue_es.events.manifests import ManifestError, load_documents, weight_text
from kueue_es.events.quantities import QuantityError, to_amount

CONFIG_GROUP = "config.kueue.x-k8s.io"
API_VERSIONS = (f"{CONFIG_GROUP}/v1beta2", f"{CONFIG_GROUP}/v1beta1")
#: Kueue's built-in integrations (pkg/controller/jobs/*: FrameworkName) and the ``(apiVersion, kind)`` of each one's
#: job type as Kueue's scheme registers it (validateIntegrations compares these GVKs); the watcher maps those
#: kueue-es runs to their job kinds (kueue_es.services.watcher.kinds.FRAMEWORK_KINDS).
FRAMEWORK_OWNERS: dict[str, tuple[str, str]] = {
    "batch/job": ("batch/v1", "Job"),
    "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    "pod": ("v1", "Pod"),
    "deployment": ("apps/v1", "Deployment"),
    "statefulset": ("apps/v1", "StatefulSet"),
    "kubeflow.org/mpijob": ("kubeflow.org/v2beta1", "MPIJob"),
    "kubeflow.org/paddlejob": ("kubeflow.org/v1", "PaddleJob"),
    "kubeflow.org/pytorchjob": ("kubeflow.org/v1", "PyTorchJob"),
    "kubeflow.org/tfjob": ("kubeflow.org/v1", "TFJob"),
    "kubeflow.org/xgboostjob": ("kubeflow.org/v1", "XGBoostJob"),
    "kubeflow.org/jaxjob": ("kubeflow.org/v1", "JAXJob"),
    "ray.io/rayjob": ("ray.io/v1", "RayJob"),
    "ray.io/raycluster": ("ray.io/v1", "RayCluster"),
    "ray.io/rayservice": ("ray.io/v1", "RayService"),
    "workload.codeflare.dev/appwrapper": ("workload.codeflare.dev/v1beta2", "AppWrapper"),
    "trainer.kubeflow.org/trainjob": ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    "sparkoperator.k8s.io/sparkapplication": ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
    "leaderworkerset.x-k8s.io/leaderworkerset": ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
}
KUEUE_FRAMEWORKS = frozenset(FRAMEWORK_OWNERS)
DEFAULT_FRAMEWORKS = ("batch/job",)  # Kueue's default when integrations.frameworks is empty
#: Alpha integrations Kueue sets up only with their feature gate on; listed without it, Kueue does not
#: start (jobframework setup.go CanSupportIntegration; sparkapplication_controller.go).
GATED_FRAMEWORKS = {"sparkoperator.k8s.io/sparkapplication": "SparkApplicationIntegration"}
_DURATION = re.compile(r"^-?(\d+(\.\d*)?(ns|us|µs|ms|s|m|h))+$|^0$")
#: The preemption strategy sets Kueue allows, in its order (pkg/config/validation.go validStrategySets).
_FAIR_SHARING_STRATEGIES = (
    ["LessThanOrEqualToFinalShare"],
    ["LessThanInitialShare"],
    ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
)


class _Strict(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A section of Kueue's file: camelCase keys, an unknown one is an error."""


# -- the sections kueue-es only checks (Kueue's process settings) ---------------------------------


class _Webhook(_Strict, frozen=True, kw_only=True):
    port: int | None = None
    host: str = ""
    cert_dir: str = ""


class _CustomLabel(_Strict, frozen=True, kw_only=True):
    name: str
    source_label_key: str = ""
    source_annotation_key: str = ""
    source_kind: str | None = None
    tracked_values: list[str] = []


class _LocalQueueMetrics(_Strict, frozen=True, kw_only=True):
    enable: bool = False
    local_queue_selector: models.LabelSelector | None = None


class _Metrics(_Strict, frozen=True, kw_only=True):
    bind_address: str = ""
    enable_cluster_queue_resources: bool = False
    custom_labels: list[_CustomLabel] = []
    local_queue_metrics: _LocalQueueMetrics | None = None


class _Health(_Strict, frozen=True, kw_only=True):
    health_probe_bind_address: str = ""
    readiness_endpoint_name: str = ""
    liveness_endpoint_name: str = ""


class _LeaderElection(_Strict, frozen=True, kw_only=True):
    """k8s.io/component-base LeaderElectionConfiguration."""

    leader_elect: bool | None = None
    lease_duration: str | None = None
    renew_deadline: str | None = None
    retry_period: str | None = None
    resource_lock: str = ""
    resource_name: str = ""
    resource_namespace: str = ""


class _Controller(_Strict, frozen=True, kw_only=True):
    group_kind_concurrency: dict[str, int] = {}
    cache_sync_timeout: int | str | None = None


class _TLS(_Strict, frozen=True, kw_only=True):
    min_version: str = ""
    cipher_suites: list[str] = []
    curve_preferences: list[int] = []


class _InternalCertManagement(_Strict, frozen=True, kw_only=True):
    enable: bool | None = None
    webhook_service_name: str | None = None
    webhook_secret_name: str | None = None


class _ClientConnection(_Strict, frozen=True, kw_only=True):
    qps: float | None = None
    burst: int | None = None


class _ExternalFramework(_Strict, frozen=True, kw_only=True):
    name: str


class _IncrementalDispatcherConfig(_Strict, frozen=True, kw_only=True):
    step_size: int | None = None


class _MultiKueue(_Strict, frozen=True, kw_only=True):
    gc_interval: str | None = None
    origin: str | None = None
    worker_lost_timeout: str | None = None
    dispatcher_name: str | None = None
    external_frameworks: list[_ExternalFramework] = []
    cluster_profile: dict[str, Any] | None = None  # exec plugin configs: client-go's, not checked here
    incremental_dispatcher_config: _IncrementalDispatcherConfig | None = None


class _PodOptions(_Strict, frozen=True, kw_only=True):  # v1beta1 only
    namespace_selector: dict[str, Any] | None = None
    pod_selector: dict[str, Any] | None = None


class _Integrations(_Strict, frozen=True, kw_only=True):
    frameworks: list[str] = []
    external_frameworks: list[str] = []
    label_keys_to_copy: list[str] = []
    pod_options: _PodOptions | None = None


class _QueueVisibility(_Strict, frozen=True, kw_only=True):  # v1beta1 only
    cluster_queues: dict[str, int] | None = None
    update_interval_seconds: int = 0


class _RetentionPolicy(_Strict, frozen=True, kw_only=True):
    after_finished: str | None = None
    after_deactivated_by_kueue: str | None = None


class _ObjectRetention(_Strict, frozen=True, kw_only=True):
    workloads: _RetentionPolicy | None = None


class _VisibilityServer(_Strict, frozen=True, kw_only=True):
    bind_address: str | None = None
    bind_port: int | None = None


# -- the sections the deciders read -----------------------------------------------------------------


class _RequeuingStrategy(_Strict, frozen=True, kw_only=True):
    timestamp: Literal["Creation", "Eviction"] = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


class _WaitForPodsReady(_Strict, frozen=True, kw_only=True):
    enable: bool | None = None  # v1beta1 only
    timeout: str | None = None
    block_admission: bool | None = None
    requeuing_strategy: _RequeuingStrategy | None = None
    recovery_timeout: str | None = None


class _FairSharing(_Strict, frozen=True, kw_only=True):
    enable: bool | None = None  # v1beta1 only
    preemption_strategies: list[Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]] | None = None


_DEFAULT_SAMPLING_INTERVAL = "5m"


class _AdmissionFairSharing(_Strict, frozen=True, kw_only=True):
    usage_half_life_time: str = "0s"
    usage_sampling_interval: str = _DEFAULT_SAMPLING_INTERVAL
    resource_weights: dict[str, float] = {}


class _Transformation(_Strict, frozen=True, kw_only=True):
    input: str
    strategy: Literal["Retain", "Replace", ""] = "Retain"  # "": Retain, Kueue's defaults (cmp.Or)
    multiply_by: str | None = None
    outputs: dict[str, str | int | float] = {}


class _CelSelector(_Strict, frozen=True, kw_only=True):
    expression: str


class _DeviceSelector(_Strict, frozen=True, kw_only=True):
    cel: _CelSelector


class _CounterSource(_Strict, frozen=True, kw_only=True):
    name: str = ""
    driver: str = ""
    device_selector: _DeviceSelector


class _CapacitySource(_Strict, frozen=True, kw_only=True):
    name: str = ""
    driver: str = ""
    device_selector: _DeviceSelector


class _DeviceClassSource(_Strict, frozen=True, kw_only=True):
    counter: _CounterSource | None = None
    capacity: _CapacitySource | None = None


class _DeviceClassMapping(_Strict, frozen=True, kw_only=True):
    name: str
    device_class_names: list[str]
    sources: list[_DeviceClassSource] = []


class _Resources(_Strict, frozen=True, kw_only=True):
    quota_check_strategy: Literal["IgnoreUndeclared", "BlockUndeclared"] | None = None  # v1beta2 only
    exclude_resource_prefixes: list[str] = []
    transformations: list[_Transformation] = []
    device_class_mappings: list[_DeviceClassMapping] = []


class KueueConfiguration(_Strict, frozen=True, kw_only=True):
    """config.kueue.x-k8s.io Configuration as Kueue's file has it (v1beta1 and v1beta2 together; the
    fields only one version has are refused in the other by :func:`parse`)."""

    api_version: str
    kind: str
    namespace: str | None = None
    webhook: _Webhook | None = None
    leader_election: _LeaderElection | None = None
    metrics: _Metrics | None = None
    health: _Health | None = None
    pprof_bind_address: str = ""
    controller: _Controller | None = None
    tls: _TLS | None = None
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: models.LabelSelector | None = None
    internal_cert_management: _InternalCertManagement | None = None
    wait_for_pods_ready: _WaitForPodsReady | None = None
    client_connection: _ClientConnection | None = None
    integrations: _Integrations | None = None
    queue_visibility: _QueueVisibility | None = None
    multi_kueue: _MultiKueue | None = None
    fair_sharing: _FairSharing | None = None
    admission_fair_sharing: _AdmissionFairSharing | None = None
    resources: _Resources | None = None
    feature_gates: dict[str, bool] = {}
    object_retention_policies: _ObjectRetention | None = None
    visibility_server: _VisibilityServer | None = None


#: Fields one version has and the other does not (v1beta2 dropped queueVisibility, podOptions and the
#: ``enable`` switches; v1beta1 has no quotaCheckStrategy, visibilityServer or per-label sourceKind).
_ONLY_IN = {
    "v1beta1": ("queueVisibility", "integrations.podOptions", "waitForPodsReady.enable", "fairSharing.enable"),
    "v1beta2": ("resources.quotaCheckStrategy", "visibilityServer"),
}


@dataclass(frozen=True)
class ManagerConfig:
    """What a manager configuration file says.

    ``configuration``: the settings the deciders use (what ConfigurationObserved carries);
    ``manage_jobs_without_queue_name`` and ``managed_jobs_namespace_selector``: the watcher's
    (None: Kueue's default, every namespace but kube-system and kueue-system; the Configuration naming
    another ``namespace``, that default written out with it);
    ``frameworks``: ``integrations.frameworks`` as written (Kueue's default ``batch/job`` when
    empty); ``external_frameworks``: ``integrations.externalFrameworks`` as written;
    ``label_keys_to_copy`` and ``annotations_to_copy``: the job's labels and annotations its Workload gets
    (:func:`keys_to_copy`); ``not_done``: what the file asks for that kueue-es accepts (Kueue's checks
    pass) but does not do, one sentence each, for the watcher to warn about.
    """

    configuration: models.Configuration
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: models.LabelSelector | None = None
    frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS
    external_frameworks: tuple[str, ...] = ()
    label_keys_to_copy: frozenset[str] = frozenset()
    annotations_to_copy: frozenset[str] = frozenset()
    not_done: tuple[str, ...] = ()

    @property
    def external_owners(self) -> frozenset[tuple[str, str]]:
        """``(apiVersion, kind)`` of each ``integrations.externalFrameworks`` entry (``Kind.version.group``):
        kinds an outside controller runs for Kueue, whose pods are part of their owner's workload."""
        return frozenset(external_owner(name) for name in self.external_frameworks)


def external_owner(name: str) -> tuple[str, str]:
    """``(apiVersion, kind)`` of an externalFrameworks entry ``Kind.version.group`` (``AppWrapper.v1beta2.
    workload.codeflare.dev``), as Kubernetes' schema.ParseKindArg reads it; ValueError when it is not one."""
    parts = name.split(".", 2)
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"{name!r} must be format, 'Kind.version.group.com'")
    kind, version, group = parts
    return f"{group}/{version}", kind


def parse(text: str, *, source: str = "<config>", feature_gates: str = "") -> ManagerConfig:
    """Parse a manager configuration file (YAML or JSON text) and Kueue's ``--feature-gates`` flag.

    ``feature_gates``: the flag's value, ``Gate=true,Other=false`` (empty: none).
    Raises ManifestError (kind ``Configuration``, name ``source``) naming the field: not
    one YAML mapping, a key given twice in one mapping (Kueue's strict decoding), another
    apiVersion or kind, an unknown field, a wrong type or enum value, a bad Go duration or
    quantity, an unknown or repeated integration (an external framework of a built-in one's
    kind too), a v1beta2 ``fairSharing`` without ``preemptionStrategies`` or a strategy set
    Kueue does not allow, a negative timeout or backoff, a repeated transformation input,
    ``excludeResourcePrefixes`` with ``quotaCheckStrategy: IgnoreUndeclared``, feature gates both
    in the file and the flag, a ``managedJobsNamespaceSelector`` that is not a valid label
    selector or selects ``kube-system`` or Kueue's own namespace, and the process sections'
    checks (:func:`_process_sections`) (Kueue pkg/config/validation.go).
    """
    docs = load_documents(text, source=source)
    if len(docs) != 1:
        raise ManifestError(
            kind="Configuration", name=source, field="", problem=f"must hold one document, not {len(docs)}"
        )
    _refuse_repeated_keys(text, source=source)
    raw = docs[0]
    version = str(raw.get("apiVersion") or "")
    if version not in API_VERSIONS or raw.get("kind") != "Configuration":
        raise ManifestError(
            kind="Configuration",
            name=source,
            field="apiVersion/kind",
            problem=f"{version or '?'}/{raw.get('kind') or '?'} is not Kueue's Configuration "
            f"(want {' or '.join(API_VERSIONS)}, kind Configuration)",
        )
    short = version.rsplit("/", 1)[1]
    for other, fields in _ONLY_IN.items():
        if other != short:
            for dotted in fields:
                if _has(raw, dotted):
                    raise _error(source, dotted, f"unknown field in {version} (only {CONFIG_GROUP}/{other} has it)")
    try:
        file = msgspec.convert(raw, KueueConfiguration, str_keys=True)
    except msgspec.ValidationError as err:
        problem, _, path = str(err).partition(" - at `")
        field = path.rstrip("`").removeprefix("$").removeprefix(".")
        unknown = re.search(r"unknown field `([^`]+)`", problem)
        if unknown:
            field = f"{field}.{unknown.group(1)}" if field else unknown.group(1)
            problem = "unknown field"
        missing = re.search(r"missing required field `([^`]+)`", problem)
        if missing:
            field = f"{field}.{missing.group(1)}" if field else missing.group(1)
        enum = re.fullmatch(r"Invalid enum value (.+)", problem)
        if enum:
            problem = _unsupported(_value_at(raw, field), _enum_values(field))
        raise _error(source, field, problem) from err
    gates = _feature_gates(file.feature_gates, feature_gates, source=source)
    _process_sections(file, source=source)
    refused = unknown_feature_gate_problem(gates) or feature_gate_problem(gates)
    if refused is not None:
        raise _error(source, "featureGates", refused)
    copied_labels, copied_annotations = keys_to_copy(file, gates=gates)
    return ManagerConfig(
        configuration=models.Configuration(
            fair_sharing=_fair_sharing(file.fair_sharing, v1beta1=short == "v1beta1", source=source),
            admission_fair_sharing=_admission_fair_sharing(file.admission_fair_sharing, source=source),
            wait_for_pods_ready=_wait_for_pods_ready(
                file.wait_for_pods_ready, v1beta1=short == "v1beta1", source=source
            ),
            resources=_resources(file.resources, gates=gates, source=source),
            feature_gates=gates,
            multi_kueue=_multi_kueue(file.multi_kueue, source=source),
            object_retention_policies=_object_retention(file.object_retention_policies, source=source),
            local_queue_metrics=_local_queue_metrics(file.metrics),
            enable_cluster_queue_resources=file.metrics is not None and file.metrics.enable_cluster_queue_resources,
        ),
        manage_jobs_without_queue_name=file.manage_jobs_without_queue_name,
        managed_jobs_namespace_selector=_managed_jobs_namespace_selector(file, source=source),
        frameworks=_gated(_frameworks(file.integrations, source=source), gates, source=source),
        external_frameworks=_external_frameworks(file.integrations, source=source),
        label_keys_to_copy=copied_labels,
        annotations_to_copy=copied_annotations,
        not_done=_not_done(file, gates),
    )


def _not_done(file: KueueConfiguration, gates: dict[str, bool]) -> tuple[str, ...]:
    """What the file asks for that kueue-es accepts but does not do (docs/metrics.md)."""
    if gates.get("CustomMetricLabels", False) and file.metrics is not None and file.metrics.custom_labels:
        return (
            "metrics.customLabels: the custom_* metric labels are not exported (the Workloads still copy the "
            "Workload-source labels and annotations from their jobs)",
        )
    return ()


def keys_to_copy(file: KueueConfiguration, *, gates: dict[str, bool]) -> tuple[frozenset[str], frozenset[str]]:
    """The label keys and annotation keys a job's new Workload copies from the job: ``integrations.
    labelKeysToCopy``, and with the gate CustomMetricLabels (alpha, off by default) each ``metrics.customLabels``
    entry of ``sourceKind: Workload``: its ``sourceAnnotationKey`` as an annotation, else its ``sourceLabelKey``
    (else its ``name``) as a label (Kueue cmd/kueue/main.go getLabelsAndAnnotationsToCopy,
    pkg/metrics/custom_labels.go WorkloadCustomLabelSources; the default sourceKind is ClusterQueue)."""
    labels = set(file.integrations.label_keys_to_copy if file.integrations is not None else ())
    annotations: set[str] = set()
    if not gates.get("CustomMetricLabels", False):
        return frozenset(labels), frozenset()
    for entry in file.metrics.custom_labels if file.metrics is not None else ():
        if (entry.source_kind or "ClusterQueue") != "Workload":
            continue
        if entry.source_annotation_key:
            annotations.add(entry.source_annotation_key)
        else:
            labels.add(entry.source_label_key or entry.name)
    return frozenset(labels), frozenset(annotations)


def digest(configuration: models.Configuration) -> str:
    """sha256 (hex) of a Configuration's canonical encoding: equal digests, equal settings."""
    return hashlib.sha256(msgspec.json.encode(configuration, order="sorted")).hexdigest()


# -- mapping and Kueue's validation ------------------------------------------------------------------


def _fair_sharing(section: _FairSharing | None, *, v1beta1: bool, source: str) -> models.FairSharingConfig | None:
    """``fairSharing`` checked as Kueue checks it (pkg/config/validation.go validateFairSharing): present, fair
    sharing is on and ``preemptionStrategies`` must be one of Kueue's sets. v1beta2's defaults do not fill the
    strategies, so a v1beta2 section without them (``fairSharing: {}``) is refused, ``Required value``; only
    the v1beta1 conversion of ``enable: true`` gives them Kueue's default, both rules, final share first
    (configuration_conversion.go), and a v1beta1 section without ``enable: true`` is none at all."""
    if section is None or (v1beta1 and not section.enable):
        return None
    field = "fairSharing.preemptionStrategies"
    strategies = section.preemption_strategies
    if not strategies:
        if v1beta1:
            return models.FairSharingConfig()  # the conversion's default, both rules, final share first
        raise _error(source, field, "Required value: must be specified")
    if strategies not in _FAIR_SHARING_STRATEGIES:
        allowed = [",".join(s) for s in _FAIR_SHARING_STRATEGIES]
        raise _error(source, field, _unsupported(list(strategies), allowed))
    return models.FairSharingConfig(preemption_strategies=list(strategies))


def _admission_fair_sharing(
    section: _AdmissionFairSharing | None, *, source: str
) -> models.AdmissionFairSharingConfig | None:
    """``admissionFairSharing`` with Kueue's default (apis/config/*/defaults.go: a zero or absent
    ``usageSamplingInterval`` is 5m) and checks (validateAdmissionFairSharing: a half-life not negative, an
    interval greater than 0, weights not negative; kueue-es: finite too). None when the file has no section."""
    if section is None:
        return None
    half_life = _duration(section.usage_half_life_time, "admissionFairSharing.usageHalfLifeTime", source)
    sampling = _duration(section.usage_sampling_interval, "admissionFairSharing.usageSamplingInterval", source)
    if half_life.startswith("-") and not _zero(half_life):
        raise _error(source, "admissionFairSharing.usageHalfLifeTime", "must be greater than or equal to 0")
    if _zero(sampling):
        sampling = _DEFAULT_SAMPLING_INTERVAL  # Kueue's defaults turn a zero interval into 5m (cmp.Or)
    if sampling.startswith("-"):
        raise _error(source, "admissionFairSharing.usageSamplingInterval", "must be greater than 0")
    for resource, weight in section.resource_weights.items():
        if not math.isfinite(weight):  # YAML's .inf and .nan are floats too, and no weight
            raise _error(source, f"admissionFairSharing.resourceWeights.{resource}", "must be a finite number")
        if weight < 0:
            raise _error(
                source, f"admissionFairSharing.resourceWeights.{resource}", "must be greater than or equal to 0"
            )
    return models.AdmissionFairSharingConfig(
        usage_half_life_time=half_life,
        usage_sampling_interval=sampling,
        resource_weights={r: weight_text(w) for r, w in sorted(section.resource_weights.items())},
    )


def _wait_for_pods_ready(
    section: _WaitForPodsReady | None, *, v1beta1: bool, source: str
) -> models.WaitForPodsReadyConfig | None:
    if v1beta1 and (section is None or not section.enable):
        return models.WaitForPodsReadyConfig(enable=False)  # off unless enabled, in v1beta1
    if section is None:
        return None  # v1beta2: on with Kueue's defaults, as the fold reads a missing section
    timeout = _duration(section.timeout or "30m", "waitForPodsReady.timeout", source)
    if timeout.startswith("-"):
        raise _error(source, "waitForPodsReady.timeout", "must be greater than or equal to 0")
    if _zero(timeout):
        timeout = "30m"  # Kueue defaults a zero timeout
    recovery = None
    if section.recovery_timeout is not None:
        recovery = _duration(section.recovery_timeout, "waitForPodsReady.recoveryTimeout", source)
        if recovery.startswith("-"):
            raise _error(source, "waitForPodsReady.recoveryTimeout", "must be greater than or equal to 0")
    strategy = section.requeuing_strategy or _RequeuingStrategy()
    for name in ("backoff_limit_count", "backoff_base_seconds", "backoff_max_seconds"):
        value = getattr(strategy, name)
        if value is not None and value < 0:
            camel = "".join(p.capitalize() if i else p for i, p in enumerate(name.split("_")))
            raise _error(source, f"waitForPodsReady.requeuingStrategy.{camel}", "must be greater than or equal to 0")
    return models.WaitForPodsReadyConfig(
        timeout=timeout,
        recovery_timeout=recovery,
        block_admission=bool(section.block_admission),
        requeuing_strategy=models.RequeuingStrategy(
            timestamp=strategy.timestamp,
            backoff_limit_count=strategy.backoff_limit_count,
            backoff_base_seconds=strategy.backoff_base_seconds,
            backoff_max_seconds=strategy.backoff_max_seconds,
        ),
    )


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _multi_kueue(section: _MultiKueue | None, *, source: str) -> models.MultiKueueConfiguration | None:
    """``multiKueue`` with Kueue's defaults (gcInterval 1m, origin multikueue, workerLostTimeout 15m,
    the AllAtOnce dispatcher; stepSize 3 for the Incremental one) and its checks (pkg/config/validation.go
    validateMultiKueue): no negative duration, the origin a label value, incrementalDispatcherConfig only
    with the Incremental dispatcher and a stepSize of at least 1. None when the file has no section."""
    if section is None:
        return None
    durations: dict[str, str] = {}
    for camel, value, default in (
        ("gcInterval", section.gc_interval, "1m"),
        ("workerLostTimeout", section.worker_lost_timeout, "15m"),
    ):
        text = _duration(value or default, f"multiKueue.{camel}", source)
        if text.startswith("-") and not _zero(text):
            raise _error(source, f"multiKueue.{camel}", "must be greater than or equal to 0")
        durations[camel] = text
    origin = section.origin or "multikueue"
    if len(origin) > 63 or not _LABEL_VALUE.match(origin):
        raise _error(
            source,
            "multiKueue.origin",
            f"{origin!r} is not a label value (at most 63 characters: alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric)",
        )
    dispatcher = section.dispatcher_name or models.DISPATCHER_ALL_AT_ONCE
    incremental = None
    if section.incremental_dispatcher_config is not None:
        if dispatcher != models.DISPATCHER_INCREMENTAL:
            raise _error(
                source,
                "multiKueue.incrementalDispatcherConfig",
                "incrementalDispatcherConfig is only valid when dispatcherName is set to the incremental dispatcher",
            )
        step = section.incremental_dispatcher_config.step_size
        if step is not None and step < 1:
            raise _error(
                source, "multiKueue.incrementalDispatcherConfig.stepSize", "must be greater than or equal to 1"
            )
        incremental = models.IncrementalDispatcherConfig(step_size=step or 3)
    elif dispatcher == models.DISPATCHER_INCREMENTAL:
        incremental = models.IncrementalDispatcherConfig()
    return models.MultiKueueConfiguration(
        gc_interval=durations["gcInterval"],
        origin=origin,
        worker_lost_timeout=durations["workerLostTimeout"],
        dispatcher_name=dispatcher,
        incremental_dispatcher_config=incremental,
    )


def _object_retention(section: _ObjectRetention | None, *, source: str) -> models.ObjectRetentionPolicies | None:
    """``objectRetentionPolicies`` as written, each duration checked as Kueue checks it (pkg/config/validation.go
    validateObjectRetentionPolicies: a Go duration, not negative). None when the file has no section."""
    if section is None:
        return None
    policy = section.workloads
    if policy is None:
        return models.ObjectRetentionPolicies()
    durations: dict[str, str | None] = {}
    for camel, value in (
        ("afterFinished", policy.after_finished),
        ("afterDeactivatedByKueue", policy.after_deactivated_by_kueue),
    ):
        if value is None:
            durations[camel] = None
            continue
        field = f"objectRetentionPolicies.workloads.{camel}"
        text = _duration(value, field, source)
        if text.startswith("-") and not _zero(text):
            raise _error(source, field, f"{text!r}: must be greater than or equal to 0")
        durations[camel] = text
    return models.ObjectRetentionPolicies(
        workloads=models.WorkloadRetentionPolicy(
            after_finished=durations["afterFinished"],
            after_deactivated_by_kueue=durations["afterDeactivatedByKueue"],
        )
    )


def _resources(section: _Resources | None, *, gates: dict[str, bool], source: str) -> models.ResourcesConfig | None:
    """``resources`` checked as Kueue checks it (pkg/config/validation.go): no transformation input twice
    (validateResourceTransformations), outputs quantities (a negative one an allowance), with the gate
    QuotaCheckStrategy on (its default) no ``excludeResourcePrefixes`` beside ``quotaCheckStrategy:
    IgnoreUndeclared`` (validateQuotaCheckStrategy), and the DRA mappings (:func:`_device_class_mappings`).
    None when the file has no section."""
    if section is None:
        return None
    if (
        gates.get("QuotaCheckStrategy", True)
        and section.quota_check_strategy == "IgnoreUndeclared"
        and section.exclude_resource_prefixes
    ):
        raise _error(
            source,
            "resources.quotaCheckStrategy",
            'Invalid value: "IgnoreUndeclared": excludeResourcePrefixes is not allowed when quotaCheckStrategy is '
            "IgnoreUndeclared",
        )
    seen: set[str] = set()
    transformations = []
    for index, item in enumerate(section.transformations):
        where = f"resources.transformations[{index}]"
        if item.input in seen:
            raise _error(source, f"{where}.input", f"Duplicate value: {json.dumps(item.input)}")
        seen.add(item.input)
        outputs = {}
        for resource, value in item.outputs.items():
            try:  # a negative output is an allowance (Kueue #14032: floored at zero where it meets a request)
                to_amount(resource, str(value), allow_negative=True)
            except QuantityError as err:
                raise _error(source, f"{where}.outputs.{resource}", str(err)) from err
            outputs[resource] = str(value)
        transformations.append(
            models.ResourceTransformation(
                input=item.input, strategy=item.strategy or "Retain", outputs=outputs, multiply_by=item.multiply_by
            )
        )
    return models.ResourcesConfig(
        exclude_resource_prefixes=list(section.exclude_resource_prefixes),
        transformations=transformations,
        quota_check_strategy=section.quota_check_strategy or "BlockUndeclared",
        device_class_mappings=_device_class_mappings(section.device_class_mappings, gates=gates, source=source),
    )


_LABEL_KEY = re.compile(models.LABEL_KEY_PATTERN)


def _device_class_mappings(
    mappings: list[_DeviceClassMapping], *, gates: dict[str, bool], source: str
) -> list[models.DeviceClassMapping]:
    """``resources.deviceClassMappings`` checked as Kueue checks them (pkg/config/validation.go
    validateDeviceClassMappings): at most 16 mappings; each name a qualified resource name, not
    repeated; 1 to 8 DeviceClass names, each a qualified name, not repeated in the mapping and not
    mapped to another resource name by an earlier mapping, unless both mappings have counter sources
    of different counters. ``sources``: :func:`_sources`."""
    where = "resources.deviceClassMappings"
    if len(mappings) > 16:
        raise _error(source, where, f"must have at most 16 items, has {len(mappings)}")
    names: set[str] = set()
    mapped: dict[str, str] = {}
    class_counters: dict[str, set[str]] = {}
    out = []
    for index, mapping in enumerate(mappings):
        at = f"{where}[{index}]"
        if len(mapping.name) > 253 or not _LABEL_KEY.match(mapping.name):
            raise _error(source, f"{at}.name", f"{mapping.name!r} is not a qualified name (a resource name)")
        if mapping.name in names:
            raise _error(source, f"{at}.name", f"Duplicate value: {mapping.name!r}")
        names.add(mapping.name)
        if not mapping.device_class_names:
            raise _error(source, f"{at}.deviceClassNames", "Required value: at least one device class name is required")
        if len(mapping.device_class_names) > 8:
            raise _error(
                source, f"{at}.deviceClassNames", f"must have at most 8 items, has {len(mapping.device_class_names)}"
            )
        for j, device_class in enumerate(mapping.device_class_names):
            field = f"{at}.deviceClassNames[{j}]"
            if len(device_class) > 253 or not _LABEL_KEY.match(device_class):
                raise _error(source, field, f"{device_class!r} is not a qualified name")
            if device_class in mapping.device_class_names[:j]:
                raise _error(source, field, f"Duplicate value: {device_class!r}")
            counter_name = mapping.sources[0].counter.name if mapping.sources and mapping.sources[0].counter else ""
            if mapped.get(device_class, mapping.name) != mapping.name:
                existing = class_counters.get(device_class, set())
                if not counter_name or not existing:
                    raise _error(source, field, f"device class already mapped to resource {mapped[device_class]}")
                if counter_name in existing:
                    raise _error(
                        source, field, f'device class already has a counter source for counter "{counter_name}"'
                    )
                existing.add(counter_name)
                continue
            mapped[device_class] = mapping.name
            class_counters.setdefault(device_class, {counter_name} if counter_name else set())
        counters, capacities = _sources(mapping.sources, at=f"{at}.sources", gates=gates, source=source)
        out.append(
            models.DeviceClassMapping(
                name=mapping.name,
                device_class_names=list(mapping.device_class_names),
                counters=counters,
                capacities=capacities,
            )
        )
    return out


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _sources(
    sources: list[_DeviceClassSource], *, at: str, gates: dict[str, bool], source: str
) -> tuple[list[models.CounterSource], list[models.CapacitySource]]:
    """A mapping's ``sources`` checked as Kueue checks them: exactly one kind a source; counter sources
    with gate KueueDRAIntegrationPartitionableDevices on (the default) and a DNS-label name (at most 63
    characters); capacity sources with gate KueueDRAIntegrationConsumableCapacity on (off by default)
    and a qualified dimension name; each a lowercase DNS-subdomain driver (at most 63) and a
    ``deviceSelector`` whose CEL parses; counter and capacity sources not mixed in one mapping."""
    counters: list[models.CounterSource] = []
    capacities: list[models.CapacitySource] = []
    for index, item in enumerate(sources):
        here = f"{at}[{index}]"
        if (item.counter is None) == (item.capacity is None):
            raise _error(source, here, "exactly one source type must be set per entry")
        if item.counter is not None:
            if not gates.get("KueueDRAIntegrationPartitionableDevices", True):
                raise _error(
                    source,
                    f"{here}.counter",
                    "counter sources require KueueDRAIntegrationPartitionableDevices to be enabled",
                )
            name = item.counter.name
            if not name:
                raise _error(source, f"{here}.counter.name", "Required value")
            if len(name) > 63 or not _DNS_LABEL.match(name):
                raise _error(source, f"{here}.counter.name", f"{name!r} is not a DNS-1123 label")
            driver, expression = _source_scope(item.counter, at=f"{here}.counter", source=source)
            counters.append(models.CounterSource(name=name, driver=driver, device_selector=expression))
        elif item.capacity is not None:
            if not gates.get("KueueDRAIntegrationConsumableCapacity", False):
                raise _error(
                    source,
                    f"{here}.capacity",
                    "capacity sources require KueueDRAIntegrationConsumableCapacity to be enabled",
                )
            name = item.capacity.name
            if not name or len(name) > 63 + 1 + 32 or not _LABEL_KEY.match(name):
                raise _error(source, f"{here}.capacity.name", f"{name!r} is not a qualified name")
            driver, expression = _source_scope(item.capacity, at=f"{here}.capacity", source=source)
            capacities.append(models.CapacitySource(name=name, driver=driver, device_selector=expression))
    if counters and capacities:
        raise _error(
            source, at, f"Invalid value: {len(sources)}: cannot mix counter and capacity sources in the same mapping"
        )
    return counters, capacities


def _source_scope(item: _CounterSource | _CapacitySource, *, at: str, source: str) -> tuple[str, str]:
    """A source's driver (a lowercase DNS subdomain, at most 63 characters) and ``deviceSelector`` CEL (it must parse)."""
    if not item.driver:
        raise _error(source, f"{at}.driver", "Required value")
    if len(item.driver) > 63 or not _DNS_SUBDOMAIN.match(item.driver):
        raise _error(source, f"{at}.driver", f"{item.driver!r} is not a lowercase DNS subdomain")
    expression = item.device_selector.cel.expression
    try:
        celpy.Environment().compile(expression)
    except celpy.CELParseError as err:
        problem = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
        raise _error(source, f"{at}.deviceSelector.cel.expression", f"CEL compilation failed: {problem}") from err
    return item.driver, expression


def _frameworks(section: _Integrations | None, *, source: str) -> tuple[str, ...]:
    """``integrations.frameworks`` checked as Kueue checks it (validateIntegrations): each one of Kueue's
    integrations (``Unsupported value``, listing them), none twice; Kueue's default ``batch/job`` when empty."""
    listed = tuple(section.frameworks) if section is not None else ()
    for index, name in enumerate(listed):
        if name not in KUEUE_FRAMEWORKS:
            raise _error(source, f"integrations.frameworks[{index}]", _unsupported(name, sorted(KUEUE_FRAMEWORKS)))
        if name in listed[:index]:
            raise _error(source, f"integrations.frameworks[{index}]", f"Duplicate value: {json.dumps(name)}")
    return listed or DEFAULT_FRAMEWORKS


def _gated(frameworks: tuple[str, ...], gates: dict[str, bool], *, source: str) -> tuple[str, ...]:
    for index, name in enumerate(frameworks):
        gate = GATED_FRAMEWORKS.get(name)
        if gate is not None and not gates.get(gate, False):
            raise _error(
                source,
                f"integrations.frameworks[{index}]",
                f"{name} integration is an alpha feature: enable the {gate} feature gate",
            )
    return frameworks


def _external_frameworks(section: _Integrations | None, *, source: str) -> tuple[str, ...]:
    """integrations.externalFrameworks checked as Kueue checks it (pkg/config/validation.go validateIntegrations):
    each ``Kind.version.group``, no kind twice, nor the kind of an integration ``frameworks`` lists
    (``Job.v1.batch`` beside ``batch/job``): Kueue compares the group, version and kind of each."""
    listed = tuple(section.external_frameworks) if section is not None else ()
    frameworks = section.frameworks if section is not None and section.frameworks else DEFAULT_FRAMEWORKS
    managed = {FRAMEWORK_OWNERS[name] for name in frameworks if name in FRAMEWORK_OWNERS}
    for index, name in enumerate(listed):
        field = f"integrations.externalFrameworks[{index}]"
        try:
            owner = external_owner(name)
        except ValueError as err:
            raise _error(source, field, str(err)) from None
        if owner in managed:
            raise _error(source, field, f"Duplicate value: {json.dumps(name)}")
        managed.add(owner)
    return listed


FEATURE_GATE_DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "TASFailedNodeReplacement": ("TopologyAwareScheduling",),
    "TASFailedNodeReplacementFailFast": ("TopologyAwareScheduling", "TASFailedNodeReplacement"),
    "TASReplaceNodeOnPodTermination": ("TopologyAwareScheduling", "TASFailedNodeReplacement"),
    "TASReplaceNodeDueToNotReadyOverFixedTime": ("TopologyAwareScheduling", "TASFailedNodeReplacement"),
    "TASBalancedPlacement": ("TopologyAwareScheduling",),
    "TASReplaceNodeOnNodeTaints": ("TopologyAwareScheduling",),
    "TASMultiLayerTopology": ("TopologyAwareScheduling",),
    "TASRespectNodeAffinityPreferred": ("TopologyAwareScheduling",),
    "UnadmittedWorkloadsExplicitStatus": ("UnadmittedWorkloadsObservability",),
    "TASHandleOverlappingFlavors": ("TopologyAwareScheduling",),
    "TASProfileMixed": ("TopologyAwareScheduling",),
    "TASRecomputeAssignmentWithinSchedulingCycle": ("TopologyAwareScheduling",),
    slices.TAS_GATE: slices.TAS_DEPENDENCIES,
    "KueueDRAIntegrationExtendedResource": ("KueueDRAIntegration",),
    "KueueDRAIntegrationPartitionableDevices": ("KueueDRAIntegration",),
    "KueueDRAIntegrationConsumableCapacity": ("KueueDRAIntegration",),
    "FlavorFungibilityPreserveScanProgress": ("FlavorFungibility",),
}
"""Kueue's feature gate dependencies (pkg/features/kube_features.go defaultFeatureGateDependencies):
a gate -> the gates it needs on. TASRecomputeAssignmentWithinSchedulingCycle needs
TopologyAwareScheduling since Kueue PR #14237."""

FEATURE_GATE_DEFAULTS: dict[str, bool] = {
    "TopologyAwareScheduling": True,
    "TASFailedNodeReplacement": True,
    "TASFailedNodeReplacementFailFast": True,
    "TASReplaceNodeOnPodTermination": True,
    "TASReplaceNodeDueToNotReadyOverFixedTime": False,
    "TASBalancedPlacement": False,
    "TASReplaceNodeOnNodeTaints": True,
    "TASMultiLayerTopology": True,
    "TASRespectNodeAffinityPreferred": False,
    "UnadmittedWorkloadsObservability": True,
    "UnadmittedWorkloadsExplicitStatus": False,
    "TASHandleOverlappingFlavors": True,
    "TASProfileMixed": True,
    "TASRecomputeAssignmentWithinSchedulingCycle": True,
    slices.GATE: slices.GATE_DEFAULT,
    slices.TAS_GATE: False,
    "KueueDRAIntegration": True,
    "KueueDRAIntegrationExtendedResource": True,
    "KueueDRAIntegrationPartitionableDevices": True,
    "KueueDRAIntegrationConsumableCapacity": False,
    "FlavorFungibility": True,
    "FlavorFungibilityPreserveScanProgress": True,
}
"""The defaults (Kueue's defaultVersionedFeatureGates at v0.19/v0.20: ElasticJobsViaWorkloadSlices on
since v0.18, :func:`kueue_es.events.slices.gate_enabled`; ElasticJobsViaWorkloadSlicesWithTAS alpha, off)
of every gate :data:`FEATURE_GATE_DEPENDENCIES` names."""


KNOWN_FEATURE_GATES: frozenset[str] = frozenset(
    {
        "AdmissionFairSharing",
        "AdmissionGatedBy",
        "AssignQueueLabelsForPods",
        "CleanupProvisioningRequestsOnEviction",
        "ConcurrentAdmission",
        "CustomMetricLabels",
        "DeferRayServiceFinalizationForRedisCleanup",
        "DisableWaitForPodsReady",
        "ElasticJobsViaWorkloadSlices",
        "ElasticJobsViaWorkloadSlicesWithTAS",
        "FailureRecoveryPolicy",
        "FairSharingPreemptWithinNominal",
        "FairSharingPrioritizeNonBorrowing",
        "FastQuotaReleaseInPodIntegration",
        "FinishOrphanedWorkloads",
        "FlavorFungibility",
        "FlavorFungibilityPreserveScanProgress",
        "KueueDRAIntegration",
        "KueueDRAIntegrationConsumableCapacity",
        "KueueDRAIntegrationExtendedResource",
        "KueueDRAIntegrationPartitionableDevices",
        "KueueDRARejectWorkloadsWhenDRADisabled",
        "LWSImmutableGroupSize",
        "LocalQueueMetrics",
        "ManagedJobsNamespaceSelectorAlwaysRespected",
        "MetricForWorkloadCreationLatency",
        "MetricsForCohorts",
        "MultiKueue",
        "MultiKueueAdaptersForCustomJobs",
        "MultiKueueClusterProfile",
        "MultiKueueIncrementalDispatcherConfig",
        "MultiKueueIncrementalDispatcherRespectConfigOrder",
        "MultiKueueKubeConfigPathValidation",
        "MultiKueueManagerQuotaAutomation",
        "MultiKueueOrchestratedPreemption",
        "MultiKueueRemoteSpecSync",
        "PartialAdmission",
        "PodIntegrationValidateGroupOwner",
        "PrioritizePreemptorWorkloads",
        "PriorityBoost",
        "PrioritySortingWithinCohort",
        "QuotaCheckStrategy",
        "ReclaimablePods",
        "RecomputeAssignmentUponPreemptionTargetsOverlap",
        "RejectUpdatesToCQWithInvalidOnFlavors",
        "RemoveFinalizersWithStrictPatch",
        "SchedulerLibraryIntegration",
        "SchedulingEquivalenceHashing",
        "ShortWorkloadNames",
        "SkipAncestorCheckForDeletedWorkloads",
        "SkipReassignmentForPodOwnedWorkloads",
        "SparkApplicationIntegration",
        "TASAssignmentsEncodingByHostnamePrefix",
        "TASBalancedPlacement",
        "TASCacheNodeMatchResults",
        "TASCacheTopologyTree",
        "TASCachingRemainingResources",
        "TASFailedNodeReplacement",
        "TASFailedNodeReplacementFailFast",
        "TASHandleOverlappingFlavors",
        "TASMultiLayerTopology",
        "TASProfileMixed",
        "TASRecomputeAssignmentWithinSchedulingCycle",
        "TASReplaceNodeDueToNotReadyOverFixedTime",
        "TASReplaceNodeOnNodeTaints",
        "TASReplaceNodeOnPodTermination",
        "TASRespectNodeAffinityPreferred",
        "TASValidateWorkloadSliceSize",
        "TLSOptions",
        "TopologyAwareScheduling",
        "UnadmittedWorkloadsExplicitStatus",
        "UnadmittedWorkloadsObservability",
        "ValidateRayAndSparkJobUpdates",
        "VectorizedResourceRequests",
        "VisibilityOnDemand",
        "WorkloadIdentifierAnnotations",
        "WorkloadPriorityClassDefaulting",
        "WorkloadRequestUseMergePatch",
        "WorkloadValidateResourcesAreNonNegative",
        "WorkloadValidationForPodSetMetadata",
    }
)
"""Every feature gate Kueue knows (pkg/features/kube_features.go defaultVersionedFeatureGates, v0.20): a
Configuration naming another is refused at start, as Kueue's component-base feature gate refuses it."""

LOCKED_FEATURE_GATES: dict[str, bool] = {"ManagedJobsNamespaceSelectorAlwaysRespected": True, "TLSOptions": True}
"""Gates that are GA and locked to their default (LockToDefault in kube_features.go): setting one to the other
value is refused."""


def unknown_feature_gate_problem(gates: dict[str, bool]) -> str | None:
    """Kueue's refusal of a Configuration's ``gates`` that names a gate Kueue does not know
    (:data:`KNOWN_FEATURE_GATES`; component-base featuregate SetFromMap: ``"unrecognized feature gate: X"``),
    or sets a locked one to the value it is not locked to (``"cannot set feature gate X to false, feature is
    locked to true"``); the first such gate by name, None when there is none."""
    for name in sorted(gates):
        if name not in KNOWN_FEATURE_GATES:
            return f"unrecognized feature gate: {name}"
        locked = LOCKED_FEATURE_GATES.get(name)
        if locked is not None and gates[name] != locked:
            value, lock = str(gates[name]).lower(), str(locked).lower()
            return f"cannot set feature gate {name} to {value}, feature is locked to {lock}"
    return None


def feature_gate_problem(gates: dict[str, bool]) -> str | None:
    """Kueue's refusal of ``gates`` (a Configuration's featureGates; a gate not set has its default,
    :data:`FEATURE_GATE_DEFAULTS`) when an enabled gate depends on a disabled one (the dependencies
    component-base checks when Kueue's pkg/config LoadAndValidateFeatureGates sets the gates):
    ``"X is enabled, but depends on features that are disabled: [A B]"``, one such sentence per gate
    in the order of the gates' names, joined by ``"; "``; None when every dependency holds. So turning
    TopologyAwareScheduling off needs its dependents that are on by default turned off too, as in
    Kueue (PR #14237 added TASRecomputeAssignmentWithinSchedulingCycle to them)."""

    def enabled(name: str) -> bool:
        return gates.get(name, FEATURE_GATE_DEFAULTS.get(name, False))

    problems = []
    for gate in sorted(FEATURE_GATE_DEPENDENCIES):
        if not enabled(gate):
            continue
        off = [name for name in FEATURE_GATE_DEPENDENCIES[gate] if not enabled(name)]
        if off:
            problems.append(f"{gate} is enabled, but depends on features that are disabled: [{' '.join(off)}]")
    return "; ".join(problems) or None


def _feature_gates(in_file: dict[str, bool], flag: str, *, source: str) -> dict[str, bool]:
    """The gates of the file or of ``--feature-gates`` (Kueue refuses both at once)."""
    if not flag.strip():
        return dict(sorted(in_file.items()))
    if in_file:
        raise _error(source, "featureGates", "feature gates for CLI and configuration cannot both be specified")
    gates: dict[str, bool] = {}
    for part in flag.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or not name or value.strip().lower() not in ("true", "false"):
            raise ManifestError(
                kind="flag", name="--feature-gates", field="", problem=f"{part.strip()!r} is not Gate=true|false"
            )
        gates[name.strip()] = value.strip().lower() == "true"
    return dict(sorted(gates.items()))


#: apis/config/v1beta2 defaults.go DefaultNamespace: the Configuration's ``namespace`` when it names none.
DEFAULT_NAMESPACE = "kueue-system"
_NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
_SELECTOR = "managedJobsNamespaceSelector"
_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def _local_queue_metrics(metrics: _Metrics | None) -> models.LocalQueueMetricsConfig | None:
    """``metrics.localQueueMetrics`` (None when absent: Kueue's default enables it for every LocalQueue,
    defaults.go). A selector is kept only when enabled, as Kueue's NewLocalQueueMetricsConfig reads it."""
    section = metrics.local_queue_metrics if metrics is not None else None
    if section is None:
        return None
    return models.LocalQueueMetricsConfig(
        enable=section.enable, local_queue_selector=section.local_queue_selector if section.enable else None
    )


def _managed_jobs_namespace_selector(file: KueueConfiguration, *, source: str) -> models.LabelSelector | None:
    """``managedJobsNamespaceSelector`` checked as Kueue checks it (pkg/config/validation.go
    validateManagedJobsNamespaceSelector): a valid label selector (metav1 ValidateLabelSelector: qualified
    keys, label values, ``In``/``NotIn`` with values, ``Exists``/``DoesNotExist`` without) that does not
    select ``kube-system`` nor the Configuration's ``namespace`` (``kueue-system`` unless set), whose Pods and
    jobs Kueue must never hold back. Absent, Kueue's default (defaults.go) leaves out both: None when that
    is ``kueue-system`` (:data:`kueue_es.jobframework.workloads.DEFAULT_MANAGED_JOBS_NAMESPACE_SELECTOR`),
    else that selector written out. Raises ManifestError naming the field."""
    namespace = file.namespace or DEFAULT_NAMESPACE
    selector = file.managed_jobs_namespace_selector
    if selector is None:
        if namespace == DEFAULT_NAMESPACE:
            return None
        requirement = models.LabelSelectorRequirement(
            key=_NAMESPACE_NAME_LABEL, operator="NotIn", values=["kube-system", namespace]
        )
        return models.LabelSelector(match_expressions=[requirement])
    for key, value in selector.match_labels.items():
        if len(key) > 317 or not _QUALIFIED_NAME.match(key):
            raise _error(source, f"{_SELECTOR}.matchLabels", f"Invalid value: {key!r}: not a qualified name")
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            raise _error(source, f"{_SELECTOR}.matchLabels", f"Invalid value: {value!r}: not a valid label value")
    for index, requirement in enumerate(selector.match_expressions):
        at = f"{_SELECTOR}.matchExpressions[{index}]"
        if len(requirement.key) > 317 or not _QUALIFIED_NAME.match(requirement.key):
            raise _error(source, f"{at}.key", f"Invalid value: {requirement.key!r}: not a qualified name")
        if requirement.operator in ("In", "NotIn") and not requirement.values:
            raise _error(source, f"{at}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
        if requirement.operator in ("Exists", "DoesNotExist") and requirement.values:
            raise _error(
                source, f"{at}.values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
        for j, value in enumerate(requirement.values):
            if len(value) > 63 or not _LABEL_VALUE.match(value):
                raise _error(source, f"{at}.values[{j}]", f"Invalid value: {value!r}: not a valid label value")
    for prohibited in ("kube-system", namespace):
        # Kueue matches the selector against the name label alone, as the API server gives every Namespace
        if selector.matches({_NAMESPACE_NAME_LABEL: prohibited}):
            raise _error(source, _SELECTOR, f'should not match the "{prohibited}" namespace')
    return selector


_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _process_sections(file: KueueConfiguration, *, source: str) -> None:
    """The checks Kueue makes of the sections that configure its process (pkg/config/validation.go), which
    kueue-es otherwise ignores: with ``internalCertManagement.enable``, ``webhookServiceName`` a DNS-1035
    label and ``webhookSecretName`` a DNS-1123 subdomain (validateInternalCertManagement);
    ``visibilityServer.bindAddress`` an IP address and ``bindPort`` in 1-65535 (validateVisibilityServer); no
    ``tls.cipherSuites`` with ``minVersion: VersionTLS13`` (validateTLS); each ``multiKueue.externalFrameworks``
    name ``Kind.version.group``, none twice (validateMultiKueue). Raises ManifestError naming the field."""
    certs = file.internal_cert_management
    if certs is not None and certs.enable:
        name = certs.webhook_service_name
        if name is not None and (len(name) > 63 or not _DNS_1035_LABEL.match(name)):
            raise _error(
                source,
                "internalCertManagement.webhookServiceName",
                f"Invalid value: {name!r}: a DNS-1035 label must consist of lower case alphanumeric characters or "
                "'-', start with an alphabetic character, and end with an alphanumeric character",
            )
        secret = certs.webhook_secret_name
        if secret is not None and (len(secret) > 253 or not _DNS_SUBDOMAIN.match(secret)):
            raise _error(
                source,
                "internalCertManagement.webhookSecretName",
                f"Invalid value: {secret!r}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
            )
    visibility = file.visibility_server
    if visibility is not None:
        if visibility.bind_address is not None:
            try:
                ipaddress.ip_address(visibility.bind_address)
            except ValueError:
                raise _error(
                    source,
                    "visibilityServer.bindAddress",
                    f"Invalid value: {visibility.bind_address!r}: must be a valid IP address",
                ) from None
        port = visibility.bind_port
        if port is not None and not 1 <= port <= 65535:
            raise _error(
                source, "visibilityServer.bindPort", f"Invalid value: {port}: must be a valid port number (1-65535)"
            )
    if file.tls is not None and file.tls.min_version == "VersionTLS13" and file.tls.cipher_suites:
        raise _error(source, "tls.cipherSuites", "may not be specified when `minVersion` is 'VersionTLS13'")
    if file.multi_kueue is not None:
        seen: set[tuple[str, str]] = set()
        for index, framework in enumerate(file.multi_kueue.external_frameworks):
            field = f"multiKueue.externalFrameworks[{index}].name"
            try:
                owner = external_owner(framework.name)
            except ValueError:
                raise _error(
                    source, field, f"Invalid value: {framework.name!r}: must be in 'kind.version.group' format"
                ) from None
            if owner in seen:
                raise _error(source, field, f"Duplicate value: {framework.name!r}")
            seen.add(owner)
    if file.metrics is not None and file.metrics.custom_labels:
        _check_custom_labels(file.metrics.custom_labels, source=source)


_CUSTOM_LABEL_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*$")
MAX_CUSTOM_LABELS = 20
MAX_CUSTOM_LABELS_PER_SOURCE_KIND = {"ClusterQueue": 6, "Cohort": 6, "LocalQueue": 6, "Workload": 2}
MAX_TRACKED_VALUES, MAX_TRACKED_WORKLOAD_VALUES = 16, 12


def _check_custom_labels(entries: list[_CustomLabel], *, source: str) -> None:
    """Kueue's checks of ``metrics.customLabels`` (pkg/config/validation.go validateCustomLabels): at most 20;
    each ``name`` matching ``^[a-zA-Z][a-zA-Z0-9_]*$``, not repeated; ``sourceLabelKey`` and
    ``sourceAnnotationKey`` not both, the one given (else the name) a label key; a ``sourceKind`` of
    ClusterQueue (the default), LocalQueue, Cohort (at most 6 labels each) or Workload (at most 2, each with 1 to
    12 ``trackedValues``; other kinds at most 16), no tracked value twice. Raises ManifestError naming the field."""
    path = "metrics.customLabels"
    if len(entries) > MAX_CUSTOM_LABELS:
        raise _error(source, path, f"Too many: {len(entries)}: must have at most {MAX_CUSTOM_LABELS} items")
    seen: set[str] = set()
    per_kind: dict[str, int] = {}
    for index, entry in enumerate(entries):
        at = f"{path}[{index}]"
        if not _CUSTOM_LABEL_NAME.match(entry.name):
            raise _error(source, f"{at}.name", f"Invalid value: {entry.name!r}: must match ^[a-zA-Z][a-zA-Z0-9_]*$")
        if entry.name in seen:
            raise _error(source, f"{at}.name", f"Duplicate value: {entry.name!r}")
        seen.add(entry.name)
        if entry.source_label_key and entry.source_annotation_key:
            raise _error(source, at, "Invalid value: sourceLabelKey and sourceAnnotationKey are mutually exclusive")
        key_field, key = next(
            (f, k)
            for f, k in (
                ("sourceLabelKey", entry.source_label_key),
                ("sourceAnnotationKey", entry.source_annotation_key),
                ("name", entry.name),
            )
            if k
        )
        if problems := labels.qualified_name_problems(key):
            raise _error(source, f"{at}.{key_field}", f"Invalid value: {key!r}: {'; '.join(problems)}")
        kind = entry.source_kind or "ClusterQueue"
        per_kind[kind] = per_kind.get(kind, 0) + 1
        tracked = entry.tracked_values
        if kind == "Workload":
            if not tracked:
                raise _error(
                    source, f"{at}.trackedValues", "Invalid value: must not be empty when sourceKind is 'Workload'"
                )
            if len(tracked) > MAX_TRACKED_WORKLOAD_VALUES:
                raise _error(
                    source,
                    f"{at}.trackedValues",
                    f"Invalid value: must not be greater than {MAX_TRACKED_WORKLOAD_VALUES} when sourceKind is "
                    "'Workload'",
                )
        elif len(tracked) > MAX_TRACKED_VALUES:
            raise _error(
                source, f"{at}.trackedValues", f"Too many: {len(tracked)}: must have at most {MAX_TRACKED_VALUES} items"
            )
        if len(set(tracked)) < len(tracked):
            raise _error(source, f"{at}.trackedValues", "Invalid value: must not contain duplicates")
    for kind in sorted(per_kind):
        limit = MAX_CUSTOM_LABELS_PER_SOURCE_KIND.get(kind)
        if limit is None:
            raise _error(source, path, f"Invalid value: unknown source kind: {kind}")
        if per_kind[kind] > limit:
            raise _error(
                source,
                path,
                f"Invalid value: too many custom labels for source kind {kind}: found {per_kind[kind]}, "
                f"expected <= {limit}",
            )


def _refuse_repeated_keys(text: str, *, source: str) -> None:
    """Refuse a mapping that gives one key twice, as Kueue's strict decoding of its file does (pkg/config
    config.go fromFile: ``serializer.EnableStrict``; PyYAML would keep the last value silently): the field is
    the repeated key's path, the problem Kubernetes' YAML decoder's ``line N: key "K" already set in map``."""
    seen_nodes: set[int] = set()

    def walk(node: yaml.Node, path: str) -> None:
        if id(node) in seen_nodes:  # an alias of a node already walked
            return
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = str(key_node.value)
                here = f"{path}.{key}" if path else key
                if key in keys:
                    problem = f"line {key_node.start_mark.line + 1}: key {json.dumps(key)} already set in map"
                    raise _error(source, here, problem)
                keys.add(key)
                walk(value_node, here)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, f"{path}[{index}]")

    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if document is not None:
            walk(document, "")


def _unsupported(value: Any, supported: list[str]) -> str:
    """Kubernetes' field.NotSupported wording: ``Unsupported value: "X": supported values: "A", "B"``."""
    return f"Unsupported value: {json.dumps(value)}: supported values: {', '.join(json.dumps(v) for v in supported)}"


def _value_at(raw: Any, field: str) -> Any:
    """The value at ``field`` (``a.b[0].c``) of the file's mapping ``raw`` (None when it has none)."""
    value = raw
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        if index:
            value = value[int(index)] if isinstance(value, list) and int(index) < len(value) else None
        else:
            value = value.get(name) if isinstance(value, dict) else None
    return value


def _enum_values(field: str) -> list[str]:
    """The values :class:`KueueConfiguration` allows at ``field`` (``a.b[0].c``), an enum's (a ``Literal``), in
    the order Kueue lists them; ``""``, which Kueue's defaults replace, is not listed."""
    kind: Any = KueueConfiguration
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        kind = _unwrap(kind, keep_list=bool(index))
        if index and typing.get_origin(kind) is list:
            kind = typing.get_args(kind)[0]
        elif isinstance(kind, type) and issubclass(kind, msgspec.Struct):
            kind = next((f.type for f in msgspec.structs.fields(kind) if f.encode_name == name), None)
        elif typing.get_origin(kind) is dict:
            kind = typing.get_args(kind)[1]
    kind = _unwrap(kind, keep_list=False)
    return [str(v) for v in typing.get_args(kind) if v != ""] if typing.get_origin(kind) is Literal else []


def _unwrap(kind: Any, *, keep_list: bool) -> Any:
    """``kind`` without ``| None`` (and, unless ``keep_list``, the item type of a list)."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    if not keep_list and typing.get_origin(kind) is list:
        kind = typing.get_args(kind)[0]
    return kind


def _duration(text: str, field: str, source: str) -> str:
    if not _DURATION.match(text.strip()):
        raise _error(source, field, f"{text!r} is not a duration (Go's format: 30s, 5m, 1h30m)")
    return text.strip()


def _zero(duration: str) -> bool:
    return not re.search(r"[1-9]", duration)


def _has(raw: dict[str, Any], dotted: str) -> bool:
    value: Any = raw
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def _error(source: str, field: str, problem: str) -> ManifestError:
    return ManifestError(kind="Configuration", name=source, field=field, problem=problem)
