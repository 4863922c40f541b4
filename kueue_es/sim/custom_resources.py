"""CustomResourceDefinitions in the emulated API server: the kinds a CRD declares and what the API
server does to their objects (structural pruning and defaulting), plus loading CRD files for tests.

Why this module exists: Kueue admits RayJobs, PyTorchJobs, LeaderWorkerSets, ... whose kinds a
cluster serves only once their operator's CRD is installed. The emulator
(:class:`kueue_es.sim.emulator.ClusterEmulator`) serves ``apiextensions.k8s.io/v1
CustomResourceDefinition`` (:data:`CRDS`); creating one registers the kinds it declares, as a real
API server's apiextensions controllers do. This module holds the pure part of that, without HTTP:

* :func:`kinds_of` reads a CRD into one :class:`CustomKind` per served version (plural, kind,
  scope, short names, categories, status and scale subresources, printer columns, schema), and
  refuses a CRD a real API server refuses for the same reason, naming the CRD and the field;
* :func:`accepted_status` is the status the API server's naming and establishing controllers
  write (``NamesAccepted`` and ``Established`` True, ``acceptedNames``, ``storedVersions``);
* :func:`decode` does to an object of such a kind what the API server does when it decodes one:
  fields the schema does not declare are pruned (and reported, for ``fieldValidation``), except
  below ``x-kubernetes-preserve-unknown-fields`` and the ``apiVersion``/``kind``/``metadata`` of
  the root and of ``x-kubernetes-embedded-resource`` objects; ``null`` in a field that is not
  ``nullable`` is dropped; then every ``default:`` of the schema is filled in where the field is
  absent and its parent object present (structural defaulting, Kubernetes
  apiextensions-apiserver pkg/apiserver/schema/defaulting and pruning);
* :func:`validate` checks a decoded object against the schema's value constraints (``type``,
  ``nullable``, ``required``, ``enum``, ``minimum``/``maximum``, ``minLength``/``maxLength``,
  ``pattern``, ``minItems``/``maxItems``, ``minProperties``/``maxProperties``), with the API
  server's messages, for a 422 Invalid;
* :func:`load` reads CRD files (``tests/fixtures/crds/*.yaml``, the operators' published CRDs).

Not done: CEL ``x-kubernetes-validations`` and ``format`` checks (a real API server runs them),
``x-kubernetes-list-type`` uniqueness, ``anyOf``/``oneOf``/``allOf``/``not`` alternatives,
conversion webhooks of installed CRDs (every served version shares one storage, converted by rewriting
``apiVersion``, which is the ``None`` strategy; Kueue's own v1beta1 is converted by Kueue's rules, in
the emulator), and ``metadata`` pruning inside embedded
resources.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kueue_es import validation
from kueue_es.services.kube import resources

GROUP = "apiextensions.k8s.io"
#: The kind of CustomResourceDefinitions themselves (cluster-scoped, with a status subresource).
CRDS = resources.ResourceRef(
    group=GROUP,
    version="v1",
    plural="customresourcedefinitions",
    kind="CustomResourceDefinition",
    namespaced=False,
    status_subresource=True,
)
#: The short names and categories discovery gives CustomResourceDefinitions.
CRD_SHORT_NAMES = ("crd", "crds")
CRD_CATEGORIES = ("api-extensions",)
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


class CrdError(ValueError):
    """A CustomResourceDefinition the API server refuses (422 Invalid); the message names the CRD and field."""

    def __init__(self, name: str, field: str, message: str) -> None:
        super().__init__(f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: {field}: {message}')
        self.name = name
        self.field = field


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scale:
    """A CRD version's ``subresources.scale``: JSON paths (``.spec.replicas``) of the replica counts."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CustomKind:
    """One served version of a CRD's kind: how to address it and what its objects look like.

    ``ref`` is the address (group, this version, plural, kind, scope, status subresource);
    ``storage`` the ref of the CRD's storage version (objects of every version are kept once, in
    it); ``schema`` the version's ``openAPIV3Schema`` (``{}`` when none: everything is kept);
    ``printer_columns`` its ``additionalPrinterColumns`` as written in the CRD; ``selectable`` the paths of
    its ``selectableFields`` without the leading dot (``spec.color``), which field selectors may name.
    """

    ref: resources.ResourceRef
    storage: resources.ResourceRef
    crd_name: str
    singular: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    schema: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)
    printer_columns: tuple[Mapping[str, Any], ...] = dataclasses.field(default=(), compare=False, hash=False)
    scale: Scale | None = None
    selectable: tuple[str, ...] = ()


def kinds_of(crd: Mapping[str, Any]) -> list[CustomKind]:
    """The kinds a CRD serves, one per version with ``served: true`` (the storage version first).

    Raises :class:`CrdError` where a real API server refuses the CRD: no ``spec.group``,
    ``spec.names.plural`` or ``spec.names.kind``; ``metadata.name`` other than
    ``<plural>.<group>``; ``spec.scope`` other than Namespaced or Cluster; no versions, or not
    exactly one ``storage: true`` version; a version without a name.
    """
    metadata = crd.get("metadata") or {}
    name = str(metadata.get("name") or "")
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        raise CrdError(name, "spec", "Required value")
    group = spec.get("group")
    names: Mapping[str, Any] = spec["names"] if isinstance(spec.get("names"), Mapping) else {}
    plural, kind = names.get("plural"), names.get("kind")
    for field, value in (("spec.group", group), ("spec.names.plural", plural), ("spec.names.kind", kind)):
        if not isinstance(value, str) or not value:
            raise CrdError(name, field, "Required value")
    if name != f"{plural}.{group}":
        raise CrdError(name, "metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group')
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        raise CrdError(name, "spec.scope", f'Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"')
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        raise CrdError(name, "spec.versions", "Required value: must have exactly one version marked as storage version")
    for index, version in enumerate(versions):
        if not isinstance(version, Mapping) or not version.get("name"):
            raise CrdError(name, f"spec.versions[{index}].name", "Required value")
    storage_versions = [v["name"] for v in versions if v.get("storage")]
    if len(storage_versions) != 1:
        raise CrdError(name, "spec.versions", "Invalid value: must have exactly one version marked as storage version")

    def ref_of(version: Mapping[str, Any]) -> resources.ResourceRef:
        return resources.ResourceRef(
            group=str(group),
            version=str(version["name"]),
            plural=str(plural),
            kind=str(kind),
            namespaced=scope == "Namespaced",
            status_subresource="status" in (version.get("subresources") or {}),
        )

    storage = ref_of(next(v for v in versions if v.get("storage")))
    served = sorted((v for v in versions if v.get("served")), key=lambda v: not v.get("storage"))
    return [
        CustomKind(
            ref=ref_of(version),
            storage=storage,
            crd_name=name,
            singular=str(names.get("singular") or str(kind).lower()),
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            schema=(version.get("schema") or {}).get("openAPIV3Schema") or {},
            printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            scale=_scale_of(version),
            selectable=_selectable_of(version),
        )
        for version in served
    ]


def _selectable_of(version: Mapping[str, Any]) -> tuple[str, ...]:
    """A version's ``selectableFields`` as field selector paths: each ``jsonPath`` (``.spec.color``) without its
    leading dot; an entry without a path is skipped."""
    paths = []
    for entry in version.get("selectableFields") or ():
        path = entry.get("jsonPath") if isinstance(entry, Mapping) else None
        if isinstance(path, str) and path.strip("."):
            paths.append(path.lstrip("."))
    return tuple(paths)


def _scale_of(version: Mapping[str, Any]) -> Scale | None:
    scale = (version.get("subresources") or {}).get("scale")
    if not isinstance(scale, Mapping):
        return None
    return Scale(
        spec_replicas_path=str(scale.get("specReplicasPath") or ".spec.replicas"),
        status_replicas_path=str(scale.get("statusReplicasPath") or ".status.replicas"),
        label_selector_path=scale.get("labelSelectorPath"),
    )


def accepted_status(crd: Mapping[str, Any], *, now: str) -> dict[str, Any]:
    """The ``status`` of a CRD whose names were accepted and that is served (``now``: RFC 3339).

    As the API server's naming controller and establishing controller write it: ``acceptedNames``
    (the spec's names with ``singular`` and ``listKind`` filled in), conditions ``NamesAccepted``
    (reason NoConflicts) and ``Established`` (reason InitialNamesAccepted), and ``storedVersions``
    (the storage version added to those already stored). Conditions already True keep their
    ``lastTransitionTime``.
    """
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    old = crd.get("status") or {}
    before = {c.get("type"): c for c in old.get("conditions") or [] if isinstance(c, Mapping)}

    def condition(type_: str, reason: str, message: str) -> dict[str, Any]:
        kept = before.get(type_) or {}
        since = kept.get("lastTransitionTime") if kept.get("status") == "True" else None
        return {
            "type": type_,
            "status": "True",
            "lastTransitionTime": since or now,
            "reason": reason,
            "message": message,
        }

    stored = list(old.get("storedVersions") or [])
    for version in spec.get("versions") or []:
        if version.get("storage") and version.get("name") not in stored:
            stored.append(version["name"])
    return {
        "acceptedNames": names,
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": stored,
    }


# -- pruning and defaulting -------------------------------------------------------------------------


def decode(obj: dict[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Prune and default ``obj`` (a whole object of a custom kind) in place by its version's ``schema``.

    Returns the pruned fields as paths (``spec.foo``, ``spec.items[0].bar``), in document order:
    what ``fieldValidation=Strict`` refuses and ``Warn`` names. The root's ``apiVersion``,
    ``kind`` and ``metadata`` are always kept. An empty ``schema`` keeps everything.
    """
    if not schema:
        return []
    pruned: list[str] = []
    _prune(obj, schema, path="", pruned=pruned, root=True)
    _default(obj, schema, root=True)
    return pruned


def prune(obj: dict[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Prune ``obj`` in place by ``schema`` as :func:`decode` does, without defaulting it (a partial object: an
    apply configuration); returns the pruned paths. An empty ``schema`` keeps everything."""
    pruned: list[str] = []
    if schema:
        _prune(obj, schema, path="", pruned=pruned, root=True)
    return pruned


def apply_defaults(obj: dict[str, Any], schema: Mapping[str, Any]) -> None:
    """Fill in ``obj`` (a whole object) in place every ``default:`` of its ``schema`` where the field is
    absent, as the API server defaults a custom resource on every write (``metadata`` untouched)."""
    _default(obj, schema, root=True)


def _prune(value: Any, schema: Mapping[str, Any], *, path: str, pruned: list[str], root: bool = False) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        kept = _ROOT_FIELDS if root or schema.get("x-kubernetes-embedded-resource") else ()
        for key in list(value):
            where = f"{path}.{key}" if path else str(key)
            if key in kept:
                continue  # apiVersion, kind and metadata (ObjectMeta, not the schema's) are kept
            if properties is not None and key in properties:
                _prune(value[key], properties[key], path=where, pruned=pruned)
            elif isinstance(additional, Mapping):
                _prune(value[key], additional, path=where, pruned=pruned)
            elif not preserve and additional is not True and _is_object_schema(schema):
                del value[key]
                pruned.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _prune(item, schema["items"], path=f"{path}[{index}]", pruned=pruned)


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    """Whether a structural schema describes an object whose undeclared fields are pruned."""
    if schema.get("x-kubernetes-int-or-string"):
        return False
    return schema.get("type") == "object" or "properties" in schema


def _default(value: Any, schema: Mapping[str, Any], *, root: bool = False) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            for key, prop in properties.items():
                if root and key == "metadata":
                    continue
                if not isinstance(prop, Mapping):
                    continue
                if key in value and value[key] is None and not prop.get("nullable"):
                    del value[key]  # null in a non-nullable field is pruned before defaulting
                if key not in value and "default" in prop:
                    value[key] = copy.deepcopy(prop["default"])
                if key in value:
                    _default(value[key], prop)
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for key, item in value.items():
                if properties is None or key not in properties:
                    _default(item, additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _default(item, schema["items"])


# -- validation --------------------------------------------------------------------------------------

_JSON_TYPES = {"object": "object", "array": "array", "string": "string", "boolean": "boolean", "integer": "integer"}


def validate(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> list[validation.Cause]:
    """What the API server refuses in ``obj`` (decoded: pruned and defaulted) by its CRD version's
    ``schema``: one :class:`kueue_es.validation.Cause` per problem, with the field path and the
    API server's message (``spec.replicas: Invalid value: "x": spec.replicas in body must be of
    type integer: "string"``, ``spec.template: Required value``, ``spec.policy: Unsupported value:
    "x": supported values: "A", "B"``). The root's metadata is not checked here. ``[]`` when valid."""
    causes: list[validation.Cause] = []
    if schema:
        _check(obj, schema, path="", causes=causes, root=True)
    return causes


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _shown(value: Any) -> str:
    """A value as the API server quotes it in a message (Go's %#v of a JSON value, close enough)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return "{...}" if isinstance(value, dict) else "[...]"
    return "null" if value is None else str(value)


def _check(
    value: Any, schema: Mapping[str, Any], *, path: str, causes: list[validation.Cause], root: bool = False
) -> None:
    where = path or "<root>"

    def invalid(message: str, *, kind: str = "FieldValueInvalid") -> None:
        causes.append(validation.Cause(path, kind, f"Invalid value: {_shown(value)}: {message}"))

    def wrong_type(types: str) -> None:  # the API server names the type it found, not the value
        found = "null" if value is None else actual
        message = f'Invalid value: "{found}": {where} in body must be of type {types}: "{found}"'
        causes.append(validation.Cause(path, "FieldValueTypeInvalid", message))

    wanted = schema.get("type")
    actual = _type_of(value)
    if value is None:
        if not schema.get("nullable") and wanted:
            wrong_type(str(wanted))
        return
    if schema.get("x-kubernetes-int-or-string"):
        if actual not in ("integer", "string"):
            wrong_type("integer,string")
            return
    elif wanted in _JSON_TYPES or wanted == "number":
        if not (actual == wanted or (wanted == "number" and actual == "integer")):
            wrong_type(str(wanted))
            return
    if "enum" in schema and value not in schema["enum"]:
        listed = ", ".join(_shown(option) for option in schema["enum"])
        causes.append(
            validation.Cause(
                path, "FieldValueNotSupported", f"Unsupported value: {_shown(value)}: supported values: {listed}"
            )
        )
    if actual in ("integer", "number"):
        if "minimum" in schema and (
            value < schema["minimum"] or (schema.get("exclusiveMinimum") and value == schema["minimum"])
        ):
            invalid(f"{where} in body should be greater than or equal to {schema['minimum']}")
        if "maximum" in schema and (
            value > schema["maximum"] or (schema.get("exclusiveMaximum") and value == schema["maximum"])
        ):
            invalid(f"{where} in body should be less than or equal to {schema['maximum']}")
    elif actual == "string":
        if "minLength" in schema and len(value) < schema["minLength"]:
            invalid(f"{where} in body should be at least {schema['minLength']} chars long")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append(
                validation.Cause(
                    path, "FieldValueTooLong", f"Too long: may not be more than {schema['maxLength']} bytes"
                )
            )
        if "pattern" in schema and not _matches(schema["pattern"], value):
            invalid(f"{where} in body should match '{schema['pattern']}'")
    elif actual == "array":
        if "minItems" in schema and len(value) < schema["minItems"]:
            invalid(f"{where} in body should have at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append(
                validation.Cause(
                    path, "FieldValueTooMany", f"Too many: {len(value)}: must have at most {schema['maxItems']} items"
                )
            )
        if isinstance(schema.get("items"), Mapping):
            for index, item in enumerate(value):
                _check(item, schema["items"], path=f"{path}[{index}]", causes=causes)
    elif actual == "object":
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            invalid(f"{where} in body should have at least {schema['minProperties']} properties")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            causes.append(
                validation.Cause(
                    path,
                    "FieldValueTooMany",
                    f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                )
            )
        for required in schema.get("required") or ():
            if required not in value and not (root and required in _ROOT_FIELDS):
                at = f"{path}.{required}" if path else str(required)
                causes.append(validation.Cause(at, "FieldValueRequired", "Required value"))
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            at = f"{path}.{key}" if path else str(key)
            if root and key in _ROOT_FIELDS:
                continue
            if key in properties:
                _check(item, properties[key], path=at, causes=causes)
            elif isinstance(additional, Mapping):
                _check(item, additional, path=at, causes=causes)


def _matches(pattern: str, value: str) -> bool:
    """Whether ``value`` matches an ECMA/RE2 ``pattern`` (searched, as JSON Schema does); a pattern Python
    cannot compile is not held against the value."""
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return True


# -- loading CRD files ----------------------------------------------------------------------------


def load(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions in ``paths``: YAML or JSON files, or folders of them (``*.yaml``,
    ``*.yml``, ``*.json``, sorted by name), each file one or more documents.

    Documents of other kinds are refused: raises ValueError naming the file and the document's
    kind; OSError when a path cannot be read; yaml.YAMLError for a file that is not YAML.
    """
    found: list[dict[str, Any]] = []
    for path in map(Path, paths):
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json")) if path.is_dir() else [path]
        for file in files:
            for document in yaml.load_all(file.read_text(), Loader=_Loader):
                if document is None:
                    continue
                if not isinstance(document, dict) or document.get("kind") != CRDS.kind:
                    kind = document.get("kind") if isinstance(document, dict) else type(document).__name__
                    raise ValueError(f"{file}: a document of kind {kind!r} is not a CustomResourceDefinition")
                found.append(document)
    return found


_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader reads a 1 MB CRD in a tenth of a second
