"""The review kinds of the authentication and authorization APIs, answered as a real API server
answers them (``kubectl auth can-i``, ``kubectl auth whoami``).

Why this module exists: kubectl asks the server what it may do: ``kubectl auth can-i create jobs`` POSTs a
SelfSubjectAccessReview, ``--list`` a SelfSubjectRulesReview, ``kubectl auth whoami`` a
SelfSubjectReview, and a cluster without those kinds makes them fail (404). The reviews are answered,
never stored: a create returns the review with its ``status`` filled (201), and the kinds take no other verb
(405), as on a real server.

Who asks: the emulated API server's kubeconfig carries no credentials, and its requests are the cluster's
administrator (group ``system:masters``: everything allowed, as with ``kind``'s admin kubeconfig). A request
that impersonates a user (``kubectl auth can-i ... --as alice``) is answered for that user by RBAC
(:mod:`.rbac`: the stored ClusterRoles, Roles and their bindings, enforced on every impersonated request);
a SubjectAccessReview is answered for the user and groups its spec names.
"""

from __future__ import annotations

import copy
from typing import Any

from kueue_es.services.kube import resources
from kueue_es.sim import rbac


def _review(group: str, plural: str, kind: str) -> resources.ResourceRef:
    """A cluster-scoped v1 review kind of ``group`` (created and answered, never stored)."""
    return resources.ResourceRef(group=group, version="v1", plural=plural, kind=kind, namespaced=False)


SELF_SUBJECT_ACCESS_REVIEWS = _review("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview")
SELF_SUBJECT_RULES_REVIEWS = _review("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview")
SUBJECT_ACCESS_REVIEWS = _review("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview")
SELF_SUBJECT_REVIEWS = _review("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview")
KINDS = (SELF_SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_RULES_REVIEWS, SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_REVIEWS)


#: RBAC's kinds (:mod:`.rbac`), served and enforced on impersonated requests.
RBAC_KINDS = rbac.KINDS
CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS = rbac.KINDS


def answer(
    ref: resources.ResourceRef,
    body: Any,
    *,
    user: rbac.User | None = None,
    authorizer: rbac.Authorizer | None = None,
) -> dict[str, Any]:
    """The review ``body`` (a create of ``ref``, one of :data:`KINDS`) as the server returns it, for ``user``
    (None: the administrator, allowed everything) by ``authorizer``'s RBAC. A SubjectAccessReview is answered
    for the ``spec.user`` and ``spec.groups`` it names."""
    review = copy.deepcopy(body) if isinstance(body, dict) else {}
    review["apiVersion"], review["kind"] = ref.api_version, ref.kind
    review.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    spec = review.setdefault("spec", {})
    if ref == SUBJECT_ACCESS_REVIEWS and spec.get("user"):
        groups = [*(spec.get("groups") or [])]
        user = rbac.User(str(spec["user"]), tuple(groups))
    who = user or rbac.ADMIN
    if ref == SELF_SUBJECT_REVIEWS:
        review["status"] = {"userInfo": who.info()}
        return review
    if authorizer is None or rbac.MASTERS in who.groups:
        if ref == SELF_SUBJECT_RULES_REVIEWS:
            review["status"] = rbac.rules_review(
                [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]}]
            )
        else:
            review["status"] = {"allowed": True, "reason": ADMIN_REASON}
        return review
    if ref == SELF_SUBJECT_RULES_REVIEWS:
        review["status"] = rbac.rules_review(authorizer.rules(who, str(spec.get("namespace") or "")))
        return review
    attrs = _review_attributes(spec)
    allowed = authorizer.allows(who, attrs)
    review["status"] = {"allowed": allowed} if allowed else {"allowed": False, "reason": ""}
    return review


#: Why the administrator may do everything, as the reason an access review gives.
ADMIN_REASON = "the kueue-es emulated API server's own kubeconfig is the cluster administrator (system:masters)"


def _review_attributes(spec: dict[str, Any]) -> rbac.Attributes:
    """A review's ``resourceAttributes`` or ``nonResourceAttributes`` as request attributes."""
    if (found := spec.get("nonResourceAttributes")) is not None:
        return rbac.Attributes(verb=str(found.get("verb", "")), resource_request=False, path=str(found.get("path", "")))
    found = spec.get("resourceAttributes") or {}
    return rbac.Attributes(
        verb=str(found.get("verb", "")),
        resource_request=True,
        group=str(found.get("group", "")),
        resource=str(found.get("resource", "")),
        subresource=str(found.get("subresource", "")),
        namespace=str(found.get("namespace", "")),
        name=str(found.get("name", "")),
    )
