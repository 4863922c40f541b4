"""RBAC for the emulated API server: who a request is, what it asks, and whether a role allows it.

The emulated API server's own kubeconfig carries no credentials: its requests are the cluster's
administrator (``system:masters``), allowed everything, as ``kind``'s admin kubeconfig is. A request
that impersonates someone (kubectl's ``--as`` and ``--as-group``: the ``Impersonate-User`` and
``Impersonate-Group`` headers) is authorized as that user by Kubernetes' RBAC rules over the stored
ClusterRoles, ClusterRoleBindings, Roles and RoleBindings, as kube-apiserver's RBAC authorizer does
(k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go, pkg/apis/rbac/v1/evaluation_helpers.go):
a rule allows a request when its verbs, API groups, resources (``resource/subresource``, ``*``) and
resource names match, or for a path outside the API (``/apis``, ``/openapi/v3``) its non-resource URLs
(a trailing ``*`` a prefix); a ClusterRole with an ``aggregationRule`` holds the rules of every ClusterRole
its selectors match, as the clusterrole-aggregation controller writes them. A denied request gets
kube-apiserver's 403 Forbidden, worded as its ``forbiddenMessage``.

The server's bootstrap roles are those kubectl needs to work at all as an impersonated user
(``system:discovery``, ``system:basic-user``, ``system:public-info-viewer``, bound to
``system:authenticated``), ``cluster-admin`` (bound to ``system:masters``) and the default ``admin``,
``edit`` and ``view`` roles reduced to their aggregation of labelled roles (Kueue's viewers join them);
Kubernetes' own rules in those three are not modelled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kueue_es.services.kube import resources

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
MASTERS = "system:masters"
ALL = "*"

Select = Callable[..., list[dict[str, Any]]]
"""The store's ``select(ref, namespace=..., name=...)``: the stored objects of a kind."""


@dataclasses.dataclass(frozen=True)
class User:
    """An authenticated user: name and groups (``system:authenticated`` included)."""

    name: str
    groups: tuple[str, ...] = ()

    def info(self) -> dict[str, Any]:
        """As a review's ``userInfo``."""
        return {"username": self.name, "groups": list(self.groups)}


ADMIN = User("kubernetes-admin", (MASTERS, AUTHENTICATED))


def impersonated(headers: Mapping[str, str] | Any) -> User | None:
    """The user a request impersonates (``Impersonate-User``, every ``Impersonate-Group``), or None for
    one that impersonates nobody. As kube-apiserver's impersonation filter (k8s.io/apiserver
    pkg/endpoints/filters/impersonation.go): a service account ``system:serviceaccount:NS:NAME`` impersonated
    without any group is in ``system:serviceaccounts`` and ``system:serviceaccounts:NS`` (with groups given,
    in those only); then any user but ``system:anonymous`` is also in ``system:authenticated`` unless
    ``system:authenticated`` or ``system:unauthenticated`` was given, and ``system:anonymous`` is in
    ``system:unauthenticated``. ``headers``: a case-insensitive mapping (aiohttp's CIMultiDict: repeated
    headers read with ``getall``)."""
    name = headers.get("Impersonate-User")
    if not name:
        return None
    groups: list[str] = list(headers.getall("Impersonate-Group", [])) if hasattr(headers, "getall") else []
    parts = name.split(":")
    if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] and all(parts[2:]) and not groups:
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{parts[2]}"]
    if name == ANONYMOUS:
        if UNAUTHENTICATED not in groups:
            groups.append(UNAUTHENTICATED)
    elif AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return User(name, tuple(dict.fromkeys(groups)))


@dataclasses.dataclass(frozen=True)
class Attributes:
    """What a request asks (kube-apiserver's RequestInfo): a verb on a resource (``group``, ``resource``,
    ``subresource``, ``namespace``, ``name``), or on a ``path`` outside the API."""

    verb: str
    resource_request: bool
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes of an HTTP request, as k8s.io/apiserver's RequestInfoFactory reads them:
    ``/api/v1/...`` and ``/apis/GROUP/VERSION/...`` are resource requests (``namespaces/NS/`` then
    ``RESOURCE[/NAME[/SUBRESOURCE]]``; GET without a name is ``list``, ``?watch=true`` ``watch``,
    DELETE without a name ``deletecollection``), anything else a path (verb ``get``, ``post``, ...)."""
    method = method.upper()
    segments = [s for s in path.strip("/").split("/") if s]
    if len(segments) >= 3 and segments[0] == "api":
        group, rest = "", segments[2:]
    elif len(segments) >= 4 and segments[0] == "apis":
        group, rest = segments[1], segments[3:]
    else:
        return Attributes(verb=method.lower(), resource_request=False, path="/" + "/".join(segments))
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces" and (len(rest) > 2 and group == "" or group != ""):
        if not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize")):
            namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if resource == "namespaces" and name and not namespace:
        namespace = name  # a Namespace's own requests are in that namespace (RequestInfoFactory)
    watch = str(query.get("watch", "")).lower() in ("1", "true")
    if method == "GET":
        verb = "watch" if watch else "get" if name else "list"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
    return Attributes(
        verb=verb,
        resource_request=True,
        group=group,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )


# -- evaluation ------------------------------------------------------------------------------------------


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist) on ``labels``."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def aggregated_rules(role: Mapping[str, Any], cluster_roles: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rules of ClusterRole ``role``: its own, and with an ``aggregationRule`` those of every ClusterRole
    one of its selectors matches (their own aggregation followed, each role once), in name order, as the
    clusterrole-aggregation controller writes them (pkg/controller/clusterroleaggregation)."""
    rules = [dict(r) for r in role.get("rules") or []]
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
    if not selectors:
        return rules
    seen = {role.get("metadata", {}).get("name")}
    pending = [role]
    while pending:
        current = pending.pop()
        for selector in (current.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
            for other in sorted(cluster_roles, key=lambda r: r.get("metadata", {}).get("name", "")):
                name = other.get("metadata", {}).get("name")
                if name in seen or not _selector_matches(selector, other.get("metadata", {}).get("labels") or {}):
                    continue
                seen.add(name)
                for rule in other.get("rules") or []:
                    if rule not in rules:
                        rules.append(dict(rule))
                pending.append(other)
    return rules


def _has(values: Iterable[str], wanted: str) -> bool:
    return any(v == ALL or v == wanted for v in values)


def rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """Whether one PolicyRule allows the request (evaluation_helpers.go RuleAllows)."""
    if not _has(rule.get("verbs") or [], attrs.verb):
        return False
    if not attrs.resource_request:
        for url in rule.get("nonResourceURLs") or []:
            if url == ALL or url == attrs.path or (url.endswith("*") and attrs.path.startswith(url[:-1])):
                return True
        return False
    if not _has(rule.get("apiGroups") or [], attrs.group):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources_ = rule.get("resources") or []
    if not any(r == ALL or r == combined or (attrs.subresource and r == f"*/{attrs.subresource}") for r in resources_):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_matches(subject: Mapping[str, Any], user: User, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


class Authorizer:
    """RBAC over a store's objects (``select``: the store's select)."""

    def __init__(self, select: Select) -> None:
        self._select = select

    def _cluster_roles(self) -> list[dict[str, Any]]:
        return self._select(CLUSTER_ROLES)

    def _role_rules(self, ref_: Mapping[str, Any], namespace: str, cluster_roles: list[dict[str, Any]]) -> list[Any]:
        kind, name = ref_.get("kind"), ref_.get("name")
        if kind == "ClusterRole":
            found = [r for r in cluster_roles if r.get("metadata", {}).get("name") == name]
            return aggregated_rules(found[0], cluster_roles) if found else []
        if kind == "Role" and namespace:
            roles = self._select(ROLES, namespace=namespace, name=name)
            return list(roles[0].get("rules") or []) if roles else []
        return []

    def rules(self, user: User, namespace: str) -> list[dict[str, Any]]:
        """Every rule that applies to ``user`` in ``namespace`` ("" for cluster-scoped requests): those of
        the ClusterRoleBindings, then of ``namespace``'s RoleBindings."""
        cluster_roles = self._cluster_roles()
        out: list[dict[str, Any]] = []
        for binding in self._select(CLUSTER_ROLE_BINDINGS):
            if any(_subject_matches(s, user, "") for s in binding.get("subjects") or []):
                out += self._role_rules(binding.get("roleRef") or {}, "", cluster_roles)
        if namespace:
            for binding in self._select(ROLE_BINDINGS, namespace=namespace):
                if any(_subject_matches(s, user, namespace) for s in binding.get("subjects") or []):
                    out += self._role_rules(binding.get("roleRef") or {}, namespace, cluster_roles)
        return out

    def allows(self, user: User, attrs: Attributes) -> bool:
        """Whether RBAC allows ``user`` the request (``system:masters`` always)."""
        if MASTERS in user.groups:
            return True
        return any(rule_allows(rule, attrs) for rule in self.rules(user, attrs.namespace))


def forbidden(user: User, attrs: Attributes) -> tuple[str, dict[str, Any]]:
    """kube-apiserver's 403 for a denied request: the message (responsewriters.forbiddenMessage inside
    apierrors.NewForbidden) and the Status ``details``."""
    if not attrs.resource_request:
        return f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"', {}
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    why = f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}" {scope}'
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    named = f' "{attrs.name}"' if attrs.name else ""
    details: dict[str, Any] = {"group": attrs.group, "kind": attrs.resource}
    if attrs.name:
        details["name"] = attrs.name
    return f"{qualified}{named} is forbidden: {why}", details


# -- the kinds and the bootstrap objects ----------------------------------------------------------------


def _rbac(plural: str, kind: str, *, namespaced: bool) -> resources.ResourceRef:
    return resources.ResourceRef(
        group="rbac.authorization.k8s.io", version="v1", plural=plural, kind=kind, namespaced=namespaced
    )


CLUSTER_ROLES = _rbac("clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = _rbac("clusterrolebindings", "ClusterRoleBinding", namespaced=False)
ROLES = _rbac("roles", "Role", namespaced=True)
ROLE_BINDINGS = _rbac("rolebindings", "RoleBinding", namespaced=True)
KINDS = (CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS)

BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}


def _cluster_role(name: str, rules: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS)},
        "rules": rules,
        **extra,
    }


def _binding(name: str, role: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    }


def _aggregate_to(role: str) -> dict[str, Any]:
    return {"clusterRoleSelectors": [{"matchLabels": {f"rbac.authorization.k8s.io/aggregate-to-{role}": "true"}}]}


def bootstrap_objects() -> list[dict[str, Any]]:
    """The RBAC objects the emulated API server starts with (see the module's docstring), in the shapes of
    kube-apiserver's bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go)."""
    discovery_urls = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ]
    return [
        _cluster_role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        _cluster_role("system:discovery", [{"nonResourceURLs": discovery_urls, "verbs": ["get"]}]),
        _cluster_role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ],
        ),
        _cluster_role(
            "system:public-info-viewer",
            [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}],
        ),
        _cluster_role("admin", [], aggregationRule=_aggregate_to("admin")),
        _cluster_role("edit", [], aggregationRule=_aggregate_to("edit")),
        _cluster_role("view", [], aggregationRule=_aggregate_to("view")),
        _binding("cluster-admin", "cluster-admin", MASTERS),
        _binding("system:discovery", "system:discovery", AUTHENTICATED),
        _binding("system:basic-user", "system:basic-user", AUTHENTICATED),
        _binding("system:public-info-viewer", "system:public-info-viewer", AUTHENTICATED),
    ]


def rules_review(rules: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A SelfSubjectRulesReview's ``status`` for ``rules`` (resource and non-resource rules apart)."""
    resource_rules, non_resource_rules = [], []
    for rule in rules:
        if rule.get("nonResourceURLs"):
            non_resource_rules.append({"verbs": list(rule["verbs"]), "nonResourceURLs": list(rule["nonResourceURLs"])})
        else:
            entry = {k: list(rule[k]) for k in ("verbs", "apiGroups", "resources", "resourceNames") if rule.get(k)}
            resource_rules.append(entry)
    return {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": False}
