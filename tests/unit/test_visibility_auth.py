"""Delegated authentication and authorization of the visibility server (services/visibility/auth.py), as
k8s.io/apiserver's delegating options do them for Kueue's visibility server: the front proxy's certificate
and headers, a TokenReview for a bearer token, a SubjectAccessReview for every request."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import CIMultiDict

from kueue_es.services.visibility import auth

CONFIGMAP = {
    "client-ca-file": "-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n",
    "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\nproxy\n-----END CERTIFICATE-----\n",
    "requestheader-allowed-names": '["front-proxy-client"]',
    "requestheader-username-headers": '["X-Remote-User"]',
    "requestheader-group-headers": '["X-Remote-Group"]',
    "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
}
PROXY_CERT = {"subject": ((("commonName", "front-proxy-client"),),)}


def test_configmap_is_read_as_kube_apiserver_writes_it() -> None:
    config = auth.parse_configmap(CONFIGMAP)
    assert config.client_ca.startswith("-----BEGIN CERTIFICATE-----\nproxy")
    assert config.allowed_names == ("front-proxy-client",)
    assert config.username_headers == ("X-Remote-User",)
    with pytest.raises(auth.AuthConfigError, match="requestheader-client-ca-file: missing"):
        auth.parse_configmap({})
    with pytest.raises(auth.AuthConfigError, match="requestheader-allowed-names: not a JSON list"):
        auth.parse_configmap({**CONFIGMAP, "requestheader-allowed-names": "front-proxy-client"})


def test_front_proxy_user_needs_an_allowed_certificate_and_a_user_header() -> None:
    config = auth.parse_configmap(CONFIGMAP)
    headers = CIMultiDict(
        [("X-Remote-User", "alice"), ("X-Remote-Group", "team-a"), ("X-Remote-Group", "system:authenticated")]
    )
    user = auth.front_proxy_user(config, auth.peer_common_name(PROXY_CERT), headers)
    assert user == auth.User(name="alice", groups=("team-a", "system:authenticated"))
    assert auth.front_proxy_user(config, None, headers) is None  # no client certificate: headers are not trusted
    assert auth.front_proxy_user(config, "someone-else", headers) is None
    assert auth.front_proxy_user(config, "front-proxy-client", CIMultiDict()) is None
    anyone = auth.parse_configmap({**CONFIGMAP, "requestheader-allowed-names": "[]"})
    assert auth.front_proxy_user(anyone, "any-name", headers) is not None


def test_access_review_names_the_pendingworkloads_subresource() -> None:
    user = auth.User(name="alice", groups=("team-a",))
    review = auth.access_review(
        user, "GET", "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/lq/pendingworkloads"
    )
    assert review["spec"] == {
        "user": "alice",
        "groups": ["team-a"],
        "resourceAttributes": {
            "group": "visibility.kueue.x-k8s.io",
            "version": "v1beta2",
            "resource": "localqueues",
            "subresource": "pendingworkloads",
            "namespace": "ns",
            "name": "lq",
            "verb": "get",
        },
    }
    cq = auth.access_review(user, "GET", "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads")
    assert cq["spec"]["resourceAttributes"]["resource"] == "clusterqueues"
    assert "namespace" not in cq["spec"]["resourceAttributes"]
    discovery = auth.access_review(user, "GET", "/apis/visibility.kueue.x-k8s.io/v1beta2")
    assert discovery["spec"]["nonResourceAttributes"] == {
        "path": "/apis/visibility.kueue.x-k8s.io/v1beta2",
        "verb": "get",
    }


class FakeCluster:
    """Answers TokenReviews and SubjectAccessReviews: ``tokens`` maps a token to a user, ``allowed`` the users
    allowed; counts the calls."""

    def __init__(self, tokens: dict[str, str], allowed: set[str]) -> None:
        self.tokens, self.allowed = tokens, allowed
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        self.calls.append((method, path))
        assert body is not None
        if path.endswith("/tokenreviews"):
            name = self.tokens.get(body["spec"]["token"])
            if name is None:
                return {"status": {"authenticated": False}}
            return {"status": {"authenticated": True, "user": {"username": name, "groups": ["system:authenticated"]}}}
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


CQ_PATH = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads"


async def test_requests_are_authenticated_then_authorized_and_answers_kept() -> None:
    cluster = FakeCluster(tokens={"good": "bob", "other": "eve"}, allowed={"alice", "bob"})
    now = [0.0]
    delegated = auth.DelegatedAuth(auth.parse_configmap(CONFIGMAP), cluster, clock=lambda: now[0])
    proxied = CIMultiDict([("X-Remote-User", "alice")])
    assert await delegated.check(method="GET", path=CQ_PATH, headers=proxied, peercert=PROXY_CERT) is None
    assert await delegated.check(method="GET", path=CQ_PATH, headers=proxied, peercert=PROXY_CERT) is None
    assert len(cluster.calls) == 1  # the second answer came from the cache
    now[0] = 11.0
    assert await delegated.check(method="GET", path=CQ_PATH, headers=proxied, peercert=PROXY_CERT) is None
    assert len(cluster.calls) == 2  # expired after 10 s
    # the headers without the front proxy's certificate are not trusted: no credentials, so system:anonymous,
    # whom the review refuses (k8s.io/apiserver's anonymous authentication), not 401
    anonymous = await delegated.check(method="GET", path=CQ_PATH, headers=proxied, peercert=None)
    assert anonymous is not None and anonymous.status == 403
    assert 'User "system:anonymous" cannot get resource' in anonymous.body["message"]
    token = CIMultiDict([("Authorization", "Bearer good")])
    assert await delegated.check(method="GET", path=CQ_PATH, headers=token, peercert=None) is None
    bad = await delegated.check(
        method="GET", path=CQ_PATH, headers=CIMultiDict([("Authorization", "Bearer x")]), peercert=None
    )
    assert bad is not None and bad.status == 401
    forbidden = await delegated.check(
        method="GET", path=CQ_PATH, headers=CIMultiDict([("Authorization", "Bearer other")]), peercert=None
    )
    assert forbidden is not None and forbidden.status == 403
    assert forbidden.body["reason"] == "Forbidden" and '"eve"' in forbidden.body["message"]


def test_each_group_header_is_one_group_commas_and_all() -> None:
    """requestheader.go allHeaderValues: the aggregator sends one X-Remote-Group per group, taken whole."""
    config = auth.parse_configmap(CONFIGMAP)
    headers = CIMultiDict([("X-Remote-User", "alice"), ("X-Remote-Group", "ou=a,o=example"), ("X-Remote-Group", "b")])
    user = auth.front_proxy_user(config, "front-proxy-client", headers)
    assert user == auth.User(name="alice", groups=("ou=a,o=example", "b"))


def test_a_denied_request_gets_k8s_apiservers_forbidden_status() -> None:
    """responsewriters.Forbidden: forbiddenMessage in apierrors.NewForbidden of the resource (no subresource), the
    review's reason after a colon, details of the resource; a path outside the resources is "forbidden: ..."."""
    user = auth.User(name="system:serviceaccount:kueue-system:default")
    lq = auth.forbidden(
        user, "GET", "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/lq/pendingworkloads"
    )
    assert (lq.status, lq.body["reason"], lq.body["code"]) == (403, "Forbidden", 403)
    assert lq.body["message"] == (
        'localqueues.visibility.kueue.x-k8s.io "lq" is forbidden: User "system:serviceaccount:kueue-system:default" '
        'cannot get resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" in the namespace '
        '"ns"'
    )
    assert lq.body["details"] == {"name": "lq", "group": "visibility.kueue.x-k8s.io", "kind": "localqueues"}
    cq = auth.forbidden(user, "GET", CQ_PATH, "no RBAC policy matched")
    assert cq.body["message"] == (
        'clusterqueues.visibility.kueue.x-k8s.io "cq" is forbidden: User "system:serviceaccount:kueue-system:default" '
        'cannot get resource "clusterqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" at the cluster '
        "scope: no RBAC policy matched"
    )
    path = auth.forbidden(user, "GET", "/apis/visibility.kueue.x-k8s.io/v1beta2")
    assert path.body["message"] == (
        'forbidden: User "system:serviceaccount:kueue-system:default" cannot get path '
        '"/apis/visibility.kueue.x-k8s.io/v1beta2"'
    )


async def test_the_front_proxys_user_is_authenticated_and_masters_need_no_review() -> None:
    """group.AuthenticatedGroupAdder puts an authenticated user in system:authenticated before the review; a
    rejected bearer token is 401 (not anonymous); system:masters is allowed without a review (AlwaysAllowGroups)."""
    reviewed: list[dict[str, Any]] = []

    async def cluster(method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        assert body is not None
        reviewed.append(body)
        if path.endswith("/tokenreviews"):
            return {"status": {"authenticated": False}}
        return {"status": {"allowed": True}}

    delegated = auth.DelegatedAuth(auth.parse_configmap(CONFIGMAP), cluster)
    proxied = CIMultiDict([("X-Remote-User", "alice"), ("X-Remote-Group", "team-a")])
    assert await delegated.check(method="GET", path=CQ_PATH, headers=proxied, peercert=PROXY_CERT) is None
    assert reviewed[-1]["spec"]["groups"] == ["team-a", "system:authenticated"]
    bad = await delegated.check(
        method="GET", path=CQ_PATH, headers=CIMultiDict([("Authorization", "Bearer x")]), peercert=None
    )
    assert bad is not None and bad.status == 401
    count = len(reviewed)
    admin = CIMultiDict([("X-Remote-User", "kubernetes-admin"), ("X-Remote-Group", "system:masters")])
    assert await delegated.check(method="GET", path=CQ_PATH, headers=admin, peercert=PROXY_CERT) is None
    assert len(reviewed) == count
