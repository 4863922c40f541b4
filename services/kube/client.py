"""Talking to a Kubernetes API server (real or emulated) with plain dicts.

Why this module exists: the watcher and the dispatcher need a handful of
operations on a dozen kinds -- get, list, create, patch, delete, apply a
manifest, and a list+watch loop that never loses an update -- and they should
not care whether a kind is core, batch or a CRD.  Everything here goes through
kubernetes-asyncio's ``ApiClient.call_api`` on paths built from
``resources.ResourceRef``, sends and returns JSON dicts (no generated models),
and raises ``errors`` types instead of ``ApiException``/aiohttp errors.

The watch loop (``watch_objects``) does what client-go's reflector does:
list, yield a ``Resynced`` snapshot, watch from the list's resourceVersion,
remember the last resourceVersion seen (bookmarks included), re-watch from it
when a stream ends, relist on 410 Expired, and reconnect with exponential
backoff (tenacity) on errors.  It never gives up; cancel it to stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pathlib
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
import structlog
import tenacity
import yaml

from kueue_es.services.kube import errors, resources

if TYPE_CHECKING:
    from kubernetes_asyncio import client as k8s_client

__all__ = [
    "RESOURCES",
    "ResourceRef",
    "Resynced",
    "WatchEvent",
    "apply_manifest",
    "apply_object",
    "create_object",
    "delete_object",
    "get_object",
    "list_objects",
    "make_api_client",
    "patch_object",
    "read_manifests",
    "ref_for",
    "replace_object",
    "watch_objects",
    "write_kubeconfig",
]

# The kind registry lives in ``resources`` (the emulator shares it); re-exported for callers of this module.
RESOURCES = resources.RESOURCES
ResourceRef = resources.ResourceRef
ref_for = resources.ref_for

logger = structlog.get_logger(__name__)

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_OBJECT_RESPONSES = {200: "object", 201: "object", 202: "object"}
_NETWORK_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)
#: Sent with every request: the API server names the field manager of a write without ``fieldManager``
#: by its first word, so kueue-es's merge patches (finalizers, suspends, ...) are owned by ``kueue-es`` in
#: ``managedFields``, as its server-side applies are (the generated client's default was OpenAPI-Generator).
USER_AGENT = "kueue-es/python"
_T = TypeVar("_T")


# -- connecting ----------------------------------------------------------------------------


async def make_api_client(
    *,
    server: str | None = None,
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
) -> k8s_client.ApiClient:
    """Build an ApiClient; async because loading a kubeconfig is.

    ``server``: a plain http(s) URL with no auth (the emulator's ``url``).
    ``kubeconfig``: a kubeconfig file path (``context`` picks a context).
    Neither: the default kubeconfig ($KUBECONFIG or ~/.kube/config).
    Raises ValueError if both are given, FileNotFoundError naming the path when the
    kubeconfig file (given, or the first of $KUBECONFIG) does not exist (the library would
    only say it lacks a current-context). Close the client with ``await api.close()``.
    """
    if server is not None and kubeconfig is not None:
        raise ValueError("pass either server= or kubeconfig=, not both")
    # imported here: kubernetes_asyncio's client loads every API and model class (about 0.3 s), which a
    # process that never reaches an API server (the bench's dispatcher, over its simulated API) need not pay
    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config

    if server is not None:
        api = k8s_client.ApiClient(k8s_client.Configuration(host=str(server).rstrip("/")))
    else:
        config_file = None if kubeconfig is None else os.fspath(kubeconfig)
        wanted = config_file or (os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None)
        if wanted is not None and not pathlib.Path(wanted).expanduser().is_file():
            raise FileNotFoundError(f"kubeconfig file {wanted} does not exist")
        api = await k8s_config.new_client_from_config(config_file=config_file, context=context, persist_config=False)
    api.user_agent = USER_AGENT
    return api


def write_kubeconfig(path: str | os.PathLike[str], *, server: str, context: str = "kueue-es-demo") -> None:
    """Write a kubeconfig for an unauthenticated server (the emulator), usable by kubectl too.

    The cluster, user and context are all named ``context``; the context's
    namespace is ``default`` and it is the current context. Written to a temporary file
    beside it and renamed, so a reader (kubectl, a script waiting for the demo) never
    sees it empty or half written.
    """
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": str(server).rstrip("/")}}],
        "users": [{"name": context, "user": {}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}],
        "current-context": context,
        "preferences": {},
    }
    target = pathlib.Path(path)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(yaml.safe_dump(config, sort_keys=False))
    os.replace(partial, target)


# -- single requests -----------------------------------------------------------------------


async def _call(
    api: k8s_client.ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, str]] | None = None,
    body: Any = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    """One JSON request; returns the decoded body, raises errors.ApiError/ConnectionFailedError."""
    from kubernetes_asyncio.client import ApiException  # loaded by now (api is its client): see make_api_client

    try:
        result = await api.call_api(
            path,
            method,
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            response_types_map=_OBJECT_RESPONSES,
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    except ApiException as exc:
        raise _api_error(status=exc.status or 0, text=exc.body, fallback_reason=exc.reason) from exc
    except _NETWORK_ERRORS as exc:
        raise errors.ConnectionFailedError(f"{method} {path} failed: {exc!r}") from exc
    return result if isinstance(result, dict) else {}


def _api_error(*, status: int, text: Any, fallback_reason: str | None) -> errors.ApiError:
    try:
        status_body = json.loads(text) if isinstance(text, (str, bytes)) and text else {}
    except ValueError:
        status_body = {}
    if not isinstance(status_body, dict):
        status_body = {}
    return errors.error_for_status(
        status=status,
        reason=str(status_body.get("reason") or fallback_reason or "Unknown"),
        message=str(status_body.get("message") or text or ""),
        body=status_body,
    )


async def get_object(
    api: k8s_client.ApiClient, ref: ResourceRef, *, namespace: str | None = None, name: str
) -> dict[str, Any]:
    """GET one object; raises errors.NotFoundError if it does not exist."""
    return await _call(api, "GET", ref.path(namespace=namespace, name=name))


async def list_objects(
    api: k8s_client.ApiClient,
    ref: ResourceRef,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """LIST objects (all namespaces if ``namespace`` is None); returns (items, list resourceVersion).

    Items get ``apiVersion``/``kind`` filled in (core lists omit them).
    """
    query = [
        (key, value) for key, value in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if value
    ]
    body = await _call(api, "GET", ref.path(namespace=namespace), query=query)
    items = [{"apiVersion": ref.api_version, "kind": ref.kind, **item} for item in body.get("items") or []]
    return items, str(body.get("metadata", {}).get("resourceVersion", ""))


async def create_object(
    api: k8s_client.ApiClient, ref: ResourceRef, *, namespace: str | None = None, body: dict[str, Any]
) -> dict[str, Any]:
    """POST a new object (``metadata.generateName`` honoured); raises errors.ConflictError if it exists."""
    return await _call(api, "POST", ref.path(namespace=namespace), body=body)


async def replace_object(
    api: k8s_client.ApiClient,
    ref: ResourceRef,
    *,
    namespace: str | None = None,
    name: str,
    body: dict[str, Any],
    subresource: str | None = None,
) -> dict[str, Any]:
    """PUT an object (or its ``status``); a ``metadata.resourceVersion`` in ``body`` is a precondition (409)."""
    return await _call(api, "PUT", ref.path(namespace=namespace, name=name, subresource=subresource), body=body)


async def patch_object(
    api: k8s_client.ApiClient,
    ref: ResourceRef,
    *,
    namespace: str | None = None,
    name: str,
    patch: dict[str, Any] | list[dict[str, Any]],
    subresource: str | None = None,
    content_type: str = MERGE_PATCH,
) -> dict[str, Any]:
    """PATCH an object (or, with ``subresource="status"``, only its status); returns the stored object.

    Default: JSON merge patch (``None`` deletes a key, lists are replaced);
    pass ``content_type=JSON_PATCH`` with a list of RFC 6902 operations.
    """
    path = ref.path(namespace=namespace, name=name, subresource=subresource)
    return await _call(api, "PATCH", path, body=patch, content_type=content_type)


async def apply_object(
    api: k8s_client.ApiClient,
    ref: ResourceRef,
    *,
    namespace: str | None = None,
    name: str,
    body: dict[str, Any],
    field_manager: str,
    subresource: str | None = None,
    force: bool = True,
) -> dict[str, Any]:
    """Server-side apply ``body`` (a full applied configuration: apiVersion, kind, metadata.name) as ``field_manager``.

    Creates the object if it is absent (not through ``subresource="status"``);
    fields this manager applied before and leaves out now are removed. ``force``
    takes fields over from other managers instead of failing with 409 Conflict.
    An apply that changes nothing is not a write on the server (same
    resourceVersion). Returns the stored object.
    """
    path = ref.path(namespace=namespace, name=name, subresource=subresource)
    query = [("fieldManager", field_manager)] + ([("force", "true")] if force else [])
    return await _call(api, "PATCH", path, query=query, body=body, content_type=APPLY_PATCH)


async def delete_object(
    api: k8s_client.ApiClient,
    ref: ResourceRef,
    *,
    namespace: str | None = None,
    name: str,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """DELETE an object; returns the server's answer (the object, possibly still terminating). ``options``: the
    DeleteOptions sent as the body, as client-go sends them (``propagationPolicy``, ``preconditions``)."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", **options} if options else None
    return await _call(api, "DELETE", ref.path(namespace=namespace, name=name), body=body)


# -- manifests -----------------------------------------------------------------------------


def read_manifests(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Load every non-empty YAML document of a file, in order."""
    with open(path, encoding="utf-8") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


async def apply_manifest(api: k8s_client.ApiClient, manifest: dict[str, Any]) -> dict[str, Any]:
    """Create the object of a manifest, or merge-patch the existing one with it (like ``kubectl apply``).

    With ``generateName`` and no ``name`` it always creates.  Namespaced kinds
    default to the ``default`` namespace.  As kubectl's client-side apply does, the
    manifest is kept in the ``kubectl.kubernetes.io/last-applied-configuration``
    annotation, and a field the last applied manifest had and this one lacks is
    removed from the object (a three-way JSON merge patch: lists are replaced whole),
    so ``kubectl apply`` and ``kueue-es apply`` can take turns on one object.  Returns
    the stored object.  Raises errors.UnknownKindError, errors.InvalidManifestError,
    errors.ApiError.
    """
    stored, _ = await apply_manifest_outcome(api, manifest)
    return stored


async def apply_manifest_outcome(
    api: k8s_client.ApiClient, manifest: dict[str, Any], *, ref: resources.ResourceRef | None = None
) -> tuple[dict[str, Any], str]:
    """:func:`apply_manifest`, also saying what happened as kubectl does: ``created``, ``configured``
    (the patch changed the object: a new resourceVersion) or ``unchanged``. Same errors. ``ref``: the kind as
    the server's discovery maps it (:func:`served_kinds`), for a kind kueue-es does not know itself; the
    ``metadata.namespace`` of a cluster-scoped one is dropped, as kubectl's builder drops it."""
    ref = ref or ref_for(str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
    manifest = {**manifest, "metadata": dict(manifest.get("metadata") or {})}
    if not ref.namespaced:
        manifest["metadata"].pop("namespace", None)
    metadata = dict(manifest["metadata"])
    namespace = (metadata.get("namespace") or "default") if ref.namespaced else None
    if namespace is not None:
        metadata["namespace"] = namespace
    applied = {**manifest, "metadata": _without_last_applied(metadata)}
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        LAST_APPLIED: json.dumps(applied, separators=(",", ":"), sort_keys=True) + "\n",  # as kubectl writes it
    }
    body = {**manifest, "metadata": metadata}
    name = metadata.get("name")
    if not name and not metadata.get("generateName"):
        raise errors.InvalidManifestError(
            f"a {ref.kind} manifest has neither metadata.name nor metadata.generateName; it is not applied"
        )
    try:
        created = await create_object(api, ref, namespace=namespace, body=body)
    except errors.ConflictError as exc:
        if not name or exc.reason != "AlreadyExists":
            raise
    else:
        logger.info("manifest_created", kind=ref.kind, namespace=namespace, name=created["metadata"]["name"])
        return created, "created"
    before = await get_object(api, ref, namespace=namespace, name=name)
    patch = _with_removals(body, _last_applied(before), applied)
    patched = await patch_object(api, ref, namespace=namespace, name=name, patch=patch)
    logger.info("manifest_patched", kind=ref.kind, namespace=namespace, name=name)
    version = (patched.get("metadata") or {}).get("resourceVersion")
    same = version is not None and version == (before.get("metadata") or {}).get("resourceVersion")
    return patched, "unchanged" if same else "configured"


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


async def served_kinds(api: k8s_client.ApiClient, api_version: str) -> dict[str, resources.ResourceRef]:
    """Every kind the server serves in ``api_version`` (``v1``, ``rbac.authorization.k8s.io/v1``), by kind: its
    plural, scope and ``status`` subresource, read from the group-version's discovery document
    (``/api/v1``, ``/apis/GROUP/VERSION``: an APIResourceList) as kubectl's RESTMapper reads it
    (k8s.io/client-go/restmapper, ``NewDiscoveryRESTMapper``); ``{}`` when the server does not serve the
    group-version (404). Subresources (``jobs/status``) are not kinds of their own. Raises errors.ApiError,
    errors.ConnectionFailedError."""
    group, _, version = api_version.rpartition("/")
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    try:
        document = await _call(api, "GET", path)
    except errors.NotFoundError:
        return {}
    entries = [entry for entry in document.get("resources") or [] if isinstance(entry, dict)]
    with_status = {
        str(entry.get("name", "")).split("/")[0] for entry in entries if entry.get("name", "").endswith("/status")
    }
    out: dict[str, resources.ResourceRef] = {}
    for entry in entries:
        plural, kind = str(entry.get("name") or ""), str(entry.get("kind") or "")
        if not plural or "/" in plural or not kind or kind in out:
            continue
        out[kind] = resources.ResourceRef(
            group=group,
            version=version,
            plural=plural,
            kind=kind,
            namespaced=bool(entry.get("namespaced")),
            status_subresource=plural in with_status,
        )
    return out


def _without_last_applied(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` as kubectl records it in the annotation: without the annotation itself, and with
    ``annotations`` always present (``{}`` when there is no other), so both write the same text."""
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k != LAST_APPLIED}
    return {**metadata, "annotations": annotations}


def _last_applied(stored: dict[str, Any]) -> dict[str, Any]:
    """The manifest last applied to ``stored`` (its annotation), or {} when there is none or it is not JSON."""
    text = ((stored.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    try:
        previous = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return previous if isinstance(previous, dict) else {}


def _removals(previous: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch deleting what ``previous`` set and ``current`` no longer does (maps recursively)."""
    out: dict[str, Any] = {}
    for key, old in previous.items():
        if key not in current:
            out[key] = None
        elif isinstance(old, dict) and isinstance(current[key], dict):
            if nested := _removals(old, current[key]):
                out[key] = nested
    return out


def _with_removals(body: dict[str, Any], previous: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """``body`` (a merge patch) plus the deletions of fields dropped since the last applied manifest."""

    def merge(removals: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        out = dict(patch)
        for key, value in removals.items():
            if key not in out:
                out[key] = value
            elif isinstance(value, dict) and isinstance(out[key], dict):
                out[key] = merge(value, out[key])
        return out

    return merge(_removals(previous, current), body)


# -- list + watch --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class WatchEvent:
    """A change to one object: ``type`` is ADDED, MODIFIED or DELETED; ``object`` its (last) state."""

    type: str
    object: dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Resynced:
    """A full, fresh list: every live object at ``resource_version``.

    Objects a consumer knows that are not in ``objects`` were deleted while
    it was not watching.  Yielded first, and again after every relist.
    """

    objects: tuple[dict[str, Any], ...]
    resource_version: str


class _ShortWatchError(errors.KubeError):
    """A watch stream ended at once without a single line: treated as a failure, so we back off."""


class _WatchStream:
    """An open watch response, read one JSON event per line."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def next_event(self) -> dict[str, Any] | None:
        """The next event, or None at the end of the stream; raises errors.ConnectionFailedError."""
        while True:
            try:
                line = await self._response.content.readline()
            except _NETWORK_ERRORS as exc:
                raise errors.ConnectionFailedError(f"the watch stream broke: {exc!r}") from exc
            if not line:
                return None
            if line.strip():
                try:
                    event = json.loads(line)
                except ValueError as exc:
                    raise errors.ConnectionFailedError(
                        f"the watch stream sent a line that is not JSON: {line[:200]!r}"
                    ) from exc
                return event if isinstance(event, dict) else {}

    def close(self) -> None:
        """Drop the connection (a half-read stream cannot go back to the pool)."""
        self._response.close()


async def _start_watch(
    api: k8s_client.ApiClient,
    ref: ResourceRef,
    *,
    namespace: str | None,
    resource_version: str,
    label_selector: str | None,
    bookmarks: bool,
    field_selector: str | None = None,
    timeout_seconds: float,
) -> tuple[_WatchStream, dict[str, Any] | None]:
    """Open a watch and read its first event; a watch only counts as started once it delivers.

    Raises errors.ExpiredError (relist), other errors.ApiError,
    errors.ConnectionFailedError, or _ShortWatchError.
    """
    query = [
        ("watch", "true"),
        ("resourceVersion", resource_version),
        ("timeoutSeconds", str(max(1, int(timeout_seconds)))),
    ]
    query += [("allowWatchBookmarks", "true")] if bookmarks else []
    query += [("labelSelector", label_selector)] if label_selector else []
    query += [("fieldSelector", field_selector)] if field_selector else []
    started = time.monotonic()
    try:
        response = await api.call_api(
            ref.path(namespace=namespace),
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=timeout_seconds + 30),
        )
    except _NETWORK_ERRORS as exc:
        raise errors.ConnectionFailedError(f"opening a watch on {ref.qualified_plural} failed: {exc!r}") from exc
    if response.status >= 400:
        try:
            text = await response.text()
        finally:
            response.close()
        raise _api_error(status=response.status, text=text, fallback_reason=response.reason)
    stream = _WatchStream(response)
    try:
        first = await stream.next_event()
        if first is None and time.monotonic() - started < 1.0:
            raise _ShortWatchError(f"a watch on {ref.qualified_plural} ended at once without events")
        if first is not None and first.get("type") == "ERROR":
            status = first.get("object") or {}
            raise _api_error(status=int(status.get("code") or 500), text=json.dumps(status), fallback_reason=None)
    except BaseException:
        stream.close()
        raise
    return stream, first


def _is_retryable(exc: BaseException) -> bool:
    transient = (errors.ConnectionFailedError, errors.ApiError, _ShortWatchError)
    return isinstance(exc, transient) and not isinstance(exc, errors.ExpiredError)


async def _retrying(
    fn: Callable[..., Awaitable[_T]],
    *args: Any,
    backoff_seconds: float,
    max_backoff_seconds: float,
    log: Any,
    **kwargs: Any,
) -> _T:
    """Call ``fn`` until it succeeds, sleeping with exponential backoff and jitter between failures."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "kube_request_failed", attempt=state.attempt_number, retry_in_seconds=round(delay, 2), error=repr(exc)
        )

    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(_is_retryable),
        wait=tenacity.wait_exponential_jitter(
            multiplier=backoff_seconds, max=max_backoff_seconds, jitter=backoff_seconds
        ),
        stop=tenacity.stop_never,
        before_sleep=before_sleep,
        reraise=True,
    )
    return await retrying(fn, *args, **kwargs)


async def watch_objects(
    api: k8s_client.ApiClient,
    ref: ResourceRef,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    bookmarks: bool = True,
    timeout_seconds: float | None = None,
    backoff_seconds: float = 0.5,
    max_backoff_seconds: float = 30.0,
) -> AsyncGenerator[WatchEvent | Resynced, None]:
    """List, then watch, forever: yields a Resynced snapshot, then WatchEvents, and a new Resynced after each relist.

    ``timeout_seconds`` is the server-side length of one watch request (a
    random 5-10 minutes if None, as client-go does); the loop re-watches from
    the last resourceVersion seen, so no change is lost between requests.
    Failures back off from ``backoff_seconds`` up to ``max_backoff_seconds``
    (with jitter) and are logged as warnings; only cancellation stops it.
    ``label_selector`` / ``field_selector`` narrow both the lists and the watches.
    """
    log = logger.bind(kind=ref.kind, namespace=namespace, label_selector=label_selector, field_selector=field_selector)
    retry_options: dict[str, Any] = {
        "backoff_seconds": backoff_seconds,
        "max_backoff_seconds": max_backoff_seconds,
        "log": log,
    }
    resource_version: str | None = None
    while True:
        if resource_version is None:
            items, listed_version = await _retrying(
                list_objects,
                api,
                ref,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                **retry_options,
            )
            log.info("kube_listed", objects=len(items), resource_version=listed_version)
            resource_version = listed_version
            yield Resynced(objects=tuple(items), resource_version=listed_version)
        try:
            stream, event = await _retrying(
                _start_watch,
                api,
                ref,
                namespace=namespace,
                resource_version=resource_version,
                label_selector=label_selector,
                field_selector=field_selector,
                bookmarks=bookmarks,
                timeout_seconds=timeout_seconds or random.uniform(300, 600),
                **retry_options,
            )
        except errors.ExpiredError:
            log.info("kube_watch_expired", resource_version=resource_version)
            resource_version = None
            continue
        try:
            while event is not None:
                event_type = event.get("type")
                obj = event.get("object") or {}
                if event_type == "ERROR":
                    expired = obj.get("code") == 410
                    report = log.info if expired else log.warning
                    report("kube_watch_error", status=obj.get("code"), message=obj.get("message"))
                    resource_version = None if expired else resource_version
                    break
                resource_version = obj.get("metadata", {}).get("resourceVersion") or resource_version
                if event_type in ("ADDED", "MODIFIED", "DELETED"):
                    yield WatchEvent(type=event_type, object=obj)
                event = await stream.next_event()
        except errors.ConnectionFailedError as exc:
            log.info("kube_watch_broken", error=str(exc), resource_version=resource_version)
        finally:
            stream.close()
