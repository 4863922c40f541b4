"""AdmissionReview v1 in, AdmissionReview v1 out: Kueue's job webhooks answered from the pure rules.

Why this module exists: kube-apiserver sends an admission webhook an
``admission.k8s.io/v1`` AdmissionReview (``request``: uid, kind, resource,
operation, object, oldObject, dryRun, ...) and expects one back whose
``response`` echoes the uid and says ``allowed``; a mutating webhook's changes are
a base64 JSONPatch (``patchType: JSONPatch``), a refusal a ``status`` with the
message kubectl prints after ``admission webhook "vjob.kb.io" denied the
request:``. This module does only that translation, around
:mod:`kueue_es.jobframework.webhooks`; what the cluster knows (the namespace's
``default`` LocalQueue) arrives in the :class:`~kueue_es.jobframework.webhooks.Context`.
Pure: no I/O, no clock.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import jsonpatch

from kueue_es.jobframework import core_webhooks, webhooks, workload_webhook

API_VERSION = "admission.k8s.io/v1"


class BadReview(ValueError):
    """A body that is not an AdmissionReview v1 request (answered 400)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Request:
    """The parts of ``AdmissionReview.request`` the webhooks read."""

    uid: str
    api_version: str
    kind: str
    operation: str
    namespace: str
    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None
    dry_run: bool


def parse(body: Any) -> Request:
    """The request of an AdmissionReview v1 body (decoded JSON). Raises :class:`BadReview` naming the field."""
    if not isinstance(body, dict) or body.get("apiVersion") != API_VERSION or body.get("kind") != "AdmissionReview":
        raise BadReview(f"expected an AdmissionReview of {API_VERSION}")
    request = body.get("request")
    if not isinstance(request, dict):
        raise BadReview("request: is required")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid: is required")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str) or not isinstance(kind.get("version"), str):
        raise BadReview("request.kind: must be a group/version/kind")
    group = str(kind.get("group") or "")
    obj = request.get("object")
    old = request.get("oldObject")
    operation = str(request.get("operation") or "")
    if operation in ("CREATE", "UPDATE") and not isinstance(obj, dict):
        raise BadReview("request.object: is required for CREATE and UPDATE")
    if operation == "UPDATE" and not isinstance(old, dict):
        raise BadReview("request.oldObject: is required for UPDATE")
    return Request(
        uid=uid,
        api_version=f"{group}/{kind['version']}" if group else str(kind["version"]),
        kind=str(kind["kind"]),
        operation=operation,
        namespace=str(request.get("namespace") or ""),
        obj=obj if isinstance(obj, dict) else {},
        old=old if isinstance(old, dict) else None,
        dry_run=bool(request.get("dryRun")),
    )


def with_namespace(obj: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
    """The object with ``metadata.namespace`` filled in from the request (a created object may lack it)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    if meta.get("namespace") or not namespace:
        return obj
    return {**obj, "metadata": {**meta, "namespace": namespace}}


def _review(uid: str, response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": {"uid": uid, **response}}


def unchanged(request: Request) -> dict[str, Any]:
    """The AdmissionReview of Kueue's no-op webhook (:func:`webhooks.noop`), mutating or validating alike:
    allowed, no patch, whatever the object holds (pkg/util/webhook/noop_webhook.go)."""
    return _review(request.uid, {"allowed": True})


def mutate(request: Request, target: webhooks.Target, *, context: webhooks.Context) -> dict[str, Any]:
    """The AdmissionReview answering a mutating call: allowed, with the JSONPatch (RFC 6902) that turns the
    object into :func:`webhooks.default`'s when it changes anything. On UPDATE only the kinds whose Kueue
    webhook is called then too (:func:`webhooks.defaults_on_update`: Deployment, StatefulSet,
    LeaderWorkerSet) are defaulted, as at creation: the ``default`` LocalQueue, and the template marks of
    one with a queue or, under ``manageJobsWithoutQueueName``, of one in a selected namespace."""
    obj = dict(request.obj)
    if defaults(request, target):
        changed = webhooks.default(request.api_version, request.kind, obj, context=context)
    else:
        changed = obj
    patch = jsonpatch.make_patch(obj, changed).patch
    if not patch:
        return _review(request.uid, {"allowed": True})
    encoded = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    return _review(request.uid, {"allowed": True, "patchType": "JSONPatch", "patch": encoded})


def validate(request: Request, target: webhooks.Target, *, context: webhooks.Context) -> dict[str, Any]:
    """The AdmissionReview answering a validating call: allowed, or refused with ``status`` code 403,
    reason Forbidden and Kueue's field errors as the message (controller-runtime admission.Denied).
    DELETE and CONNECT are allowed (Kueue's ValidateDelete allows everything)."""
    if request.operation == "CREATE":
        errors = webhooks.validate_create(request.api_version, request.kind, request.obj, context=context)
    elif request.operation == "UPDATE" and request.old is not None:
        errors = webhooks.validate_update(request.api_version, request.kind, request.old, request.obj, context=context)
    else:
        errors = []
    if not errors:
        return _review(request.uid, {"allowed": True})
    return _forbidden(request.uid, webhooks.message(errors))


def defaults(request: Request, target: webhooks.Target) -> bool:
    """Whether a mutating call defaults the object (:func:`mutate`): every CREATE, and the UPDATE of a kind
    Kueue's webhook defaults on update too (:func:`webhooks.defaults_on_update`)."""
    return request.operation == "CREATE" or (request.operation == "UPDATE" and webhooks.defaults_on_update(target))


def needs_default_queue(verb: str, request: Request, target: webhooks.Target) -> bool:
    """Whether the answer depends on the namespace having a ``default`` LocalQueue (so the server asks the
    API only then): a defaulting call (:func:`defaults`) without the queue-name label, an update that
    removes it."""
    if verb == "mutate":
        return defaults(request, target) and not webhooks.queue_name(request.obj)
    return request.operation == "UPDATE" and request.old is not None and bool(webhooks.queue_name(request.old))


#: The kinds whose validating webhook walks the owners on update (WorkloadShouldBeSuspended in
#: statefulset_webhook.go and leaderworkerset_webhook.go ValidateUpdate).
_WALKED_ON_UPDATE = ("StatefulSet", "LeaderWorkerSet")


def needs_owners(verb: str, request: Request, target: webhooks.Target) -> bool:
    """Whether the answer depends on the object's owners read from the API (:func:`webhooks.walks_owners`), so
    the server reads them only then: a defaulting call (:func:`defaults`: Kueue's ApplyDefaultForSuspend), the
    validation of a created job whose kind's own rules hold only for a job Kueue manages (a Ray kind, one
    ``refused_at_create``), and the validation of a StatefulSet's or LeaderWorkerSet's update."""
    if not webhooks.walks_owners(target, request.obj):
        return False
    if verb == "mutate":
        return defaults(request, target)
    if request.operation == "CREATE":
        integration = target.integration
        return integration is not None and (integration.refused_at_create or webhooks.target_is_ray(target))
    return request.operation == "UPDATE" and target.kind in _WALKED_ON_UPDATE


def refuses_on_walk(verb: str, request: Request, target: webhooks.Target) -> bool:
    """Whether a failed walk of the owners (an owner missing, a chain too deep) refuses the call, as the error
    of Kueue's WorkloadShouldBeSuspended does where that webhook asks it: every defaulting call, and the
    validation of a StatefulSet's or LeaderWorkerSet's update. Elsewhere the walk only informs kueue-es's
    own skip of a managed job's child (the mutating webhook has refused a create already)."""
    return verb == "mutate" or (request.operation == "UPDATE" and target.kind in _WALKED_ON_UPDATE)


def denied(
    request: Request, *, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The AdmissionReview refusing a call with the ``status`` Kueue's webhook answers with: 403 Forbidden and
    the error's text for a plain error (controller-runtime admission.Denied), or the API's own status for an
    API error (a 404 NotFound of an owner read: controller-runtime validationResponseFromStatus)."""
    status: dict[str, Any] = {"metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}
    if details:
        status["details"] = dict(details)
    return _review(request.uid, {"allowed": False, "status": status})


def workload_mutate(request: Request, *, gates: Mapping[str, bool]) -> dict[str, Any]:
    """The AdmissionReview of Kueue's mutating Workload webhook (``mworkload.kb.io``, on CREATE): allowed, with
    the JSONPatch of :func:`workload_webhook.default` when it changes the Workload (``minCount`` dropped with
    the gate PartialAdmission off)."""
    obj = dict(request.obj)
    changed = workload_webhook.default(obj, gates=gates) if request.operation == "CREATE" else obj
    patch = jsonpatch.make_patch(obj, changed).patch
    if not patch:
        return _review(request.uid, {"allowed": True})
    encoded = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    return _review(request.uid, {"allowed": True, "patchType": "JSONPatch", "patch": encoded})


def workload_validate(request: Request, *, gates: Mapping[str, bool]) -> dict[str, Any]:
    """The AdmissionReview of Kueue's validating Workload webhook (``vworkload.kb.io``, CREATE and UPDATE of
    ``workloads`` and ``workloads/status``): :func:`workload_webhook.validate` of the object (and the old one
    on UPDATE); a refusal is 403 Forbidden with Kueue's field errors, as :func:`validate`'s."""
    if request.operation == "CREATE":
        errors = workload_webhook.validate(request.obj, gates=gates)
    elif request.operation == "UPDATE" and request.old is not None:
        errors = workload_webhook.validate(request.obj, old=request.old, gates=gates)
    else:
        errors = []
    if not errors:
        return _review(request.uid, {"allowed": True})
    return _forbidden(request.uid, webhooks.message(errors))


def _forbidden(uid: str, message: str) -> dict[str, Any]:
    """The AdmissionReview refusing a request as Kueue's webhooks do: 403 Forbidden with ``message``."""
    status = {"metadata": {}, "status": "Failure", "code": 403, "reason": "Forbidden", "message": message}
    return _review(uid, {"allowed": False, "status": status})


def core_mutate(request: Request, hook: core_webhooks.Hook) -> dict[str, Any]:
    """The AdmissionReview of Kueue's mutating webhook of a ClusterQueue or ResourceFlavor (``mclusterqueue.kb.io``,
    ``mresourceflavor.kb.io``, on CREATE): allowed, with the JSONPatch adding the ``resource-in-use`` finalizer
    when the object lacks it (:func:`core_webhooks.default`)."""
    obj = dict(request.obj)
    changed = core_webhooks.default(hook.kind, obj) if request.operation == "CREATE" else obj
    patch = jsonpatch.make_patch(obj, changed).patch
    if not patch:
        return _review(request.uid, {"allowed": True})
    encoded = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    return _review(request.uid, {"allowed": True, "patchType": "JSONPatch", "patch": encoded})


def core_validate(
    request: Request, hook: core_webhooks.Hook, *, gates: Mapping[str, bool] | None = None
) -> dict[str, Any]:
    """The AdmissionReview of Kueue's validating webhook of a ClusterQueue, Cohort or ResourceFlavor
    (``vclusterqueue.kb.io``, ...; CREATE and UPDATE): :func:`core_webhooks.validate` of the object (and the old
    one on UPDATE), and for a ClusterQueue the checks that read the feature ``gates`` (the Configuration's:
    :func:`core_webhooks.concurrent_admission_refusals`); a refusal is 403 Forbidden with Kueue's field errors, as
    :func:`validate`'s. DELETE is allowed (Kueue's ValidateDelete allows everything)."""
    if request.operation == "CREATE":
        refusals = core_webhooks.validate(hook.kind, request.obj)
    elif request.operation == "UPDATE" and request.old is not None:
        refusals = core_webhooks.validate(hook.kind, request.obj, old=request.old)
    else:
        refusals = []
    if hook.kind == "ClusterQueue" and request.operation in ("CREATE", "UPDATE"):
        spec = request.obj.get("spec")
        refusals += core_webhooks.concurrent_admission_refusals(
            spec if isinstance(spec, Mapping) else {}, gates=gates or {}
        )
    if not refusals:
        return _review(request.uid, {"allowed": True})
    return _forbidden(request.uid, core_webhooks.message(refusals))
