"""The webhook service: Kueue's job and Workload admission webhooks over HTTPS, with its certificates kept current.

``kueue-es service webhook [--webhook-port 9443] [--webhook-host H] [--cert-dir DIR]
[--internal-cert-management ...] [--kubeconfig ...] [--config FILE]``. It needs no NATS: each
AdmissionReview is answered from the pure rules (:mod:`.review`,
:mod:`kueue_es.jobframework.webhooks`); the Kubernetes API is asked only whether a
namespace has a ``default`` LocalQueue, what a job's LocalQueue's ClusterQueue checks
(MultiKueue), the labels of the job's Namespace (``--config``'s
``managedJobsNamespaceSelector``), the owners of a job's controller chain (is it part of a
managed job's workload: :func:`read_owners`) and the Workload of a StatefulSet scaled up from 0, each
only when the answer depends on it. ``POST /convert`` is
Kueue's CRD conversion webhook (v1beta1 <-> v1beta2, :mod:`kueue_es.events.v1beta1`), which the
ClusterQueue, Cohort, LocalQueue, Workload and MultiKueueCluster CRDs of deploy/crds call. The kinds
of the frameworks ``--config``'s ``integrations.frameworks`` leaves out get Kueue's no-op
webhook: allowed, unchanged. Kueue's Workload webhooks (``mworkload.kb.io``, ``vworkload.kb.io``:
:mod:`kueue_es.jobframework.workload_webhook`) and those of its own kinds (``mclusterqueue.kb.io``,
``vclusterqueue.kb.io``, ``vcohort.kb.io``, ``mresourceflavor.kb.io``, ``vresourceflavor.kb.io``:
:mod:`kueue_es.jobframework.core_webhooks`) are answered too, from the object alone.

Certificates, as Kueue's manager has them: with ``--internal-cert-management`` a
:class:`~.rotation.Rotator` keeps a self-signed CA and a serving certificate for the
Service's DNS names in a Secret, renews them before they expire and patches the CA
into the webhook configurations; else the files in ``--cert-dir`` (``tls.crt``,
``tls.key``; cert-manager's Secret mounted there) are used, reloaded when they
change, and without any a self-signed pair for ``localhost``/``127.0.0.1`` is made
there (for tests and the emulator). ``/healthz`` and ``/readyz`` are on the same port
(ready once the certificates are loaded and, with internal management, the CA bundle
is in both configurations).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp.web
import structlog
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import models, slices, v1beta1
from kueue_es.jobframework import core_webhooks, webhooks, workload_webhook, workloads
from kueue_es.services.kube import client, errors, resources
from kueue_es.services.webhook import certs, review, rotation

log = structlog.get_logger(__name__)

DEFAULT_PORT = 9443  # Kueue's webhook port (controller-runtime's default)
DefaultQueueLookup = Callable[[str], Awaitable[bool]]
"""Whether namespace ``ns`` has a LocalQueue named ``default``."""


def api_lookup(api: k8s_client.ApiClient) -> DefaultQueueLookup:
    """The lookup through the Kubernetes API: GET the LocalQueue ``<ns>/default`` (404: none)."""

    async def exists(namespace: str) -> bool:
        try:
            await client.get_object(api, resources.LOCAL_QUEUES, namespace=namespace, name="default")
        except errors.NotFoundError:
            return False
        return True

    return exists


async def _no_default_queues(_: str) -> bool:
    return False


MultiKueueLookup = Callable[[str, str], Awaitable[bool]]
"""Whether LocalQueue ``ns/name`` points at a ClusterQueue with a MultiKueue admission check."""


def api_multikueue_lookup(api: k8s_client.ApiClient) -> MultiKueueLookup:
    """The lookup through the Kubernetes API: GET the LocalQueue and its ClusterQueue, LIST the
    AdmissionChecks (:func:`webhooks.uses_multikueue`); a missing queue, or a LocalQueue that names no
    ClusterQueue (``spec.clusterQueue`` is optional), is no MultiKueue."""

    async def uses(namespace: str, queue: str) -> bool:
        try:
            local_queue = await client.get_object(api, resources.LOCAL_QUEUES, namespace=namespace, name=queue)
            cq_name = str((local_queue.get("spec") or {}).get("clusterQueue") or "")
            if not cq_name:  # a GET of no name would read the whole ClusterQueue collection
                return False
            cluster_queue = await client.get_object(api, resources.CLUSTER_QUEUES, name=cq_name)
        except errors.NotFoundError:
            return False
        checks, _ = await client.list_objects(api, resources.ADMISSION_CHECKS)
        controllers = {
            str((c.get("metadata") or {}).get("name")): str((c.get("spec") or {}).get("controllerName") or "")
            for c in checks
        }
        return webhooks.uses_multikueue(cluster_queue, controllers)

    return uses


async def _no_multikueue(_namespace: str, _queue: str) -> bool:
    return False


PriorityClassLookup = Callable[[], Awaitable[bool]]
"""Whether the WorkloadPriorityClass ``default`` exists."""


def api_priority_class_lookup(api: k8s_client.ApiClient) -> PriorityClassLookup:
    """The lookup through the Kubernetes API: GET the WorkloadPriorityClass ``default`` (Kueue's
    DefaultWorkloadPriorityClassExist, pkg/util/priority/priority.go)."""

    async def exists() -> bool:
        name = workloads.DEFAULT_WORKLOAD_PRIORITY_CLASS
        try:
            await client.get_object(api, resources.WORKLOAD_PRIORITY_CLASSES, name=name)
        except errors.NotFoundError:
            return False
        return True

    return exists


async def _no_priority_classes() -> bool:
    return False


#: Kueue's gate by which its job webhooks give a job the ``default`` WorkloadPriorityClass label (beta, on).
WPC_DEFAULTING_GATE = "WorkloadPriorityClassDefaulting"


NamespaceLookup = Callable[[str], Awaitable[Mapping[str, str] | None]]
"""The labels of Namespace ``ns`` (None: no such Namespace)."""


def api_namespace_lookup(api: k8s_client.ApiClient) -> NamespaceLookup:
    """The lookup through the Kubernetes API: GET the Namespace, as Kueue's webhooks do to apply
    ``managedJobsNamespaceSelector`` (jobframework/utils.go namespaceMatchesSelector). A missing one is
    None: kube-apiserver refuses an object of a missing namespace before it calls a webhook
    (NamespaceLifecycle), so only a review made by hand names one."""

    async def labels(namespace: str) -> Mapping[str, str] | None:
        try:
            found = await client.get_object(api, resources.NAMESPACES, name=namespace)
        except errors.NotFoundError:
            return None
        return (found.get("metadata") or {}).get("labels") or {}

    return labels


async def _no_namespaces(_: str) -> Mapping[str, str] | None:
    return None


OwnerRead = Callable[[str, str, str, str], Awaitable[Mapping[str, Any] | None]]
"""The object ``(namespace, apiVersion, kind, name)`` an owner reference names (None: no such object)."""


def api_owner_read(api: k8s_client.ApiClient) -> OwnerRead:
    """The read through the Kubernetes API: GET the owner, as Kueue's FindAncestorJobManagedByKueue does for each
    owner it walks (404, or a kind the cluster does not serve: None)."""

    async def read(namespace: str, api_version: str, kind: str, name: str) -> Mapping[str, Any] | None:
        try:
            return await client.get_object(api, resources.ref_for(api_version, kind), namespace=namespace, name=name)
        except errors.NotFoundError:
            return None

    return read


WorkloadRead = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]
"""The Workload ``(namespace, name)`` (None: no such Workload)."""


def api_workload_read(api: k8s_client.ApiClient) -> WorkloadRead:
    """The read through the Kubernetes API: GET the Workload, as Kueue's StatefulSet webhook does for a scale-up
    from 0 (statefulset_webhook.go ValidateUpdate, findWorkload; 404: None)."""

    async def read(namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return await client.get_object(api, resources.WORKLOADS, namespace=namespace, name=name)
        except errors.NotFoundError:
            return None

    return read


async def _no_workloads(_namespace: str, _name: str) -> Mapping[str, Any] | None:
    return None


async def read_owners(
    obj: Mapping[str, Any],
    *,
    namespace: str,
    read: OwnerRead,
    manage_jobs_without_queue_name: bool,
    managed_kinds: frozenset[str] | None,
) -> tuple[dict[webhooks.OwnerKey, workloads.Owner], Mapping[str, Any] | None]:
    """The owners of ``obj``'s controller chain, read one at a time as far as the walk goes
    (:func:`webhooks.owner_to_read`), and the reference of the first that does not exist (None: all do).
    An owner of a framework ``managed_kinds`` leaves out is walked through, never the ancestor
    (:attr:`workloads.Owner.enabled`). Raises errors.KubeError when a read fails otherwise."""
    owners: dict[webhooks.OwnerKey, workloads.Owner] = {}
    while (
        reference := webhooks.owner_to_read(obj, owners, manage_jobs_without_queue_name=manage_jobs_without_queue_name)
    ) is not None:
        api_version, kind, name = webhooks.owner_key(reference)
        found = await read(namespace, api_version, kind, name)
        if found is None:
            return owners, reference
        owners[api_version, kind, name] = workloads.owner_record(
            found, kind=kind, api_version=api_version, enabled=managed_kinds is None or kind in managed_kinds
        )
    return owners, None


def app(
    *,
    manage_jobs_without_queue_name: bool = False,
    elastic_jobs: bool = slices.GATE_DEFAULT,
    default_queue: DefaultQueueLookup = _no_default_queues,
    ready: Callable[[], bool] = lambda: True,
    multikueue: MultiKueueLookup = _no_multikueue,
    managed_kinds: frozenset[str] | None = None,
    namespace_selector: models.LabelSelector = workloads.DEFAULT_MANAGED_JOBS_NAMESPACE_SELECTOR,
    namespace_labels: NamespaceLookup = _no_namespaces,
    owner_read: OwnerRead | None = None,
    feature_gates: Mapping[str, bool] | None = None,
    workload_read: WorkloadRead = _no_workloads,
    priority_class: PriorityClassLookup = _no_priority_classes,
) -> aiohttp.web.Application:
    """The HTTP application: ``POST /mutate-...`` and ``/validate-...`` for every kind of
    :func:`webhooks.targets`, answering AdmissionReview v1; ``/healthz`` and ``/readyz``.
    ``elastic_jobs``: Kueue's gate ElasticJobsViaWorkloadSlices (:class:`webhooks.Context`; on by default, as
    Kueue v0.18+).
    ``managed_kinds``: the kinds of the frameworks the Configuration enables
    (:func:`webhooks.enabled_kinds`; None: all); the others are answered as Kueue's no-op webhook
    answers (:func:`webhooks.noop`: allowed, unchanged), without asking the API anything.
    ``namespace_selector``: the Configuration's ``managedJobsNamespaceSelector`` (Kueue's default
    unless given), applied to the labels ``namespace_labels`` gives when a defaulting call's answer
    (a create, or the update of a Deployment, StatefulSet or LeaderWorkerSet) depends on it (:func:`webhooks.namespace_decides`), or a
    validating call's (:func:`webhooks.namespace_decides_update`), and the selector reads more than the namespace's name
    (:func:`workloads.selector_reads_labels`); a failed lookup fails the call (500), as Kueue's.
    ``owner_read``: the owners of a job's controller chain, read where the answer depends on them
    (:func:`review.needs_owners`) and walked as Kueue's webhooks walk them (:func:`read_owners`); an owner
    that does not exist is refused 404 NotFound, a chain too deep or looping 403 Forbidden, where Kueue's
    webhook refuses (:func:`review.refuses_on_walk`); None: not read, the controller's kind alone decides
    (:func:`webhooks.owner_managed`). ``feature_gates``: the Configuration's, for Kueue's Workload webhooks
    (:func:`_workload`; ElasticJobsViaWorkloadSlices as ``elastic_jobs`` says, every other gate at its
    default). ``workload_read``: the Workload of a managed StatefulSet scaled up from 0, read only then
    (:func:`webhooks.scale_up_workload`; the default: none); a failed read fails the call (500).
    ``priority_class``: whether the WorkloadPriorityClass ``default`` exists, asked when a defaulting call
    would label the object with it (:func:`webhooks.default_priority_class_applies`) and the gate
    WorkloadPriorityClassDefaulting is on (its default); a failed lookup labels nothing, as Kueue's."""
    gates = {**(feature_gates or {}), slices.GATE: elastic_jobs}

    async def handle(request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        if request.path == "/healthz":
            return aiohttp.web.Response(text="ok")
        if request.path == "/readyz":
            ok = ready()
            return aiohttp.web.Response(text="ok" if ok else "certificates not ready", status=200 if ok else 503)
        if request.path == v1beta1.WEBHOOK_PATH:
            return await _convert(request)
        if request.path in (workload_webhook.MUTATE_PATH, workload_webhook.VALIDATE_PATH):
            return await _workload(request, gates=gates)
        if (hook := core_webhooks.hook_of_path(request.path)) is not None:
            return await _core(request, hook, gates=gates)
        found = webhooks.target_of_path(request.path)
        if found is None:
            return aiohttp.web.Response(text=f"no webhook at {request.path}\n", status=404)
        if request.method != "POST":
            return aiohttp.web.Response(text="POST an AdmissionReview\n", status=405)
        verb, target = found
        try:
            parsed = review.parse(await request.json())
        except (review.BadReview, json.JSONDecodeError, UnicodeDecodeError) as err:
            return aiohttp.web.Response(text=f"{err}\n", status=400)
        parsed = review.Request(
            uid=parsed.uid,
            api_version=parsed.api_version,
            kind=parsed.kind,
            operation=parsed.operation,
            namespace=parsed.namespace,
            obj=review.with_namespace(parsed.obj, parsed.namespace),
            old=parsed.old,
            dry_run=parsed.dry_run,
        )
        if webhooks.noop(target, managed_kinds):
            # the path stays registered for a framework left out, as Kueue's does, so the configurations
            # need not follow integrations.frameworks: kube-apiserver still calls it, and gets a yes
            log.info("admission_reviewed", webhook=request.path, operation=parsed.operation, noop=True)
            return aiohttp.web.json_response(review.unchanged(parsed))
        owners: dict[webhooks.OwnerKey, workloads.Owner] | None = None
        if owner_read is not None and review.needs_owners(verb, parsed, target):
            namespace = parsed.namespace or "default"
            try:
                owners, missing = await read_owners(
                    parsed.obj,
                    namespace=namespace,
                    read=owner_read,
                    manage_jobs_without_queue_name=manage_jobs_without_queue_name,
                    managed_kinds=managed_kinds,
                )
            except errors.KubeError as err:  # Kueue's webhook fails the call when it cannot read an owner
                log.warning("webhook_lookup_failed", namespace=namespace, error=str(err))
                return aiohttp.web.Response(text=f"cannot read the owners: {err}\n", status=500)
            refusal = None
            if missing is not None:
                api_version, kind, name = webhooks.owner_key(missing)
                served_owner = webhooks.target(api_version, kind)
                refusal = review.denied(
                    parsed,
                    code=404,
                    reason="NotFound",
                    message=webhooks.owner_not_found_message(missing),
                    details={
                        "name": name,
                        "group": api_version.rpartition("/")[0],
                        "kind": served_owner.plural if served_owner is not None else kind,
                    },
                )
            elif (
                message := webhooks.walk_refusal(
                    webhooks.walk(parsed.obj, owners, manage_jobs_without_queue_name=manage_jobs_without_queue_name)
                )
            ) is not None:
                refusal = review.denied(parsed, code=403, reason="Forbidden", message=message)
            if refusal is not None and target == webhooks.POD:
                # the pod webhook filters on the namespace before it walks (pod_webhook.go Default)
                namespace = parsed.namespace or "default"
                pod_namespace_labels: Mapping[str, str] | None = None
                if workloads.selector_reads_labels(namespace_selector):
                    try:
                        pod_namespace_labels = await namespace_labels(namespace)
                    except errors.KubeError as err:
                        log.warning("webhook_lookup_failed", namespace=namespace, error=str(err))
                        return aiohttp.web.Response(text=f"cannot read the namespace: {err}\n", status=500)
                if not workloads.namespace_selected(namespace_selector, namespace, pod_namespace_labels):
                    return aiohttp.web.json_response(review.unchanged(parsed))
            if refusal is not None and review.refuses_on_walk(verb, parsed, target):
                log.info("admission_reviewed", webhook=request.path, operation=parsed.operation, allowed=False)
                return aiohttp.web.json_response(refusal)
        has_default = False
        if review.needs_default_queue(verb, parsed, target):
            try:
                has_default = await default_queue(parsed.namespace or "default")
            except errors.KubeError as err:  # Kueue's webhook fails the call when its cache cannot answer
                log.warning("webhook_lookup_failed", namespace=parsed.namespace, error=str(err))
                return aiohttp.web.Response(text=f"cannot read LocalQueues: {err}\n", status=500)
        uses_multikueue = False
        queue = webhooks.queue_name(parsed.obj) or ("default" if has_default else "")
        if verb == "mutate" and parsed.operation == "CREATE" and queue and target.kind in ("Job", "JobSet"):
            try:
                uses_multikueue = await multikueue(parsed.namespace or "default", queue)
            except errors.KubeError as err:
                log.warning("webhook_lookup_failed", namespace=parsed.namespace, error=str(err))
                return aiohttp.web.Response(text=f"cannot read the queues: {err}\n", status=500)
        namespace_managed = True  # only read where it can change the answer
        if (
            verb == "mutate"
            and review.defaults(parsed, target)
            and webhooks.namespace_decides(
                target,
                parsed.obj,
                manage_jobs_without_queue_name=manage_jobs_without_queue_name,
                default_local_queue=has_default,
                owners=owners,
            )
        ) or (
            verb == "validate"
            and parsed.operation == "UPDATE"
            and webhooks.namespace_decides_update(
                target, parsed.obj, manage_jobs_without_queue_name=manage_jobs_without_queue_name, owners=owners
            )
        ):
            namespace = parsed.namespace or "default"
            labels: Mapping[str, str] | None = None
            if workloads.selector_reads_labels(namespace_selector):
                try:
                    labels = await namespace_labels(namespace)
                except errors.KubeError as err:  # Kueue's webhook fails the call when it cannot read the Namespace
                    log.warning("webhook_lookup_failed", namespace=namespace, error=str(err))
                    return aiohttp.web.Response(text=f"cannot read the namespace: {err}\n", status=500)
            namespace_managed = workloads.namespace_selected(namespace_selector, namespace, labels)
        has_default_class = False
        if (
            verb == "mutate"
            and gates.get(WPC_DEFAULTING_GATE, True)
            and review.defaults(parsed, target)
            and webhooks.default_priority_class_applies(target, parsed.obj)
        ):
            try:
                has_default_class = await priority_class()
            except (
                errors.KubeError
            ) as err:  # Kueue logs it and leaves the label off (ApplyDefaultWorkloadPriorityClass)
                log.warning("webhook_lookup_failed", resource="workloadpriorityclasses", error=str(err))
        context = webhooks.Context(
            manage_jobs_without_queue_name=manage_jobs_without_queue_name,
            namespace_managed=namespace_managed,
            default_local_queue=has_default,
            default_priority_class=has_default_class,
            elastic_jobs=elastic_jobs,
            multikueue_queue=uses_multikueue,
            owners=owners,
            # off, pods get no kueue.x-k8s.io/topology gate and TAS annotations go unchecked, as the watcher
            # builds their pod sets without a topology request (Kueue's job webhooks read the gate too)
            topology_aware_scheduling=gates.get("TopologyAwareScheduling", True),
        )
        if (
            verb == "validate"
            and parsed.operation == "UPDATE"
            and parsed.old is not None
            and (workload_name := webhooks.scale_up_workload(target, parsed.old, parsed.obj, context)) is not None
        ):
            namespace = parsed.namespace or "default"
            try:
                workload = await workload_read(namespace, workload_name)
            except errors.KubeError as err:  # Kueue's webhook fails the call when it cannot read the Workload
                log.warning("webhook_lookup_failed", namespace=namespace, error=str(err))
                return aiohttp.web.Response(text=f"cannot read the workload: {err}\n", status=500)
            context = dataclasses.replace(context, statefulset_workload=workload)
        answer = (review.mutate if verb == "mutate" else review.validate)(parsed, target, context=context)
        log.info(
            "admission_reviewed",
            webhook=request.path,
            operation=parsed.operation,
            object=f"{parsed.namespace}/{(parsed.obj.get('metadata') or {}).get('name', '')}",
            allowed=answer["response"]["allowed"],
            patched="patch" in answer["response"],
            dry_run=parsed.dry_run,
        )
        return aiohttp.web.json_response(answer)

    application = aiohttp.web.Application()
    application.router.add_route("*", "/{tail:.*}", handle)
    return application


async def _convert(request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
    """``POST /convert``: Kueue's conversion webhook, which the CRDs of the kinds Kueue converts by webhook call
    (kueue_es.crds.conversion): a ConversionReview answered by Kueue's v1beta1 <-> v1beta2 rules
    (:func:`kueue_es.events.v1beta1.convert_review`); a body that is not a ConversionReview is 400."""
    if request.method != "POST":
        return aiohttp.web.Response(text="POST a ConversionReview\n", status=405)
    try:
        answer = v1beta1.convert_review(await request.json())
    except (v1beta1.ConversionError, json.JSONDecodeError, UnicodeDecodeError, AttributeError) as err:
        return aiohttp.web.Response(text=f"{err}\n", status=400)
    result = answer["response"]["result"]
    log.info(
        "conversion_reviewed",
        webhook=request.path,
        objects=len(answer["response"]["convertedObjects"]),
        status=result["status"],
        message=result.get("message", ""),
    )
    return aiohttp.web.json_response(answer)


async def _workload(request: aiohttp.web.Request, *, gates: Mapping[str, bool]) -> aiohttp.web.StreamResponse:
    """Kueue's Workload webhooks (``/mutate-kueue-x-k8s-io-v1beta2-workload``, ``/validate-...``): answered from
    the Workload's own rules (:mod:`kueue_es.jobframework.workload_webhook`), asking the API nothing."""
    if request.method != "POST":
        return aiohttp.web.Response(text="POST an AdmissionReview\n", status=405)
    try:
        parsed = review.parse(await request.json())
    except (review.BadReview, json.JSONDecodeError, UnicodeDecodeError) as err:
        return aiohttp.web.Response(text=f"{err}\n", status=400)
    mutating = request.path == workload_webhook.MUTATE_PATH
    answer = (review.workload_mutate if mutating else review.workload_validate)(parsed, gates=gates)
    log.info(
        "admission_reviewed",
        webhook=request.path,
        operation=parsed.operation,
        object=f"{parsed.namespace}/{(parsed.obj.get('metadata') or {}).get('name', '')}",
        allowed=answer["response"]["allowed"],
        patched="patch" in answer["response"],
        dry_run=parsed.dry_run,
    )
    return aiohttp.web.json_response(answer)


async def _core(
    request: aiohttp.web.Request, hook: core_webhooks.Hook, *, gates: Mapping[str, bool]
) -> aiohttp.web.StreamResponse:
    """Kueue's webhooks of its own kinds (``/mutate-kueue-x-k8s-io-v1beta2-clusterqueue``,
    ``/validate-kueue-x-k8s-io-v1beta2-cohort``, ...: :data:`core_webhooks.HOOKS`): answered from the object alone
    (:mod:`kueue_es.jobframework.core_webhooks`), asking the API nothing."""
    if request.method != "POST":
        return aiohttp.web.Response(text="POST an AdmissionReview\n", status=405)
    try:
        parsed = review.parse(await request.json())
    except (review.BadReview, json.JSONDecodeError, UnicodeDecodeError) as err:
        return aiohttp.web.Response(text=f"{err}\n", status=400)
    if hook.mutating:
        answer = review.core_mutate(parsed, hook)
    else:
        answer = review.core_validate(parsed, hook, gates=gates)
    log.info(
        "admission_reviewed",
        webhook=request.path,
        operation=parsed.operation,
        object=str((parsed.obj.get("metadata") or {}).get("name", "")),
        allowed=answer["response"]["allowed"],
        patched="patch" in answer["response"],
        dry_run=parsed.dry_run,
    )
    return aiohttp.web.json_response(answer)


class ServingCerts:
    """The server's TLS context over the certificate files in ``cert_dir``, reloaded in place when they
    change (new connections get the new certificate; the context object stays the one the server uses)."""

    def __init__(self, cert_dir: Path) -> None:
        self.cert_dir = cert_dir
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.loaded: tuple[bytes, bytes] | None = None

    @property
    def files(self) -> tuple[Path, Path]:
        """``(tls.crt, tls.key)`` in the directory."""
        return self.cert_dir / certs.CERT, self.cert_dir / certs.KEY

    def reload(self) -> bool:
        """Load the files when they are there and changed since the last load; True when loaded.
        Raises ssl.SSLError or OSError for files that cannot be used."""
        cert, key = self.files
        if not (cert.is_file() and key.is_file()):
            return False
        stamp = (cert.read_bytes(), key.read_bytes())
        if stamp == self.loaded:
            return False
        self.context.load_cert_chain(cert, key)
        self.loaded = stamp
        log.info("webhook_certificate_loaded", cert=str(cert), not_after=certs.not_after(cert.read_bytes()).isoformat())
        return True


def self_signed_for_localhost(cert_dir: Path, *, now: datetime.datetime | None = None) -> None:
    """Make a CA and a serving certificate for ``localhost`` and ``127.0.0.1`` in ``cert_dir`` unless
    ``tls.crt`` is there already (``ca.crt`` is what a client verifies against)."""
    if (cert_dir / certs.CERT).is_file():
        return
    bundle = certs.new_bundle(["localhost", "127.0.0.1"], now or datetime.datetime.now(datetime.UTC))
    rotation.write_files(bundle, cert_dir)


@contextlib.asynccontextmanager
async def serve_https(
    application: aiohttp.web.Application, *, host: str, port: int, context: ssl.SSLContext
) -> AsyncIterator[str]:
    """Serve ``application`` over HTTPS on ``host:port`` until the block exits; yields its URL."""
    runner = aiohttp.web.AppRunner(application, access_log=None)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, host=host, port=port, ssl_context=context)
    try:
        await site.start()
        bound = port
        server = getattr(site, "_server", None)
        if port == 0 and server is not None and server.sockets:
            bound = server.sockets[0].getsockname()[1]
        yield f"https://{host}:{bound}"
    finally:
        await runner.cleanup()


async def serve_webhook(
    *,
    stop: asyncio.Event,
    cert_dir: Path,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    api: k8s_client.ApiClient | None = None,
    rotation_settings: rotation.Settings | None = None,
    manage_jobs_without_queue_name: bool = False,
    elastic_jobs: bool = slices.GATE_DEFAULT,
    feature_gates: Mapping[str, bool] | None = None,
    managed_kinds: frozenset[str] | None = None,
    namespace_selector: models.LabelSelector | None = None,
    reload_every: float = 10.0,
    started: Callable[[str], None] | None = None,
) -> None:
    """Answer Kueue's job webhooks on ``host:port`` until ``stop`` is set.

    ``api``: the Kubernetes API (for the ``default`` LocalQueue, MultiKueue, Namespace, owner and Workload lookups
    and the rotation; None: no lookups, as if no namespace had a ``default`` LocalQueue or labels besides its
    name, and a job's controller decided by its kind alone). ``rotation_settings``: internal certificate management through ``api``; without it the
    files in ``cert_dir`` (made for localhost when missing) are served and reloaded every
    ``reload_every`` seconds when they change. ``started``: called with the URL once serving.
    ``elastic_jobs``: Kueue's gate ElasticJobsViaWorkloadSlices for the job webhooks (and the Workload ones). ``feature_gates``: the
    Configuration's feature gates, for the Workload webhooks (:func:`app`). ``managed_kinds``:
    the kinds of the enabled frameworks (:func:`app`; None: all), the others get the no-op webhook.
    ``namespace_selector``: the Configuration's ``managedJobsNamespaceSelector`` (None: Kueue's default,
    every namespace but kube-system and kueue-system). Raises ValueError when rotation is asked for without an API.
    """
    serving = ServingCerts(cert_dir)
    rotator: rotation.Rotator | None = None
    tasks: list[asyncio.Task[Any]] = []
    if rotation_settings is not None:
        if api is None:
            raise ValueError("internal certificate management needs the Kubernetes API")
        rotator = rotation.Rotator(api, rotation_settings, cert_dir=cert_dir)
        while not stop.is_set():  # the server cannot start without a certificate (Kueue's BootstrapCerts)
            try:
                await rotator.check()
                break
            except errors.KubeError as err:
                log.warning("webhook_certificate_bootstrap_failed", error=str(err))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2.0):
                        await stop.wait()
        if stop.is_set():
            return
    else:
        self_signed_for_localhost(cert_dir)
    serving.reload()

    def ready() -> bool:
        return serving.loaded is not None and (rotator is None or rotator.injected)

    application = app(
        manage_jobs_without_queue_name=manage_jobs_without_queue_name,
        elastic_jobs=elastic_jobs,
        feature_gates=feature_gates,
        managed_kinds=managed_kinds,
        default_queue=api_lookup(api) if api is not None else _no_default_queues,
        multikueue=api_multikueue_lookup(api) if api is not None else _no_multikueue,
        namespace_selector=workloads.DEFAULT_MANAGED_JOBS_NAMESPACE_SELECTOR
        if namespace_selector is None
        else namespace_selector,
        namespace_labels=api_namespace_lookup(api) if api is not None else _no_namespaces,
        owner_read=api_owner_read(api) if api is not None else None,
        workload_read=api_workload_read(api) if api is not None else _no_workloads,
        priority_class=api_priority_class_lookup(api) if api is not None else _no_priority_classes,
        ready=ready,
    )
    async with serve_https(application, host=host, port=port, context=serving.context) as url:
        log.info("service_started", role="webhook", url=url, internal_cert_management=rotator is not None)
        if started is not None:
            started(url)
        if rotator is not None:
            tasks.append(asyncio.create_task(rotator.run(stop, on_change=serving.reload)))
        else:
            tasks.append(asyncio.create_task(_reload_files(serving, stop, every=reload_every)))
        try:
            await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    log.info("service_stopped", role="webhook")


async def _reload_files(serving: ServingCerts, stop: asyncio.Event, *, every: float) -> None:
    """cert-manager renews the Secret; the kubelet updates the mounted files: load them when they change."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(every):
                await stop.wait()
        try:
            serving.reload()
        except (OSError, ssl.SSLError) as err:
            log.warning("webhook_certificate_reload_failed", error=str(err))
