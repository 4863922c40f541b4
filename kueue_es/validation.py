"""What the Kubernetes API refuses: Kueue's CRD validation and webhooks, and pod resource requests.

Why this module exists: a real API server with kueue-es's CRDs (deploy/crds, from
:mod:`kueue_es.crds`) refuses an invalid ClusterQueue with 422 before anything is stored;
the emulated API server (:mod:`kueue_es.sim.emulator`) and ``kueue-es apply`` must refuse
the same objects with the same field paths and messages, so a user meets one API
whichever way they reach it. One function does it for every kind: :func:`validate`.

For the kueue.x-k8s.io kinds it walks the CRD's own ``openAPIV3Schema`` (types, enums,
patterns, minimums, lengths, item counts, required fields, defaults as the server
applies them before validating) and evaluates each ``x-kubernetes-validations`` rule
through its Python twin (:data:`kueue_es.crds.RULES`; a rule without a twin is a bug,
raised as ``LookupError``), then adds the checks Kueue's validating webhooks make that a
schema cannot say (Kueue pkg/webhooks: duplicate flavors and covered resources, a covered
resource that is not a label key, a quota's resource name that is not its covered resource,
a ClusterQueue's lendingLimit over its nominalQuota and its namespaceSelector as a label
selector, a ResourceFlavor's nodeLabels, taint and toleration keys as labels and taints
unique by key and effect: :mod:`kueue_es.jobframework.core_webhooks`, which ``kueue-es service
webhook`` answers with too). Kueue answers these 403 from its webhooks, and :func:`check` raises
:class:`Denied` for them (the emulated API server's 403) where the schema's are :class:`Invalid`
(422). For batch/v1 Jobs, v1 Pods and JobSets it checks container resource requests and limits as the core API does
(Kubernetes pkg/apis/core/validation ValidateResourceRequirements): non-negative, valid
quantities, requests no more than limits. Kueue's job webhooks (a managed StatefulSet's update
rules among them) are not the API server's: :mod:`kueue_es.jobframework.webhooks`.

Messages are Kubernetes' ``field.Error`` bodies (``Invalid value: "-1": must be greater
than or equal to 0``) and :class:`Invalid` renders the 422 Status a real server returns.
Pure: no I/O.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kueue_es import crds
from kueue_es.events import quantities
from kueue_es.jobframework import core_webhooks

#: Kubernetes' CauseType values (apimachinery pkg/util/validation/field ErrorType).
INVALID = "FieldValueInvalid"
REQUIRED = "FieldValueRequired"
NOT_SUPPORTED = "FieldValueNotSupported"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
DUPLICATE = "FieldValueDuplicate"
FORBIDDEN = "FieldValueForbidden"

_QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")


@dataclass(frozen=True)
class Cause:
    """One thing wrong with an object: ``field`` (``spec.resourceGroups[0].flavors[0].name``),
    ``type`` (a Kubernetes CauseType) and ``message`` (the field.Error body, without the field)."""

    field: str
    type: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def render(self) -> dict[str, str]:
        """As a Status ``details.causes`` entry."""
        return {"reason": self.type, "message": self.message, "field": self.field}


class Invalid(ValueError):
    """An object the API refuses (HTTP 422, reason Invalid): its kind, group, name and causes."""

    def __init__(self, *, kind: str, group: str, name: str, causes: list[Cause]) -> None:
        self.kind, self.group, self.name, self.causes = kind, group, name, causes
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """``ClusterQueue.kueue.x-k8s.io "cq" is invalid: spec.x: ...`` as the API server says it."""
        qualified = f"{self.kind}.{self.group}" if self.group else self.kind
        reasons = [str(cause) for cause in self.causes]
        listed = reasons[0] if len(reasons) == 1 else "[" + ", ".join(reasons) + "]"
        return f'{qualified} "{self.name}" is invalid: {listed}'

    def details(self) -> dict[str, Any]:
        """The Status ``details``: name, group, kind and the causes with their field paths."""
        return {
            "name": self.name,
            "group": self.group,
            "kind": self.kind,
            "causes": [cause.render() for cause in self.causes],
        }

    def status(self) -> dict[str, Any]:
        """The v1 Status of the 422 answer (kubectl prints ``The ClusterQueue "cq" is invalid: ...``)."""
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": "Invalid",
            "details": self.details(),
            "code": 422,
        }


class Denied(Invalid):
    """An object Kueue's validating webhook of its kind refuses (``vclusterqueue.kb.io``, ...): kube-apiserver
    answers 403 Forbidden, ``admission webhook "<webhook>" denied the request: <field errors>`` (kubectl: ``Error
    from server (Forbidden): ...``), where a schema's refusal is 422 Invalid."""

    def __init__(self, *, kind: str, group: str, name: str, causes: list[Cause]) -> None:
        super().__init__(kind=kind, group=group, name=name, causes=causes)
        self.webhook = f"v{kind.lower()}.kb.io"

    @property
    def message(self) -> str:
        """controller-runtime's denial of the field errors' aggregate (``[a, b]`` when several)."""
        reasons = [str(cause) for cause in self.causes]
        listed = reasons[0] if len(reasons) == 1 else "[" + ", ".join(reasons) + "]"
        return f'admission webhook "v{self.kind.lower()}.kb.io" denied the request: {listed}'


class UnknownFields(ValueError):
    """Strict field validation refused fields the schema does not know (HTTP 400, as an API server)."""

    def __init__(self, fields: list[str]) -> None:
        self.fields = fields
        super().__init__("strict decoding error: " + ", ".join(f'unknown field "{field}"' for field in fields))


def admit(
    manifest: dict[str, Any], *, old: Mapping[str, Any] | None = None, field_validation: str = ""
) -> dict[str, Any]:
    """What an API server does with a write before storing it: returns the object to store.

    ``field_validation`` is the request's ``fieldValidation`` (``Strict``, ``Warn``, ``Ignore``;
    empty is the server's default, Warn). Unknown fields of a kueue.x-k8s.io object raise
    UnknownFields under Strict and are pruned otherwise; then :func:`check` raises Invalid.
    """
    unknown = unknown_fields(manifest)
    if unknown and field_validation.lower() == "strict":
        raise UnknownFields(unknown)
    if unknown:
        manifest = prune(copy.deepcopy(manifest))
    check(manifest, old=old)
    return manifest


def validate(manifest: Mapping[str, Any], *, old: Mapping[str, Any] | None = None) -> list[Cause]:
    """Every reason the API refuses ``manifest`` (a create, or an update of ``old``); ``[]`` if none.

    ``manifest`` is the object as JSON (kubectl's body); kinds other than the kueue.x-k8s.io
    kinds, Jobs, Pods and JobSets are not checked. Raises LookupError when a CRD carries a
    CEL rule that has no Python twin in :data:`kueue_es.crds.RULES`.
    """
    return _validate(manifest, old=old)[0]


#: The kinds whose checks beyond the schema are Kueue's validating webhooks' (pkg/webhooks), so a refusal by them
#: is 403 Forbidden (:class:`Denied`); a Workload's duplicate pod set names are its CRD's list-map key (422).
DENYING_WEBHOOK_KINDS = core_webhooks.VALIDATED_KINDS


def _validate(manifest: Mapping[str, Any], *, old: Mapping[str, Any] | None) -> tuple[list[Cause], bool]:
    """:func:`validate`'s causes, and whether they are the webhook checks' (:func:`_webhook`, run only on what
    the schema and its rules accepted)."""
    api_version, kind = str(manifest.get("apiVersion") or ""), str(manifest.get("kind") or "")
    if api_version == f"{crds.GROUP}/{crds.VERSION}" and kind in _schemas():
        return _kueue_object(manifest, old=old)
    return _core_object(api_version, kind, manifest), False


def _core_object(api_version: str, kind: str, manifest: Mapping[str, Any]) -> list[Cause]:
    match api_version, kind:
        case "batch/v1", "Job":
            return _pod_template(_dig(manifest, "spec", "template"), "spec.template")
        case "v1", "Pod":
            return list(_pod_spec(manifest.get("spec"), "spec"))
        case "jobset.x-k8s.io/v1alpha2", "JobSet":
            causes: list[Cause] = []
            for i, job in enumerate(_list(_dig(manifest, "spec", "replicatedJobs"))):
                causes += _pod_template(
                    _dig(job, "template", "spec", "template"), f"spec.replicatedJobs[{i}].template.spec.template"
                )
            return causes
    return []


def admit_status(
    manifest: dict[str, Any], *, old: Mapping[str, Any] | None = None, field_validation: str = ""
) -> dict[str, Any]:
    """What an API server does with a write through the ``status`` subresource of a kueue.x-k8s.io object:
    returns the object to store (``manifest`` is the whole object, its new ``status`` included).

    The status is held to Kueue's status schema (:func:`kueue_es.crds.status_schema`): fields it does not
    declare raise UnknownFields under ``field_validation`` Strict and are pruned otherwise; then
    :func:`validate_status` raises Invalid. Other kinds and objects without a status pass unchanged.
    """
    schema = _schemas().get(str(manifest.get("kind") or ""))
    status_schema = (schema or {}).get("properties", {}).get("status")
    if status_schema is None or manifest.get("apiVersion") != f"{crds.GROUP}/{crds.VERSION}":
        return manifest
    unknown = list(_unknown(manifest.get("status"), status_schema, "status"))
    if unknown and field_validation.lower() == "strict":
        raise UnknownFields(unknown)
    if unknown:
        manifest = copy.deepcopy(manifest)
        _prune(manifest["status"], status_schema)
    causes = validate_status(manifest, old=old)
    if causes:
        meta = manifest.get("metadata") or {}
        raise Invalid(kind=str(manifest["kind"]), group=crds.GROUP, name=str(meta.get("name") or ""), causes=causes)
    return manifest


def validate_status(manifest: Mapping[str, Any], *, old: Mapping[str, Any] | None = None) -> list[Cause]:
    """Every reason the API refuses the ``status`` of a kueue.x-k8s.io object (``[]`` if none, or for
    another kind, or without a status): Kueue's status schema (:func:`kueue_es.crds.status_schema`) after
    its defaults, its types, enums, required fields and bounds, and the twins of its CEL rules
    (:data:`kueue_es.crds.STATUS_RULES`; the transition rules against ``old``'s status, when given).
    Field paths start with ``status``. Raises LookupError for a CEL rule without a Python twin.
    """
    schema = _schemas().get(str(manifest.get("kind") or ""))
    status = manifest.get("status")
    if schema is None or manifest.get("apiVersion") != f"{crds.GROUP}/{crds.VERSION}" or status is None:
        return []
    status_schema = schema["properties"].get("status")
    if status_schema is None:
        return []
    body = copy.deepcopy(status)
    _default(body, status_schema)
    old_body = None
    if old is not None and isinstance(old.get("status"), dict):
        old_body = copy.deepcopy(old["status"])
        _default(old_body, status_schema)
    elif old is not None:
        old_body = {}
    causes = list(_walk(body, status_schema, "status", old_body))
    if not causes:
        # the rules on the whole object too: a status write keeps the stored spec (the written one when new)
        kept = old if old is not None else manifest
        fields = {k: copy.deepcopy(v) for k, v in kept.items() if k not in ("metadata", "status")}
        _default(fields, {"properties": {k: v for k, v in schema["properties"].items() if k != "status"}})
        causes += _object_rules(fields, status, schema, old=old)
    return causes


def check(manifest: Mapping[str, Any], *, old: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`Invalid` when :func:`validate` finds anything: :class:`Denied` when only the checks of Kueue's
    validating webhook of a ClusterQueue, Cohort or ResourceFlavor do (they run on what the schema accepted)."""
    causes, by_webhook = _validate(manifest, old=old)
    if causes:
        meta = manifest.get("metadata") or {}
        api_version = str(manifest.get("apiVersion") or "")
        kind = str(manifest.get("kind") or "")
        by_webhook = by_webhook and kind in DENYING_WEBHOOK_KINDS
        raise (Denied if by_webhook else Invalid)(
            kind=kind,
            group=api_version.rpartition("/")[0],
            name=str(meta.get("name") or meta.get("generateName") or ""),
            causes=causes,
        )


def unknown_fields(manifest: Mapping[str, Any]) -> list[str]:
    """The fields of a kueue.x-k8s.io object its CRD does not know (``spec.cohrtName``): what strict
    field validation refuses and a structural schema prunes. Other kinds: ``[]``."""
    schema = _schemas().get(str(manifest.get("kind") or ""))
    if schema is None or manifest.get("apiVersion") != f"{crds.GROUP}/{crds.VERSION}":
        return []
    return [path for path in _unknown(manifest, schema, "") if not path.startswith("metadata")]


def schema_of(kind: str) -> Mapping[str, Any] | None:
    """The ``openAPIV3Schema`` of the kueue.x-k8s.io kind ``kind`` (its CRD's, :mod:`kueue_es.crds`), None
    for another kind."""
    return _schemas().get(kind)


def defaulted(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``manifest`` with every ``default:`` of its CRD schema filled in where the field is
    absent, as the API server defaults a kueue.x-k8s.io object on every write (so as the watcher records
    it: a ClusterQueue's ``queueingStrategy``, ``flavorFungibility``, ``preemption``...); ``metadata`` and
    ``status`` are left as they are. A manifest of another kind or API version: an unchanged copy."""
    out = copy.deepcopy(dict(manifest))
    schema = _schemas().get(str(out.get("kind") or ""))
    if schema is None or out.get("apiVersion") != f"{crds.GROUP}/{crds.VERSION}":
        return out
    properties = {k: v for k, v in schema.get("properties", {}).items() if k not in ("metadata", "status")}
    _default(out, {"properties": properties})
    return out


def prune(manifest: dict[str, Any]) -> dict[str, Any]:
    """Drop the fields :func:`unknown_fields` names, in place, as an API server prunes them; returns it."""
    schema = _schemas().get(str(manifest.get("kind") or ""))
    if schema is not None and manifest.get("apiVersion") == f"{crds.GROUP}/{crds.VERSION}":
        _prune(manifest, schema)
    return manifest


# -- the kueue.x-k8s.io kinds ----------------------------------------------------------------


@functools.cache
def _schemas() -> dict[str, dict[str, Any]]:
    return {kind.kind: crds.object_schema(kind) for kind in crds.KINDS}


@functools.cache
def _twins() -> dict[str, crds.Rule]:
    return crds.rules_by_cel()


def _kueue_object(manifest: Mapping[str, Any], *, old: Mapping[str, Any] | None) -> tuple[list[Cause], bool]:
    schema = _schemas()[str(manifest["kind"])]
    body = {k: copy.deepcopy(v) for k, v in manifest.items() if k not in ("metadata", "status")}
    _default(body, schema)
    old_body = None
    if old is not None:
        old_body = {k: copy.deepcopy(v) for k, v in old.items() if k not in ("metadata", "status")}
        _default(old_body, schema)
    properties = {k: v for k, v in schema["properties"].items() if k not in ("metadata", "status")}
    fields = {k: v for k, v in schema.items() if k != "x-kubernetes-validations"}
    causes = list(_walk(body, {**fields, "properties": properties}, "", old_body))
    if not causes:
        # a write to the main resource keeps the stored status (a create has none), and the rules on the whole
        # object read it
        status = old.get("status") if old is not None else None
        causes += _object_rules(body, status, schema, old=old)
    if causes:
        return causes, False
    # the validating webhook runs only on objects the schema accepted (kube-apiserver: schema, then admission)
    return _webhook(str(manifest["kind"]), body, old=old_body), True


def _object_rules(
    fields: Mapping[str, Any], status: Any, schema: Mapping[str, Any], *, old: Mapping[str, Any] | None
) -> list[Cause]:
    """The CEL rules on a whole object (Kueue's on a Workload: "queueName is immutable while workload quota
    reserved", ...) for ``fields`` (its spec and the like, defaulted) with ``status``, against ``old``. An API
    server names no field for them: ``<nil>: Invalid value: "object": <message>``."""
    if not schema.get("x-kubernetes-validations"):
        return []
    whole = {**fields, **({"status": copy.deepcopy(status)} if status is not None else {})}
    before = None
    if old is not None:
        before = {k: copy.deepcopy(v) for k, v in old.items() if k != "metadata"}
        _default(before, {"properties": {k: v for k, v in schema["properties"].items() if k != "status"}})
    return list(_rules(whole, {"x-kubernetes-validations": schema["x-kubernetes-validations"]}, "<nil>", before))


def _default(value: Any, schema: Mapping[str, Any]) -> None:
    """Fill absent fields that have schema defaults, as the API server does before validating."""
    if isinstance(value, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _default(value[name], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _default(item, schema["items"])


def _walk(value: Any, schema: Mapping[str, Any], path: str, old: Any) -> Iterator[Cause]:
    """Structural validation of ``value`` against ``schema``, then the CEL rules' twins."""
    wrong_type = _type_error(value, schema, path)
    if wrong_type is not None:
        yield wrong_type
        return
    causes = list(_limits(value, schema, path))
    if isinstance(value, dict) and "properties" in schema:
        for name in schema.get("required", []):
            if name not in value:
                causes.append(Cause(_join(path, name), REQUIRED, "Required value"))
        for name, sub in schema["properties"].items():
            if name in value and value[name] is not None:
                old_sub = old.get(name) if isinstance(old, dict) else None
                causes.extend(_walk(value[name], sub, _join(path, name), old_sub))
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), Mapping):
        for key, item in value.items():
            causes.extend(_walk(item, schema["additionalProperties"], f"{path}[{key}]", None))
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            causes.extend(_walk(item, schema["items"], f"{path}[{index}]", None))
    causes.extend(_rules(value, schema, path, old))
    yield from causes


def _type_error(value: Any, schema: Mapping[str, Any], path: str) -> Cause | None:
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, int | str) and not isinstance(value, bool)
        want = "integer or string"
    else:
        want = str(schema.get("type") or "")
        ok = {
            "object": isinstance(value, dict),
            "array": isinstance(value, list),
            "string": isinstance(value, str),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, int | float) and not isinstance(value, bool),
            "boolean": isinstance(value, bool),
            "": True,
        }.get(want, True)
    if ok:
        return None
    got = _json_type(value)
    return Cause(path, INVALID, f'Invalid value: "{got}": {path} in body must be of type {want}: "{got}"')


def _limits(value: Any, schema: Mapping[str, Any], path: str) -> Iterator[Cause]:
    shown = _show(value)
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(json.dumps(v) for v in schema["enum"])
        yield Cause(path, NOT_SUPPORTED, f"Unsupported value: {shown}: supported values: {supported}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value.encode()) > schema["maxLength"]:
            yield Cause(path, TOO_LONG, f"Too long: may not be more than {schema['maxLength']} bytes")
        if "minLength" in schema and len(value) < schema["minLength"]:
            yield Cause(
                path,
                INVALID,
                f"Invalid value: {shown}: {path} in body should be at least {schema['minLength']} chars long",
            )
        if "pattern" in schema and not re.search(schema["pattern"], value):
            yield Cause(path, INVALID, f"Invalid value: {shown}: {path} in body should match '{schema['pattern']}'")
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            yield Cause(
                path,
                INVALID,
                f"Invalid value: {shown}: {path} in body should be greater than or equal to {schema['minimum']}",
            )
        if "maximum" in schema and value > schema["maximum"]:
            yield Cause(
                path,
                INVALID,
                f"Invalid value: {shown}: {path} in body should be less than or equal to {schema['maximum']}",
            )
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            yield Cause(path, TOO_MANY, f"Too many: {len(value)}: must have at most {schema['maxItems']} items")
        if "minItems" in schema and len(value) < schema["minItems"]:
            yield Cause(
                path,
                INVALID,
                f"Invalid value: {len(value)}: {path} in body should have at least {schema['minItems']} items",
            )
    if isinstance(value, dict) and "maxProperties" in schema and len(value) > schema["maxProperties"]:
        yield Cause(path, TOO_MANY, f"Too many: {len(value)}: must have at most {schema['maxProperties']} items")


def _rules(value: Any, schema: Mapping[str, Any], path: str, old: Any) -> Iterator[Cause]:
    for rendered in schema.get("x-kubernetes-validations", []):
        twin = _twins().get(rendered["rule"])
        if twin is None:
            raise LookupError(f"{path}: CEL rule {rendered['rule']!r} has no Python twin in kueue_es.crds.RULES")
        if twin.transition and old is None:
            continue
        if not twin.check(value, old):
            yield Cause(path, INVALID, f"Invalid value: {_show_cel(value)}: {rendered['message']}")


def _unknown(value: Any, schema: Mapping[str, Any], path: str) -> Iterator[str]:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict) and "properties" in schema:
        for name, item in value.items():
            if name not in schema["properties"]:
                yield _join(path, name)
            else:
                yield from _unknown(item, schema["properties"][name], _join(path, name))
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), Mapping):
        for key, item in value.items():
            yield from _unknown(item, schema["additionalProperties"], f"{path}[{key}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            yield from _unknown(item, schema["items"], f"{path}[{index}]")


def _prune(value: Any, schema: Mapping[str, Any]) -> None:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict) and "properties" in schema:
        for name in [n for n in value if n not in schema["properties"] and n != "metadata"]:
            del value[name]
        for name, item in value.items():
            if name != "metadata":
                _prune(item, schema["properties"][name])
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), Mapping):
        for item in value.values():
            _prune(item, schema["additionalProperties"])
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _prune(item, schema["items"])


def _webhook(kind: str, body: Mapping[str, Any], *, old: Mapping[str, Any] | None = None) -> list[Cause]:
    """Kueue's validating webhooks' checks that the CRD schema cannot say (:func:`core_webhooks.validate`, the
    rules ``kueue-es service webhook`` answers with too); ``old``: the object an update replaces (defaulted as
    ``body``), None on a create. A Workload's duplicate pod set names are its CRD's list-map key."""
    causes = [Cause(r.field, r.reason, r.message) for r in core_webhooks.validate(kind, body, old=old)]
    if kind == "Workload":
        names = [ps.get("name", "main") for ps in (body.get("spec") or {}).get("podSets") or []]
        for i, name in enumerate(names):
            if name in names[:i]:
                causes.append(Cause(f"spec.podSets[{i}]", DUPLICATE, f'Duplicate value: {{"name":{json.dumps(name)}}}'))
    return causes


# -- pod resources (core API) ----------------------------------------------------------------


def _pod_template(template: Any, path: str) -> list[Cause]:
    if not isinstance(template, Mapping):
        return []
    return list(_pod_spec(template.get("spec"), f"{path}.spec"))


def _pod_spec(spec: Any, path: str) -> Iterator[Cause]:
    """Kubernetes ValidateResourceRequirements over a pod spec's containers (and pod-level resources)."""
    if not isinstance(spec, Mapping):
        return
    for group in ("initContainers", "containers"):
        for i, container in enumerate(_list(spec.get(group))):
            if isinstance(container, Mapping):
                yield from _resources(container.get("resources"), f"{path}.{group}[{i}].resources")
    yield from _resources(spec.get("resources"), f"{path}.resources")


def _resources(resources: Any, path: str) -> Iterator[Cause]:
    if not isinstance(resources, Mapping):
        return
    amounts: dict[str, dict[str, Any]] = {}
    for part in ("limits", "requests"):
        values = resources.get(part)
        if not isinstance(values, Mapping):
            continue
        for name, value in values.items():
            where = f"{path}.{part}[{name}]"
            if (
                not isinstance(value, int | str | float)
                or isinstance(value, bool)
                or not core_webhooks.parses_as_quantity(value)
            ):
                yield Cause(
                    where,
                    INVALID,
                    f"Invalid value: {_show(value)}: quantities must match the regular expression "
                    f"'{_QUANTITY_RE.pattern}'",
                )
                continue
            number = quantities.parse_decimal(value)
            if number < 0:
                yield Cause(where, INVALID, f'Invalid value: "{value}": must be greater than or equal to 0')
                continue
            amounts.setdefault(part, {})[name] = (number, value)
    for name, (number, value) in amounts.get("requests", {}).items():
        limit = amounts.get("limits", {}).get(name)
        if limit is not None and number > limit[0]:
            yield Cause(
                f"{path}.requests",
                INVALID,
                f'Invalid value: "{value}": must be less than or equal to {name} limit of {limit[1]}',
            )


# -- helpers ---------------------------------------------------------------------------------


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _show(value: Any) -> str:
    """A value as Kubernetes' field errors print it: strings quoted, numbers bare."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return f'"{_json_type(value)}"'


def _show_cel(value: Any) -> str:
    """A CEL rule's failing value: a quantity as its string (Kueue's webhooks print it so), else its type."""
    if isinstance(value, int | str) and not isinstance(value, bool):
        return json.dumps(str(value))
    return f'"{_json_type(value)}"'
