"""Kueue's manager configuration file: parsed in Kueue's format, checked field by field, followed by the watcher."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kueue_es.events import codec, manager_config, models, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.events.manifests import ManifestError
from kueue_es.services.watcher.config_file import ConfigFile, load
from kueue_es.services.watcher.kinds import LOGGED_KINDS
from kueue_es.services.watcher.publishing import Publisher

MIRROR = Path("/work/.mirror/kubernetes-sigs+kueue/repo")
V1BETA2 = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
V1BETA1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"


def test_kueue_s_shipped_file_is_read_as_kueue_s_defaults() -> None:
    """config/components/manager/controller_manager_config.yaml as Kueue ships it (from the mirror when present)."""
    if MIRROR.is_dir():
        text = subprocess.run(
            ["git", "-C", str(MIRROR), "show", "HEAD:config/components/manager/controller_manager_config.yaml"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    else:
        text = V1BETA2 + "health: {healthProbeBindAddress: ':8081'}\nintegrations: {frameworks: [batch/job, pod]}\n"
    parsed = manager_config.parse(text, source="controller_manager_config.yaml")
    assert parsed.configuration == manager_config.parse(V1BETA2).configuration
    assert {"batch/job", "pod"} <= set(parsed.frameworks)


def test_the_settings_the_deciders_read() -> None:
    text = V1BETA2 + (
        "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n"
        "admissionFairSharing: {usageHalfLifeTime: 168h, usageSamplingInterval: 5m, resourceWeights: {cpu: 0, x/gpu: 2.5}}\n"
        "waitForPodsReady: {timeout: 5m, blockAdmission: true, requeuingStrategy: {timestamp: Creation, backoffLimitCount: 2}}\n"
        "resources:\n  quotaCheckStrategy: IgnoreUndeclared\n"
        "  transformations: [{input: nvidia.com/mig-1g.5gb, strategy: Replace, outputs: {example.com/mem: 5Gi}}]\n"
        "featureGates: {TASProfileMixed: false}\nmanageJobsWithoutQueueName: true\n"
        "integrations: {frameworks: [batch/job, ray.io/rayjob]}\n"
    )
    parsed = manager_config.parse(text)
    config = parsed.configuration
    assert config.fair_sharing is not None and config.fair_sharing.preemption_strategies == ["LessThanInitialShare"]
    assert config.admission_fair_sharing is not None
    assert config.admission_fair_sharing.resource_weights == {"cpu": "0", "x/gpu": "2.5"}
    wait = config.wait_for_pods_ready
    assert wait is not None and (wait.timeout, wait.block_admission, wait.recovery_timeout) == ("5m", True, None)
    assert (wait.requeuing_strategy.timestamp, wait.requeuing_strategy.backoff_limit_count) == ("Creation", 2)
    assert config.resources is not None and config.resources.quota_check_strategy == "IgnoreUndeclared"
    assert config.resources.transformations[0].outputs == {"example.com/mem": "5Gi"}
    assert config.feature_gates == {"TASProfileMixed": False}
    assert parsed.manage_jobs_without_queue_name and parsed.frameworks == ("batch/job", "ray.io/rayjob")
    # the same through the scenario files' Configuration (the one format both share)
    assert codec.decode(codec.encode(types.ConfigurationObserved(configuration=config))).configuration == config


def test_a_negative_transformation_output_is_an_allowance_the_file_may_give() -> None:
    """Kueue validates a transformation's strategy and input only (pkg/config/validation.go), and a negative
    output takes off what the others add (#14032): the watcher refused the file, so a cluster run of
    config/resource-transformation-allowance-spares-direct-request never started."""
    text = V1BETA2 + "resources: {transformations: [{input: x/credit, strategy: Replace, outputs: {x/gpu: '-1'}}]}\n"
    config = manager_config.parse(text).configuration
    assert config.resources is not None and config.resources.transformations[0].outputs == {"x/gpu": "-1"}


@pytest.mark.parametrize("weight", [".inf", ".nan"])
def test_a_resource_weight_must_be_finite(weight: str) -> None:
    text = V1BETA2 + f"admissionFairSharing: {{resourceWeights: {{cpu: {weight}}}}}\n"
    with pytest.raises(ValueError, match=r"admissionFairSharing.resourceWeights.cpu.*finite"):
        manager_config.parse(text)


def test_v1beta1_needs_enable() -> None:
    off = manager_config.parse(V1BETA1 + "fairSharing: {enable: false}\n").configuration
    assert off.fair_sharing is None
    assert off.wait_for_pods_ready is not None and not off.wait_for_pods_ready.enable
    on = manager_config.parse(V1BETA1 + "fairSharing: {enable: true}\nwaitForPodsReady: {enable: true}\n")
    assert on.configuration.fair_sharing is not None
    assert on.configuration.wait_for_pods_ready is not None and on.configuration.wait_for_pods_ready.enable


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (V1BETA2 + "fairSharing: {preemptionStrategy: []}\n", "fairSharing.preemptionStrategy", "unknown field"),
        (V1BETA2 + "waitForPodsReady: {timeout: 5m, enable: true}\n", "waitForPodsReady.enable", "only config.kueue.x-k8s.io/v1beta1"),
        (V1BETA1 + "resources: {quotaCheckStrategy: BlockUndeclared}\n", "resources.quotaCheckStrategy", "only config.kueue.x-k8s.io/v1beta2"),
        (V1BETA2 + "waitForPodsReady: {timeout: five minutes}\n", "waitForPodsReady.timeout", "is not a duration"),
        (V1BETA2 + "waitForPodsReady: {requeuingStrategy: {backoffBaseSeconds: -1}}\n", "waitForPodsReady.requeuingStrategy.backoffBaseSeconds", "greater than or equal to 0"),
        (V1BETA2 + "fairSharing: {preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]}\n", "fairSharing.preemptionStrategies", 'Unsupported value: ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]: supported values: "LessThanOrEqualToFinalShare", "LessThanInitialShare", "LessThanOrEqualToFinalShare,LessThanInitialShare"'),
        (V1BETA2 + "fairSharing: {preemptionStrategies: [Sometimes]}\n", "fairSharing.preemptionStrategies[0]", 'Unsupported value: "Sometimes": supported values: "LessThanOrEqualToFinalShare", "LessThanInitialShare"'),
        (V1BETA2 + "integrations: {frameworks: [batch/jobs]}\n", "integrations.frameworks[0]", 'Unsupported value: "batch/jobs": supported values: "batch/job", "deployment", "jobset.x-k8s.io/jobset",'),
        (V1BETA2 + "integrations: {frameworks: [pod, pod]}\n", "integrations.frameworks[1]", 'Duplicate value: "pod"'),
        (V1BETA2 + "integrations: {frameworks: [pod, sparkoperator.k8s.io/sparkapplication]}\n", "integrations.frameworks[1]", "enable the SparkApplicationIntegration feature gate"),
        (V1BETA2 + "integrations: {externalFrameworks: [Workflow.v1alpha1]}\n", "integrations.externalFrameworks[0]", "must be format, 'Kind.version.group.com'"),
        (V1BETA2 + "integrations: {externalFrameworks: [A.v1.x.io, A.v1.x.io]}\n", "integrations.externalFrameworks[1]", 'Duplicate value: "A.v1.x.io"'),
        (V1BETA2 + "resources: {transformations: [{input: a}, {input: a}]}\n", "resources.transformations[1].input", 'Duplicate value: "a"'),
        (V1BETA2 + "resources: {transformations: [{input: a, strategy: Drop}]}\n", "resources.transformations[0].strategy", 'Unsupported value: "Drop": supported values: "Retain", "Replace"'),
        (V1BETA2 + "waitForPodsReady: {requeuingStrategy: {timestamp: Now}}\n", "waitForPodsReady.requeuingStrategy.timestamp", 'Unsupported value: "Now": supported values: "Creation", "Eviction"'),
        (V1BETA2 + "resources: {transformations: [{input: a, outputs: {b: lots}}]}\n", "resources.transformations[0].outputs.b", "lots"),
        (V1BETA2 + "webhook: {port: high}\n", "webhook.port", "Expected"),
        (V1BETA2 + "admissionFairSharing: {usageHalfLifeTime: 1h, usageSamplingInterval: -1s}\n", "admissionFairSharing.usageSamplingInterval", "greater than 0"),
        (V1BETA2 + "objectRetentionPolicies: {workloads: {afterFinished: 1 hour}}\n", "objectRetentionPolicies.workloads.afterFinished", "is not a duration"),
        (V1BETA2 + "objectRetentionPolicies: {workloads: {afterDeactivatedByKueue: 5}}\n", "objectRetentionPolicies.workloads.afterDeactivatedByKueue", "Expected `str | null`"),
        (V1BETA2 + "objectRetentionPolicies: {workloads: {afterDeactivatedByKueue: -1m}}\n", "objectRetentionPolicies.workloads.afterDeactivatedByKueue", "greater than or equal to 0"),
        (V1BETA2 + "objectRetentionPolicies: {workloads: {afterFinish: 1h}}\n", "objectRetentionPolicies.workloads.afterFinish", "unknown field"),
        ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Configuration\n", "apiVersion/kind", "is not Kueue's Configuration"),
        (V1BETA2 + "---\n" + V1BETA2, "", "one document"),
    ],
)  # fmt: skip
def test_bad_files_are_refused_naming_the_field(text: str, field: str, problem: str) -> None:
    with pytest.raises(ManifestError) as caught:
        manager_config.parse(text, source="cfg.yaml")
    assert (caught.value.kind, caught.value.name, caught.value.field) == ("Configuration", "cfg.yaml", field)
    assert problem in caught.value.problem


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (V1BETA2 + "fairSharing: {}\n", "fairSharing.preemptionStrategies", "Required value: must be specified"),
        (V1BETA2 + "fairSharing: {preemptionStrategies: []}\n", "fairSharing.preemptionStrategies", "Required value: must be specified"),
        (V1BETA2 + "resources: {quotaCheckStrategy: IgnoreUndeclared, excludeResourcePrefixes: [x/]}\n", "resources.quotaCheckStrategy", 'Invalid value: "IgnoreUndeclared": excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared'),
        (V1BETA2 + "integrations: {frameworks: [batch/job], externalFrameworks: [Job.v1.batch]}\n", "integrations.externalFrameworks[0]", 'Duplicate value: "Job.v1.batch"'),
        (V1BETA2 + "integrations: {externalFrameworks: [Job.v1.batch]}\n", "integrations.externalFrameworks[0]", 'Duplicate value: "Job.v1.batch"'),
        (V1BETA2 + "integrations: {frameworks: [pod, deployment], externalFrameworks: [Workflow.v1.argoproj.io, Deployment.v1.apps]}\n", "integrations.externalFrameworks[1]", 'Duplicate value: "Deployment.v1.apps"'),
        (V1BETA2 + "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\nwaitForPodsReady: {timeout: 5m}\nfairSharing: {}\n", "fairSharing", 'line 5: key "fairSharing" already set in map'),
        (V1BETA2 + "waitForPodsReady:\n  timeout: 5m\n  blockAdmission: true\n  timeout: 10m\n", "waitForPodsReady.timeout", 'line 6: key "timeout" already set in map'),
        (V1BETA2 + "integrations:\n  frameworks: [pod]\n  externalFrameworks:\n  - {a: 1, a: 2}\n", "integrations.externalFrameworks[0].a", 'key "a" already set in map'),
        ('{"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "kind": "Configuration"}', "kind", 'line 1: key "kind" already set in map'),
    ],
)  # fmt: skip
def test_files_kueue_refuses_to_start_with(text: str, field: str, problem: str) -> None:
    """Kueue pkg/config/validation.go (validateFairSharing: v1beta2's defaults do not fill the strategies;
    validateQuotaCheckStrategy, gate QuotaCheckStrategy on by default; validateIntegrations compares the GVKs of
    frameworks and externalFrameworks, ``batch/job`` the default) and config.go fromFile's strict decoding, which
    refuses a key given twice: kueue-es accepted each of these (the last value of a repeated key won)."""
    with pytest.raises(ManifestError) as caught:
        manager_config.parse(text, source="cfg.yaml")
    assert (caught.value.kind, caught.value.name, caught.value.field) == ("Configuration", "cfg.yaml", field)
    assert problem in caught.value.problem


def test_what_kueue_s_defaults_fill_in_is_accepted() -> None:
    """apis/config/v1beta2 defaults.go (cmp.Or): a zero usageSamplingInterval is 5m and an empty transformation
    strategy Retain, before validation; v1beta1's ``enable: true`` gives fair sharing both strategies
    (configuration_conversion.go); with the gate QuotaCheckStrategy off its check is not made. kueue-es refused
    the first two ("must be greater than 0", an enum error)."""
    afs = manager_config.parse(
        V1BETA2 + "admissionFairSharing: {usageHalfLifeTime: 10m, usageSamplingInterval: 0s}\n"
    ).configuration.admission_fair_sharing
    assert afs is not None and (afs.usage_half_life_time, afs.usage_sampling_interval) == ("10m", "5m")
    resources = manager_config.parse(
        V1BETA2 + "resources: {transformations: [{input: x/credit, strategy: '', outputs: {cpu: 1}}]}\n"
    ).configuration.resources
    assert resources is not None and resources.transformations[0].strategy == "Retain"
    v1beta1 = manager_config.parse(V1BETA1 + "fairSharing: {enable: true, preemptionStrategies: []}\n")
    assert v1beta1.configuration.fair_sharing == models.FairSharingConfig(
        preemption_strategies=["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    )
    ungated = V1BETA2 + "resources: {quotaCheckStrategy: IgnoreUndeclared, excludeResourcePrefixes: [x/]}\n"
    config = manager_config.parse(ungated, feature_gates="QuotaCheckStrategy=false").configuration
    assert config.resources is not None and config.resources.exclude_resource_prefixes == ["x/"]
    # an external framework of a kind no listed framework manages is fine
    text = V1BETA2 + "integrations: {frameworks: [pod], externalFrameworks: [Job.v1.batch]}\n"
    assert manager_config.parse(text).external_owners == {("batch/v1", "Job")}


def test_the_frameworks_kinds_are_the_webhooks() -> None:
    """The kind of each of Kueue's integrations, which externalFrameworks are compared with, is the one the
    webhook serves and the watcher watches."""
    from kueue_es.jobframework import webhooks

    served = {t.framework: (f"{t.group}/{t.version}" if t.group else t.version, t.kind) for t in webhooks.targets()}
    assert served == manager_config.FRAMEWORK_OWNERS


def test_object_retention_policies_reach_the_configuration_as_written() -> None:
    """``objectRetentionPolicies.workloads`` (Kueue's setup_object_retention_policy example) is carried by the
    ConfigurationObserved for the dispatcher; without the section nothing is (Kueue's default: kept for good)."""
    text = (
        V1BETA2 + "objectRetentionPolicies:\n  workloads:\n    afterFinished: 1m\n    afterDeactivatedByKueue: 1m30s\n"
    )
    policies = manager_config.parse(text).configuration.object_retention_policies
    assert policies == models.ObjectRetentionPolicies(
        workloads=models.WorkloadRetentionPolicy(after_finished="1m", after_deactivated_by_kueue="1m30s")
    )
    only_finished = manager_config.parse(V1BETA2 + "objectRetentionPolicies: {workloads: {afterFinished: 0s}}\n")
    assert only_finished.configuration.object_retention_policies == models.ObjectRetentionPolicies(
        workloads=models.WorkloadRetentionPolicy(after_finished="0s")
    )
    assert manager_config.parse(V1BETA2).configuration.object_retention_policies is None
    # the same in Kueue's v1beta1 file
    assert manager_config.parse(text.replace("v1beta2", "v1beta1")).configuration.object_retention_policies == policies
    # a Configuration without the section encodes as before (its ConfigurationObserved keeps its bytes)
    assert b"objectRetentionPolicies" not in codec.encode(
        types.ConfigurationObserved(configuration=manager_config.parse(V1BETA2).configuration)
    )


def test_the_alpha_spark_integration_needs_its_feature_gate() -> None:
    """Kueue sets SparkApplication up only with SparkApplicationIntegration on (its CanSupportIntegration)."""
    text = V1BETA2 + "integrations: {frameworks: [sparkoperator.k8s.io/sparkapplication]}\n"
    parsed = manager_config.parse(text, feature_gates="SparkApplicationIntegration=true")
    assert parsed.frameworks == ("sparkoperator.k8s.io/sparkapplication",)
    gated_in_file = text + "featureGates: {SparkApplicationIntegration: true}\n"
    assert manager_config.parse(gated_in_file).frameworks == ("sparkoperator.k8s.io/sparkapplication",)


def test_external_frameworks_are_kinds_run_by_outside_controllers() -> None:
    """integrations.externalFrameworks ``Kind.version.group`` (Kueue configuration_types.go, validation.go:
    schema.ParseKindArg), read as (apiVersion, kind) for the pods they own."""
    text = (
        V1BETA2
        + "integrations: {externalFrameworks: [Workflow.v1alpha1.argoproj.io, AppWrapper.v1beta2.workload.codeflare.dev]}\n"
    )
    parsed = manager_config.parse(text)
    assert parsed.external_frameworks == ("Workflow.v1alpha1.argoproj.io", "AppWrapper.v1beta2.workload.codeflare.dev")
    assert parsed.external_owners == {
        ("argoproj.io/v1alpha1", "Workflow"),
        ("workload.codeflare.dev/v1beta2", "AppWrapper"),
    }
    assert manager_config.parse(V1BETA2).external_owners == frozenset()


def test_the_keys_a_workload_copies_of_its_job() -> None:
    """integrations.labelKeysToCopy, and with the gate CustomMetricLabels the Workload sources of
    metrics.customLabels: an annotation key, else a label key, else the entry's name; entries of sourceKind
    ClusterQueue (the default) copy nothing (Kueue main.go getLabelsAndAnnotationsToCopy,
    custom_labels.go WorkloadCustomLabelSources; job_controller_test.go "Job controller with CustomMetricLabels")."""
    text = V1BETA2 + (
        "integrations: {labelKeysToCopy: [toCopyKey]}\n"
        "metrics:\n"
        "  customLabels:\n"
        "  - {name: custom_label_key, sourceLabelKey: job-label, sourceKind: Workload, trackedValues: [a]}\n"
        "  - {name: custom_annotation_key, sourceAnnotationKey: job-annotation, sourceKind: Workload,"
        " trackedValues: [a, b]}\n"
        "  - {name: cq_label, sourceLabelKey: cq-only}\n"
    )
    gated = manager_config.parse(text, feature_gates="CustomMetricLabels=true")
    assert gated.label_keys_to_copy == {"toCopyKey", "job-label"}
    assert gated.annotations_to_copy == {"job-annotation"}
    assert gated.not_done and "customLabels" in gated.not_done[0]
    plain = manager_config.parse(text)
    assert (plain.label_keys_to_copy, plain.annotations_to_copy) == ({"toCopyKey"}, frozenset())
    assert plain.not_done == ()
    named = V1BETA2 + "metrics:\n  customLabels:\n  - {name: team, sourceKind: Workload, trackedValues: [ml]}\n"
    assert manager_config.parse(named, feature_gates="CustomMetricLabels=true").label_keys_to_copy == {"team"}


@pytest.mark.parametrize(
    ("entries", "field", "problem"),
    [
        ("- {name: 1bad-name}", "customLabels[0].name", "must match ^[a-zA-Z][a-zA-Z0-9_]*$"),
        ("- {name: team}\n  - {name: team}", "customLabels[1].name", "Duplicate value: 'team'"),
        ("- {name: t, sourceLabelKey: a, sourceAnnotationKey: b}", "customLabels[0]", "mutually exclusive"),
        ("- {name: t, sourceLabelKey: 'bad key'}", "customLabels[0].sourceLabelKey", "Invalid value: 'bad key'"),
        ("- {name: w, sourceKind: Workload}", "customLabels[0].trackedValues", "must not be empty"),
        ("- {name: t, trackedValues: [a, a]}", "customLabels[0].trackedValues", "must not contain duplicates"),
        ("- {name: t, sourceKind: Job}", "customLabels", "unknown source kind: Job"),
        (
            "\n  ".join(f"- {{name: w{i}, sourceKind: Workload, trackedValues: [a]}}" for i in range(3)),
            "customLabels",
            "too many custom labels for source kind Workload: found 3, expected <= 2",
        ),
    ],
)
def test_custom_metric_labels_are_checked_as_kueue_checks_them(entries: str, field: str, problem: str) -> None:
    """Kueue pkg/config/validation.go validateCustomLabels (validation_test.go): the watcher refuses the file."""
    text = V1BETA2 + "metrics:\n  customLabels:\n  " + entries + "\n"
    with pytest.raises(ManifestError) as refused:
        manager_config.parse(text, feature_gates="CustomMetricLabels=true")
    assert f"metrics.{field}" in str(refused.value) and problem in str(refused.value)


def test_feature_gates_from_the_flag_not_together_with_the_file() -> None:
    flag = "PartialAdmission=false, MultiKueue=true"
    assert manager_config.parse(V1BETA2, feature_gates=flag).configuration.feature_gates == {
        "MultiKueue": True,
        "PartialAdmission": False,
    }
    with pytest.raises(ManifestError, match="cannot both be specified"):
        manager_config.parse(V1BETA2 + "featureGates: {MultiKueue: true}\n", feature_gates="PartialAdmission=false")
    with pytest.raises(ManifestError, match="is not Gate=true"):
        manager_config.parse(V1BETA2, feature_gates="MultiKueue=yes")


@pytest.mark.parametrize(
    ("gates", "problem"),
    [
        ("featureGates: {NoSuchGate: true}", "unrecognized feature gate: NoSuchGate"),
        ("featureGates: {PartialAdmission: true, Zeta: false}", "unrecognized feature gate: Zeta"),
        (
            "featureGates: {TLSOptions: false}",
            "cannot set feature gate TLSOptions to false, feature is locked to true",
        ),
        (
            "featureGates: {ManagedJobsNamespaceSelectorAlwaysRespected: false}",
            "cannot set feature gate ManagedJobsNamespaceSelectorAlwaysRespected to false, feature is locked to true",
        ),
    ],
)
def test_a_gate_kueue_does_not_know_or_a_locked_one_changed_is_refused(gates: str, problem: str) -> None:
    """Kueue's component-base feature gate refuses a name it does not know and a GA gate set against its lock
    (LoadAndValidateFeatureGates: Kueue exits at start); from the flag too."""
    with pytest.raises(ManifestError) as refused:
        manager_config.parse(V1BETA2 + gates + "\n", source="config.yaml")
    assert str(refused.value) == f"Configuration config.yaml: field featureGates: {problem}"
    with pytest.raises(ManifestError, match="unrecognized feature gate: NoSuchGate"):
        manager_config.parse(V1BETA2, feature_gates="NoSuchGate=true")
    ok = manager_config.parse(V1BETA2 + "featureGates: {TLSOptions: true, FailureRecoveryPolicy: false}\n")
    assert ok.configuration.feature_gates == {"FailureRecoveryPolicy": False, "TLSOptions": True}


# Kueue pkg/config/validation_test.go TestLoadAndValidateFeatureGates: a gate on whose dependencies are off
# is refused (pkg/features/kube_features.go defaultFeatureGateDependencies).

TAS_DEPENDENTS_OFF = (
    "TopologyAwareScheduling=false,TASProfileMixed=false,TASHandleOverlappingFlavors=false,"
    "TASFailedNodeReplacement=false,TASFailedNodeReplacementFailFast=false,TASReplaceNodeOnPodTermination=false,"
    "TASReplaceNodeOnNodeTaints=false,TASMultiLayerTopology=false"
)


def _gate_problem(flag: str) -> str | None:
    try:
        manager_config.parse(V1BETA2, feature_gates=flag)
    except ManifestError as err:
        return str(err).partition("featureGates: ")[2]
    return None


def test_tas_recompute_requires_topology_aware_scheduling() -> None:
    """Kueue PR #14237: 'TASRecomputeAssignmentWithinSchedulingCycle requires TopologyAwareScheduling'; on by
    default, so TopologyAwareScheduling off needs it turned off too ('cannot set TAS profile with TAS disabled'
    and the other cases now list it)."""
    assert _gate_problem(TAS_DEPENDENTS_OFF) == (
        "TASRecomputeAssignmentWithinSchedulingCycle is enabled, but depends on features that are disabled: "
        "[TopologyAwareScheduling]"
    )
    assert _gate_problem(TAS_DEPENDENTS_OFF + ",TASRecomputeAssignmentWithinSchedulingCycle=false") is None
    assert _gate_problem(
        TAS_DEPENDENTS_OFF.replace("TASProfileMixed=false", "TASProfileMixed=true")
        + ",TASRecomputeAssignmentWithinSchedulingCycle=false"
    ) == ("TASProfileMixed is enabled, but depends on features that are disabled: [TopologyAwareScheduling]")


@pytest.mark.parametrize(
    ("flag", "problem"),
    [
        (
            "TASReplaceNodeDueToNotReadyOverFixedTime=true,TASFailedNodeReplacement=false,"
            "TASFailedNodeReplacementFailFast=false,TASReplaceNodeOnPodTermination=false",
            "TASReplaceNodeDueToNotReadyOverFixedTime is enabled, but depends on features that are disabled: "
            "[TASFailedNodeReplacement]",
        ),
        (
            "TASFailedNodeReplacement=false",
            "TASFailedNodeReplacementFailFast is enabled, but depends on features that are disabled: "
            "[TASFailedNodeReplacement]; TASReplaceNodeOnPodTermination is enabled, but depends on features "
            "that are disabled: [TASFailedNodeReplacement]",
        ),
        (
            "KueueDRAIntegration=false,KueueDRAIntegrationExtendedResource=false",
            "KueueDRAIntegrationPartitionableDevices is enabled, but depends on features that are disabled: "
            "[KueueDRAIntegration]",
        ),
        (
            "KueueDRAIntegration=false,KueueDRAIntegrationExtendedResource=false,"
            "KueueDRAIntegrationPartitionableDevices=false",
            None,
        ),
        ("TASBalancedPlacement=true", None),
        (
            "UnadmittedWorkloadsObservability=false,UnadmittedWorkloadsExplicitStatus=true",
            "UnadmittedWorkloadsExplicitStatus is enabled, but depends on features that are disabled: "
            "[UnadmittedWorkloadsObservability]",
        ),
        (
            "FlavorFungibility=false",
            "FlavorFungibilityPreserveScanProgress is enabled, but depends on features that are disabled: "
            "[FlavorFungibility]",
        ),
    ],
)
def test_a_gate_needs_the_gates_it_depends_on(flag: str, problem: str | None) -> None:
    assert _gate_problem(flag) == problem


async def configs_on(bus: MemoryBus) -> list[tuple[str, types.Event]]:
    found = []
    for seq in range(1, await bus.last_seq() + 1):
        message = await bus.get(seq)
        found.append((message.headers["Nats-Msg-Id"], codec.decode(message.data)))
    return found


async def test_the_file_followed_each_change_once(tmp_path: Path) -> None:
    """At start one ConfigurationObserved; a comment changes nothing; fair sharing on, then off again (back to
    the first settings: a new Msg-Id, so JetStream does not drop it as a duplicate); an invalid file is an
    ObjectRejected naming the field and the last valid settings stay; a restart with the same file publishes
    nothing."""
    path = tmp_path / "controller_manager_config.yaml"
    path.write_text(V1BETA2)
    bus = MemoryBus()
    follower = ConfigFile(path=path, initial=load(path), publisher=Publisher(bus=bus, kinds=LOGGED_KINDS))
    await follower.start()
    for text in (
        V1BETA2 + "# a comment\n",
        V1BETA2 + "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n",
        V1BETA2 + "fairSharing: {preemptionStrategies: [Never]}\n",
        V1BETA2,
    ):
        path.write_text(text)
        await follower.check()
    await follower.check()
    found = await configs_on(bus)
    kinds = [type(event).__name__ for _, event in found]
    assert kinds == ["ConfigurationObserved", "ConfigurationObserved", "ObjectRejected", "ConfigurationObserved"]
    observed = [event for _, event in found if isinstance(event, types.ConfigurationObserved)]
    assert [o.configuration.fair_sharing is not None for o in observed] == [False, True, False]
    assert len({msg_id for msg_id, _ in found}) == 4
    rejected = found[2][1]
    assert isinstance(rejected, types.ObjectRejected) and rejected.field == "fairSharing.preemptionStrategies[0]"

    again = ConfigFile(path=path, initial=load(path), publisher=Publisher(bus=bus, kinds=LOGGED_KINDS))
    for seq in range(1, await bus.last_seq() + 1):
        again.learn(await bus.get(seq))
    await again.start()
    assert len(await configs_on(bus)) == 4


async def test_without_a_file_only_a_leftover_configuration_is_replaced(tmp_path: Path) -> None:
    bus = MemoryBus()
    defaults = ConfigFile(path=None, initial=load(None), publisher=Publisher(bus=bus, kinds=LOGGED_KINDS))
    await defaults.start()
    assert await bus.last_seq() == 0  # a fresh log holds Kueue's defaults already
    path = tmp_path / "config.yaml"
    path.write_text(V1BETA2 + "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n")
    earlier = ConfigFile(path=path, initial=load(path), publisher=Publisher(bus=bus, kinds=LOGGED_KINDS))
    await earlier.start()
    later = ConfigFile(path=None, initial=load(None), publisher=Publisher(bus=bus, kinds=LOGGED_KINDS))
    later.learn(await bus.get(1))
    await later.start()
    [_, (_, back)] = await configs_on(bus)
    assert isinstance(back, types.ConfigurationObserved) and back.configuration.fair_sharing is None


@pytest.mark.parametrize(
    "command",
    [
        ["up", "--emulator", "--dir", "{home}"],
        ["demo", "--dir", "{home}"],
        ["service", "watcher", "--nats", "nats://127.0.0.1:9"],
    ],
)
def test_a_bad_file_stops_the_command_before_anything_starts(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from kueue_es.cli import main

    bad = tmp_path / "controller_manager_config.yaml"
    bad.write_text(V1BETA2 + "fairSharingg: {}\n")
    home = tmp_path / "home"
    assert main([arg.format(home=home) for arg in command] + ["--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"invalid configuration: Configuration {bad}: field fairSharingg: unknown field" in err
    assert not home.exists()


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (V1BETA2 + "managedJobsNamespaceSelector: {}\n", "managedJobsNamespaceSelector", 'should not match the "kube-system" namespace'),
        (V1BETA2 + "managedJobsNamespaceSelector:\n  matchExpressions:\n  - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}\n", "managedJobsNamespaceSelector", 'should not match the "kueue-system" namespace'),
        (V1BETA2 + "namespace: kueue\nmanagedJobsNamespaceSelector:\n  matchExpressions:\n  - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kueue-system]}\n", "managedJobsNamespaceSelector", 'should not match the "kueue" namespace'),
        (V1BETA2 + "managedJobsNamespaceSelector:\n  matchExpressions:\n  - {key: team, operator: In}\n", "managedJobsNamespaceSelector.matchExpressions[0].values", "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        (V1BETA2 + "managedJobsNamespaceSelector:\n  matchExpressions:\n  - {key: team, operator: Exists, values: [a]}\n", "managedJobsNamespaceSelector.matchExpressions[0].values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
        (V1BETA2 + "managedJobsNamespaceSelector:\n  matchExpressions:\n  - {key: 'bad key', operator: Exists}\n", "managedJobsNamespaceSelector.matchExpressions[0].key", "not a qualified name"),
        (V1BETA2 + "managedJobsNamespaceSelector:\n  matchLabels: {team: 'a b'}\n", "managedJobsNamespaceSelector.matchLabels", "not a valid label value"),
        (V1BETA2 + "internalCertManagement: {enable: true, webhookServiceName: 9-service}\n", "internalCertManagement.webhookServiceName", "a DNS-1035 label"),
        (V1BETA2 + "internalCertManagement: {enable: true, webhookSecretName: Secret}\n", "internalCertManagement.webhookSecretName", "RFC 1123 subdomain"),
        (V1BETA2 + "visibilityServer: {bindAddress: localhost}\n", "visibilityServer.bindAddress", "must be a valid IP address"),
        (V1BETA2 + "visibilityServer: {bindPort: 70000}\n", "visibilityServer.bindPort", "must be a valid port number (1-65535)"),
        (V1BETA2 + "tls: {minVersion: VersionTLS13, cipherSuites: [TLS_AES_128_GCM_SHA256]}\n", "tls.cipherSuites", "may not be specified when `minVersion` is 'VersionTLS13'"),
        (V1BETA2 + "multiKueue: {externalFrameworks: [{name: Workflow}]}\n", "multiKueue.externalFrameworks[0].name", "must be in 'kind.version.group' format"),
        (V1BETA2 + "multiKueue: {externalFrameworks: [{name: Workflow.v1alpha1.argoproj.io}, {name: Workflow.v1alpha1.argoproj.io}]}\n", "multiKueue.externalFrameworks[1].name", "Duplicate value"),
    ],
)  # fmt: skip
def test_kueue_s_configuration_checks(text: str, field: str, problem: str) -> None:
    """pkg/config/validation.go: managedJobsNamespaceSelector a valid selector that leaves out kube-system and
    Kueue's own namespace (``namespace``, kueue-system unless set), and the process sections' rules."""
    with pytest.raises(ManifestError) as caught:
        manager_config.parse(text, source="cfg.yaml")
    assert (caught.value.kind, caught.value.name, caught.value.field) == ("Configuration", "cfg.yaml", field)
    assert problem in caught.value.problem


def test_the_default_selector_leaves_out_the_configured_namespace() -> None:
    """defaults.go: without managedJobsNamespaceSelector, Kueue manages every namespace but kube-system and its
    own; kueue-es kept kueue-system out whatever ``namespace`` said. Valid selectors pass as written."""
    assert manager_config.parse(V1BETA2).managed_jobs_namespace_selector is None  # the built-in default
    moved = manager_config.parse(V1BETA2 + "namespace: kueue\n").managed_jobs_namespace_selector
    assert moved is not None
    assert not moved.matches({"kubernetes.io/metadata.name": "kueue"})
    assert not moved.matches({"kubernetes.io/metadata.name": "kube-system"})
    assert moved.matches({"kubernetes.io/metadata.name": "kueue-system"})
    selected = manager_config.parse(
        V1BETA2 + "managedJobsNamespaceSelector:\n  matchLabels: {kueue: enabled}\n"
        "internalCertManagement: {enable: true, webhookServiceName: svc, webhookSecretName: a.b}\n"
        "visibilityServer: {bindAddress: '::', bindPort: 8082}\n"
    )
    assert selected.managed_jobs_namespace_selector == models.LabelSelector(match_labels={"kueue": "enabled"})


@pytest.mark.parametrize(
    "command",
    [["service", "webhook", "--webhook-port", "0", "--cert-dir", "{home}"]],
)
def test_a_selector_of_kube_system_stops_the_webhook_before_it_serves(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``kueue-es service webhook --config``: a managedJobsNamespaceSelector that selects kube-system would gate
    the cluster's own pods; Kueue refuses to start with it (validateManagedJobsNamespaceSelector), and so does
    kueue-es now (before, the webhook served with it; ``demo`` and ``up`` read the file the same way)."""
    from kueue_es.cli import main

    bad = tmp_path / "controller_manager_config.yaml"
    bad.write_text(V1BETA2 + "managedJobsNamespaceSelector:\n  matchLabels: {}\n")
    home = tmp_path / "home"
    assert main([arg.format(home=home) for arg in command] + ["--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert (
        f"invalid configuration: Configuration {bad}: field managedJobsNamespaceSelector: should not match the "
        '"kube-system" namespace'
    ) in err
    assert not home.exists()
