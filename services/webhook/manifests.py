"""The Mutating- and ValidatingWebhookConfiguration for every kind the webhook serves, as Kueue ships them.

Why this module exists: the configurations must name exactly the paths the server
answers (:func:`kueue_es.jobframework.webhooks.targets`), or kube-apiserver calls
a path that does not exist and, with ``failurePolicy: Fail``, refuses the object.
So they are generated from the same table (``kueue-es deploy webhooks``), written to
``deploy/base/webhook-configurations.yaml``, and a test holds the file to the
generator. The shape is Kueue's config/components/webhook/manifests.yaml: one
webhook per kind, ``m<kind>.kb.io`` on CREATE (and UPDATE for kinds run through
their pods, whose templates follow the queue label), ``v<kind>.kb.io`` on CREATE
and UPDATE, ``failurePolicy: Fail``, ``sideEffects: None``, AdmissionReview v1,
and Kueue's default ``managedJobsNamespaceSelector`` as the namespaceSelector. Kueue's Workload
webhooks are there too, as Kueue ships them (``mworkload.kb.io``, ``vworkload.kb.io`` on
``workloads`` and ``workloads/status``, every namespace), and those of its own kinds (``mclusterqueue.kb.io``
and ``mresourceflavor.kb.io`` on CREATE, ``vclusterqueue.kb.io``, ``vcohort.kb.io`` and
``vresourceflavor.kb.io`` on CREATE and UPDATE).
"""

from __future__ import annotations

from typing import Any

import yaml

from kueue_es.jobframework import core_webhooks, webhooks, workload_webhook

NAMESPACE = "kueue-es"
SERVICE = "kueue-es-webhook-service"
MUTATING = "kueue-es-mutating-webhook-configuration"
VALIDATING = "kueue-es-validating-webhook-configuration"
#: Kueue's default managedJobsNamespaceSelector leaves out kube-system and its own namespace; ours is kueue-es
#: (kueue-system is left out as well, as the watcher's default has it).
UNMANAGED_NAMESPACES = ("kube-system", "kueue-system", NAMESPACE)
LABELS = {
    "app.kubernetes.io/name": "kueue-es",
    "app.kubernetes.io/component": "webhook",
    "app.kubernetes.io/part-of": "kueue-es",
}


def _webhook(target: webhooks.Target, *, verb: str) -> dict[str, Any]:
    mutating = verb == "mutate"
    operations = ["CREATE", "UPDATE"] if (not mutating or webhooks.defaults_on_update(target)) else ["CREATE"]
    return {
        "name": f"{'m' if mutating else 'v'}{target.kind.lower()}.kb.io",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": target.path(verb), "port": 443}},
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(UNMANAGED_NAMESPACES)}
            ]
        },
        "rules": [
            {
                "apiGroups": [target.group],
                "apiVersions": [target.version],
                "operations": operations,
                "resources": [target.plural],
                "scope": "Namespaced",
            }
        ],
        "sideEffects": "None",
        "timeoutSeconds": 10,
    }


def _workload_webhook(*, verb: str) -> dict[str, Any]:
    """Kueue's Workload webhook: ``mworkload.kb.io`` on CREATE, ``vworkload.kb.io`` on CREATE and UPDATE of
    ``workloads`` and ``workloads/status`` (workload_webhook.go kubebuilder markers), every namespace (Kueue's
    has no namespaceSelector: a Workload is Kueue's wherever it is)."""
    mutating = verb == "mutate"
    return {
        "name": workload_webhook.MUTATING_NAME if mutating else workload_webhook.VALIDATING_NAME,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {
            "service": {
                "name": SERVICE,
                "namespace": NAMESPACE,
                "path": workload_webhook.MUTATE_PATH if mutating else workload_webhook.VALIDATE_PATH,
                "port": 443,
            }
        },
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "rules": [
            {
                "apiGroups": ["kueue.x-k8s.io"],
                "apiVersions": ["v1beta2"],
                "operations": ["CREATE"] if mutating else ["CREATE", "UPDATE"],
                "resources": ["workloads"] if mutating else ["workloads", "workloads/status"],
                "scope": "Namespaced",
            }
        ],
        "sideEffects": "None",
        "timeoutSeconds": 10,
    }


def _core_webhook(hook: core_webhooks.Hook) -> dict[str, Any]:
    """Kueue's webhook of one of its own kinds (``mclusterqueue.kb.io``, ``vcohort.kb.io``, ...: the kubebuilder
    markers of pkg/webhooks/*.go): its operations, ``failurePolicy: Fail``, ``sideEffects: None``, no
    namespaceSelector (the kinds are cluster-scoped)."""
    return {
        "name": hook.name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": hook.path, "port": 443}},
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "rules": [
            {
                "apiGroups": [core_webhooks.GROUP],
                "apiVersions": [core_webhooks.VERSION],
                "operations": hook.operations,
                "resources": [hook.plural],
                "scope": "Cluster",
            }
        ],
        "sideEffects": "None",
        "timeoutSeconds": 10,
    }


def configurations() -> list[dict[str, Any]]:
    """The MutatingWebhookConfiguration and the ValidatingWebhookConfiguration, one webhook per served kind
    in kind order (Job, Pod, the integrations, Kueue's Workload and its ClusterQueue, Cohort and ResourceFlavor
    webhooks, :data:`core_webhooks.HOOKS`)."""
    targets = sorted(webhooks.targets(), key=lambda t: t.kind)
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name, "labels": dict(LABELS)},
            "webhooks": [
                hook
                for _, hook in sorted(
                    [(t.kind, _webhook(t, verb=verb)) for t in targets]
                    + [(workload_webhook.KIND, _workload_webhook(verb=verb))]
                    + [(h.kind, _core_webhook(h)) for h in core_webhooks.HOOKS if h.mutating == (verb == "mutate")],
                    key=lambda pair: pair[0],
                )
            ],
        }
        for kind, name, verb in (
            ("MutatingWebhookConfiguration", MUTATING, "mutate"),
            ("ValidatingWebhookConfiguration", VALIDATING, "validate"),
        )
    ]


HEADER = """\
# Generated by `kueue-es deploy webhooks` from the kinds the webhook serves (jobframework/webhooks.py
# targets(): batch/v1 Job, v1 Pod and every registered integration; Kueue's Workload,
# jobframework/workload_webhook.py; its ClusterQueue, Cohort and ResourceFlavor, jobframework/core_webhooks.py);
# do not edit, run it again.
# Kueue's shape (config/components/webhook/manifests.yaml): failurePolicy Fail, sideEffects None, the
# namespaces of managedJobsNamespaceSelector's default left out. caBundle is empty here: the webhook's
# internal certificate management (--internal-cert-management) writes it, or cert-manager's CA injector
# with deploy/certmanager (docs/webhooks.md).
"""


def render() -> str:
    """The YAML stream of :func:`configurations` with its header."""
    return HEADER + "---\n".join(yaml.safe_dump(c, sort_keys=False) for c in configurations())
