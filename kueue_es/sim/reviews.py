"""The review kinds of the authentication and authorization APIs, as a cluster that lets everyone do everything
answers them (``kubectl auth can-i``, ``kubectl auth whoami``).

Why this module exists: the emulated API server has no users (its kubeconfig carries no credentials) and
refuses nothing for want of a permission, as a kube-apiserver with anonymous requests allowed and the
``AlwaysAllow`` authorizer. kubectl still asks: ``kubectl auth can-i create jobs`` POSTs a
SelfSubjectAccessReview, ``--list`` a SelfSubjectRulesReview, ``kubectl auth whoami`` a
SelfSubjectReview, and a cluster without those kinds makes them fail (404). The reviews are answered,
never stored: a create returns the review with its ``status`` filled (201), and the kinds take no other verb
(405), as on a real server.

RBAC's objects (``rbac.authorization.k8s.io/v1`` ClusterRole, ClusterRoleBinding, Role, RoleBinding) are
served and stored as any kind, and grant or deny nothing, so a manifest that carries them applies as in a
cluster: Kueue's "Monitor pending workloads" page has the reader of the visibility API apply
``examples/visibility/cluster-role-and-binding.yaml``, which kubectl refused with a confusing validation
error (its group was not in ``/openapi/v3``, and the protobuf ``/openapi/v2`` it then asks for is not served).
"""

from __future__ import annotations

import copy
from typing import Any

from kueue_es.services.kube import resources


def _review(group: str, plural: str, kind: str) -> resources.ResourceRef:
    """A cluster-scoped v1 review kind of ``group`` (created and answered, never stored)."""
    return resources.ResourceRef(group=group, version="v1", plural=plural, kind=kind, namespaced=False)


SELF_SUBJECT_ACCESS_REVIEWS = _review("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview")
SELF_SUBJECT_RULES_REVIEWS = _review("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview")
SUBJECT_ACCESS_REVIEWS = _review("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview")
SELF_SUBJECT_REVIEWS = _review("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview")
KINDS = (SELF_SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_RULES_REVIEWS, SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_REVIEWS)


def _rbac(plural: str, kind: str, *, namespaced: bool) -> resources.ResourceRef:
    """An rbac.authorization.k8s.io/v1 kind (stored, never enforced)."""
    return resources.ResourceRef(
        group="rbac.authorization.k8s.io", version="v1", plural=plural, kind=kind, namespaced=namespaced
    )


CLUSTER_ROLES = _rbac("clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = _rbac("clusterrolebindings", "ClusterRoleBinding", namespaced=False)
ROLES = _rbac("roles", "Role", namespaced=True)
ROLE_BINDINGS = _rbac("rolebindings", "RoleBinding", namespaced=True)
#: RBAC's kinds: served so that manifests carrying them apply; they change no answer of this server.
RBAC_KINDS = (CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS)

#: Who an unauthenticated request is (the API server's anonymous user).
ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
#: Why everything is allowed, as the reason an access review gives.
REASON = "the kueue-es emulated API server allows every request (no authentication, no authorization)"


def answer(ref: resources.ResourceRef, body: Any) -> dict[str, Any]:
    """The review ``body`` (a create of ``ref``, one of :data:`KINDS`) as the server returns it: allowed."""
    review = copy.deepcopy(body) if isinstance(body, dict) else {}
    review["apiVersion"], review["kind"] = ref.api_version, ref.kind
    review.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    review.setdefault("spec", {})
    if ref == SELF_SUBJECT_REVIEWS:
        review["status"] = {"userInfo": copy.deepcopy(ANONYMOUS)}
    elif ref == SELF_SUBJECT_RULES_REVIEWS:
        review["status"] = {
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": False,
        }
    else:
        review["status"] = {"allowed": True, "reason": REASON}
    return review
