"""API aggregation for the emulated API server: an APIService's group and version answered by its backend.

A real kube-apiserver proxies ``/apis/GROUP/VERSION/...`` to the server an ``apiregistration.k8s.io/v1``
APIService named ``VERSION.GROUP`` points at (``spec.service``: a Service's namespace, name and port), lists
the group in ``/apis`` and answers ``/apis/GROUP`` itself from its APIServices. The emulator does the same,
reaching the backend as kube-apiserver does with ``--enable-aggregator-routing``: through the Service's
Endpoints (the Service port ``spec.service.port``, default 443, its ``targetPort`` or the Endpoints port of
the same name, on the first address). TLS as the APIService says: ``insecureSkipTLSVerify`` or the
``caBundle`` (base64 PEM). No Endpoints, no address, or a backend that does not answer: 503, as
kube-apiserver's ``service unavailable``. A request goes on as the caller the API server authorized (after
impersonation: ``kubectl --as``'s user, not the administrator) in the ``X-Remote-User`` and ``X-Remote-Group``
headers, as kube-apiserver's aggregator names the caller to an extension server (:func:`front_proxy_headers`).

``kueue-es up --emulator`` and ``demo`` store the objects of :func:`visibility_objects` (Kueue's
APIServices and Service as ``deploy/`` ships them, and the Endpoints a cluster would make from the pod) once
the visibility service listens, so ``kubectl get --raw /apis/visibility.kueue.x-k8s.io/...`` works there as
in a cluster with Kueue.
"""

from __future__ import annotations

import base64
import re
import ssl
from collections.abc import Callable
from typing import Any

import aiohttp
import aiohttp.web
import multidict

from kueue_es.services.kube import resources
from kueue_es.sim import rbac, store

API_SERVICES = resources.ResourceRef(
    group="apiregistration.k8s.io",
    version="v1",
    plural="apiservices",
    kind="APIService",
    namespaced=False,
    status_subresource=True,
)
SERVICES = resources.ResourceRef(
    group="", version="v1", plural="services", kind="Service", namespaced=True, status_subresource=True
)
ENDPOINTS = resources.ResourceRef(group="", version="v1", plural="endpoints", kind="Endpoints", namespaced=True)
KINDS = (API_SERVICES, SERVICES, ENDPOINTS)

VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSIONS = ("v1beta2", "v1beta1")
VISIBILITY_NAMESPACE = "kueue-es"  # deploy/base's namespace
VISIBILITY_SERVICE = "visibility-server"  # Kueue's Service name
PROXY_TIMEOUT = 30.0

Getter = Callable[[resources.ResourceRef, str | None, str], dict[str, Any]]


class BackendUnavailableError(Exception):
    """The APIService's backend cannot be reached; the message says why (the 503's message)."""


def api_services(select: Callable[[resources.ResourceRef], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The stored APIServices that point at a Service (a ``spec.service``; the others are local)."""
    return [obj for obj in select(API_SERVICES) if (obj.get("spec") or {}).get("service")]


def group_document(group: str, services: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``APIGroup`` of ``group`` from its APIServices (versions by ``versionPriority``, highest first), or
    None when no APIService serves that group."""
    specs = [obj["spec"] for obj in services if obj["spec"].get("group") == group]
    if not specs:
        return None
    specs.sort(key=lambda spec: (-int(spec.get("versionPriority") or 0), version_order(str(spec.get("version")))))
    versions = [{"groupVersion": f"{group}/{spec['version']}", "version": spec["version"]} for spec in specs]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def version_order(version: str) -> tuple[int, int, int]:
    """Kubernetes' version order as a sort key: GA before beta before alpha, higher numbers first."""
    found = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if found is None:
        return (3, 0, 0)
    stage = {"": 0, "beta": 1, "alpha": 2}[found.group(2) or ""]
    return (stage, -int(found.group(1)), -int(found.group(3) or 0))


def backend(get: Getter, api_service: dict[str, Any]) -> tuple[str, ssl.SSLContext | bool]:
    """``(base URL, ssl)`` of the server behind ``api_service`` (module docstring); ``ssl`` is False for
    ``insecureSkipTLSVerify``. Raises BackendUnavailableError naming what is missing."""
    spec = api_service["spec"]
    ref = spec["service"]
    namespace, name, port = ref.get("namespace") or "default", ref.get("name", ""), int(ref.get("port") or 443)
    where = f"service {namespace}/{name}"
    try:
        service = get(SERVICES, namespace, name)
        endpoints = get(ENDPOINTS, namespace, name)
    except store.StoreError as err:
        raise BackendUnavailableError(f"{where}: {err.message}") from None
    service_port = next(
        (p for p in (service.get("spec") or {}).get("ports") or [] if int(p.get("port", 0)) == port), None
    )
    if service_port is None:
        raise BackendUnavailableError(f"{where} has no port {port}")
    for subset in endpoints.get("subsets") or []:
        addresses = subset.get("addresses") or []
        ports = subset.get("ports") or []
        if not addresses or not ports:
            continue
        named = [p for p in ports if p.get("name", "") == service_port.get("name", "")]
        target = service_port.get("targetPort", port)
        chosen = (named or [p for p in ports if p.get("port") == target] or ports)[0]
        url = f"https://{addresses[0]['ip']}:{int(chosen['port'])}"
        return url, _tls(spec)
    raise BackendUnavailableError(f"endpoints for {where} not found")


def _tls(spec: dict[str, Any]) -> ssl.SSLContext | bool:
    if spec.get("insecureSkipTLSVerify"):
        return False
    context = ssl.create_default_context()
    if bundle := spec.get("caBundle"):
        context.load_verify_locations(cadata=base64.b64decode(bundle).decode())
    return context


def front_proxy_headers(user: rbac.User) -> multidict.CIMultiDict[str]:
    """The headers that name the caller to the backend, as kube-apiserver's aggregator writes them (client-go
    transport.SetAuthProxyHeaders): ``X-Remote-User``, then one ``X-Remote-Group`` per group, in order. The
    caller is whoever the API server authorized: an impersonated user is forwarded as that user, not as the
    one who impersonates, so a backend that authorizes by these headers (Kueue's visibility server, through
    k8s.io/apiserver's request-header authentication and a SubjectAccessReview) decides for the same user."""
    headers: multidict.CIMultiDict[str] = multidict.CIMultiDict({"X-Remote-User": user.name})
    for group in user.groups:
        headers.add("X-Remote-Group", group)
    return headers


async def proxy(
    request: aiohttp.web.BaseRequest, body: bytes, *, url: str, tls: ssl.SSLContext | bool, user: rbac.User
) -> aiohttp.web.Response:
    """Send ``request`` on to ``url`` (same method, path, query, body, Accept and Content-Type), as the
    aggregator does, with ``user`` (the caller the API server authorized) in :func:`front_proxy_headers`; the
    request's own ``Impersonate-*`` and ``X-Remote-*`` headers are not passed on. The backend's answer comes
    back as it is. Raises BackendUnavailableError when the backend does not answer."""
    headers = front_proxy_headers(user)
    for name in ("Accept", "Content-Type"):
        if name in request.headers:
            headers[name] = request.headers[name]
    timeout = aiohttp.ClientTimeout(total=PROXY_TIMEOUT)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(
                request.method, url + request.rel_url.raw_path_qs, data=body or None, headers=headers, ssl=tls
            ) as answer,
        ):
            payload = await answer.read()
            content_type = answer.headers.get("Content-Type", "application/json")
            return aiohttp.web.Response(body=payload, status=answer.status, headers={"Content-Type": content_type})
    except (aiohttp.ClientError, TimeoutError, OSError) as err:
        raise BackendUnavailableError(f"error trying to reach service: {err}") from None


def visibility_objects(*, host: str, port: int, namespace: str = VISIBILITY_NAMESPACE) -> list[dict[str, Any]]:
    """What an emulated cluster needs for the visibility service listening on ``host:port`` (HTTPS): the
    Namespace, Kueue's Service ``visibility-server`` (443 to 8082), the Endpoints a cluster would make for it
    (here ``host:port``), and Kueue's two APIServices (v1beta2 and v1beta1, ``insecureSkipTLSVerify``)."""
    labels = {"app.kubernetes.io/name": "kueue-es", "app.kubernetes.io/component": "visibility"}
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": VISIBILITY_SERVICE, "namespace": namespace, "labels": labels},
            "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8082}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": VISIBILITY_SERVICE, "namespace": namespace, "labels": labels},
            "subsets": [{"addresses": [{"ip": host}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}],
        },
    ]
    for version in VISIBILITY_VERSIONS:
        objects.append(
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": f"{version}.{VISIBILITY_GROUP}", "labels": labels},
                "spec": {
                    "group": VISIBILITY_GROUP,
                    "groupPriorityMinimum": 100,
                    "insecureSkipTLSVerify": True,
                    "service": {"name": VISIBILITY_SERVICE, "namespace": namespace},
                    "version": version,
                    "versionPriority": 100,
                },
            }
        )
    return objects
