"""Kueue's visibility API as pure functions: a request's path and query in, a status and a JSON body out.

Kueue serves ``visibility.kueue.x-k8s.io`` v1beta2 and v1beta1 from an aggregated API server
(pkg/visibility/server.go, pkg/visibility/storage/*.go; types in apis/visibility/v1beta2/types.go;
SEMANTICS-ADVANCED §G.2). Two reads exist, both ``GET``:

- ``/apis/visibility.kueue.x-k8s.io/VERSION/clusterqueues/CQ/pendingworkloads``
- ``/apis/visibility.kueue.x-k8s.io/VERSION/namespaces/NS/localqueues/LQ/pendingworkloads``

with the query parameters ``offset`` (default 0; negative counts as 0) and ``limit`` (absent or 0:
1000; negative: 0; at most 100,000), answered with a ``PendingWorkloadsSummary``; an unknown
ClusterQueue or LocalQueue is a 404 ``Status`` as Kueue's ``errors.NewNotFound`` writes it. On the
ClusterQueue read, ``offset`` counts the ClusterQueue's workloads; on the LocalQueue read, only that
LocalQueue's. Positions are the admitter's queue order (:mod:`kueue_es.scheduling.visibility`). Also
here: the discovery documents an aggregated server answers (``/apis``, the group, each version's
resource list) so kubectl finds the group.

No I/O and no clock: the caller passes the folded state and ``now_ms`` (ms since the epoch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kueue_es.events.manifests import format_time_ms
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import visibility

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # preferred first, as Kueue's APIServices rank them
KIND = "PendingWorkloadsSummary"


@dataclass(frozen=True, kw_only=True)
class Reply:
    """An HTTP answer: ``status`` code and the JSON ``body``."""

    status: int
    body: dict[str, Any]


class BadRequestError(ValueError):
    """A query parameter that is not an integer (the message names it)."""


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> Reply:
    """A ``v1 Status`` failure, as an API server writes one (``metadata`` empty, ``details`` only when given)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return Reply(status=code, body=body)


def not_found(resource: str, name: str) -> Reply:
    """Kueue's 404 for an unknown queue: ``resource`` is ``clusterqueue`` or ``localqueue``
    (``errors.NewNotFound(visibility.Resource(resource), name)`` in pkg/visibility/storage)."""
    return status(
        404,
        "NotFound",
        f'{resource}.{GROUP} "{name}" not found',
        {"name": name, "group": GROUP, "kind": resource},
    )


def no_such_path() -> Reply:
    """The API server's 404 for a path it does not serve."""
    return status(404, "NotFound", "the server could not find the requested resource")


def window(query: Mapping[str, str]) -> tuple[int, int]:
    """``(offset, limit)`` from the query, with Kueue's defaults and bounds (module docstring). Raises
    BadRequestError naming the parameter when one is not an integer."""
    values = {}
    for name in ("offset", "limit"):
        text = query.get(name, "")
        try:
            values[name] = int(text) if text != "" else 0
        except ValueError:
            raise BadRequestError(f'{name}: Invalid value: "{text}": must be an integer') from None
    limit = values["limit"] or visibility.LIMIT_DEFAULT  # Kueue's defaulting: 0 means the default
    return max(values["offset"], 0), min(max(limit, 0), visibility.LIMIT_MAX)


def rfc3339(ms: int) -> str | None:
    """``ms`` since the epoch as Kubernetes writes a timestamp (seconds, UTC, ``Z``); None for 0 (zero time)."""
    if ms <= 0:
        return None
    return format_time_ms(ms - ms % 1000)


def item(state: ClusterState, pending: visibility.PendingWorkload) -> dict[str, Any]:
    """One ``PendingWorkload`` of Kueue's summary (pkg/visibility/storage/utils.go newPendingWorkload):
    metadata {name, namespace, creationTimestamp, ownerReferences (apiVersion, kind, name, uid)},
    priority, localQueueName and the two 0-based positions."""
    metadata: dict[str, Any] = {
        "name": pending.name,
        "namespace": pending.namespace,
        "creationTimestamp": rfc3339(pending.creation_timestamp_ms),
    }
    folded = state.workloads.get(f"{pending.namespace}/{pending.name}")
    owner = folded.workload.owner if folded is not None else None
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name, "uid": owner.uid}
        ]
    return {
        "metadata": metadata,
        "priority": pending.priority,
        "localQueueName": pending.local_queue,
        "positionInClusterQueue": pending.position_in_cluster_queue,
        "positionInLocalQueue": pending.position_in_local_queue,
    }


def summary(state: ClusterState, items: list[visibility.PendingWorkload], *, version: str) -> dict[str, Any]:
    """A ``PendingWorkloadsSummary`` of ``version`` holding ``items`` (already windowed)."""
    return {
        "kind": KIND,
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {"creationTimestamp": None},
        "items": [item(state, p) for p in items],
    }


def cluster_queue_pending(
    state: ClusterState, cluster_queue: str, query: Mapping[str, str], *, version: str, now_ms: int
) -> Reply:
    """The pending workloads of ClusterQueue ``cluster_queue``, windowed by ``offset`` and ``limit``."""
    try:
        offset, limit = window(query)
    except BadRequestError as err:
        return status(400, "BadRequest", str(err))
    try:
        pending = visibility.pending_in_cluster_queue(state, cluster_queue, now_ms=now_ms)
    except KeyError:
        return not_found("clusterqueue", cluster_queue)
    return Reply(status=200, body=summary(state, visibility.page(pending, offset=offset, limit=limit), version=version))


def local_queue_pending(
    state: ClusterState, namespace: str, local_queue: str, query: Mapping[str, str], *, version: str, now_ms: int
) -> Reply:
    """The pending workloads of LocalQueue ``namespace/local_queue``, windowed among that LocalQueue's own.
    Kueue answers 404 when the LocalQueue is unknown or stopped (its queue manager forgets a stopped one); one
    whose ClusterQueue does not exist is in the queue manager all the same (addLocalQueueLocked) and has
    nothing pending: 200 with no items."""
    try:
        offset, limit = window(query)
    except BadRequestError as err:
        return status(400, "BadRequest", str(err))
    try:
        pending = visibility.pending_in_local_queue(state, namespace, local_queue, now_ms=now_ms)
    except KeyError:  # stopped
        return not_found("localqueue", local_queue)
    return Reply(status=200, body=summary(state, visibility.page(pending, offset=offset, limit=limit), version=version))


def group() -> dict[str, Any]:
    """The ``APIGroup`` document of ``/apis/visibility.kueue.x-k8s.io``."""
    versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in VERSIONS]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def group_list() -> dict[str, Any]:
    """The ``APIGroupList`` an aggregated server answers at ``/apis``: only its own group."""
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]}


def resource_list(version: str) -> dict[str, Any]:
    """The ``APIResourceList`` of ``/apis/visibility.kueue.x-k8s.io/VERSION``: what Kueue installs
    (pkg/visibility/storage/storage.go): ``clusterqueues`` and ``localqueues`` with no verbs of their
    own, and their ``pendingworkloads`` subresources, which answer ``get``."""

    def entry(name: str, *, singular: str, namespaced: bool, verbs: list[str]) -> dict[str, Any]:
        return {"name": name, "singularName": singular, "namespaced": namespaced, "kind": KIND, "verbs": verbs}

    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{version}",
        "resources": [
            entry("clusterqueues", singular="clusterqueue", namespaced=False, verbs=[]),
            entry("clusterqueues/pendingworkloads", singular="", namespaced=False, verbs=["get"]),
            entry("localqueues", singular="localqueue", namespaced=True, verbs=[]),
            entry("localqueues/pendingworkloads", singular="", namespaced=True, verbs=["get"]),
        ],
    }


def answer(
    state: ClusterState | None, method: str, path: str, query: Mapping[str, str], *, now_ms: int
) -> Reply | None:
    """Route one request: the reply for a path of this API (discovery included), None for any other path
    (the caller's own, such as ``/healthz``). ``state`` None: the fold is not ready yet (503, as an API
    server that cannot serve yet). Any method but GET on a path of the group is 405."""
    segments = [s for s in path.split("/") if s]
    if segments == ["apis"]:
        return Reply(status=200, body=group_list()) if method == "GET" else _not_allowed()
    if len(segments) < 2 or segments[0] != "apis" or segments[1] != GROUP:
        return None
    if method != "GET":
        return _not_allowed()
    rest = segments[2:]
    if not rest:
        return Reply(status=200, body=group())
    version, rest = rest[0], rest[1:]
    if version not in VERSIONS:
        return no_such_path()
    if not rest:
        return Reply(status=200, body=resource_list(version))
    match rest:
        case ["clusterqueues", name, "pendingworkloads"]:
            if state is None:
                return _not_ready()
            return cluster_queue_pending(state, name, query, version=version, now_ms=now_ms)
        case ["namespaces", namespace, "localqueues", name, "pendingworkloads"]:
            if state is None:
                return _not_ready()
            return local_queue_pending(state, namespace, name, query, version=version, now_ms=now_ms)
    return no_such_path()


def _not_allowed() -> Reply:
    return status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def _not_ready() -> Reply:
    return status(503, "ServiceUnavailable", "the visibility server has not read the log up to its end yet")
