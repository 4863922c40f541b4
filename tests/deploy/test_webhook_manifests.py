"""deploy/: the webhook's configurations, Deployment, Service and RBAC agree with the server, and with Kueue.

The configurations are generated (``kueue-es deploy webhooks``) from the kinds the server serves, so the
file must be what the generator writes; each webhook has Kueue's name, path, operations, failurePolicy
and sideEffects (config/components/webhook/manifests.yaml); the Deployment's flags name the Service,
Secret and configurations the manifests define; deploy/certmanager swaps the internal certificate
management for cert-manager's Certificate and CA injection.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import kubernetes_validate
import pytest
import yaml

from kueue_es.jobframework import core_webhooks, webhooks
from kueue_es.services.webhook import manifests
from tests.deploy.manifests import CERTMANAGER, DEPLOY, find

CONFIGURATIONS = DEPLOY / "base" / "webhook-configurations.yaml"

#: Kueue's own entries for the kinds kueue-es has always served (config/components/webhook/manifests.yaml).
KUEUE = {
    "mjob.kb.io": ("/mutate-batch-v1-job", ["batch"], ["v1"], ["CREATE"], ["jobs"]),
    "vjob.kb.io": ("/validate-batch-v1-job", ["batch"], ["v1"], ["CREATE", "UPDATE"], ["jobs"]),
    "mpod.kb.io": ("/mutate--v1-pod", [""], ["v1"], ["CREATE"], ["pods"]),
    "vpod.kb.io": ("/validate--v1-pod", [""], ["v1"], ["CREATE", "UPDATE"], ["pods"]),
    "mjobset.kb.io": (
        "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        ["jobset.x-k8s.io"],
        ["v1alpha2"],
        ["CREATE"],
        ["jobsets"],
    ),
    "vjobset.kb.io": (
        "/validate-jobset-x-k8s-io-v1alpha2-jobset",
        ["jobset.x-k8s.io"],
        ["v1alpha2"],
        ["CREATE", "UPDATE"],
        ["jobsets"],
    ),
    "mpytorchjob.kb.io": ("/mutate-kubeflow-org-v1-pytorchjob", ["kubeflow.org"], ["v1"], ["CREATE"], ["pytorchjobs"]),
    "vpytorchjob.kb.io": (
        "/validate-kubeflow-org-v1-pytorchjob",
        ["kubeflow.org"],
        ["v1"],
        ["CREATE", "UPDATE"],
        ["pytorchjobs"],
    ),
    "mworkload.kb.io": (
        "/mutate-kueue-x-k8s-io-v1beta2-workload",
        ["kueue.x-k8s.io"],
        ["v1beta2"],
        ["CREATE"],
        ["workloads"],
    ),
    "vworkload.kb.io": (
        "/validate-kueue-x-k8s-io-v1beta2-workload",
        ["kueue.x-k8s.io"],
        ["v1beta2"],
        ["CREATE", "UPDATE"],
        ["workloads", "workloads/status"],
    ),
    # Kueue's webhooks of its own kinds (pkg/webhooks/*.go kubebuilder markers)
    **{
        f"{'m' if verb == 'mutate' else 'v'}{kind.lower()}.kb.io": (
            f"/{verb}-kueue-x-k8s-io-v1beta2-{kind.lower()}",
            ["kueue.x-k8s.io"],
            ["v1beta2"],
            ["CREATE"] if verb == "mutate" else ["CREATE", "UPDATE"],
            [f"{kind.lower()}s"],
        )
        for kind, verb in (
            ("ClusterQueue", "mutate"),
            ("ResourceFlavor", "mutate"),
            ("ClusterQueue", "validate"),
            ("Cohort", "validate"),
            ("ResourceFlavor", "validate"),
        )
    },
}
#: Kueue's Workload webhooks, served besides the job kinds' (jobframework/workload_webhook.py).
WORKLOAD_HOOKS = ("mworkload.kb.io", "vworkload.kb.io")
#: Kueue's webhooks of its ClusterQueues, Cohorts and ResourceFlavors (jobframework/core_webhooks.py).
CORE_HOOKS = (
    "mclusterqueue.kb.io",
    "mresourceflavor.kb.io",
    "vclusterqueue.kb.io",
    "vcohort.kb.io",
    "vresourceflavor.kb.io",
)


def configuration(kind: str) -> dict[str, Any]:
    (found,) = [d for d in yaml.safe_load_all(CONFIGURATIONS.read_text()) if d and d["kind"] == kind]
    return found


def test_the_configurations_are_generated() -> None:
    assert CONFIGURATIONS.read_text() == manifests.render(), "run: kueue-es deploy webhooks -o " + str(
        CONFIGURATIONS.relative_to(DEPLOY.parent)
    )


@pytest.mark.parametrize(
    ("kind", "verb"), [("MutatingWebhookConfiguration", "mutate"), ("ValidatingWebhookConfiguration", "validate")]
)
@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
def test_every_served_kind_has_a_webhook_the_server_answers(kind: str, verb: str) -> None:
    hooks = [h for h in configuration(kind)["webhooks"] if h["name"] not in WORKLOAD_HOOKS + CORE_HOOKS]
    served = {t.kind for t in webhooks.targets()}
    assert len(hooks) == len(served)
    for hook in hooks:
        path = hook["clientConfig"]["service"]["path"]
        found = webhooks.target_of_path(path)
        assert found is not None and found[0] == verb, path
        target = found[1]
        (rule,) = hook["rules"]
        assert rule["apiGroups"] == [target.group] and rule["apiVersions"] == [target.version]
        assert rule["resources"] == [target.plural]
        assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert (
            hook["clientConfig"]["service"]["name"] == find("Service", "kueue-es-webhook-service")["metadata"]["name"]
        )
        assert hook["clientConfig"]["service"]["namespace"] == "kueue-es"
        (expression,) = hook["namespaceSelector"]["matchExpressions"]
        assert expression["key"] == "kubernetes.io/metadata.name" and expression["operator"] == "NotIn"
        assert {"kube-system", "kueue-es"} <= set(expression["values"])
        served.discard(target.kind)
    assert not served


def test_kueues_webhooks_of_its_own_kinds_are_there_and_served() -> None:
    """mclusterqueue, mresourceflavor, vclusterqueue, vcohort and vresourceflavor, as Kueue ships them
    (failurePolicy Fail, sideEffects None), each at a path the server answers with the webhook of that name, and
    no namespaceSelector (their kinds are cluster-scoped)."""
    hooks = {
        h["name"]: (kind, h)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for h in configuration(kind)["webhooks"]
    }
    for name in CORE_HOOKS:
        kind, hook = hooks[name]
        assert (kind == "MutatingWebhookConfiguration") == name.startswith("m"), name
        served = core_webhooks.hook_of_path(hook["clientConfig"]["service"]["path"])
        assert served is not None and served.name == name
        assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"] and "namespaceSelector" not in hook
        assert hook["clientConfig"]["service"]["name"] == "kueue-es-webhook-service"
    assert not [n for n in hooks if n.endswith(("localqueue.kb.io", "admissioncheck.kb.io", "mcohort.kb.io"))]


def test_webhooks_are_kueues() -> None:
    hooks = {
        h["name"]: h
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for h in configuration(kind)["webhooks"]
    }
    for name, (path, groups, versions, operations, resources) in KUEUE.items():
        hook = hooks[name]
        (rule,) = hook["rules"]
        assert hook["clientConfig"]["service"]["path"] == path
        assert (rule["apiGroups"], rule["apiVersions"], rule["operations"], rule["resources"]) == (
            groups,
            versions,
            operations,
            resources,
        ), name


def test_the_deployment_runs_the_webhook_with_internal_certificates() -> None:
    from kueue_es.cli import _parser

    deployment = find("Deployment", "kueue-es-webhook")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args = _parser().parse_args(container["args"])
    assert (args.name, args.internal_cert_management, args.webhook_host) == ("webhook", True, "0.0.0.0")
    assert args.nats is None  # it needs no NATS
    assert args.webhook_secret_name == find("Secret", "kueue-es-webhook-server-cert")["metadata"]["name"]
    assert args.webhook_service_name == find("Service", "kueue-es-webhook-service")["metadata"]["name"]
    assert args.mutating_webhook_configuration == configuration("MutatingWebhookConfiguration")["metadata"]["name"]
    assert args.validating_webhook_configuration == configuration("ValidatingWebhookConfiguration")["metadata"]["name"]
    (port,) = container["ports"]
    assert port["containerPort"] == args.webhook_port == 9443
    service = find("Service", "kueue-es-webhook-service")
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port["name"]}]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "webhook", "scheme": "HTTPS"}
    # the certificates are written where the pod can write: an emptyDir, under a read-only root
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert str(args.cert_dir).startswith("/tmp/") and mounts["/tmp"] == "tmp"
    assert spec["serviceAccountName"] == "kueue-es-webhook" and spec["automountServiceAccountToken"] is True


def reads_kueue_configuration(spec: dict[str, Any]) -> None:
    """The webhook's ``--config`` is the watcher's file: the ConfigMap kueue-manager-config mounted with subPath,
    so both follow one integrations.frameworks (the frameworks it leaves out get Kueue's no-op webhooks)."""
    from kueue_es.cli import _parser

    (container,) = spec["containers"]
    args = _parser().parse_args(container["args"])
    watcher_spec = find("Deployment", "kueue-es-watcher")["spec"]["template"]["spec"]
    (watcher,) = watcher_spec["containers"]
    assert args.config is not None and args.config == _parser().parse_args(watcher["args"]).config
    volumes = {v["name"]: v for v in spec["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == str(args.config)]
    assert volumes[mount["name"]]["configMap"]["name"] == "kueue-manager-config"
    assert mount["subPath"] == args.config.name and mount["readOnly"] is True


def test_the_webhook_reads_kueue_s_configuration_as_the_watcher_does() -> None:
    reads_kueue_configuration(find("Deployment", "kueue-es-webhook")["spec"]["template"]["spec"])


def test_the_webhook_may_touch_only_its_own_objects() -> None:
    role = find("Role", "kueue-es-webhook")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["kueue-es-webhook-server-cert"],
            "verbs": ["get", "update"],
        }
    ]
    cluster_role = find("ClusterRole", "kueue-es-webhook")
    by_resource = {r["resources"][0]: r for r in cluster_role["rules"]}
    assert by_resource["localqueues"]["verbs"] == ["get"]
    assert by_resource["clusterqueues"]["verbs"] == ["get"]  # MultiKueue's managedBy (docs/multikueue.md)
    assert by_resource["admissionchecks"]["verbs"] == ["list"]
    assert by_resource["namespaces"]["verbs"] == ["get"]  # their labels: managedJobsNamespaceSelector
    assert by_resource["workloads"]["verbs"] == ["get"]  # a StatefulSet's scale-down Workload (statefulset_webhook.go)
    # WorkloadPriorityClassDefaulting: whether the class `default` exists, that one only
    assert by_resource["workloadpriorityclasses"]["verbs"] == ["get"]
    assert by_resource["workloadpriorityclasses"]["resourceNames"] == ["default"]
    # the owners of a job's controller chain (the walk of FindAncestorJobManagedByKueue): get only, every kind
    # that may own a job (pods.is_job_owner), and nothing else of the jobs
    from kueue_es.jobframework import integrations

    owners = {(i.api_version.rpartition("/")[0], i.plural) for i in integrations.registry().values() if i.suspend_path}
    owners.add(("batch", "jobs"))
    readable = {
        (group, resource)
        for rule in cluster_role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if (group, resource) in owners
        or group not in ("", "kueue.x-k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io")
    }
    assert readable == owners
    for rule in cluster_role["rules"]:
        if any((g, r) in owners for g in rule["apiGroups"] for r in rule["resources"]):
            assert rule["verbs"] == ["get"] and "resourceNames" not in rule
    assert set(by_resource) - {resource for _, resource in owners} == {
        "localqueues",
        "clusterqueues",
        "admissionchecks",
        "namespaces",
        "workloads",
        "workloadpriorityclasses",
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
        "customresourcedefinitions",
    }
    from kueue_es import crds
    from kueue_es.services.webhook import rotation

    converted = [kind.name for kind in crds.KINDS if crds.conversion(kind)["strategy"] == "Webhook"]
    assert sorted(by_resource["customresourcedefinitions"]["resourceNames"]) == sorted(converted)
    assert sorted(rotation.CONVERSION_CRDS) == sorted(converted)
    assert by_resource["customresourcedefinitions"]["verbs"] == ["get", "update"]
    for kind, resource in (
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
        ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
    ):
        assert by_resource[resource]["resourceNames"] == [configuration(kind)["metadata"]["name"]]
        assert by_resource[resource]["verbs"] == ["get", "update"]


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_certmanager_overlay_uses_cert_manager_instead() -> None:
    from kueue_es.cli import _parser

    built = subprocess.run(
        ["kubectl", "kustomize", str(CERTMANAGER)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    docs = [d for d in yaml.safe_load_all(built) if d]
    by_kind_name = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    certificate = by_kind_name["Certificate", "kueue-es-webhook-cert"]
    issuer = certificate["spec"]["issuerRef"]["name"]
    assert by_kind_name["Issuer", issuer]["spec"] == {"selfSigned": {}}
    assert "kueue-es-webhook-service.kueue-es.svc" in certificate["spec"]["dnsNames"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (config,) = [d for d in docs if d["kind"] == kind]
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "kueue-es/kueue-es-webhook-cert"
    # the CA injector also fills the caBundle of the CRDs' conversion webhook, and only of those that have one
    injected = sorted(
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "CustomResourceDefinition"
        and "cert-manager.io/inject-ca-from" in d["metadata"].get("annotations", {})
    )
    webhook_crds = sorted(
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "CustomResourceDefinition" and d["spec"]["conversion"]["strategy"] == "Webhook"
    )
    assert injected == webhook_crds and len(injected) == 5
    # cert-manager owns the Secret: not shipped, and the webhook's Role on it is gone
    assert ("Secret", "kueue-es-webhook-server-cert") not in by_kind_name
    assert ("Role", "kueue-es-webhook") not in by_kind_name
    deployment = by_kind_name["Deployment", "kueue-es-webhook"]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args = _parser().parse_args(container["args"])
    assert args.internal_cert_management is False
    volumes = {v["name"]: v for v in spec["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == str(args.cert_dir)]
    assert volumes[mount["name"]]["secret"]["secretName"] == certificate["spec"]["secretName"]
    reads_kueue_configuration(spec)
    for doc in docs:
        if doc["kind"] not in ("Certificate", "Issuer"):
            kubernetes_validate.validate(doc, "1.36", strict=True)
