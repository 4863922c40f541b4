"""Delegated authentication and authorization, as an aggregated API server does them (``--delegated-auth``).

kube-apiserver's aggregator calls an extension API server with a front-proxy client certificate and the
caller's identity in request headers; the extension server checks both with the cluster (k8s.io/apiserver
``DelegatingAuthenticationOptions`` / ``DelegatingAuthorizationOptions``, which Kueue's visibility server
uses through ``RecommendedOptions``):

- authentication: the ConfigMap ``kube-system/extension-apiserver-authentication`` (readable with the Role
  ``extension-apiserver-authentication-reader``) holds the CA of the front proxy's client certificates
  (``requestheader-client-ca-file``), the names it may carry (``requestheader-allowed-names``; empty: any)
  and the headers with the user and groups (``requestheader-username-headers``, ``-group-headers``). A
  request whose verified client certificate is the front proxy's is the user those headers name (one group
  per group header); a request with ``Authorization: Bearer TOKEN`` is whoever a TokenReview says
  (``system:auth-delegator``), 401 when it says nobody; a request with neither is ``system:anonymous``.
- authorization: a SubjectAccessReview for that user, groups and request (``system:auth-delegator``):
  ``get`` of ``clusterqueues/pendingworkloads`` or ``localqueues/pendingworkloads`` in
  ``visibility.kueue.x-k8s.io`` (namespace and name), or the non-resource path of a discovery document;
  denied is 403, worded as k8s.io/apiserver words it (:func:`forbidden`). Answers are kept 10 s (allowed) and
  10 s (denied), as the apiserver's defaults; ``system:masters`` is allowed without a review, as there.

The parsing and the review bodies are pure functions; :class:`InClusterApi` is the only I/O: the pod's
service account token and CA, and ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``.
"""

from __future__ import annotations

import json
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from kueue_es.services.visibility import api

CONFIGMAP_NAMESPACE, CONFIGMAP_NAME = "kube-system", "extension-apiserver-authentication"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
CACHE_SECONDS = 10.0
MASTERS = "system:masters"  # allowed without a review (DelegatingAuthorizationOptions.AlwaysAllowGroups)
AUTHENTICATED, UNAUTHENTICATED, ANONYMOUS = "system:authenticated", "system:unauthenticated", "system:anonymous"


@dataclass(frozen=True, kw_only=True)
class RequestHeaderConfig:
    """What the front proxy's requests carry (module docstring); ``client_ca`` is PEM."""

    client_ca: str
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)


@dataclass(frozen=True, kw_only=True)
class User:
    """An authenticated caller."""

    name: str
    groups: tuple[str, ...] = ()


class AuthConfigError(ValueError):
    """The authentication ConfigMap cannot be used; the message names the key."""


def parse_configmap(data: Mapping[str, str]) -> RequestHeaderConfig:
    """The front-proxy settings from the data of ``extension-apiserver-authentication`` (list values are
    JSON arrays in strings, as kube-apiserver writes them). Raises AuthConfigError naming the key."""
    ca = data.get("requestheader-client-ca-file", "")
    if not ca.strip():
        raise AuthConfigError(
            f"ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}: data.requestheader-client-ca-file: missing"
            " (kube-apiserver runs without --requestheader-client-ca-file: no aggregation)"
        )

    def listed(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        text = data.get(key, "")
        if not text.strip():
            return default
        try:
            value = json.loads(text)
        except ValueError:
            raise AuthConfigError(
                f"ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}: data.{key}: not a JSON list"
            ) from None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise AuthConfigError(
                f"ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}: data.{key}: not a list of strings"
            )
        return tuple(value)

    return RequestHeaderConfig(
        client_ca=ca,
        allowed_names=listed("requestheader-allowed-names", ()),
        username_headers=listed("requestheader-username-headers", ("X-Remote-User",)),
        group_headers=listed("requestheader-group-headers", ("X-Remote-Group",)),
    )


def peer_common_name(peercert: Mapping[str, Any] | None) -> str | None:
    """The CN of a verified client certificate as ``ssl`` reports it (``getpeercert()``), None without one."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def front_proxy_user(config: RequestHeaderConfig, common_name: str | None, headers: Mapping[str, str]) -> User | None:
    """The user a front-proxy request names: its certificate's CN must be allowed (any, when none are
    listed) and a username header set; None otherwise (not a front-proxy request)."""
    if common_name is None or (config.allowed_names and common_name not in config.allowed_names):
        return None
    name = next((headers[h] for h in config.username_headers if headers.get(h)), "")
    if not name:
        return None
    getall = getattr(headers, "getall", None)
    groups: list[str] = []
    for header in config.group_headers:
        values = getall(header, []) if getall is not None else ([headers[header]] if header in headers else [])
        # one group per header value, commas and all (requestheader.go allHeaderValues): the aggregator sends
        # each group in a header of its own, and a group name may hold a comma
        groups += [str(value) for value in values if value]
    return User(name=name, groups=tuple(groups))


def request_attributes(method: str, path: str) -> dict[str, Any]:
    """The ``resourceAttributes`` or ``nonResourceAttributes`` of a SubjectAccessReview for ``method`` on
    ``path``: ``get`` of ``clusterqueues/pendingworkloads`` or ``localqueues/pendingworkloads`` (namespace and
    name), any other path (discovery) as a non-resource path."""
    segments = [s for s in path.split("/") if s]
    verb = "get" if method in ("GET", "HEAD") else method.lower()
    match segments:
        case ["apis", api.GROUP, version, "clusterqueues", name, "pendingworkloads"]:
            return {
                "resourceAttributes": {
                    "group": api.GROUP,
                    "version": version,
                    "resource": "clusterqueues",
                    "subresource": "pendingworkloads",
                    "name": name,
                    "verb": verb,
                }
            }
        case ["apis", api.GROUP, version, "namespaces", namespace, "localqueues", name, "pendingworkloads"]:
            return {
                "resourceAttributes": {
                    "group": api.GROUP,
                    "version": version,
                    "resource": "localqueues",
                    "subresource": "pendingworkloads",
                    "namespace": namespace,
                    "name": name,
                    "verb": verb,
                }
            }
    return {"nonResourceAttributes": {"path": path, "verb": verb}}


def access_review(user: User, method: str, path: str) -> dict[str, Any]:
    """The SubjectAccessReview of ``user`` doing ``method`` on ``path`` (:func:`request_attributes`)."""
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user.name, "groups": list(user.groups), **request_attributes(method, path)},
    }


def forbidden(user: User, method: str, path: str, reason: str = "") -> api.Reply:
    """The 403 of a denied request, worded as k8s.io/apiserver's authorization filter writes it for Kueue's
    visibility server (endpoints/handlers/responsewriters Forbidden: ``forbiddenMessage`` in
    ``apierrors.NewForbidden`` of the resource without its subresource, the review's ``reason`` after a colon
    when it gives one), the same words kube-apiserver uses in front of it."""
    attributes = request_attributes(method, path)
    found = attributes.get("resourceAttributes")
    if found is None:
        plain = attributes["nonResourceAttributes"]
        why = f'User "{user.name}" cannot {plain["verb"]} path "{plain["path"]}"'
        return api.status(403, "Forbidden", f"forbidden: {why}{_because(reason)}", {})
    resource = f"{found['resource']}/{found['subresource']}"
    scope = f'in the namespace "{found["namespace"]}"' if found.get("namespace") else "at the cluster scope"
    why = f'User "{user.name}" cannot {found["verb"]} resource "{resource}" in API group "{api.GROUP}" {scope}'
    message = f'{found["resource"]}.{api.GROUP} "{found["name"]}" is forbidden: {why}{_because(reason)}'
    return api.status(403, "Forbidden", message, {"name": found["name"], "group": api.GROUP, "kind": found["resource"]})


def _because(reason: str) -> str:
    return f": {reason}" if reason else ""


class InClusterApi:
    """The API server as the pod's service account (token and CA from ``SERVICE_ACCOUNT``)."""

    def __init__(self, *, directory: Path = SERVICE_ACCOUNT) -> None:
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise AuthConfigError("--delegated-auth: not in a pod ($KUBERNETES_SERVICE_HOST is not set)")
        self.url = f"https://{host}:{port}"
        self.directory = directory
        self.context = ssl.create_default_context(cafile=str(directory / "ca.crt"))

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One JSON request; raises AuthConfigError with the status and message of a failure."""
        token = (self.directory / "token").read_text().strip()  # re-read: the kubelet rotates it
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.request(method, self.url + path, json=body, headers=headers, ssl=self.context) as answer,
        ):
            payload = await answer.json(content_type=None)
            if answer.status >= 300:
                raise AuthConfigError(f"{method} {path}: {answer.status} {payload.get('message', '')}")
            return dict(payload)


class DelegatedAuth:
    """Authenticates and authorizes requests through ``call`` (an :meth:`InClusterApi.call`)."""

    def __init__(
        self,
        config: RequestHeaderConfig,
        call: Callable[..., Any],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config, self.call, self.clock = config, call, clock
        self._decisions: dict[tuple[str, tuple[str, ...], str, str], tuple[float, tuple[bool, str]]] = {}
        self._tokens: dict[str, tuple[float, User | None]] = {}

    def client_ca(self) -> str:
        """The PEM the TLS server verifies client certificates with."""
        return self.config.client_ca

    async def check(self, *, method: str, path: str, headers: Mapping[str, str], peercert: Any) -> api.Reply | None:
        """None when the request may go on; else the 401 or 403 Status to answer. As k8s.io/apiserver's
        delegating authenticator: a bearer token the TokenReview rejects is 401; a request with no credentials
        at all is ``system:anonymous`` (anonymous authentication is on by default there), which the review
        then refuses like any other user (403); an authenticated user is also in ``system:authenticated``
        (group.AuthenticatedGroupAdder)."""
        user = front_proxy_user(self.config, peer_common_name(peercert), headers)
        if user is None:
            authorization = headers.get("Authorization", "")
            if authorization.startswith("Bearer "):
                user = await self._token_user(authorization.removeprefix("Bearer ").strip())
                if user is None:
                    return api.status(401, "Unauthorized", "Unauthorized")
        if user is None:
            user = User(name=ANONYMOUS, groups=(UNAUTHENTICATED,))
        elif AUTHENTICATED not in user.groups and UNAUTHENTICATED not in user.groups:
            user = User(name=user.name, groups=(*user.groups, AUTHENTICATED))
        if MASTERS in user.groups:
            return None  # DelegatingAuthorizationOptions' AlwaysAllowGroups: the cluster allows them all anyway
        allowed, reason = await self._allowed(user, method, path)
        return None if allowed else forbidden(user, method, path, reason)

    async def _token_user(self, token: str) -> User | None:
        now = self.clock()
        cached = self._tokens.get(token)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        answer = await self.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review)
        status = answer.get("status") or {}
        user = None
        if status.get("authenticated"):
            found = status.get("user") or {}
            user = User(name=str(found.get("username", "")), groups=tuple(found.get("groups") or ()))
        self._tokens[token] = (now, user)
        return user

    async def _allowed(self, user: User, method: str, path: str) -> tuple[bool, str]:
        """(allowed, the review's reason) of a SubjectAccessReview, kept CACHE_SECONDS."""
        now = self.clock()
        key = (user.name, user.groups, method, path)
        cached = self._decisions.get(key)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        answer = await self.call(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", access_review(user, method, path)
        )
        status = answer.get("status") or {}
        decision = (bool(status.get("allowed")), str(status.get("reason") or ""))
        self._decisions[key] = (now, decision)
        return decision


async def in_cluster() -> DelegatedAuth:
    """The delegated auth of a pod: reads the authentication ConfigMap once. Raises AuthConfigError."""
    cluster = InClusterApi()
    configmap = await cluster.call("GET", f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps/{CONFIGMAP_NAME}")
    return DelegatedAuth(parse_configmap(configmap.get("data") or {}), cluster.call)
