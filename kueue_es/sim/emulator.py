"""An emulated Kubernetes API server, good enough for a watcher, a dispatcher and kubectl.

Why this module exists: no real API server can run on our machines, yet the
Kubernetes edge of kueue-es must be tested with the real client
(kubernetes-asyncio) over real HTTP, and ``kueue-es demo`` needs a cluster.
kmock's ``KubernetesEmulator`` gives us the HTTP server, discovery documents
and an object array, but (in kmock 0.8) its watch ignores ``watch=True`` as the
client sends it, and it has no resourceVersions, generateName, selectors, watch
history, status subresource, PUT, or addressing of the Namespace kind.
``ClusterEmulator`` keeps kmock's server and ``objects`` and serves discovery,
OpenAPI and every request for a registered kind itself, from ``store.ObjectStore``.

What is served, per registered kind (``resources.RESOURCES``: Kueue's kinds and the built-in ones
kueue-es and its users meet -- Namespace, Node, Pod, Event, Secret, ConfigMap, PodTemplate, batch/v1 Job and
CronJob, apps/v1 Deployment, ReplicaSet and StatefulSet, scheduling.k8s.io/v1 PriorityClass, Lease, DRA's
kinds, ProvisioningRequest; the access and self-subject reviews, :mod:`.reviews`, allowed and never stored; the controllers that act on them are simulated elsewhere, :mod:`.kubelet`
and :mod:`.controllers`): GET (get/list), GET ?watch=true|True|1 (watch), POST (create, 201), PUT
(replace; a custom resource's needs ``metadata.resourceVersion``, 422 without), PATCH (merge,
strategic merge by the kind's OpenAPI schema for built-in kinds only (415 for custom resources:
Kueue's kinds, the ``*.x-k8s.io`` ones and CRDs' kinds), JSON patch, and a minimal server-side
apply: see ``_server_side_apply``), DELETE (with DeleteOptions' ``propagationPolicy``, as ``kubectl delete
--cascade`` sends it: Orphan leaves the dependents, their owner references to the object taken off,
Foreground deletes them before the object, which waits with ``foregroundDeletion``; the garbage collector's
part is :mod:`.garbage`, played by the store within the request); the
``status`` subresource (held to Kueue's status schemas for Kueue's kinds);
what kube-apiserver's create strategies write into a new Pod (its Pending status, QoS class and
``SchedulingGated`` condition) or Job (its generated selector and labels), :mod:`.strategies`;
``dryRun=All`` (nothing stored, no watch event);
``fieldValidation`` (see ``validate_object``); Tables for ``kubectl get``
(``tables.py``); ``labelSelector``, ``fieldSelector``; watch with
``resourceVersion`` (410 Expired as an ERROR event when too old, 504 with the cause
ResourceVersionTooLarge when newer than the server's), ``sendInitialEvents`` (the initial ADDEDs end
with a BOOKMARK annotated ``k8s.io/initial-events-end``),
``allowWatchBookmarks`` (BOOKMARK every ``bookmark_interval`` seconds) and
``timeoutSeconds``.  Request bodies are JSON (YAML for apply), or protobuf for a PriorityClass
or Namespace (:mod:`.protobuf`: what ``kubectl create priorityclass`` and ``create namespace`` send;
other protobuf bodies get 415).  Also served, for kubectl: legacy discovery (``/api``,
``/apis``, ... with Kueue's short names), ``/version``, ``/openapi/v3`` and
``/openapi/v2`` (JSON; ``openapi.py``; ``/openapi/v2`` also as the protobuf kubectl asks for to validate a
``kind: List`` file, ``openapi_v2_pb.py``).  CustomResourceDefinitions
(``apiextensions.k8s.io/v1``, :mod:`.custom_resources`): writing one serves its kinds (every
served version, status and scale subresources, short names and categories, schema, printer
columns), their objects pruned, defaulted and validated by the schema (not its CEL rules);
deleting it deletes their objects
and ends their watches; ``crd_files`` / :meth:`ClusterEmulator.install_crds` install CRDs without
HTTP.  Kueue's kinds are served in v1beta2 and, as Kueue's CRDs serve it, in the deprecated v1beta1,
stored as v1beta2 and converted both ways by Kueue's rules (:mod:`kueue_es.events.v1beta1`), with
Kueue's v1beta1 schemas, printer columns and deprecation warning (one difference: the
``managedFields`` of a write through v1beta1 name v1beta2 and its field paths).  Events are served through
``events.k8s.io/v1`` too, the same way: views of the stored core/v1 Events, converted both ways by
Kubernetes' field mapping (:mod:`.event_versions`; their ``managedFields`` name core ``v1`` and its
fields; the events.k8s.io create validation, eventTime, action and reporting fields required, is not
played).  Not served: aggregated discovery, the
protobuf OpenAPI v3, CEL rules of CRDs, deletecollection, consistent pages of a list (a page
read with a ``continue`` token has the objects as they are now, not as of the first page), the items of
``listType=map`` and ``set`` lists as fields of their own in ``managedFields`` (every list is owned whole),
the background garbage collection of dependents (the default propagation, Background, deletes the object
alone; the simulated controllers collect what their kinds own: a CronJob's Jobs, a ReplicaSet's pods, ...,
and Workload objects whose owners are gone),
and a kind's own default policy (a batch/v1 Job's is Orphan on a real API server: kubectl always sends one).

kmock DSL reactions (``emulator['get /apis/...'] << 500``) still work for fault
injection: while any reaction is registered, requests go through kmock's
dispatcher first and unmatched ones fall back to the same emulation (except
Namespace requests, which kmock's parser cannot address: they are always
served directly).  Requests served without reactions are not kept in
``emulator.requests`` (so a long demo does not grow memory).

Run it on a real port with ``serve_emulator()``; see ``reset_history()`` and
``drop_watches()`` for making watchers relist and reconnect in tests.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime
import functools
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import multidict
import structlog
import yaml

from kueue_es import crds, validation
from kueue_es.events import models, slices, v1beta1
from kueue_es.jobframework import core_webhooks, integrations, pods, webhooks, workload_webhook, workloads
from kueue_es.jobframework.integrations import serving
from kueue_es.services.kube import resources
from kueue_es.services.webhook import manifests
from kueue_es.sim import (
    aggregator,
    custom_resources,
    event_versions,
    flowcontrol,
    garbage,
    managed_fields,
    openapi,
    openapi_v2_pb,
    patches,
    protobuf,
    rbac,
    reviews,
    selectors,
    store,
    tables,
)

logger = structlog.get_logger(__name__)

_KmockResponse = kmock.Response

_TRUE = ("true", "1")
KUBERNETES_VERSION = openapi.KUBERNETES_VERSION
#: Short names and categories of the built-in kinds, as a real API server's discovery gives them.
_BUILT_IN_NAMES: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("", "pods"): (("po",), ("all",)),
    ("", "nodes"): (("no",), ()),
    ("", "namespaces"): (("ns",), ()),
    ("", "events"): (("ev",), ()),
    (event_versions.GROUP, "events"): (("ev",), ()),
    ("", "configmaps"): (("cm",), ()),
    ("batch", "jobs"): ((), ("all",)),
    ("batch", "cronjobs"): (("cj",), ("all",)),
    ("scheduling.k8s.io", "priorityclasses"): (("pc",), ()),
    (custom_resources.GROUP, "customresourcedefinitions"): (
        custom_resources.CRD_SHORT_NAMES,
        custom_resources.CRD_CATEGORIES,
    ),
    ("apps", "deployments"): (("deploy",), ("all",)),
    ("apps", "replicasets"): (("rs",), ("all",)),
    ("apps", "statefulsets"): (("sts",), ("all",)),
}
_FIELD_VALIDATION = ("Ignore", "Warn", "Strict")
APPLY_PATCH = "application/apply-patch+yaml"
#: events.k8s.io/v1 Events: served as views of the stored core/v1 ones (``ClusterEmulator._serve_events_v1``).
EVENTS_V1 = resources.ResourceRef(
    group=event_versions.GROUP, version="v1", plural="events", kind=event_versions.KIND, namespaced=True
)
_VERBS = {"create", "delete", "get", "list", "patch", "update", "watch"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class _ApiCall:
    """One request for a registered kind, routed: what to do, to which object."""

    verb: str  # list, watch, get, create, replace, patch, delete
    ref: resources.ResourceRef
    namespace: str | None
    name: str | None
    subresource: str | None
    params: Mapping[str, str]
    content_type: str
    body: bytes
    accept: str = ""
    user_agent: str = ""
    user: rbac.User | None = None  # an impersonated user (kubectl --as); None: the administrator
    #: The version the client addressed when it differs from ``ref`` and the objects are converted
    #: (Kueue's v1beta1, executed against v1beta2): reads are answered in it, writes converted from it.
    served: resources.ResourceRef | None = None

    @property
    def dry_run(self) -> bool:
        """``?dryRun=All``: do everything but the write (any other value is 422, as the request options'
        validation answers: ``CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ...``)."""
        values = self.params.getall("dryRun", []) if hasattr(self.params, "getall") else [self.params.get("dryRun")]
        values = [value for value in values if value]
        if any(value != "All" for value in values):
            options = {"create": "CreateOptions", "replace": "UpdateOptions", "delete": "DeleteOptions"}
            shown = "[]string{" + ", ".join(json.dumps(value) for value in values) + "}"
            invalid = validation.Invalid(
                kind=options.get(self.verb, "PatchOptions"),
                group="meta.k8s.io",
                name="",
                causes=[
                    validation.Cause(
                        "dryRun", validation.NOT_SUPPORTED, f'Unsupported value: {shown}: supported values: "All"'
                    )
                ],
            )
            raise store.StoreError(status=422, reason="Invalid", message=invalid.message, details=invalid.details())
        return bool(values)

    @property
    def field_validation(self) -> str:
        """``?fieldValidation=``: Ignore, Warn or Strict; "" when not given (the emulator then checks nothing)."""
        value = self.params.get("fieldValidation") or ""
        if value and value not in _FIELD_VALIDATION:
            raise store.StoreError(
                status=400,
                reason="BadRequest",
                message=f"invalid fieldValidation directive {value!r}: expected Ignore, Warn or Strict",
                details={"kind": self.ref.plural},
            )
        return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Reply:
    status: int
    payload: dict[str, Any]
    warnings: tuple[str, ...] = ()


@attrs.define(kw_only=True)
class ClusterEmulator(kmock.KubernetesEmulator):
    """kmock's Kubernetes emulator with the semantics a list+watch client relies on.

    ``history_limit``: watch events kept per kind (older resourceVersions get
    410).  ``bookmark_interval``: seconds between BOOKMARK events on watches
    that allow them.  ``enforce_namespaces``: namespaced objects need an
    existing Namespace (default, kube-system, kube-public, kube-node-lease
    exist).  ``create_hooks``: callables ``(ref, obj)`` run on every created
    object, like mutating webhooks; the default, ``KUEUE_WEBHOOKS``,
    plays Kueue's Job, integration (JobSet, Kubeflow, ...) and Pod webhooks (pass ``()`` for a bare
    cluster), and with them :class:`DefaultLocalQueue` runs first; neither they nor Kueue's validating job
    webhooks are called for the jobs and Pods of kube-system, kueue-system and kueue-es, which the webhook
    configurations leave out (:meth:`_left_out`).  ``clock``:
    the UTC time for timestamps.  ``extra_resources``: kinds to serve besides
    ``resources.RESOURCES``.  ``validate``: refuse what a real API server with kueue-es's CRDs
    refuses (``kueue_es.validation``: 422 Invalid with field paths; unknown fields of Kueue kinds
    pruned, or 400 with ``fieldValidation=Strict``), and objects of CRD kinds that break their
    schema's value constraints (422); False plays a cluster without those checks.
    ``kueue_validation``: with ``validate`` and Kueue's create hooks, also refuse what Kueue's validating
    job webhooks refuse (:meth:`_kueue_validate`); False plays a cluster without the webhook (its
    mutating part stays, as with the MutatingAdmissionPolicy), where invalid jobs are stored and
    the watcher reports them.
    ``elastic_jobs``: Kueue's gate ElasticJobsViaWorkloadSlices, for Kueue's job webhooks (an elastic
    Job's pod template, an elastic RayCluster's or RayService's head and worker templates, get the
    elastic-job scheduling gate; the annotation and a Ray job's autoscaling are validated); None, the
    default: as ``feature_gates`` says, on unless set false (Kueue v0.18+, :attr:`elastic`).
    ``feature_gates``: Kueue's feature gates (``Gate: on``) for its Workload webhooks
    (:attr:`workload_gates`; a gate not given has Kueue's default).
    ``crd_files``: CRD files or folders installed at start (:func:`custom_resources.load`), as
    if applied; more can be applied at any time (``kubectl apply --server-side -f``) or
    installed with :meth:`install_crds`.
    ``managed_kinds``: the job kinds (``Job``, ``Pod``, ``JobSet``, ...) of the integrations Kueue's
    configuration enables (``integrations.frameworks``); Kueue's webhooks of the others are no-ops
    (setup.go ``WithNoopWebhook``), so such a job is neither suspended nor validated, and runs unmanaged.
    None (the default): every integration is enabled.
    ``manage_jobs_without_queue_name`` and ``managed_jobs_namespace_selector``: Kueue's options of those
    names, for its job webhooks (:meth:`webhook_context`; a selector of None is Kueue's default, every
    namespace but kube-system and kueue-system): a job without the queue-name label is created suspended
    with the first in a namespace the second selects; a Pod in a namespace it does not select is not
    gated, and a job there gets no ``default`` LocalQueue.
    ``resource_in_use_finalizer``: with Kueue's create hooks, also play ``mclusterqueue.kb.io`` and
    ``mresourceflavor.kb.io``: a created ClusterQueue or ResourceFlavor gets the ``kueue.x-k8s.io/resource-in-use``
    finalizer (:func:`finalize_in_use`). Off by default: it is kueue-es's dispatcher that takes it off a deleted
    one nothing uses (Kueue's controllers' part), and a cluster without one would keep it Terminating; ``demo``
    and ``up --emulator``, which run the dispatcher, turn it on.
    """

    history_limit: int = 1000
    bookmark_interval: float = 5.0
    enforce_namespaces: bool = True
    create_hooks: tuple[store.CreateHook, ...] = attrs.field(factory=lambda: KUEUE_WEBHOOKS)
    clock: Callable[[], datetime.datetime] = store.utc_now
    extra_resources: tuple[resources.ResourceRef, ...] = ()
    validate: bool = True
    kueue_validation: bool = True
    crd_files: tuple[str | Path, ...] = ()
    elastic_jobs: bool | None = None
    feature_gates: Mapping[str, bool] = attrs.field(factory=dict)
    managed_kinds: frozenset[str] | None = None
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: models.LabelSelector | None = None
    resource_in_use_finalizer: bool = False

    _store: store.ObjectStore = attrs.field(init=False)
    #: The kinds of installed CRDs, by (group, version, plural); ``_crd_kinds`` by CRD name.
    _custom: dict[tuple[str, str, str], custom_resources.CustomKind] = attrs.field(factory=dict, init=False)
    _crd_kinds: dict[str, list[custom_resources.CustomKind]] = attrs.field(factory=dict, init=False)
    #: The kinds the emulator serves by itself that a CRD may take over (schema-less placeholders: JobSet).
    _placeholders: dict[tuple[str, str, str], resources.ResourceRef] = attrs.field(factory=dict, init=False)
    _documents: dict[tuple[Any, ...], dict[str, Any]] = attrs.field(factory=dict, init=False)
    #: The last ``/openapi/v2`` document served as protobuf, and its bytes.
    _v2_protobuf: tuple[dict[str, Any], bytes] | None = attrs.field(default=None, init=False)
    _refs: dict[tuple[str, str, str], resources.ResourceRef] = attrs.field(factory=dict, init=False)
    _builtin_payload_ids: set[int] = attrs.field(factory=set, init=False)
    #: Kueue's v1beta1 kinds and events.k8s.io/v1 Events by (group, version, plural): the kind they are stored as
    #: and converted to (v1beta2; core/v1 Event).
    _converted: dict[tuple[str, str, str], resources.ResourceRef] = attrs.field(factory=dict, init=False)
    _watch_epoch: int = attrs.field(default=0, init=False)
    _closing: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        # kmock guesses no action for PUT; route it to the emulation too when reactions are in use.
        self.fallback[kmock.method.PUT] << self._serve_via_dsl
        self._builtin_payload_ids = {id(payload) for payload in self._payloads}
        hooks = self.create_hooks
        default_queue = DefaultLocalQueue(selector=self._namespace_selector) if suspend_queued_jobs in hooks else None
        multikueue = MultiKueueManagedBy() if suspend_queued_jobs in hooks else None
        if multikueue is not None:  # after the queue's defaulting, before the suspending
            hooks = (multikueue, *hooks)
        if default_queue is not None:  # Kueue's job webhooks default the queue before deciding to suspend
            hooks = (default_queue, *hooks)
        if self.resource_in_use_finalizer and suspend_queued_jobs in hooks:  # with Kueue's job webhooks
            hooks = (*hooks, finalize_in_use)
        self._store = store.ObjectStore(
            objects=self._objects,
            refs=(),
            history_limit=self.history_limit,
            clock=self.clock,
            enforce_namespaces=self.enforce_namespaces,
            create_hooks=tuple(self._only_called(hook, self._configured(hook)) for hook in hooks),
        )
        if default_queue is not None:
            default_queue.store = self._store
        if multikueue is not None:
            multikueue.store = self._store
        for ref in (
            *resources.RESOURCES.values(),
            *aggregator.KINDS,
            *reviews.KINDS,
            *rbac.KINDS,
            *flowcontrol.KINDS,
            *self.extra_resources,
        ):
            self.register_resource(ref)
        self.register_resource(custom_resources.CRDS)
        self._serve_kueue_v1beta1()
        self._serve_events_v1()
        self._store.create_system_priority_classes()
        for obj in rbac.bootstrap_objects():  # what kube-apiserver's RBAC bootstrap policy creates at start
            self.put_objects([obj])
        self._placeholders = {
            (ref.group, ref.version, ref.plural): ref
            for ref in self._refs.values()
            if openapi.schema_name(ref) not in openapi.core_schemas() and ref.group != crds.GROUP
        }
        if self.crd_files:
            self.install_crds(custom_resources.load(self.crd_files))

    # -- public hooks --------------------------------------------------------------------

    @property
    def url(self) -> str:  # type: ignore[override]
        """The base URL of the running server, e.g. ``http://127.0.0.1:41234`` (kmock's is a yarl.URL)."""
        return str(super().url)

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out by this server."""
        return self._store.resource_version

    def register_resource(self, ref: resources.ResourceRef, *, storage: resources.ResourceRef | None = None) -> None:
        """Serve one more kind (discovery, CRUD, watch); idempotent. ``storage``: the version whose
        objects this one shares (another served version of a CRD; ``None``: its own)."""
        key = (ref.group, ref.version, ref.plural)
        if (old := self._refs.get(key)) is not None and old != ref:
            self._store.register(ref, storage=storage or self._store.storage_of(old))
        else:
            self._store.register(ref, storage=storage)
        self._refs[key] = ref
        self._documents.clear()
        self.resources[kmock.resource(ref.group, ref.version, ref.plural)] = kmock.ResourceInfo(
            kind=ref.kind,
            singular=ref.singular,
            namespaced=ref.namespaced,
            verbs=_VERBS,
            subresources={"status"} if ref.status_subresource else set(),
        )

    def _serve_kueue_v1beta1(self) -> None:
        """Serve Kueue's deprecated v1beta1 of every Kueue kind beside v1beta2, as Kueue's CRDs do: stored
        as v1beta2 and converted both ways by Kueue's rules (:mod:`kueue_es.events.v1beta1`)."""
        for hub in [ref for ref in self._refs.values() if ref.api_version == v1beta1.V1BETA2]:
            served = dataclasses.replace(hub, version="v1beta1")
            self.register_resource(served, storage=hub)
            self._converted[(served.group, served.version, served.plural)] = hub

    def _serve_events_v1(self) -> None:
        """Serve ``events.k8s.io/v1`` Events as views of the stored core/v1 ones, as kube-apiserver serves one
        Event through both groups (Kueue writes its Events through events.k8s.io/v1, kubectl reads core/v1):
        each request runs on core/v1, what is written converted to it and what is answered from it by
        Kubernetes' field mapping (:mod:`.event_versions`), as Kueue's v1beta1 kinds are views of v1beta2."""
        self.register_resource(EVENTS_V1, storage=resources.EVENTS)
        self._converted[(EVENTS_V1.group, EVENTS_V1.version, EVENTS_V1.plural)] = resources.EVENTS

    def unregister_resource(self, ref: resources.ResourceRef) -> None:
        """Stop serving a kind: its objects are deleted (watchers see DELETED), its watches end,
        and requests for it get 404 as for any kind the server does not serve."""
        key = (ref.group, ref.version, ref.plural)
        served = self._refs.pop(key, None)
        self._custom.pop(key, None)
        self._documents.clear()
        with contextlib.suppress(KeyError):
            del self.resources[kmock.resource(ref.group, ref.version, ref.plural)]
        if served is not None and self._store.serves(served):
            self._store.unregister(served)

    def install_crds(self, documents: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create (or replace the spec of) CustomResourceDefinitions as ``kubectl apply`` would, without
        HTTP; returns them as stored, Established. Raises StoreError (422) for a CRD the API server
        refuses (:func:`custom_resources.kinds_of`)."""
        installed = []
        for document in documents:
            name = str((document.get("metadata") or {}).get("name") or "")
            body = store.json_copy(dict(document))
            self._check_crd(body)
            try:
                self._store.get(custom_resources.CRDS, namespace=None, name=name)
            except store.StoreError:
                self._store.create(custom_resources.CRDS, namespace=None, body=body)
            else:

                def replace(current: dict[str, Any], body: dict[str, Any] = body) -> dict[str, Any]:
                    return {**body, "metadata": {**current["metadata"], **body.get("metadata", {})}}

                self._store.update(custom_resources.CRDS, namespace=None, name=name, subresource=None, change=replace)
            installed.append(self._crd_changed(name))
        return installed

    def _lookup(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object of a served kind, or None (for create hooks that read another object)."""
        for ref in self._refs.values():
            if ref.api_version == api_version and ref.kind == kind:
                found = self._store.select(ref, namespace=namespace if ref.namespaced else None, name=name)
                return found[0] if found else None
        return None

    def aggregate_cluster_roles(self) -> None:
        """Write into every ClusterRole with an ``aggregationRule`` the rules of the ClusterRoles it selects,
        as Kubernetes' clusterrole-aggregation controller does (run after any ClusterRole write here)."""
        stored = self._store.select(rbac.CLUSTER_ROLES)
        for role in stored:
            if not (role.get("aggregationRule") or {}).get("clusterRoleSelectors"):
                continue
            rules = rbac.aggregated_rules({**role, "rules": []}, stored)
            if rules != (role.get("rules") or []):
                self._store.update(
                    rbac.CLUSTER_ROLES,
                    namespace=None,
                    name=role["metadata"]["name"],
                    subresource=None,
                    change=functools.partial(_with_rules, rules),
                )

    def put_objects(self, objects: list[dict[str, Any]]) -> None:
        """Store ``objects`` (of registered kinds) as they are, replacing any of the same name: how ``up
        --emulator`` and ``demo`` register the visibility server (:func:`aggregator.visibility_objects`).
        Raises StoreError as a create would."""
        for obj in objects:
            ref = self._refs[_group_version(obj["apiVersion"]) + (_plural_of(self._refs, obj),)]
            metadata = obj["metadata"]
            namespace = metadata.get("namespace") if ref.namespaced else None
            if ref == resources.NAMESPACES and self._store.select(ref, name=metadata["name"]):
                continue  # a Namespace stays (deleting one would end what is in it)
            with contextlib.suppress(store.StoreError):
                self._store.delete(ref, namespace=namespace, name=metadata["name"], preconditions=None, dry_run=False)
            self._store.create(ref, namespace=namespace, body=store.json_copy(obj))
        if any(obj.get("kind") == "ClusterRole" for obj in objects):
            self.aggregate_cluster_roles()

    def reset_history(self) -> None:
        """Forget all watch history and end open watches.

        Watchers that resume from any earlier resourceVersion get 410 Expired
        and must relist, as after an API server restart or etcd compaction.
        """
        self._store.reset_history()
        self.drop_watches()

    def drop_watches(self) -> None:
        """End every open watch stream now (the client sees a normal end of stream)."""
        self._watch_epoch += 1
        for ref in self._refs.values():
            self._store.log(ref).notify()

    # -- request entry points ------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """Serve discovery, OpenAPI and registered kinds directly; leave unknown paths and reactions to kmock.
        A group and version an APIService points elsewhere goes to its backend (:mod:`.aggregator`), as the
        caller authorized here (the impersonated user, else the administrator).
        A request impersonating a user (kubectl ``--as``) is first authorized by RBAC (:mod:`.rbac`): 403
        Forbidden as kube-apiserver's when no role allows it."""
        user = rbac.impersonated(raw_request.headers)
        if user is not None:
            attrs = rbac.request_attributes(raw_request.method, raw_request.path, raw_request.query)
            if not rbac.Authorizer(self._store.select).allows(user, attrs):
                message, details = rbac.forbidden(user, attrs)
                return await self._render_error(
                    kmock.KubernetesError(status=403, reason="Forbidden", message=message, details=details)
                )
        if (target := self._aggregated(raw_request.path)) is not None:
            try:
                url, tls = aggregator.backend(self._get_object, target)
                caller = user if user is not None else rbac.ADMIN
                return await aggregator.proxy(raw_request, await raw_request.read(), url=url, tls=tls, user=caller)
            except aggregator.BackendUnavailableError as err:
                logger.info("aggregated_backend_unavailable", api_service=target["metadata"]["name"], error=str(err))
                return await self._render_error(
                    kmock.KubernetesError(status=503, reason="ServiceUnavailable", message=str(err), details={})
                )
        if raw_request.method == "GET" and raw_request.path.rstrip("/") in HEALTH_PATHS:
            return aiohttp.web.Response(text="ok")  # kube-apiserver's health checks, as `kubectl get --raw /readyz`
        if (
            raw_request.method == "GET"
            and (document := self._discovery(raw_request.path)) is None
            and _is_discovery_path(raw_request.path)
            and not self._has_user_reactions()
        ):
            return await self._render_error(_not_found())
        if raw_request.method == "GET" and document is not None:
            accept = raw_request.headers.get("Accept", "")
            if raw_request.path.strip("/") == "openapi/v2" and _prefers_v2_protobuf(accept):
                body = self._openapi_v2_protobuf(document)
                return aiohttp.web.Response(body=body, content_type=openapi_v2_pb.CONTENT_TYPE)
            if not _accepts_json(accept):
                return await self._render_error(
                    kmock.KubernetesError(
                        status=406,
                        reason="NotAcceptable",
                        message="only application/json is served here (and protobuf for /openapi/v2)",
                        details={"name": raw_request.path},
                    )
                )
            return aiohttp.web.json_response(document)
        body = await raw_request.read()
        call = self._route(
            method=raw_request.method,
            path=raw_request.path,
            params=raw_request.query,
            content_type=raw_request.headers.get("Content-Type", ""),
            body=body,
            accept=raw_request.headers.get("Accept", ""),
            user_agent=raw_request.headers.get("User-Agent", ""),
        )
        if call is not None and user is not None:
            call = dataclasses.replace(call, user=user)
        # kmock 0.8 cannot parse Namespace URLs (/api/v1/namespaces raises), so those never go to reactions.
        if call is None or (self._has_user_reactions() and call.ref != resources.NAMESPACES):
            return await super().__call__(raw_request)
        try:
            result = self._execute(call)
        except kmock.KubernetesError as exc:
            return await self._render_error(exc)
        if isinstance(result, _Reply):
            headers = [("Warning", f'299 - "{_quoted(text)}"') for text in result.warnings]
            return aiohttp.web.json_response(
                result.payload, status=result.status, headers=multidict.CIMultiDict(headers)
            )
        if tables.wants_table(call.accept):
            result = self._table_events(call, result)
        deprecation = (
            crds.v1beta1_warning(call.ref.kind)
            if (call.ref.group, call.ref.version, call.ref.plural) in self._converted and call.ref.group == crds.GROUP
            else None
        )
        return await _stream_events(raw_request, result, warnings=(deprecation,) if deprecation else ())

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        """kmock's Status for an error, but kube-apiserver's 404 for a path nothing serves: kmock's own not-found
        errors (an unknown group, version or resource) name kmock's test API, which no user should see."""
        if isinstance(exc, kmock.KubernetesNotFoundError):
            return aiohttp.web.json_response(_not_found_status(), status=404)
        return await super()._render_error(exc)

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        """kmock's dispatch of reactions, without KubernetesEmulator's own object bookkeeping (the store does it)."""
        return await kmock.RawHandler._handle(self, request)

    async def _serve_via_dsl(self, request: kmock.Request) -> Any:  # a kmock.Response
        """The kmock fallback reaction: the same emulation, reached through kmock's dispatcher."""
        headers = {key.lower(): value for key, value in request.headers.items()}
        call = self._route(
            method=str(request.method.value),
            path=request.url.path,
            params=request.params,
            content_type=headers.get("content-type", ""),
            body=request.body,
            accept=headers.get("accept", ""),
            user_agent=headers.get("user-agent", ""),
        )
        if call is None:
            raise _not_found()
        result = self._execute(call)
        if isinstance(result, _Reply):
            return _KmockResponse(status=result.status, payload=result.payload)
        return _KmockResponse(payload=_with_headers_first(result), headers={"Content-Type": "application/json"})

    # kmock registers these as its fallback reactions; all of them lead to the same emulation.
    _serve_list = _serve_watch = _serve_fetch = _serve_create = _serve_update = _serve_delete = _serve_via_dsl  # type: ignore[assignment]

    def _get_object(self, ref: resources.ResourceRef, namespace: str | None, name: str) -> dict[str, Any]:
        return self._store.get(ref, namespace=namespace, name=name)

    def _aggregated(self, path: str) -> dict[str, Any] | None:
        """The APIService that sends ``path`` (``/apis/GROUP/VERSION[/...]``) to another server, if one does."""
        segments = [segment for segment in path.split("/") if segment]
        if len(segments) < 3 or segments[0] != "apis":
            return None
        with contextlib.suppress(store.StoreError):
            found = self._store.get(aggregator.API_SERVICES, namespace=None, name=f"{segments[2]}.{segments[1]}")
            if (found.get("spec") or {}).get("service"):
                return found
        return None

    def _has_user_reactions(self) -> bool:
        return any(id(payload) not in self._builtin_payload_ids for payload in self._payloads)

    # -- discovery and OpenAPI -----------------------------------------------------------

    def _discovery(self, path: str) -> dict[str, Any] | None:
        """The discovery or OpenAPI document at ``path``, or None when ``path`` is not one.

        ``/api``, ``/api/v1``, ``/apis``, ``/apis/GROUP``, ``/apis/GROUP/VERSION``
        (APIVersions, APIResourceList, APIGroupList, APIGroup: the legacy discovery
        kubectl falls back to when the aggregated form is not offered), ``/version``,
        ``/openapi/v2`` and ``/openapi/v3[/api/v1|/apis/GROUP/VERSION]``
        (:mod:`kueue_es.sim.openapi`).
        """
        segments = [segment for segment in path.split("/") if segment]
        match segments:
            case ["version"]:
                major, minor, _ = KUBERNETES_VERSION.split(".")
                return {
                    "major": major,
                    "minor": minor,
                    "gitVersion": f"v{KUBERNETES_VERSION}",
                    "platform": "linux/amd64",
                    "compiler": "gc",
                }
            case ["api"]:
                return {"kind": "APIVersions", "apiVersion": "v1", "versions": ["v1"], "serverAddressByClientCIDRs": []}
            case ["api", version]:
                return self._resource_list("", version)
            case ["apis"]:
                refs = self._discoverable()
                remote = aggregator.api_services(self._store.select)
                groups = sorted({ref.group for ref in refs if ref.group} | {obj["spec"]["group"] for obj in remote})
                documents = [
                    self._group(g, refs) if any(r.group == g for r in refs) else aggregator.group_document(g, remote)
                    for g in groups
                ]
                return {"kind": "APIGroupList", "apiVersion": "v1", "groups": documents}
            case ["apis", group]:
                refs = self._discoverable()
                if any(ref.group == group for ref in refs):
                    return self._group(group, refs)
                return aggregator.group_document(group, aggregator.api_services(self._store.select))
            case ["apis", group, version]:
                return self._resource_list(group, version)
            case ["openapi", *_]:
                return self._openapi(tuple(segments[1:]), self._discoverable())
        return None

    def _openapi(self, where: tuple[str, ...], refs: list[resources.ResourceRef]) -> dict[str, Any] | None:
        """An OpenAPI document (``where``: ``("v2",)``, ``("v3",)``, ``("v3", "apis", GROUP, VERSION)``),
        kept until the served kinds change (a CRD's schemas make these documents megabytes)."""
        key = (where, tuple(refs))
        if (cached := self._documents.get(key)) is not None:
            return cached
        custom = {kind.ref: kind.schema for kind in self._custom.values()}
        for (group, version, plural), hub in self._converted.items():  # Kueue's v1beta1 schemas
            if group == crds.GROUP:  # (events.k8s.io/v1's is among the built-in ones)
                custom[self._refs[group, version, plural]] = crds.v1beta1_schema(hub.kind)
        match where:
            case ("v2",):
                document = openapi.v2_document(refs, custom)
            case ("v3",):
                document = openapi.v3_index(refs, custom)
            case ("v3", "api", version):
                document = openapi.v3_document(refs, group="", version=version, custom=custom)
            case ("v3", "apis", group, version):
                document = openapi.v3_document(refs, group=group, version=version, custom=custom)
            case _:
                return None
        self._documents[key] = document
        return document

    def _openapi_v2_protobuf(self, document: dict[str, Any]) -> bytes:
        """``/openapi/v2`` as gnostic's protobuf (:mod:`.openapi_v2_pb`), what kubectl asks for to validate a
        ``kind: List`` file client-side; encoded once for each v2 document (the document is rebuilt, and
        so encoded again, when the served kinds change)."""
        cached = self._v2_protobuf
        if cached is not None and cached[0] is document:
            return cached[1]
        encoded = openapi_v2_pb.encode(document)
        self._v2_protobuf = (document, encoded)
        return encoded

    def _discoverable(self) -> list[resources.ResourceRef]:
        """The registered kinds still in kmock's ``resources`` (a test removes one there to hide it).

        Compared as (group, version, plural), the fields a ``kmock.resource`` is equal and hashed by: building
        one ``kmock.resource`` per registered kind took most of the emulator's time under kubectl's discovery."""
        listed = {(key.group, key.version, key.plural) for key in self.resources if isinstance(key, kmock.resource)}
        return [ref for key, ref in self._refs.items() if key in listed]

    def _group(self, group: str, refs: list[resources.ResourceRef]) -> dict[str, Any]:
        """The APIGroup document of ``group`` among the discoverable kinds ``refs``."""
        versions = sorted({ref.version for ref in refs if ref.group == group}, key=_version_priority)
        entries = [{"groupVersion": f"{group}/{version}", "version": version} for version in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": entries,
            "preferredVersion": entries[0],
        }

    def _resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        refs = [ref for ref in self._discoverable() if (ref.group, ref.version) == (group, version)]
        if not refs:
            return None
        crd_names = {kind.plural: kind.short_names for kind in crds.KINDS} if group == crds.GROUP else {}
        entries = []
        for ref in sorted(refs, key=lambda r: r.plural):
            short_names, categories = _BUILT_IN_NAMES.get((group, ref.plural), (crd_names.get(ref.plural, ()), ()))
            custom = self._custom.get((ref.group, ref.version, ref.plural))
            if custom is not None:
                short_names, categories = custom.short_names, custom.categories
            entries.append(
                {
                    "name": ref.plural,
                    "singularName": custom.singular if custom is not None else ref.singular,
                    "namespaced": ref.namespaced,
                    "kind": ref.kind,
                    "verbs": ["create"] if ref in reviews.KINDS else sorted(_VERBS),
                    **({"shortNames": list(short_names)} if short_names else {}),
                    **({"categories": list(categories)} if categories else {}),
                }
            )
            if (group, ref.plural) in SCALABLE or (custom is not None and custom.scale is not None):
                entries.append(
                    {
                        "name": f"{ref.plural}/scale",
                        "singularName": "",
                        "namespaced": ref.namespaced,
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if ref.status_subresource:
                entries.append(
                    {
                        "name": f"{ref.plural}/status",
                        "singularName": "",
                        "namespaced": ref.namespaced,
                        "kind": ref.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": entries,
        }

    # -- routing and execution -----------------------------------------------------------

    def _route(
        self,
        *,
        method: str,
        path: str,
        params: Mapping[str, str],
        content_type: str,
        body: bytes,
        accept: str = "",
        user_agent: str = "",
    ) -> _ApiCall | None:
        """Map an HTTP request to an _ApiCall, or None if it is not for a registered kind."""
        segments = path.strip("/").split("/")
        if len(segments) >= 3 and segments[0] == "api":
            group, version, rest = "", segments[1], segments[2:]
        elif len(segments) >= 4 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            return None
        namespace = None
        is_namespace_subresource = group == "" and len(rest) == 3 and rest[2] in ("status", "finalize")
        if len(rest) >= 3 and rest[0] == "namespaces" and not is_namespace_subresource:
            namespace, rest = rest[1], rest[2:]
        ref = self._refs.get((group, version, rest[0]))
        if ref is None or len(rest) > 3:
            return None
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        verb = _verb_for(
            method=method.upper(), has_name=name is not None, watch=str(params.get("watch", "")).lower() in _TRUE
        )
        return _ApiCall(
            verb=verb,
            ref=ref,
            namespace=namespace,
            name=name,
            subresource=subresource,
            params=params,
            content_type=content_type,
            body=body,
            accept=accept,
            user_agent=user_agent,
        )

    def _execute(self, call: _ApiCall) -> _Reply | AsyncIterator[dict[str, Any]]:
        """Run a routed call against the store; raises kmock.KubernetesError with a real-looking Status.

        A write to a CustomResourceDefinition then updates the kinds served (:meth:`_crd_changed`);
        objects of a CRD's other served versions are answered in the requested version; Kueue's v1beta1
        kinds are executed as v1beta2 (:meth:`_execute_converted`)."""
        if (hub := self._converted.get((call.ref.group, call.ref.version, call.ref.plural))) is not None:
            return self._execute_converted(call, hub)
        result = self._execute_call(call)
        if call.ref == rbac.CLUSTER_ROLES and call.verb not in ("get", "list", "watch"):
            with _kubernetes_errors(call):
                self.aggregate_cluster_roles()
        if call.ref == custom_resources.CRDS and call.verb not in ("get", "list", "watch"):
            with _kubernetes_errors(call):
                if isinstance(result, _Reply) and (name := call.name or result.payload["metadata"].get("name")):
                    self._crd_changed(name)
        if (storage := self._store.storage_of(call.ref)) is not None and storage.version != call.ref.version:
            if isinstance(result, _Reply):
                return dataclasses.replace(result, payload=_in_version(call.ref, result.payload))
            return _events_in_version(call.ref, result)
        return result

    def _execute_converted(self, call: _ApiCall, hub: resources.ResourceRef) -> _Reply | AsyncIterator[dict[str, Any]]:
        """A request for a Kueue kind in v1beta1, as kube-apiserver serves a CRD version that is not the storage
        one: the written object (create, replace, server-side apply) is decoded by the v1beta1 schema and
        converted to v1beta2 (:meth:`_from_served`); a JSON or merge patch is applied to the object as v1beta1
        shows it (:meth:`_update`); then the call runs on v1beta2, and what it answers (objects, lists, watch
        events) is converted back to v1beta1. Every answer carries the version's deprecation warning. An
        events.k8s.io/v1 Event goes the same way to and from the core/v1 Event stored (:mod:`.event_versions`),
        without a warning."""
        warnings: list[str] = []
        with _kubernetes_errors(call):
            body, content_type = call.body, call.content_type
            media_type = call.content_type.split(";", 1)[0].strip().lower()
            if call.verb in ("create", "replace"):
                converted = self._from_served(call, _json_body(call), warnings)
                body, content_type = json.dumps(converted).encode(), "application/json"
            elif call.verb == "patch" and media_type == APPLY_PATCH:
                converted = self._from_served(call, _apply_config(call), warnings, applied=True)
                body = json.dumps(converted).encode()
            result = self._execute_call(
                dataclasses.replace(call, ref=hub, served=call.ref, body=body, content_type=content_type)
            )
        deprecation = crds.v1beta1_warning(call.ref.kind) if call.ref.group == crds.GROUP else None
        if isinstance(result, _Reply):
            extra = ((deprecation,) if deprecation else ()) + tuple(warnings)
            payload = _in_served(call.ref, result.payload)
            return dataclasses.replace(result, payload=payload, warnings=extra + result.warnings)
        return _events_in_served(call.ref, result)

    def _from_served(self, call: _ApiCall, obj: Any, warnings: list[str], *, applied: bool = False) -> dict[str, Any]:
        """An object written through a Kueue kind's v1beta1 (``call.ref``, or ``call.served`` once routed) as
        the v1beta2 object to store: fields Kueue's v1beta1 schema does not declare pruned (400 with
        ``fieldValidation=Strict``, warnings with ``Warn``), then, unless it is an apply configuration
        (``applied``: a partial object), the schema's defaults filled in and its value constraints checked
        (422), then converted by Kueue's rules (:func:`kueue_es.events.v1beta1.to_v1beta2`)."""
        served = call.served or call.ref
        if not isinstance(obj, dict):
            raise store.StoreError(
                status=400, reason="BadRequest", message=f"the request body is not a {served.kind} object"
            )
        obj = {**obj, "apiVersion": served.api_version, "kind": served.kind}
        if served.group == event_versions.GROUP:  # an events.k8s.io/v1 Event: the core/v1 Event it stands for
            return event_versions.to_core(obj)
        schema = crds.v1beta1_schema(served.kind)
        # an apply configuration is partial: pruned, but neither defaulted nor held to required fields
        pruned = custom_resources.prune(obj, schema) if applied else custom_resources.decode(obj, schema)
        unknown = [f'unknown field "{path}"' for path in pruned]
        if unknown and call.field_validation == "Strict":
            raise store.StoreError(
                status=400,
                reason="BadRequest",
                message=f'{served.kind} in version "{served.version}" cannot be handled as a {served.kind}: '
                f"strict decoding error: {', '.join(unknown)}",
                details={"kind": served.plural, "group": served.group, "name": call.name or ""},
            )
        if call.field_validation == "Warn":
            warnings.extend(unknown)
        if self.validate and not applied and (causes := custom_resources.validate(obj, schema)):
            name = str((obj.get("metadata") or {}).get("name") or call.name or "")
            invalid = validation.Invalid(kind=served.kind, group=served.group, name=name, causes=causes)
            raise store.StoreError(status=422, reason="Invalid", message=invalid.message, details=invalid.details())
        try:
            return v1beta1.to_v1beta2(obj)
        except v1beta1.ConversionError as err:
            raise store.StoreError(status=400, reason="BadRequest", message=str(err)) from err

    def _execute_call(self, call: _ApiCall) -> _Reply | AsyncIterator[dict[str, Any]]:
        with _kubernetes_errors(call):
            if call.ref in reviews.KINDS:  # answered, never stored (kubectl auth can-i, auth whoami)
                if call.verb != "create":
                    raise store.StoreError(
                        status=405,
                        reason="MethodNotAllowed",
                        message="the server does not allow this method on the requested resource",
                        details={"kind": call.ref.plural, "group": call.ref.group},
                    )
                review = reviews.answer(
                    call.ref, _json_body(call), user=call.user, authorizer=rbac.Authorizer(self._store.select)
                )
                return _Reply(status=201, payload=review)
            kind = self._custom.get((call.ref.group, call.ref.version, call.ref.plural))
            custom_scale = kind.scale if kind is not None else None
            _check_allowed(call, scale=custom_scale is not None)
            if call.subresource == "scale":
                if custom_scale is not None:
                    return self._custom_scale(call, custom_scale)
                return self._scale(call)
            match call.verb:
                case "list":
                    return self._read_reply(call, self._list(call))
                case "watch":
                    return self._watch(call)
                case "get":
                    assert call.name is not None
                    obj = self._store.get(call.ref, namespace=call.namespace, name=call.name)
                    return self._read_reply(call, obj)
                case "create":
                    warnings: list[str] = []
                    created = self._store.create(
                        call.ref,
                        namespace=call.namespace,
                        body=self._admit(call, self._decode(call, _json_body(call), warnings), old=None),
                        dry_run=call.dry_run,
                        check=self._checker(call, warnings),
                        track=self._update_tracker(call),
                    )
                    return _Reply(status=201, payload=created, warnings=tuple(warnings))
                case "patch" if call.content_type.split(";", 1)[0].strip().lower() == APPLY_PATCH:
                    return self._server_side_apply(call)
                case "replace" | "patch":
                    warnings = []
                    updated = self._update(call, check=self._checker(call, warnings), warnings=warnings)
                    return _Reply(status=200, payload=updated, warnings=tuple(warnings))
                case "delete":
                    assert call.name is not None
                    options = _delete_options(call)
                    preconditions = options.get("preconditions")
                    dry_run = call.dry_run or options.get("dryRun") == ["All"]
                    try:
                        propagation = garbage.propagation_policy(options)
                    except validation.Invalid as exc:
                        raise store.StoreError(
                            status=422, reason="Invalid", message=exc.message, details=exc.details()
                        ) from exc
                    if call.ref == custom_resources.CRDS and not dry_run:
                        # the API server's CRD finalizer: the instances go first, then the CRD
                        self._store.get(call.ref, namespace=None, name=call.name)
                        for kind in self._crd_kinds.pop(call.name, []):
                            self._unserve(kind)
                    deleted = self._store.delete(
                        call.ref,
                        namespace=call.namespace,
                        name=call.name,
                        preconditions=preconditions,
                        dry_run=dry_run,
                        propagation=propagation,
                    )
                    if deleted["metadata"].get("deletionTimestamp") or not self._answers_delete_with_status(call.ref):
                        return _Reply(status=200, payload=deleted)
                    return _Reply(status=200, payload=_deleted_status(call.ref, deleted))
        raise AssertionError(f"unrouted verb {call.verb!r}")  # pragma: no cover

    def _scale(self, call: _ApiCall) -> _Reply:
        """The ``scale`` subresource of a Deployment, ReplicaSet or StatefulSet (``kubectl scale``): an
        autoscaling/v1 Scale read from, or written to, the object's ``spec.replicas``."""
        assert call.name is not None
        if call.verb in ("patch", "replace"):
            body = _json_body(call)

            def change(current: dict[str, Any]) -> Any:
                scale = _scale_of(current)
                if call.verb == "replace":
                    wanted = body
                else:
                    wanted = patches.apply_patch(scale, body, content_type=call.content_type, schema=None)
                replicas = (wanted.get("spec") or {}).get("replicas") if isinstance(wanted, dict) else None
                if not isinstance(replicas, int) or replicas < 0:
                    raise store.StoreError(
                        status=422,
                        reason="Invalid",
                        message=f'Scale.autoscaling "{call.name}" is invalid: spec.replicas: Invalid value: '
                        f"{replicas!r}: must be greater than or equal to 0",
                        details={"kind": "Scale", "group": "autoscaling", "name": call.name},
                    )
                updated = store.json_copy(current)
                updated.setdefault("spec", {})["replicas"] = replicas
                return updated

            stored = self._store.update(
                call.ref,
                namespace=call.namespace,
                name=call.name,
                subresource=None,
                change=change,
                dry_run=call.dry_run,
            )
            return _Reply(status=200, payload=_scale_of(stored))
        if call.verb != "get":
            raise store.StoreError(
                status=405,
                reason="MethodNotAllowed",
                message="the server does not allow this method on the requested resource",
                details={"kind": call.ref.plural, "group": call.ref.group},
            )
        return _Reply(
            status=200, payload=_scale_of(self._store.get(call.ref, namespace=call.namespace, name=call.name))
        )

    def _list(self, call: _ApiCall) -> dict[str, Any]:
        """A list, a page of it with ``limit``: ``metadata.continue`` (a token naming the list's
        resourceVersion and the key the next page starts after) and ``remainingItemCount`` while items
        remain. A page read with a token starts after its key and reports the first page's resourceVersion
        (its items are the current ones: the emulator keeps no old versions of objects)."""
        limit_text, token = call.params.get("limit") or "", call.params.get("continue") or ""
        if limit_text and not re.fullmatch(r"-?\d+", limit_text):
            raise store.StoreError(
                status=400, reason="BadRequest", message=f'limit: Invalid value: "{limit_text}": must be an integer'
            )
        version, after = _decode_continue(token) if token else (self._store.resource_version, None)
        items = self._store.select(
            call.ref,
            namespace=call.namespace,
            labels=selectors.parse_label_selector(call.params.get("labelSelector")),
            fields=self._field_selector(call),
        )
        if after is not None:
            items = [item for item in items if _list_key(item) > after]
        metadata: dict[str, Any] = {"resourceVersion": str(version)}
        limit = int(limit_text or 0)
        if 0 < limit < len(items):
            items, rest = items[:limit], len(items) - limit
            metadata.update({"continue": _encode_continue(version, _list_key(items[-1])), "remainingItemCount": rest})
        return {
            "apiVersion": call.ref.api_version,
            "kind": f"{call.ref.kind}List",
            "metadata": metadata,
            "items": items,
        }

    def _field_selector(self, call: _ApiCall) -> selectors.FieldSelector:
        """The request's ``fieldSelector``, refused (400) when it names a field the kind does not select by."""
        fields = selectors.parse_field_selector(call.params.get("fieldSelector"))
        ref = call.served or call.ref  # the version addressed: Kueue's v1beta1 Workload selects by no status field
        custom = not self._takes_strategic_merge(ref)
        selectors.check_selectable(
            fields,
            group=ref.group,
            kind=ref.kind,
            namespaced=ref.namespaced,
            custom=custom,
            selectable=self._selectable_fields(ref),
        )
        if ref.group == event_versions.GROUP:  # named as events.k8s.io/v1 names them, selected on core/v1 Events
            return selectors.FieldSelector(
                requirements=tuple(
                    dataclasses.replace(term, path=event_versions.FIELD_LABELS[term.path])
                    for term in fields.requirements
                )
            )
        return fields

    def _selectable_fields(self, ref: resources.ResourceRef) -> tuple[str, ...]:
        """The ``selectableFields`` of a custom kind's CRD: Kueue's own (:data:`kueue_es.crds.KINDS`) or an
        installed CRD's; () for any other kind."""
        if (ref.group, ref.version, ref.plural) in self._converted and ref.group == crds.GROUP:
            return crds.v1beta1_selectable(ref.kind)  # Kueue's v1beta1 declares none
        if ref.group == crds.GROUP:
            return next((kind.selectable for kind in crds.KINDS if kind.plural == ref.plural), ())
        custom = self._custom.get((ref.group, ref.version, ref.plural))
        return custom.selectable if custom is not None else ()

    def _read_reply(self, call: _ApiCall, payload: dict[str, Any]) -> _Reply:
        """A get or list answer: the object or list, or a Table of it when kubectl asks for one."""
        if not tables.wants_table(call.accept):
            return _Reply(status=200, payload=payload)
        objects = payload["items"] if "items" in payload else [payload]
        version = str(payload.get("metadata", {}).get("resourceVersion", ""))
        shown = call.served or call.ref
        if call.served is not None:
            objects = [_in_served(call.served, obj) for obj in objects]
        elif self._store.storage_of(call.ref) not in (None, call.ref):
            objects = [_in_version(call.ref, obj) for obj in objects]
        table = tables.table(
            shown,
            objects,
            now=self.clock(),
            resource_version=version,
            include_object=call.params.get("includeObject") or "PartialObjectMetadata",
            printer_columns=self._printer_columns(shown),
        )
        for key in ("continue", "remainingItemCount"):  # a page of a list as a Table (kubectl get --chunk-size)
            if key in payload.get("metadata", {}) and "items" in payload:
                table.setdefault("metadata", {})[key] = payload["metadata"][key]
        return _Reply(status=200, payload=table)

    async def _table_events(
        self, call: _ApiCall, events: AsyncIterator[dict[str, Any]]
    ) -> AsyncIterator[dict[str, Any]]:
        """A watch as ``kubectl get -w`` asks for it: each event's object as a one-row Table."""
        include = call.params.get("includeObject") or "PartialObjectMetadata"
        async for event in events:
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                version = str(event["object"].get("metadata", {}).get("resourceVersion", ""))
                table = tables.table(
                    call.ref,
                    [event["object"]],
                    now=self.clock(),
                    resource_version=version,
                    include_object=include,
                    printer_columns=self._printer_columns(call.ref),
                )
                event = {"type": event["type"], "object": table}
            yield event

    def validate_object(self, ref: resources.ResourceRef, obj: dict[str, Any], *, field_validation: str) -> list[str]:
        """The API server's validation of an object about to be stored (the one hook for every write).

        Called on create, replace, patch and apply (dry runs included) with the object
        as it would be stored. ``field_validation`` is the request's
        ``fieldValidation`` ("" when not given). Here: fields the kind's OpenAPI schema
        does not declare are refused with 400 under ``Strict`` (the message of a real
        API server's strict decoding), returned as warnings under ``Warn``, and let
        through otherwise (unlike a real server, which drops them, the emulator keeps
        them). An object of a CRD's kind (pruned already) is held to the values of its
        schema (:func:`custom_resources.validate`: 422 Invalid) unless ``validate`` is off. Raises ``store.StoreError``; returns warning texts for ``Warning`` headers.
        Extend it (e.g. with Kueue's validation, 422) rather than adding other hooks.
        """
        if (kind := self._custom.get((ref.group, ref.version, ref.plural))) is not None:
            # its unknown fields were pruned when decoded (_decode); its values are held to its schema
            if self.validate and (causes := custom_resources.validate(obj, kind.schema)):
                name = str(obj.get("metadata", {}).get("name", ""))
                invalid = validation.Invalid(kind=ref.kind, group=ref.group, name=name, causes=causes)
                raise store.StoreError(status=422, reason="Invalid", message=invalid.message, details=invalid.details())
            return []
        if field_validation not in ("Strict", "Warn"):
            return []
        unknown = [f'unknown field "{path}"' for path in openapi.unknown_fields(obj, ref)]
        if unknown and field_validation == "Strict":
            raise store.StoreError(
                status=400,
                reason="BadRequest",
                message=f'{ref.kind} in version "{ref.version}" cannot be handled as a {ref.kind}: '
                f"strict decoding error: {', '.join(unknown)}",
                details={"kind": ref.plural, "group": ref.group, "name": obj.get("metadata", {}).get("name", "")},
            )
        return unknown

    def _checker(self, call: _ApiCall, warnings: list[str]) -> Callable[[dict[str, Any]], None]:
        field_validation = call.field_validation

        def check(obj: dict[str, Any]) -> None:
            warnings.extend(self.validate_object(call.ref, obj, field_validation=field_validation))

        return check

    def _update(
        self,
        call: _ApiCall,
        *,
        check: Callable[[dict[str, Any]], None] | None = None,
        warnings: list[str] | None = None,
    ) -> dict[str, Any]:
        assert call.name is not None
        warnings = [] if warnings is None else warnings
        body = _json_body(call)
        if call.verb == "replace":
            version = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
            if not version and not self._takes_strategic_merge(call.ref):
                # a custom resource's strategy refuses an unconditional update (AllowUnconditionalUpdate false);
                # the API server names the resource, not the kind, in this one message
                raise store.StoreError(
                    status=422,
                    reason="Invalid",
                    message=f'{call.ref.qualified_plural} "{call.name}" is invalid: metadata.resourceVersion: '
                    "Invalid value: 0x0: must be specified for an update",
                    details={
                        "name": call.name,
                        "group": call.ref.group,
                        "kind": call.ref.plural,
                        "causes": [
                            {
                                "reason": validation.INVALID,
                                "message": "Invalid value: 0x0: must be specified for an update",
                                "field": "metadata.resourceVersion",
                            }
                        ],
                    },
                )

            def change(current: dict[str, Any]) -> Any:
                return self._admit(call, self._decode(call, store.json_copy(body), warnings), old=current)
        else:
            media_type = call.content_type.split(";", 1)[0].strip().lower()
            if media_type == patches.STRATEGIC_MERGE_PATCH and not self._takes_strategic_merge(call.ref):
                raise store.StoreError(
                    status=415,
                    reason="UnsupportedMediaType",
                    message="the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                    details={"kind": call.ref.plural, "group": call.ref.group},
                )

            def change(current: dict[str, Any]) -> Any:
                if call.served is not None:  # patched as the client sees it (v1beta1), stored as v1beta2
                    shown = _in_served(call.served, current)
                    patched = patches.apply_patch(shown, body, content_type=call.content_type, schema=None)
                    patched = self._from_served(call, patched, warnings)
                else:
                    patched = patches.apply_patch(
                        current, body, content_type=call.content_type, schema=openapi.patch_schema(call.ref)
                    )
                return self._admit(call, self._decode(call, patched, warnings), old=current)

        return self._store.update(
            call.ref,
            namespace=call.namespace,
            name=call.name,
            subresource=call.subresource,
            change=change,
            dry_run=call.dry_run,
            check=check,
            track=self._update_tracker(call),
        )

    def _update_tracker(self, call: _ApiCall) -> store.Track:
        """Records a create, replace or patch in the object's managedFields as an Update by the request's
        field manager (:func:`managed_fields.track_update`)."""
        manager = managed_fields.manager_of(call.params.get("fieldManager") or "", call.user_agent)
        subresource = call.subresource or ""
        part = "status" if subresource == "status" else ("main" if call.ref.status_subresource else "all")

        def track(previous: dict[str, Any] | None, new: dict[str, Any]) -> None:
            managed_fields.track_update(
                previous,
                new,
                manager=manager,
                api_version=call.ref.api_version,
                part=part,
                subresource=subresource,
                now=store.format_timestamp(self.clock()),
            )

        return track

    def _apply_tracker(self, call: _ApiCall, *, manager: str, applied: set[managed_fields.Path]) -> store.Track:
        """Records a server-side apply in managedFields, refusing (409) one that changes fields other managers
        own unless ``force`` (:func:`managed_fields.track_apply`)."""
        force = str(call.params.get("force", "")).lower() in _TRUE

        def track(previous: dict[str, Any] | None, new: dict[str, Any]) -> None:
            try:
                managed_fields.track_apply(
                    previous,
                    new,
                    applied=applied,
                    manager=manager,
                    api_version=call.ref.api_version,
                    subresource=call.subresource or "",
                    force=force,
                    now=store.format_timestamp(self.clock()),
                )
            except managed_fields.Conflict as conflict:
                raise store.StoreError(
                    status=409,
                    reason="Conflict",
                    message=conflict.message,
                    details={"causes": conflict.causes()},
                ) from conflict

        return track

    def _server_side_apply(self, call: _ApiCall) -> _Reply:
        """PATCH ``application/apply-patch+yaml``: create-or-merge, and fields a manager stops applying go.

        The applied configuration (YAML or JSON) creates the object when it is absent
        (201; not for ``status``: 404) and is otherwise merged into it -- maps key by
        key, lists and scalars replaced whole (a real server merges ``listType=map``
        lists such as conditions by key; a manager that applies the whole list gets
        the same result). Ownership is kept in ``metadata.managedFields``
        (:mod:`.managed_fields`): an apply that would change a field another manager
        owns is 409 Conflict naming them, unless ``force=true`` (``kubectl apply
        --server-side --force-conflicts``), which takes the fields over; fields this
        manager applied last time (per subresource) but not now are removed unless
        another manager owns them too. An apply that changes nothing writes nothing
        (same resourceVersion, no watch event).
        """
        assert call.name is not None
        manager = call.params.get("fieldManager") or ""
        if not manager:
            raise store.StoreError(
                status=400,
                reason="BadRequest",
                message="PATCH requests with content type application/apply-patch+yaml require fieldManager",
                details={"kind": call.ref.plural},
            )
        config = _apply_config(call)
        part = "status" if call.subresource == "status" else ("main" if call.ref.status_subresource else "all")
        applied = managed_fields.fields_of(_applied_part(config, part=part), part=part)
        track = self._apply_tracker(call, manager=manager, applied=applied)
        warnings: list[str] = []
        check = self._checker(call, warnings)
        try:
            current = self._store.get(call.ref, namespace=call.namespace, name=call.name)
        except store.StoreError:
            if call.subresource is not None:
                raise
            created = self._store.create(
                call.ref,
                namespace=call.namespace,
                body=self._admit(call, self._decode(call, config, warnings), old=None),
                dry_run=call.dry_run,
                check=check,
                track=track,
            )
            return _Reply(status=201, payload=created, warnings=tuple(warnings))
        subresource = call.subresource or ""
        # fields this manager applied before and not now go, unless another manager owns them too
        stale = frozenset(
            managed_fields.applied_before(current, manager=manager, subresource=subresource)
            - applied
            - managed_fields.owned_by_others(current, manager=manager, subresource=subresource)
        )

        precondition = (config.get("metadata") or {}).get("resourceVersion")

        def change(obj: dict[str, Any]) -> dict[str, Any]:
            # an applied resourceVersion is a precondition, also through the status subresource
            if precondition and precondition != obj["metadata"].get("resourceVersion"):
                raise store.StoreError(
                    status=409,
                    reason="Conflict",
                    message=f'Operation cannot be fulfilled on {call.ref.qualified_plural} "{call.name}": '
                    "the object has been modified; please apply your changes to the latest version and try again",
                    details={"kind": call.ref.plural, "group": call.ref.group, "name": call.name},
                )
            old = store.json_copy(obj)
            merged = _merge_applied(_drop_fields(obj, stale), _applied_part(config, part=part))
            if manager == managed_fields.KUBECTL and part != "status":
                managed_fields.update_last_applied(old, merged, config)
            return self._admit(call, self._decode(call, merged, warnings), old=old)

        updated = self._store.update(
            call.ref,
            namespace=call.namespace,
            name=call.name,
            subresource=call.subresource,
            change=change,
            dry_run=call.dry_run,
            check=check,
            track=track,
        )
        return _Reply(status=200, payload=updated, warnings=tuple(warnings))

    def _decode(self, call: _ApiCall, obj: Any, warnings: list[str]) -> Any:
        """What the API server does when it decodes a write, before admission: a CRD is checked
        (422 when refused); an object of a CRD's kind is pruned and defaulted by its schema
        (:func:`custom_resources.decode`): pruned fields refused with ``fieldValidation=Strict``
        (400, strict decoding error), named in warnings with ``Warn``, dropped silently otherwise."""
        if not isinstance(obj, dict):
            return obj
        if call.ref == custom_resources.CRDS:
            self._check_crd(obj)
            return obj
        kind = self._custom.get((call.ref.group, call.ref.version, call.ref.plural))
        if kind is None:
            return obj
        obj = {"apiVersion": call.ref.api_version, "kind": call.ref.kind, **obj}
        unknown = [f'unknown field "{path}"' for path in custom_resources.decode(obj, kind.schema)]
        if unknown and call.field_validation == "Strict":
            raise store.StoreError(
                status=400,
                reason="BadRequest",
                message=f'{call.ref.kind} in version "{call.ref.version}" cannot be handled as a {call.ref.kind}: '
                f"strict decoding error: {', '.join(unknown)}",
                details={"kind": call.ref.plural, "group": call.ref.group, "name": call.name or ""},
            )
        if call.field_validation == "Warn":
            warnings.extend(unknown)
        return obj

    def _check_crd(self, crd: dict[str, Any]) -> list[custom_resources.CustomKind]:
        try:
            return custom_resources.kinds_of(crd)
        except custom_resources.CrdError as err:
            raise store.StoreError(
                status=422,
                reason="Invalid",
                message=str(err),
                details={"group": custom_resources.GROUP, "kind": "customresourcedefinitions", "name": err.name},
            ) from err

    def _crd_changed(self, name: str) -> dict[str, Any]:
        """Serve what the stored CRD ``name`` declares: its served versions' kinds registered (kinds
        it no longer serves removed, with their objects), its status NamesAccepted and Established.
        The kueue.x-k8s.io kinds stay the emulator's own (kueue-es's schemas and validation).
        Returns the CRD as stored, or ``{}`` when it is gone (its kinds are then no longer served)."""
        try:
            crd = self._store.get(custom_resources.CRDS, namespace=None, name=name)
        except store.StoreError:
            for kind in self._crd_kinds.pop(name, []):
                self._unserve(kind)
            return {}
        if crd["metadata"].get("deletionTimestamp"):  # held by a finalizer: its kinds are gone already
            for kind in self._crd_kinds.pop(name, []):
                self._unserve(kind)
            return crd
        kinds = [kind for kind in self._check_crd(crd) if kind.ref.group != crds.GROUP]
        keys = {(k.ref.group, k.ref.version, k.ref.plural) for k in kinds}
        for old in self._crd_kinds.get(name, []):
            if (old.ref.group, old.ref.version, old.ref.plural) not in keys:
                self._unserve(old)
        for kind in kinds:
            self._custom[kind.ref.group, kind.ref.version, kind.ref.plural] = kind
            self.register_resource(kind.ref, storage=kind.storage)
        self._crd_kinds[name] = kinds
        self._documents.clear()
        status = custom_resources.accepted_status(crd, now=store.format_timestamp(self.clock()))
        if crd.get("status") == status:
            return crd
        return self._store.update(
            custom_resources.CRDS,
            namespace=None,
            name=name,
            subresource="status",
            change=lambda current: {**current, "status": status},
        )

    def _unserve(self, kind: custom_resources.CustomKind) -> None:
        """Stop serving a CRD's kind (its objects deleted); a kind the emulator serves without a CRD
        (JobSet) goes back to that."""
        key = (kind.ref.group, kind.ref.version, kind.ref.plural)
        self.unregister_resource(kind.ref)
        if (placeholder := self._placeholders.get(key)) is not None:
            self.register_resource(placeholder)

    def _answers_delete_with_status(self, ref: resources.ResourceRef) -> bool:
        """Whether a delete that removes an object at once is answered with a Status rather than the object:
        the generic registry's answer for the built-in kinds but those whose storage sets
        ``ReturnDeletedObject`` (Pods, ServiceAccounts) or has its own (Namespaces, CRDs); custom resources
        answer with the object."""
        exceptions = {resources.PODS, resources.NAMESPACES, custom_resources.CRDS}
        return self._takes_strategic_merge(ref) and ref not in exceptions and ref.plural != "serviceaccounts"

    def _takes_strategic_merge(self, ref: resources.ResourceRef) -> bool:
        """Whether ``ref`` is served as a built-in kind (strategic merge patches, updates without a
        resourceVersion), not as a custom resource: the kinds of applied CRDs, and those of the
        ``*.x-k8s.io`` groups the emulator serves itself (Kueue's, JobSet, ProvisioningRequest), are
        custom resources in a real cluster."""
        return not self._is_custom(ref) and not ref.group.endswith("x-k8s.io")

    def _is_custom(self, ref: resources.ResourceRef) -> bool:
        """Whether ``ref`` is served from a CRD applied to the emulator."""
        return (ref.group, ref.version, ref.plural) in self._custom

    def _printer_columns(self, ref: resources.ResourceRef) -> tuple[Mapping[str, Any], ...] | None:
        if (ref.group, ref.version, ref.plural) in self._converted and ref.group == crds.GROUP:  # .spec.cohort
            return crds.v1beta1_columns(ref.kind) or None
        kind = self._custom.get((ref.group, ref.version, ref.plural))
        return kind.printer_columns if kind is not None else None

    def _custom_scale(self, call: _ApiCall, scale: custom_resources.Scale) -> _Reply:
        """The ``scale`` subresource of a CRD's kind: an autoscaling/v1 Scale read from (and written to)
        the object at the CRD's ``specReplicasPath``, ``statusReplicasPath`` and ``labelSelectorPath``."""
        assert call.name is not None
        current = self._store.get(call.ref, namespace=call.namespace, name=call.name)
        if call.verb == "get":
            return _Reply(status=200, payload=_custom_scale_of(current, scale))
        if call.verb not in ("replace", "patch"):
            raise store.StoreError(
                status=405,
                reason="MethodNotAllowed",
                message="the server does not allow this method on the requested resource",
            )
        body = _json_body(call)
        wanted = (
            body
            if call.verb == "replace"
            else patches.apply_patch(_custom_scale_of(current, scale), body, content_type=call.content_type)
        )
        replicas = (wanted.get("spec") or {}).get("replicas") if isinstance(wanted, dict) else None
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise store.StoreError(
                status=422,
                reason="Invalid",
                message=f'Scale.autoscaling "{call.name}" is invalid: spec.replicas: Invalid value: {replicas!r}: '
                "must be a non-negative integer",
            )

        def change(obj: dict[str, Any]) -> dict[str, Any]:
            _set_path(obj, scale.spec_replicas_path, replicas)
            return obj

        updated = self._store.update(
            call.ref,
            namespace=call.namespace,
            name=call.name,
            subresource=None,
            change=change,
            dry_run=call.dry_run,
        )
        return _Reply(status=200, payload=_custom_scale_of(updated, scale))

    def _admit(self, call: _ApiCall, obj: Any, *, old: dict[str, Any] | None) -> Any:
        """The validating admission of a write to the main resource (kueue_es.validation.admit), after the
        built-in kinds' own update rules (:func:`_job_update_causes`); an update is first defaulted by Kueue's
        mutating webhooks where they run on update too (:meth:`_kueue_default_update`)."""
        if old is not None and call.subresource is None and isinstance(obj, dict):
            obj = self._kueue_default_update(call.ref, obj, namespace=call.namespace)
        if call.ref == resources.JOBS and old is not None and call.subresource is None and isinstance(obj, dict):
            if causes := _job_update_causes(old, obj):
                invalid = validation.Invalid(kind="Job", group="batch", name=call.name or "", causes=causes)
                raise store.StoreError(status=422, reason="Invalid", message=invalid.message, details=invalid.details())
        if not self.validate or not isinstance(obj, dict):
            return obj
        if call.subresource is not None:
            return self._kueue_validate_workload(call, self._admit_status(call, obj, old=old), old=old)
        manifest = {"apiVersion": call.ref.api_version, "kind": call.ref.kind, **obj}
        try:
            if call.field_validation == "Warn":
                # kept, so the strict-field checker (validate_object) names them in Warning headers
                validation.check(validation.prune(store.json_copy(manifest)), old=old)
                admitted = manifest
            else:
                admitted = validation.admit(manifest, old=old, field_validation=call.field_validation)
        except validation.Denied as exc:  # Kueue's validating webhook of a ClusterQueue, Cohort or ResourceFlavor
            raise store.StoreError(status=403, reason="Forbidden", message=exc.message) from exc
        except validation.Invalid as exc:
            raise store.StoreError(status=422, reason="Invalid", message=exc.message, details=exc.details()) from exc
        except validation.UnknownFields as exc:
            raise store.StoreError(status=400, reason="BadRequest", message=str(exc)) from exc
        self._kueue_validate(call.ref, admitted, old=old)
        self._kueue_validate_cluster_queue(call.ref, admitted)
        admitted = self._kueue_validate_workload(call, admitted, old=old)
        if call.ref.group == crds.GROUP:
            schema = validation.schema_of(call.ref.kind)
            if schema is not None:  # Kueue's CRDs default fields, as a real API server then does
                custom_resources.apply_defaults(admitted, schema)
        return admitted

    def _kueue_validate_workload(
        self, call: _ApiCall, obj: dict[str, Any], *, old: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Kueue's Workload webhooks (:mod:`kueue_es.jobframework.workload_webhook`), when the emulator plays
        Kueue's webhooks (:meth:`_kueue_validate`'s condition): a created Workload defaulted as ``mworkload.kb.io``
        leaves it (returned), then every write of one, main resource or ``status``, held to ``vworkload.kb.io``'s
        rules on the object and ``old`` with the CRD's defaults, as kube-apiserver hands them over; a refusal is
        403 Forbidden, ``admission webhook "vworkload.kb.io" denied the request: <field errors>``. Other kinds
        pass unchanged."""
        if (
            (call.ref.group, call.ref.kind) != (crds.GROUP, workload_webhook.KIND)
            or not self.kueue_validation
            or not any(hook in self.create_hooks for hook in KUEUE_WEBHOOKS)
        ):
            return obj
        gates = self.workload_gates
        if old is None and call.subresource is None:
            obj = workload_webhook.default(obj, gates=gates)
        schema = validation.schema_of(workload_webhook.KIND)
        seen, before = store.json_copy(obj), store.json_copy(old) if old is not None else None
        if schema is not None:  # the CRD's defaults come before any webhook (pod set name main, count 1)
            custom_resources.apply_defaults(seen, schema)
            if before is not None:
                custom_resources.apply_defaults(before, schema)
        errors = workload_webhook.validate(seen, old=before, gates=gates)
        if errors:
            raise store.StoreError(status=403, reason="Forbidden", message=workload_webhook.message(errors))
        return obj

    def _kueue_validate_cluster_queue(self, ref: resources.ResourceRef, obj: Mapping[str, Any]) -> None:
        """The checks of Kueue's ClusterQueue webhook (``vclusterqueue.kb.io``) that read its feature gates, on a
        create or update the schema accepted (``obj`` with the CRD's defaults), when the emulator plays Kueue's
        webhooks: :func:`core_webhooks.concurrent_admission_refusals` with :attr:`workload_gates`. A refusal is
        403 Forbidden, ``admission webhook "vclusterqueue.kb.io" denied the request: <field errors>``."""
        if (ref.group, ref.kind) != (crds.GROUP, "ClusterQueue") or not self.kueue_validation:
            return
        if not any(hook in self.create_hooks for hook in KUEUE_WEBHOOKS):
            return
        spec = obj.get("spec")
        refusals = core_webhooks.concurrent_admission_refusals(
            spec if isinstance(spec, Mapping) else {}, gates=self.workload_gates
        )
        if refusals:
            message = f'admission webhook "vclusterqueue.kb.io" denied the request: {core_webhooks.message(refusals)}'
            raise store.StoreError(status=403, reason="Forbidden", message=message)

    @property
    def workload_gates(self) -> dict[str, bool]:
        """The feature gates Kueue's Workload webhooks read here: ``feature_gates``, ElasticJobsViaWorkloadSlices
        as :attr:`elastic` says; every other gate at its default (:data:`workload_webhook.GATE_DEFAULTS`)."""
        return {**self.feature_gates, slices.GATE: self.elastic}

    @property
    def elastic(self) -> bool:
        """Whether the gate ElasticJobsViaWorkloadSlices is on here: ``elastic_jobs`` when given, else as
        ``feature_gates`` says (on unless set false, :func:`kueue_es.events.slices.gate_enabled`)."""
        return slices.gate_enabled(self.feature_gates) if self.elastic_jobs is None else self.elastic_jobs

    def _admit_status(self, call: _ApiCall, obj: dict[str, Any], *, old: dict[str, Any] | None) -> dict[str, Any]:
        """A write through the ``status`` subresource of a kueue.x-k8s.io object, held to Kueue's status schema
        (:func:`kueue_es.validation.admit_status`): unknown fields pruned (400 with ``fieldValidation=Strict``),
        then 422 Invalid for what the schema or its CEL rules refuse, as a real API server with Kueue's CRDs."""
        if call.subresource != "status" or call.ref.group != crds.GROUP:
            return obj
        manifest = {"apiVersion": call.ref.api_version, "kind": call.ref.kind, **obj}
        try:
            if call.field_validation == "Warn":
                # kept, as on the main resource, so the strict-field checker names them in Warning headers
                validation.admit_status(manifest, old=old)
                admitted = manifest
            else:
                admitted = validation.admit_status(manifest, old=old, field_validation=call.field_validation)
        except validation.Invalid as exc:
            raise store.StoreError(status=422, reason="Invalid", message=exc.message, details=exc.details()) from exc
        except validation.UnknownFields as exc:
            raise store.StoreError(status=400, reason="BadRequest", message=str(exc)) from exc
        return admitted

    def _configured(self, hook: store.CreateHook) -> store.CreateHook:
        """Kueue's webhooks among the create hooks, given this emulator's settings (:meth:`webhook_context`)
        and, the Pod webhook, the parents of pods (:meth:`_lookup`); other hooks as they are."""
        if hook is gate_queued_pods:
            return functools.partial(hook, lookup=self._lookup, context=self.webhook_context)
        if hook in (suspend_queued_jobs, suspend_queued_integration_jobs):
            return functools.partial(hook, context=self.webhook_context)
        return hook

    @property
    def _namespace_selector(self) -> models.LabelSelector:
        """``managed_jobs_namespace_selector``, Kueue's default when None."""
        selector = self.managed_jobs_namespace_selector
        return workloads.DEFAULT_MANAGED_JOBS_NAMESPACE_SELECTOR if selector is None else selector

    def webhook_context(self, namespace: str, obj: Mapping[str, Any] | None = None) -> webhooks.Context:
        """What Kueue's job webhooks know for an object of ``namespace`` here: the gate
        ElasticJobsViaWorkloadSlices, ``manageJobsWithoutQueueName``, whether
        ``managedJobsNamespaceSelector`` selects the Namespace, by its stored labels
        (:func:`workloads.namespace_selected`, the watcher's rule), whether it has a ``default``
        LocalQueue, whether the WorkloadPriorityClass ``default`` is stored (with the gate
        WorkloadPriorityClassDefaulting on, its default) and, for a job ``obj`` whose controller is a job, the
        owners of its controller chain from the store (:meth:`_owners`). Raises StoreError as Kueue's mutating webhook refuses a job whose
        chain names an owner that does not exist (404 NotFound) or is too deep (403 Forbidden)."""
        labels = _namespace_labels(self._store, namespace)
        selected = workloads.namespace_selected(self._namespace_selector, namespace, labels)
        served = webhooks.target(str((obj or {}).get("apiVersion") or ""), str((obj or {}).get("kind") or ""))
        owners = None
        # the pod webhook filters on the namespace before it walks the owners (pod_webhook.go Default)
        if served is not None and obj is not None and (served != webhooks.POD or selected):
            owners = self._owners(served, namespace, obj)
        return webhooks.Context(
            manage_jobs_without_queue_name=self.manage_jobs_without_queue_name,
            namespace_managed=selected,
            default_local_queue=_has_default_local_queue(self._store, namespace),
            default_priority_class=self.feature_gates.get(WPC_DEFAULTING_GATE, True)
            and _has_default_priority_class(self._store),
            elastic_jobs=self.elastic,
            owners=owners,
            topology_aware_scheduling=self.feature_gates.get("TopologyAwareScheduling", True),
        )

    def _owners(
        self, served: webhooks.Target, namespace: str, obj: Mapping[str, Any]
    ) -> dict[webhooks.OwnerKey, workloads.Owner] | None:
        """The owners of ``obj``'s controller chain as Kueue's webhook reads them from the API server, one at a
        time as far as the walk goes (:func:`webhooks.owner_to_read`, the webhook server's rule); None when
        it walks none (:func:`webhooks.walks_owners`). An owner of a framework the configuration leaves out is
        walked through, never the ancestor. Raises StoreError 404 NotFound for an owner that does not exist
        (ErrWorkloadOwnerNotFound joined with the GET's NotFound), 403 Forbidden for a chain deeper than
        Kueue walks or one that loops."""
        if not webhooks.walks_owners(served, obj):
            return None
        webhook = f'admission webhook "m{served.kind.lower()}.kb.io" denied the request'
        manage = self.manage_jobs_without_queue_name
        owners: dict[webhooks.OwnerKey, workloads.Owner] = {}
        while (reference := webhooks.owner_to_read(obj, owners, manage_jobs_without_queue_name=manage)) is not None:
            api_version, kind, name = key = webhooks.owner_key(reference)
            found = self._lookup(api_version, kind, namespace, name)
            if found is None:
                raise store.StoreError(
                    status=404, reason="NotFound", message=f"{webhook}: {webhooks.owner_not_found_message(reference)}"
                )
            enabled = self.managed_kinds is None or kind in self.managed_kinds
            owners[key] = workloads.owner_record(found, kind=kind, api_version=api_version, enabled=enabled)
        refusal = webhooks.walk_refusal(webhooks.walk(obj, owners, manage_jobs_without_queue_name=manage))
        if refusal is not None:
            raise store.StoreError(status=403, reason="Forbidden", message=f"{webhook}: {refusal}")
        return owners

    def _unmanaged(self, ref: resources.ResourceRef) -> bool:
        """Whether ``ref`` is a job kind of an integration the configuration leaves out (``managed_kinds``),
        whose webhooks are Kueue's no-op ones (:func:`webhooks.noop`, as ``kueue-es service webhook`` has it)."""
        served = webhooks.target(ref.api_version, ref.kind)
        return served is not None and webhooks.noop(served, self.managed_kinds)

    def _only_called(self, original: store.CreateHook, hook: store.CreateHook) -> store.CreateHook:
        """``hook`` (the create hook ``original`` configured, :meth:`_configured`) for every object but those the
        webhook it plays is not called for: the jobs of integrations left out (a no-op webhook for those) and,
        for Kueue's job and Pod webhooks, the jobs and Pods of the namespaces their configurations leave out
        (:meth:`_left_out`)."""
        kueue = original in KUEUE_WEBHOOKS or isinstance(original, DefaultLocalQueue | MultiKueueManagedBy)
        if self.managed_kinds is None and not kueue:
            return hook

        def called(ref: resources.ResourceRef, obj: dict[str, Any]) -> None:
            if self._unmanaged(ref):
                return
            if kueue and self._left_out(ref, (obj.get("metadata") or {}).get("namespace")):
                return
            hook(ref, obj)

        return called

    @staticmethod
    def _left_out(ref: resources.ResourceRef, namespace: str | None) -> bool:
        """Whether kube-apiserver calls none of Kueue's job and Pod webhooks (mutating and validating) for an
        object of kind ``ref`` in ``namespace``: their configurations' ``namespaceSelector`` leaves out
        ``kube-system`` and ``kueue-system`` (Kueue config/components/webhook/kustomization.yaml), and kueue-es's
        (``deploy/base/webhook-configurations.yaml``, :data:`manifests.UNMANAGED_NAMESPACES`) its own namespace
        too. Such a job is created as written (a queue-labelled Job not suspended, a Pod not gated) and, as
        ``managedJobsNamespaceSelector`` never selects ``kube-system`` nor the Configuration's namespace, no
        reconciler manages it: it runs unmanaged (docs/webhooks.md)."""
        return webhooks.target(ref.api_version, ref.kind) is not None and namespace in manifests.UNMANAGED_NAMESPACES

    def _kueue_default_update(
        self, ref: resources.ResourceRef, obj: dict[str, Any], *, namespace: str | None
    ) -> dict[str, Any]:
        """An update as Kueue's mutating webhooks leave it, for the kinds they default on update too
        (:func:`webhooks.defaults_on_update`: Deployment, StatefulSet, LeaderWorkerSet) when the emulator plays
        Kueue's webhooks and the kind's framework is enabled: the namespace's ``default`` LocalQueue, the
        template marks (:func:`webhooks.default`, in :meth:`webhook_context`); other objects as they are."""
        served = webhooks.target(ref.api_version, ref.kind)
        namespace = namespace or str((obj.get("metadata") or {}).get("namespace") or "default")
        if (
            served is None
            or not webhooks.defaults_on_update(served)
            or suspend_queued_integration_jobs not in self.create_hooks
            or self._unmanaged(ref)
            or self._left_out(ref, namespace)
        ):
            return obj
        context = self.webhook_context(namespace, _manifest(ref, obj, namespace))
        return webhooks.default(ref.api_version, ref.kind, obj, context=context)

    def _kueue_validate(self, ref: resources.ResourceRef, obj: dict[str, Any], *, old: dict[str, Any] | None) -> None:
        """Kueue's validating job webhooks (:func:`kueue_es.jobframework.webhooks.validate_create` and
        ``validate_update``), when the emulator plays Kueue's webhooks (its default ``create_hooks``):
        a StatefulSet scaled up from 0 has its scale-down's Workload read from the store
        (:func:`webhooks.scale_up_workload`); a refusal is 403 Forbidden with the message kube-apiserver gives
        for a denying webhook,
        ``admission webhook "vjob.kb.io" denied the request: <field errors>``. Not called for an object of a
        namespace the webhook configurations leave out (:meth:`_left_out`)."""
        if not self.kueue_validation or not any(hook in self.create_hooks for hook in KUEUE_WEBHOOKS):
            return
        if self._unmanaged(ref):
            return  # its integration is not enabled: Kueue's webhook for it is a no-op
        served = webhooks.target(ref.api_version, ref.kind)
        namespace = str(obj.get("metadata", {}).get("namespace") or "default")
        if served is None or self._left_out(ref, namespace):
            return
        # the owners are walked at creation (the mutating webhook, which runs first, refuses what the walk
        # cannot finish) and, as Kueue's validating webhooks do, on a StatefulSet's or LeaderWorkerSet's update
        walked = old is None or ref.kind in ("StatefulSet", "LeaderWorkerSet")
        context = self.webhook_context(namespace, _manifest(ref, obj, namespace) if walked else None)
        if old is None:
            # the mutating webhook runs first (the store's create hooks apply it after this check): validate
            # what it makes of the object, as kube-apiserver validates a mutated object
            mutated = webhooks.default(ref.api_version, ref.kind, obj, context=context)
            errors = webhooks.validate_create(ref.api_version, ref.kind, mutated, context=context)
        else:
            if (workload_name := webhooks.scale_up_workload(served, old, obj, context)) is not None:
                # statefulset_webhook.go ValidateUpdate reads the scale-down's Workload (findWorkload)
                found = self._store.select(resources.WORKLOADS, namespace=namespace, name=workload_name)
                context = dataclasses.replace(context, statefulset_workload=found[0] if found else None)
            errors = webhooks.validate_update(ref.api_version, ref.kind, old, obj, context=context)
        if errors:
            raise store.StoreError(
                status=403,
                reason="Forbidden",
                message=f'admission webhook "v{ref.kind.lower()}.kb.io" denied the request: {webhooks.message(errors)}',
            )

    def _watch(self, call: _ApiCall) -> AsyncIterator[dict[str, Any]]:
        """Validate the watch parameters now (errors become HTTP statuses) and return the event stream."""
        params = call.params
        since_text = params.get("resourceVersion") or "0"
        if not re.fullmatch(r"\d+", since_text):
            raise store.StoreError(
                status=400,
                reason="BadRequest",
                message=f"invalid resourceVersion {since_text!r}",
                details={"kind": call.ref.plural},
            )
        timeout_text = params.get("timeoutSeconds")
        if timeout_text is not None and not re.fullmatch(r"\d+(\.\d+)?", timeout_text):
            raise store.StoreError(
                status=400,
                reason="BadRequest",
                message=f"invalid timeoutSeconds {timeout_text!r}",
                details={"kind": call.ref.plural},
            )
        bookmarks = str(params.get("allowWatchBookmarks", "")).lower() in _TRUE
        initial = _send_initial_events(params, bookmarks=bookmarks)
        self._check_not_too_large(int(since_text))
        return self._watch_events(
            call.ref,
            since=None if initial or not int(since_text) else int(since_text),
            namespace=call.namespace,
            name=call.name,
            labels=selectors.parse_label_selector(params.get("labelSelector")),
            fields=self._field_selector(call),
            bookmarks=bookmarks,
            timeout=float(timeout_text) if timeout_text else None,
            initial_events_end=initial,
        )

    def _check_not_too_large(self, resource_version: int) -> None:
        """504 for a resourceVersion this server has not reached (the watch cache's answer once it has waited
        for it in vain: client-go relists on the ResourceVersionTooLarge cause)."""
        current = self._store.resource_version
        if resource_version > current:
            raise store.StoreError(
                status=504,
                reason="Timeout",
                message=f"Too large resource version: {resource_version}, current: {current}",
                details={
                    "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1,
                },
            )

    async def _watch_events(
        self,
        ref: resources.ResourceRef,
        *,
        since: int | None,
        namespace: str | None,
        name: str | None,
        labels: selectors.LabelSelector,
        fields: selectors.FieldSelector,
        bookmarks: bool,
        timeout: float | None,
        initial_events_end: bool = False,
    ) -> AsyncIterator[dict[str, Any]]:
        """The watch stream: initial ADDEDs (if no resourceVersion; with ``initial_events_end`` then a BOOKMARK
        annotated ``k8s.io/initial-events-end``), then logged and live changes."""
        loop = asyncio.get_running_loop()
        log = self._store.log(ref)
        epoch = self._watch_epoch
        deadline = None if timeout is None else loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval
        if since is None:
            last_seen = self._store.resource_version
            for obj in self._store.select(ref, namespace=namespace, name=name, labels=labels, fields=fields):
                yield {"type": "ADDED", "object": obj}
            if initial_events_end:
                end = _bookmark_event(ref, resource_version=last_seen)
                end["object"]["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
                yield end
        else:
            last_seen = since

        def visible(obj: dict[str, Any]) -> bool:
            metadata = obj.get("metadata", {})
            return (
                (name is None or metadata.get("name") == name)
                and (namespace is None or not ref.namespaced or metadata.get("namespace") == namespace)
                and labels.matches(metadata.get("labels"))
                and fields.matches(obj)
            )

        while not self._closing and self._watch_epoch == epoch:
            wakeup = log.wakeup
            batch = log.since(last_seen)
            if batch is None:
                yield _expired_event(since=last_seen, oldest=log.floor)
                return
            if batch:
                last_seen = batch[-1].resource_version
                for event in batch:
                    if (shown := _as_seen_by(event, visible=visible)) is not None:
                        yield shown
                continue
            if not self._store.serves(ref) or self._store.log(ref) is not log:
                return  # the kind's CRD was deleted (its objects' DELETED sent): a real API server ends the watch
            now = loop.time()
            if deadline is not None and now >= deadline:
                return
            if bookmarks and now >= next_bookmark:
                last_seen = self._store.resource_version
                next_bookmark = now + self.bookmark_interval
                yield _bookmark_event(ref, resource_version=last_seen)
                continue
            waits = [deadline - now] if deadline is not None else []
            waits += [next_bookmark - now] if bookmarks else []
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(waits) if waits else None):
                    await wakeup.wait()


@attrs.define
class DefaultLocalQueue:
    """A create hook doing what the webhooks of Kueue's integrations do first (LocalQueueDefaulting,
    always on since Kueue v0.19): a Job, an integration's job (a JobSet, a PyTorchJob, a Deployment, ...) or
    a plain Pod created without the ``kueue.x-k8s.io/queue-name`` label in a namespace that has a
    LocalQueue named ``default`` gets the label ``default``, by the webhook server's own rule
    (:func:`kueue_es.jobframework.webhooks.default_local_queue_applies`: not under a managed job, not a pod
    its serving parent marked), when ``managedJobsNamespaceSelector`` (``selector``: the emulator's, Kueue's
    default unless its configuration says otherwise) selects the namespace by its stored labels
    (:func:`workloads.namespace_selected`, the watcher's rule). At creation here; the kinds Kueue's
    webhooks also default on update (Deployment, StatefulSet, LeaderWorkerSet) get it then through
    :meth:`ClusterEmulator.webhook_context`."""

    store: store.ObjectStore | None = None
    selector: models.LabelSelector = workloads.DEFAULT_MANAGED_JOBS_NAMESPACE_SELECTOR

    def __call__(self, ref: resources.ResourceRef, obj: dict[str, Any]) -> None:
        served = webhooks.target(ref.api_version, ref.kind)
        if served is None or self.store is None:
            return
        namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
        context = webhooks.Context(
            default_local_queue=_has_default_local_queue(self.store, namespace),
            namespace_managed=workloads.namespace_selected(
                self.selector, namespace, _namespace_labels(self.store, namespace)
            ),
        )
        webhooks.apply_default_local_queue(served, obj, context=context)


def _has_default_local_queue(objects: store.ObjectStore, namespace: str) -> bool:
    """Whether ``namespace`` has a LocalQueue named ``default`` (Kueue's queue cache DefaultLocalQueueExist)."""
    try:
        objects.get(resources.LOCAL_QUEUES, namespace=namespace, name=workloads.DEFAULT_LOCAL_QUEUE)
    except store.StoreError:
        return False
    return True


#: Kueue's feature gate by which its job webhooks label a job with the ``default`` WorkloadPriorityClass (beta,
#: on by default since v0.20).
WPC_DEFAULTING_GATE = "WorkloadPriorityClassDefaulting"


def _has_default_priority_class(objects: store.ObjectStore) -> bool:
    """Whether the WorkloadPriorityClass ``default`` is stored (Kueue's DefaultWorkloadPriorityClassExist)."""
    try:
        objects.get(resources.WORKLOAD_PRIORITY_CLASSES, namespace=None, name=workloads.DEFAULT_WORKLOAD_PRIORITY_CLASS)
    except store.StoreError:
        return False
    return True


def _namespace_labels(objects: store.ObjectStore, namespace: str) -> Mapping[str, str] | None:
    """The stored Namespace's labels (None: no such Namespace)."""
    try:
        return objects.get(resources.NAMESPACES, namespace=None, name=namespace)["metadata"].get("labels") or {}
    except store.StoreError:
        return None


@attrs.define
class MultiKueueManagedBy:
    """A create hook doing what Kueue's Job and JobSet webhooks do for MultiKueue (jobframework/defaults.go
    ApplyDefaultForManagedBy): a Job or JobSet naming a LocalQueue whose ClusterQueue has an
    AdmissionCheck with controllerName ``kueue.x-k8s.io/multikueue`` gets ``spec.managedBy:
    kueue.x-k8s.io/multikueue`` unless it sets one (:func:`kueue_es.jobframework.webhooks.uses_multikueue`).
    Only at creation, as the webhook."""

    store: store.ObjectStore | None = None

    def __call__(self, ref: resources.ResourceRef, obj: dict[str, Any]) -> None:
        if (ref.api_version, ref.kind) not in webhooks.MULTIKUEUE_KINDS or self.store is None:
            return
        metadata = obj.get("metadata") or {}
        queue = (metadata.get("labels") or {}).get(workloads.QUEUE_LABEL)
        if not queue or _controlled_by_job(metadata):
            return
        namespace = str(metadata.get("namespace") or "default")
        try:
            local_queue = self.store.get(resources.LOCAL_QUEUES, namespace=namespace, name=queue)
            cq_name = str((local_queue.get("spec") or {}).get("clusterQueue") or "")
            cluster_queue = self.store.get(resources.CLUSTER_QUEUES, namespace=None, name=cq_name)
        except store.StoreError:
            return  # no such queue: the job waits, as with Kueue, and MultiKueue does not apply
        controllers: dict[str, str] = {}
        for check in self.store.select(resources.ADMISSION_CHECKS):
            name = str((check.get("metadata") or {}).get("name") or "")
            controllers[name] = str((check.get("spec") or {}).get("controllerName") or "")
        if webhooks.uses_multikueue(cluster_queue, controllers):
            defaulted = webhooks.default(
                ref.api_version, ref.kind, obj, context=webhooks.Context(multikueue_queue=True)
            )
            obj.clear()
            obj.update(defaulted)


def _controlled_by_job(metadata: Mapping[str, Any]) -> bool:
    """Whether a Job or an integration's job is the object's controller (Kueue: IsOwnerManagedByKueueForObject)."""
    owners = metadata.get("ownerReferences") or []
    return any(
        isinstance(o, dict) and o.get("controller") and pods.is_job_owner(o.get("apiVersion"), o.get("kind"))
        for o in owners
    )


#: The webhook Context for an object (its manifest, None: any) of a namespace (:meth:`ClusterEmulator.webhook_context`).
WebhookContext = Callable[[str, Mapping[str, Any] | None], webhooks.Context]


def _manifest(ref: resources.ResourceRef, obj: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """``obj`` as the webhook sees it: the request's apiVersion and kind, ``metadata.namespace`` filled in."""
    meta = obj.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta["namespace"] = meta.get("namespace") or namespace
    return {**obj, "apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta}


def _kueue_default(
    ref: resources.ResourceRef,
    obj: dict[str, Any],
    *,
    elastic_jobs: bool = slices.GATE_DEFAULT,
    context: WebhookContext | None = None,
) -> None:
    """Replace ``obj``'s content with what Kueue's mutating webhook makes of it
    (:func:`kueue_es.jobframework.webhooks.default`, the webhook server's own function), in the Context
    ``context`` gives for its namespace (None: Kueue's defaults, with ``elastic_jobs``)."""
    namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
    settings = (
        context(namespace, _manifest(ref, obj, namespace))
        if context is not None
        else webhooks.Context(elastic_jobs=elastic_jobs)
    )
    defaulted = webhooks.default(ref.api_version, ref.kind, obj, context=settings)
    if defaulted != obj:
        obj.clear()
        obj.update(defaulted)


def finalize_in_use(ref: resources.ResourceRef, obj: dict[str, Any]) -> None:
    """A create hook doing what Kueue's ``mclusterqueue.kb.io`` and ``mresourceflavor.kb.io`` do: a created
    ClusterQueue or ResourceFlavor gets the ``kueue.x-k8s.io/resource-in-use`` finalizer
    (:func:`core_webhooks.default`; clusterqueue_webhook.go and resourceflavor_webhook.go Default). kueue-es's
    dispatcher takes it off a deleted one nothing uses, as Kueue's controllers do. Other kinds are left alone."""
    if ref.group == crds.GROUP and ref.kind in core_webhooks.FINALIZED_AT_CREATE:
        obj["metadata"] = core_webhooks.default(ref.kind, obj)["metadata"]


def suspend_queued_jobs(
    ref: resources.ResourceRef,
    obj: dict[str, Any],
    *,
    elastic_jobs: bool = slices.GATE_DEFAULT,
    context: WebhookContext | None = None,
) -> None:
    """A create hook doing what Kueue's Job webhook does: suspend Jobs that name a queue.

    Jobs with the ``kueue.x-k8s.io/queue-name`` label are created with
    ``spec.suspend: true``, so they wait for admission instead of running
    (:func:`kueue_es.jobframework.webhooks.default`). ClusterEmulator uses it unless
    given other ``create_hooks``. ``elastic_jobs``: the gate ElasticJobsViaWorkloadSlices (on by
    default, as Kueue v0.18+: an elastic Job's pod template gets the elastic-job scheduling gate). ``context``: the
    webhook Context of a namespace (ClusterEmulator's :meth:`~ClusterEmulator.webhook_context`:
    its configuration, the Namespace's labels), which then says the gate too.
    """
    if ref == resources.JOBS:
        _kueue_default(ref, obj, elastic_jobs=elastic_jobs, context=context)


def suspend_queued_integration_jobs(
    ref: resources.ResourceRef,
    obj: dict[str, Any],
    *,
    elastic_jobs: bool = slices.GATE_DEFAULT,
    context: WebhookContext | None = None,
) -> None:
    """A create hook doing what the webhooks of Kueue's integrations do (a JobSet, a PyTorchJob, a RayJob,
    ...: :mod:`kueue_es.jobframework.integrations`): a job that names a queue is created suspended, by its
    kind's own suspend field (``spec.suspend``, ``spec.runPolicy.suspend``, ...), and gets its kind's
    ``on_create`` changes (:func:`kueue_es.jobframework.webhooks.default`). A job another managed job
    controls (a RayJob's RayCluster, which carries its queue label) is left alone: it is part of its
    owner's workload (jobframework WorkloadShouldBeSuspended). ``elastic_jobs``: the gate
    ElasticJobsViaWorkloadSlices (an elastic RayCluster's or RayService's pod templates get the
    elastic-job scheduling gate). ``context``: as for :func:`suspend_queued_jobs`."""
    integration = integrations.by_kind(ref.kind)
    if integration is not None and integration.api_version == ref.api_version:
        _kueue_default(ref, obj, elastic_jobs=elastic_jobs, context=context)


def gate_queued_pods(
    ref: resources.ResourceRef,
    obj: dict[str, Any],
    *,
    lookup: Callable[[str, str, str, str], dict[str, Any] | None] | None = None,
    context: WebhookContext | None = None,
) -> None:
    """A create hook doing what Kueue's Pod webhook does for a Pod that names a queue.

    It gets the ``kueue.x-k8s.io/managed: "true"`` label, the ``kueue.x-k8s.io/managed``
    finalizer (the dispatcher takes it off: :func:`kueue_es.jobframework.pods.finalizer_released`),
    the ``kueue.x-k8s.io/role-hash`` annotation, the ``kueue.x-k8s.io/admission`` scheduling
    gate, which holds it until admitted, and (TopologyAwareScheduling is on by default) the
    ``kueue.x-k8s.io/topology`` gate, which the start removes unless the pod's pod set got a
    topology assignment (Kueue pkg/controller/jobs/pod/pod_webhook.go Default;
    :func:`kueue_es.jobframework.webhooks.default`). Pods with a managed ancestor (their
    owners walked by UID, as Kueue's webhook walks them) are left alone: they belong to its
    workload; a Job owner that does not exist refuses the pod (404), as Kueue's.

    A pod whose template a managed Deployment, StatefulSet or LeaderWorkerSet marked
    (``kueue.x-k8s.io/pod-suspending-parent``) is gated whatever its labels
    (suspendByParent); a StatefulSet's or LeaderWorkerSet's pod also gets, from its
    parent (``lookup(apiVersion, kind, namespace, name)``), the labels that make it a
    member of the parent's serving pod group, which Kueue's StatefulSet and
    LeaderWorkerSet reconcilers write just after creation
    (:func:`kueue_es.jobframework.integrations.serving.pod_defaults`, which ``context``'s
    ``manageJobsWithoutQueueName`` tells whether a StatefulSet without the queue-name label is
    managed). Any other pod in a
    namespace ``managedJobsNamespaceSelector`` does not select (``context``: as for
    :func:`suspend_queued_jobs`) is left alone.
    """
    metadata = obj.get("metadata", {})
    if ref != resources.PODS:
        return
    if serving.parent_framework(obj):
        # the webhook first, then the reconciler: Kueue's pod webhook gates the pod as it is created, before its
        # parent's reconciler writes the group's marks, so the webhook never sees the StatefulSet's index-label
        # annotation and the pod gets no kueue.x-k8s.io/pod-group-pod-index label
        _gate(obj)
        parent_key = serving.parent_of(obj)
        if lookup is not None and parent_key is not None:
            api_version, kind, name = parent_key
            namespace = str(metadata.get("namespace") or "")
            # Kueue's StatefulSet pod reconciler reads manageJobsWithoutQueueName (Kueue #5714)
            manage = context is not None and context(namespace or "default", None).manage_jobs_without_queue_name
            parent = lookup(api_version, kind, namespace, name)
            serving.pod_defaults(obj, parent, manage_jobs_without_queue_name=manage)
        return
    _kueue_default(ref, obj, context=context)


def _gate(pod: dict[str, Any]) -> None:
    """What Kueue's pod webhook gives a pod its parent marked (suspendByParent): the admission and topology
    scheduling gates and the role hash, no managed label nor finalizer (:func:`webhooks.gate_pod`)."""
    webhooks.gate_pod(pod, topology=True, managed=False)


#: The create hooks ClusterEmulator uses by default: Kueue's Job, integrations' and Pod webhooks.
KUEUE_WEBHOOKS: tuple[store.CreateHook, ...] = (suspend_queued_jobs, suspend_queued_integration_jobs, gate_queued_pods)


@contextlib.asynccontextmanager
async def serve_emulator(*, host: str = "127.0.0.1", port: int = 0, **options: Any) -> AsyncIterator[ClusterEmulator]:
    """Run a ClusterEmulator on a real TCP port until the block exits.

    ``port=0`` picks a free port; ``emulator.url`` is then the base URL
    as a string, e.g. ``http://127.0.0.1:41234``.  ``options`` are
    ClusterEmulator fields (history_limit, bookmark_interval, create_hooks, ...).  On exit, open watches are ended first so that
    the server shuts down at once.
    """
    emulator = ClusterEmulator(**options)
    async with emulator, kmock.Server(emulator, host=host, port=port):
        logger.info("emulator_serving", url=str(emulator.url))
        try:
            yield emulator
        finally:
            emulator._closing = True
            emulator.drop_watches()


#: The kinds with a ``scale`` subresource (autoscaling/v1 Scale), as (group, plural).
SCALABLE = frozenset({("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")})


def _scale_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale of a scalable object: its ``spec.replicas`` (default 1) and ``status.replicas``."""
    meta = obj.get("metadata") or {}
    selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
        },
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
        "status": {
            "replicas": (obj.get("status") or {}).get("replicas", 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items())),
        },
    }


def _with_rules(rules: list[dict[str, Any]], current: dict[str, Any]) -> dict[str, Any]:
    """A ClusterRole with the aggregated ``rules`` (the aggregation controller's write)."""
    return {**current, "rules": rules}


def _check_allowed(call: _ApiCall, *, scale: bool = False) -> None:
    """405 for methods a path does not take, 404 for subresources other than a kind's ``status``
    (and ``scale``: the apps kinds', and a CRD kind's when its CRD declares one)."""
    if scale and call.subresource == "scale" and call.verb not in ("watch", "delete", "not-allowed"):
        return
    if call.verb == "not-allowed" or (call.subresource is not None and call.verb in ("watch", "delete")):
        raise store.StoreError(
            status=405,
            reason="MethodNotAllowed",
            message="the server does not allow this method on the requested resource",
            details={"kind": call.ref.plural, "group": call.ref.group},
        )
    if call.subresource == "scale" and (call.ref.group, call.ref.plural) in SCALABLE:
        return
    if call.subresource is not None and (call.subresource != "status" or not call.ref.status_subresource):
        raise store.StoreError(
            status=404,
            reason="NotFound",
            message="the server could not find the requested resource",
            details={"kind": call.ref.plural, "group": call.ref.group},
        )


def _in_version(ref: resources.ResourceRef, payload: dict[str, Any]) -> dict[str, Any]:
    """An object (or a list of them) of a CRD's storage version as another served version shows it:
    the ``apiVersion`` rewritten (the API server's conversion strategy ``None``)."""
    if "items" in payload and isinstance(payload["items"], list):
        return {**payload, "apiVersion": ref.api_version, "items": [_in_version(ref, i) for i in payload["items"]]}
    if payload.get("kind") == ref.kind:
        return {**payload, "apiVersion": ref.api_version}
    return payload


def _in_served(ref: resources.ResourceRef, payload: dict[str, Any]) -> dict[str, Any]:
    """An object (or a list of them) of v1beta2 as Kueue's v1beta1 ``ref`` shows it, converted by Kueue's rules
    (:func:`kueue_es.events.v1beta1.convert`), or a core/v1 Event as events.k8s.io/v1 shows it
    (:func:`.event_versions.to_events_v1`); anything else (a Status, a Table) as it is."""
    if "items" in payload and isinstance(payload["items"], list):
        return {**payload, "apiVersion": ref.api_version, "items": [_in_served(ref, i) for i in payload["items"]]}
    if ref.group == event_versions.GROUP:  # an events.k8s.io/v1 view of a core/v1 Event
        return event_versions.to_events_v1(payload) if event_versions.is_core_event(payload) else payload
    if payload.get("kind") == ref.kind and payload.get("apiVersion") == v1beta1.V1BETA2:
        return v1beta1.convert(payload, ref.api_version)
    return payload


async def _events_in_served(
    ref: resources.ResourceRef, events: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    async for event in events:
        if event.get("type") in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") and isinstance(event.get("object"), dict):
            event = {**event, "object": _in_served(ref, event["object"])}
        yield event


async def _events_in_version(
    ref: resources.ResourceRef, events: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    async for event in events:
        if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
            event = {**event, "object": _in_version(ref, event["object"])}
        yield event


def _path_value(obj: Mapping[str, Any], path: str) -> Any:
    """The value at a simple JSON path (``.spec.replicas``, ``.status.replicaStatuses.Worker.active``), or None."""
    value: Any = obj
    for key in path.strip(".").split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set the value at a simple JSON path, creating the maps on the way."""
    keys = path.strip(".").split(".")
    parent = obj
    for key in keys[:-1]:
        parent = parent.setdefault(key, {})
    parent[keys[-1]] = value


def _custom_scale_of(obj: dict[str, Any], scale: custom_resources.Scale) -> dict[str, Any]:
    """The autoscaling/v1 Scale of an object of a kind with a ``scale`` subresource."""
    metadata = obj.get("metadata", {})
    status: dict[str, Any] = {"replicas": _path_value(obj, scale.status_replicas_path) or 0}
    if scale.label_selector_path and (selector := _path_value(obj, scale.label_selector_path)):
        status["selector"] = selector
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            key: metadata[key]
            for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if key in metadata
        },
        "spec": {"replicas": _path_value(obj, scale.spec_replicas_path) or 0},
        "status": status,
    }


#: What of a Job's pod template may change while the Job is suspended and has never started (the API
#: server's AllowMutableSchedulingDirectives): the scheduling directives Kueue writes at a start and takes
#: back at a stop.
_MUTABLE_WHEN_SUSPENDED = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "nodeSelector"),
    ("spec", "tolerations"),
    ("spec", "schedulingGates"),
    ("spec", "affinity", "nodeAffinity"),
)
#: The Job spec fields no update may change (ValidateJobSpecUpdate).
_IMMUTABLE_JOB_FIELDS = ("selector", "completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy")


def _job_update_causes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[validation.Cause]:
    """Why kube-apiserver refuses an update of a batch/v1 Job (pkg/apis/batch/validation ValidateJobSpecUpdate):
    its pod template is immutable but for the scheduling directives of a Job that is suspended and has not
    started (``status.startTime`` unset), which is why Kueue's stop suspends a Job, resets its start time and
    only then restores the template; ``completions`` changes only with ``parallelism`` in an Indexed Job
    (elastic Indexed Jobs); the selector, completion mode, pod failure policy, backoff limit per index and
    ``managedBy`` never. The template's value is shown abbreviated (the API server prints the whole Go struct)."""
    defaulted: dict[str, Any] = store.json_copy(dict(new))
    store.apply_defaults(resources.JOBS, defaulted)
    new = defaulted  # validated as decoded: with what the request left out defaulted
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    causes = []
    for field in _IMMUTABLE_JOB_FIELDS:
        if old_spec.get(field) != new_spec.get(field):
            shown = json.dumps(new_spec.get(field), separators=(",", ":"))
            causes.append(
                validation.Cause(f"spec.{field}", validation.INVALID, f"Invalid value: {shown}: field is immutable")
            )
    if old_spec.get("completions") != new_spec.get("completions"):
        elastic = new_spec.get("completionMode") == "Indexed" and new_spec.get("completions") == new_spec.get(
            "parallelism"
        )
        if not elastic:
            causes.append(
                validation.Cause(
                    "spec.completions",
                    validation.INVALID,
                    f"Invalid value: {json.dumps(new_spec.get('completions'))}: field is immutable",
                )
            )
    template, old_template = (
        store.json_copy(new_spec.get("template") or {}),
        store.json_copy(old_spec.get("template") or {}),
    )
    suspended = bool(old_spec.get("suspend")) and not (old.get("status") or {}).get("startTime")
    if suspended:
        for path in _MUTABLE_WHEN_SUSPENDED:
            for side in (template, old_template):
                parent = side
                for key in path[:-1]:
                    parent = parent.get(key) if isinstance(parent, dict) else None
                if isinstance(parent, dict):
                    parent.pop(path[-1], None)
        for side in (template, old_template):  # an affinity left empty once its node affinity is set aside
            spec = side.get("spec")
            if isinstance(spec, dict) and spec.get("affinity") == {}:
                del spec["affinity"]
    for side in (template, old_template):
        if isinstance(side.get("metadata"), dict):
            side["metadata"] = {k: v for k, v in side["metadata"].items() if v not in ({}, None, [])}
            if not side["metadata"]:
                del side["metadata"]
    if template != old_template:
        causes.append(
            validation.Cause(
                "spec.template", validation.INVALID, "Invalid value: core.PodTemplateSpec{...}: field is immutable"
            )
        )
    return causes


def _delete_options(call: _ApiCall) -> dict[str, Any]:
    """A delete's DeleteOptions: its body, or the query parameters that stand for them
    (``?propagationPolicy=Foreground``, ``?orphanDependents=true``), as the API server reads either."""
    options = _json_body(call) if call.body.strip() else {}
    options = dict(options) if isinstance(options, dict) else {}
    if "propagationPolicy" in call.params and "propagationPolicy" not in options:
        options["propagationPolicy"] = call.params["propagationPolicy"]
    if "orphanDependents" in call.params and "orphanDependents" not in options:
        value = call.params["orphanDependents"]
        options["orphanDependents"] = {"true": True, "false": False}.get(value.lower(), value)
    return options


def _deleted_status(ref: resources.ResourceRef, deleted: Mapping[str, Any]) -> dict[str, Any]:
    """The Status the generic registry answers a delete with (finalizeDelete): Success, with details naming
    the object (``kind`` is the resource, as the API server sets it) and its UID."""
    metadata = deleted.get("metadata") or {}
    details = {"name": metadata.get("name", ""), "group": ref.group, "kind": ref.plural, "uid": metadata.get("uid", "")}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def _list_key(obj: Mapping[str, Any]) -> str:
    """Where an object sorts in a list (``namespace/name``, as the store's keys sort), for continue tokens."""
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace') or ''}/{metadata.get('name') or ''}"


def _encode_continue(resource_version: int, key: str) -> str:
    """A continue token as kube-apiserver's storage makes one: URL-safe base64 of ``{"v", "rv", "start"}``."""
    token = json.dumps({"v": "meta.k8s.io/v1", "rv": resource_version, "start": key + "\x00"})
    return base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    """(resourceVersion, key the page starts after) of a continue token; 400 for one this server did not make."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if decoded.get("v") != "meta.k8s.io/v1":
            raise ValueError(f"got {decoded.get('v')!r}")
        version, start = int(decoded["rv"]), str(decoded["start"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise store.StoreError(
            status=400, reason="BadRequest", message=f"invalid continue token: continue key is not valid: {exc}"
        ) from exc
    return version, start.removesuffix("\x00")


def _group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _plural_of(refs: Mapping[tuple[str, str, str], resources.ResourceRef], obj: dict[str, Any]) -> str:
    group, version = _group_version(obj["apiVersion"])
    for (ref_group, ref_version, plural), ref in refs.items():
        if (ref_group, ref_version, ref.kind) == (group, version, obj["kind"]):
            return plural
    raise KeyError(f"{obj['apiVersion']} {obj['kind']} is not served by the emulator")


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version order: GA before beta before alpha, higher numbers first (v1 > v1beta2 > v1alpha1)."""
    found = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if found is None:
        return (3, 0, 0)
    stage = {"": 0, "beta": 1, "alpha": 2}[found.group(2) or ""]
    return (stage, -int(found.group(1)), -int(found.group(3) or 0))


def _prefers_v2_protobuf(accept: str) -> bool:
    """Whether ``/openapi/v2`` is answered as protobuf: the first Accept clause naming a form served there
    names protobuf (kube-openapi pkg/handler serves the first clause it matches; q-values are not weighed
    here, kubectl sends none). An empty header takes JSON."""
    for part in accept.split(","):
        media = part.split(";", 1)[0].strip().lower()
        if media in openapi_v2_pb.MEDIA_TYPES:
            return True
        if media in ("application/json", "*/*", "application/*"):
            return False
    return False


def _accepts_json(accept: str) -> bool:
    """Whether an Accept header takes JSON (or anything); kubectl's OpenAPI v2 client asks for protobuf only."""
    if not accept.strip():
        return True
    media = [part.split(";", 1)[0].strip().lower() for part in accept.split(",")]
    return any(m in ("application/json", "*/*", "application/*") for m in media)


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _verb_for(*, method: str, has_name: bool, watch: bool) -> str:
    if method == "GET":
        return "watch" if watch else ("get" if has_name else "list")
    if method == "POST" and not has_name:
        return "create"
    if has_name and method in ("PUT", "PATCH", "DELETE"):
        return {"PUT": "replace", "PATCH": "patch", "DELETE": "delete"}[method]
    return "not-allowed"


def _json_body(call: _ApiCall) -> Any:
    """The request's object: JSON, or protobuf for the kinds kubectl's generators send so (:mod:`.protobuf`)."""
    if protobuf.is_protobuf(call.content_type):
        try:
            return protobuf.decode(call.body, api_version=call.ref.api_version, kind=call.ref.kind)
        except protobuf.Unsupported as exc:
            raise store.StoreError(
                status=415, reason="UnsupportedMediaType", message=str(exc), details={"kind": call.ref.plural}
            ) from exc
    try:
        return json.loads(call.body or b"null")
    except ValueError as exc:
        raise store.StoreError(
            status=400,
            reason="BadRequest",
            message=f"the request body is not valid JSON: {exc}",
            details={"kind": call.ref.plural},
        ) from exc


_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, when PyYAML was built with it


def _apply_config(call: _ApiCall) -> dict[str, Any]:
    """The applied configuration of an apply PATCH: a YAML (or JSON) object for the URL's object."""
    try:
        # clients send JSON (YAML's subset), which the json module reads a hundred times faster than PyYAML
        config = json.loads(call.body) if call.body else {}
    except ValueError:
        config = None
    try:
        if config is None:
            config = yaml.load(call.body, Loader=_YAML_LOADER) or {}  # noqa: S506 -- a safe loader
    except yaml.YAMLError as exc:
        raise store.StoreError(
            status=400, reason="BadRequest", message=f"the apply body is not valid YAML: {exc}"
        ) from exc
    if not isinstance(config, dict) or not isinstance(config.get("metadata", {}), dict):
        raise store.StoreError(status=400, reason="BadRequest", message="the apply body is not a Kubernetes object")
    if config.get("apiVersion") != call.ref.api_version or config.get("kind") != call.ref.kind:
        raise store.StoreError(
            status=400,
            reason="BadRequest",
            message=f"an apply body for {call.ref.qualified_plural} needs apiVersion {call.ref.api_version!r} "
            f"and kind {call.ref.kind!r}",
        )
    metadata = config.setdefault("metadata", {})
    if metadata.get("name", call.name) != call.name:
        raise store.StoreError(
            status=400, reason="BadRequest", message="the name in the apply body does not match the URL"
        )
    metadata["name"] = call.name
    return config


def _applied_part(config: dict[str, Any], *, part: str) -> dict[str, Any]:
    """What an apply sets: ``status`` only through the status subresource (``part`` "status"),
    everything else through the main resource ("main"), all of it for kinds without the subresource ("all")."""
    if part == "status":
        return {"status": config.get("status") or {}}
    if part == "main":
        return {key: value for key, value in config.items() if key != "status"}
    return config


def _drop_fields(obj: dict[str, Any], paths: frozenset[tuple[str, ...]]) -> dict[str, Any]:
    """Remove fields a manager no longer applies, deepest first, and the maps they leave empty (a map
    keeps what others still set in it)."""
    emptied: set[tuple[str, ...]] = set()
    for path in sorted(paths, key=len, reverse=True):
        parent: Any = obj
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if path[-1].startswith("k:") and isinstance(parent, list):
            # one item of a listType=map list (a condition): it goes, the list with it when none is left
            gone = managed_fields.value_at(parent, path[-1:])
            parent[:] = [item for item in parent if item is not gone]
            if not parent:
                holder = managed_fields.value_at(obj, path[:-2])
                if isinstance(holder, dict):
                    holder.pop(path[-2], None)
                    emptied.update(path[:end] for end in range(1, len(path) - 1))
            continue
        if not isinstance(parent, dict) or path[-1] not in parent:
            continue
        if isinstance(parent[path[-1]], dict) and parent[path[-1]]:
            continue
        del parent[path[-1]]
        emptied.update(path[:end] for end in range(1, len(path)))
    for path in sorted(emptied, key=len, reverse=True):
        parent = obj
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and parent.get(path[-1]) == {}:
            del parent[path[-1]]
    return obj


def _merge_applied(obj: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Merge an applied configuration into an object: maps by key, a ``listType=map`` list (conditions,
    :data:`managed_fields.MAP_LISTS`) item by item (an applied item replaces the one with its key, a new one is
    appended), anything else replaced; null removes."""
    for key, value in config.items():
        if value is None:
            obj.pop(key, None)
        elif isinstance(value, dict) and isinstance(obj.get(key), dict):
            _merge_applied(obj[key], value)
        elif managed_fields.keyed_items((key,), value) and managed_fields.keyed_items((key,), obj.get(key)):
            merged = list(obj[key])
            index = {managed_fields.item_key(key, item): i for i, item in enumerate(merged)}
            for item in value:
                at = index.get(managed_fields.item_key(key, item))
                if at is None:
                    merged.append(store.json_copy(item))
                else:
                    merged[at] = store.json_copy(item)
            obj[key] = merged
        else:
            obj[key] = store.json_copy(value)
    return obj


@contextlib.contextmanager
def _kubernetes_errors(call: _ApiCall) -> Iterator[None]:
    """Turn store, selector and patch errors into kmock's KubernetesError (rendered as a Status)."""
    details = {"kind": call.ref.plural, "group": call.ref.group, **({"name": call.name} if call.name else {})}
    try:
        yield
    except store.StoreError as exc:
        raise kmock.KubernetesError(
            status=exc.status, reason=exc.reason, message=exc.message, details=exc.details or details
        ) from exc
    except selectors.SelectorError as exc:
        raise kmock.KubernetesError(status=400, reason="BadRequest", message=str(exc), details=details) from exc
    except patches.UnsupportedPatchType as exc:
        raise kmock.KubernetesError(
            status=415, reason="UnsupportedMediaType", message=str(exc), details=details
        ) from exc
    except patches.MalformedPatch as exc:
        raise kmock.KubernetesError(status=400, reason="BadRequest", message=str(exc), details={}) from exc
    except patches.PatchError as exc:
        # as the API server answers a patch that does not apply (errors.NewGenericServerResponse with 422): a
        # generic message, the reason as the one cause, which kubectl prints ("The request is invalid: ...")
        raise kmock.KubernetesError(
            status=422,
            reason="Invalid",
            message="the server rejected our request due to an error in our request",
            details={"causes": [{"reason": "UnexpectedServerResponse", "message": str(exc)}]},
        ) from exc


def _as_seen_by(event: store.LoggedEvent, *, visible: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """The event as a filtered watch shows it: objects entering the filter are ADDED, leaving it DELETED."""
    now_visible = visible(event.object)
    if event.type == "MODIFIED" and event.previous is not None:
        was_visible = visible(event.previous)
        if now_visible and not was_visible:
            return {"type": "ADDED", "object": event.object}
        if was_visible and not now_visible:
            return {"type": "DELETED", "object": event.object}
    return {"type": event.type, "object": event.object} if now_visible else None


def _send_initial_events(params: Mapping[str, str], *, bookmarks: bool) -> bool:
    """Whether a watch asks for its initial events to end with a bookmark (``sendInitialEvents=true``, the
    streaming list of client-go's WatchListClient), after ListOptions' validation (422 as the API server)."""
    send = params.get("sendInitialEvents")
    match = params.get("resourceVersionMatch") or ""
    errors = []
    if send is not None and send.lower() not in ("true", "false"):
        errors.append(("sendInitialEvents", f'Invalid value: "{send}": must be true or false'))
    elif send is not None and send.lower() == "true":
        if match != "NotOlderThan":
            errors.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            )
        if not bookmarks:
            errors.append(
                (
                    "allowWatchBookmarks",
                    "Required value: sendInitialEvents requires setting allowWatchBookmarks to true",
                )
            )
    elif match:
        errors.append(
            (
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            )
        )
    if errors:
        kinds = {"Forbidden": validation.FORBIDDEN, "Required": validation.REQUIRED, "Invalid": validation.INVALID}
        causes = [validation.Cause(field, kinds[text.split(" ", 1)[0].rstrip(":")], text) for field, text in errors]
        invalid = validation.Invalid(kind="ListOptions", group="meta.k8s.io", name="", causes=causes)
        raise store.StoreError(status=422, reason="Invalid", message=invalid.message, details=invalid.details())
    return send is not None and send.lower() == "true"


HEALTH_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
"""kube-apiserver's health endpoints, each answering ``ok`` (text/plain) while it serves."""


def _not_found_status() -> dict[str, Any]:
    """kube-apiserver's answer to a path it does not serve (an unknown group, version or resource): the 404 Status
    of k8s.io/apiserver's ``notfoundhandler`` (reason NotFound, no details)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    }


def _not_found() -> kmock.KubernetesError:
    """:func:`_not_found_status` as an error to raise (``ClusterEmulator._render_error`` renders it)."""
    return kmock.KubernetesNotFoundError()


def _is_discovery_path(path: str) -> bool:
    """Whether ``path`` is where a discovery document would be (``/api/VERSION``, ``/apis/GROUP[/VERSION]``)."""
    segments = [segment for segment in path.split("/") if segment]
    return (len(segments) == 2 and segments[0] == "api") or (len(segments) in (2, 3) and segments[0] == "apis")


def _bookmark_event(ref: resources.ResourceRef, *, resource_version: int) -> dict[str, Any]:
    return {
        "type": "BOOKMARK",
        "object": {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "metadata": {"resourceVersion": str(resource_version)},
        },
    }


def _expired_event(*, since: int, oldest: int) -> dict[str, Any]:
    return {
        "type": "ERROR",
        "object": {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {since} ({oldest})",
            "reason": "Expired",
            "code": 410,
        },
    }


async def _with_headers_first(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[Any]:
    """kmock streams start their HTTP response at the first chunk; an empty one sends headers at once."""
    yield b""
    async for event in events:
        yield event


async def _stream_events(
    raw_request: aiohttp.web.BaseRequest, events: AsyncIterator[dict[str, Any]], *, warnings: tuple[str, ...] = ()
) -> aiohttp.web.StreamResponse:
    """Write a watch stream as JSON lines, one event per line, flushing each; ``warnings`` as ``Warning`` headers."""
    headers = multidict.CIMultiDict([("Content-Type", "application/json")])
    for text in warnings:
        headers.add("Warning", f'299 - "{_quoted(text)}"')
    response = aiohttp.web.StreamResponse(status=200, headers=headers)
    try:
        await response.prepare(raw_request)  # the client may be gone already (a service stopping)
        async for event in events:
            await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
    except ConnectionError:
        logger.debug("watch_client_gone", path=raw_request.path)
    return response
