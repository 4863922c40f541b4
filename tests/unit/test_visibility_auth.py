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
    unauthenticated = await delegated.check(method="GET", path=CQ_PATH, headers=proxied, peercert=None)
    assert unauthenticated is not None and unauthenticated.status == 401
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
