"""Kubernetes' protobuf request bodies, decoded for the few kinds kubectl's generators write that way.

Why this module exists: ``kubectl create priorityclass high --value=1000`` (and ``kubectl create
namespace``, ``create job NAME --image=...``, ``create cronjob``, ``create deployment``, ``create role``,
``create clusterrole``, ``create rolebinding``, ``create clusterrolebinding``, and the reviews of ``kubectl
auth can-i`` and ``auth whoami``) build the object in Go and POST it through a typed client,
which sends
``Content-Type: application/vnd.kubernetes.protobuf`` for built-in kinds; ``kubectl apply -f`` and
``create -f`` send JSON. The emulator speaks JSON, so :func:`decode` turns such a body into the JSON
object a JSON client would have sent, for the kinds in :data:`MESSAGES`; for any other kind, or a field
these schemas do not know, it raises :class:`Unsupported` (the emulator answers 415 and names it).

The encoding (k8s.io/apimachinery runtime/serializer/protobuf): the magic ``k8s\\x00``, then a
``runtime.Unknown`` message (1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding,
4: contentType) whose ``raw`` is the object's message, with the field numbers of Kubernetes'
generated.proto files. Go writes every non-pointer field, empty or not; as its JSON encoder leaves
empty ``omitempty`` fields out, empty strings, zeros, false and empty messages are dropped here unless
the field is one JSON always carries (a PriorityClass's ``value``); so a zero a pointer field carries
(``kubectl create deployment --replicas=0``) reads as unset. The Job, CronJob and Deployment tables are
generated from Kubernetes' generated.proto files (scripts/protobuf_messages.py writes
protobuf_messages.json); the others are written here. Pure: bytes in, a dict out.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


class Unsupported(ValueError):
    """A protobuf body the emulator cannot read: a kind without a schema here, a field it does not know."""


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a message: its JSON name and type (``string``, ``int``, ``bool``, ``bytes``, ``time``,
    ``map`` of strings, or a nested message's fields); ``repeated`` for a list; ``keep_zero`` when JSON
    carries the field even at its zero value."""

    name: str
    type: str | Mapping[int, Field]
    repeated: bool = False
    keep_zero: bool = False
    value: str | Mapping[int, Field] = "string"  # a map's values


Message = Mapping[int, Field]

_OWNER_REFERENCE: Message = {
    1: Field("kind", "string"),
    3: Field("name", "string"),
    4: Field("uid", "string"),
    5: Field("apiVersion", "string"),
    6: Field("controller", "bool"),
    7: Field("blockOwnerDeletion", "bool"),
}
#: meta/v1 ObjectMeta (managedFields aside: a create never carries them).
OBJECT_META: Message = {
    1: Field("name", "string"),
    2: Field("generateName", "string"),
    3: Field("namespace", "string"),
    4: Field("selfLink", "string"),
    5: Field("uid", "string"),
    6: Field("resourceVersion", "string"),
    7: Field("generation", "int"),
    8: Field("creationTimestamp", "time"),
    9: Field("deletionTimestamp", "time"),
    10: Field("deletionGracePeriodSeconds", "int"),
    11: Field("labels", "map"),
    12: Field("annotations", "map"),
    13: Field("ownerReferences", _OWNER_REFERENCE, repeated=True),
    14: Field("finalizers", "string", repeated=True),
}
#: The kinds whose protobuf bodies are read, by (apiVersion, kind).
MESSAGES: dict[tuple[str, str], Message] = {
    ("scheduling.k8s.io/v1", "PriorityClass"): {
        1: Field("metadata", OBJECT_META),
        2: Field("value", "int", keep_zero=True),
        3: Field("globalDefault", "bool"),
        4: Field("description", "string"),
        5: Field("preemptionPolicy", "string"),
    },
    ("v1", "Namespace"): {
        1: Field("metadata", OBJECT_META),
        2: Field("spec", {1: Field("finalizers", "string", repeated=True)}),
        3: Field("status", {1: Field("phase", "string")}),
    },
}
_RESOURCE_ATTRIBUTES: Message = {
    1: Field("namespace", "string"),
    2: Field("verb", "string"),
    3: Field("group", "string"),
    4: Field("version", "string"),
    5: Field("resource", "string"),
    6: Field("subresource", "string"),
    7: Field("name", "string"),
}
# The reviews ``kubectl auth can-i`` and ``auth whoami`` send (k8s.io/api authorization/v1 and
# authentication/v1 generated.proto); their (empty) status is written too, as Go writes every non-pointer field.
MESSAGES[("authorization.k8s.io/v1", "SelfSubjectAccessReview")] = {
    1: Field("metadata", OBJECT_META),
    2: Field(
        "spec",
        {
            1: Field("resourceAttributes", _RESOURCE_ATTRIBUTES),
            2: Field("nonResourceAttributes", {1: Field("path", "string"), 2: Field("verb", "string")}),
        },
    ),
    3: Field(
        "status",
        {
            1: Field("allowed", "bool"),
            2: Field("reason", "string"),
            3: Field("evaluationError", "string"),
            4: Field("denied", "bool"),
        },
    ),
}
MESSAGES[("authorization.k8s.io/v1", "SelfSubjectRulesReview")] = {
    1: Field("metadata", OBJECT_META),
    2: Field("spec", {1: Field("namespace", "string")}),
    3: Field("status", {3: Field("incomplete", "bool"), 4: Field("evaluationError", "string")}),
}
MESSAGES[("authentication.k8s.io/v1", "SelfSubjectReview")] = {
    1: Field("metadata", OBJECT_META),
    2: Field(
        "status",
        {1: Field("userInfo", {1: Field("username", "string"), 2: Field("uid", "string")})},
    ),
}
#: Generated tables (scripts/protobuf_messages.py, from Kubernetes' generated.proto files) of the kinds
#: kubectl's other generators send: ``kubectl create job NAME --image=...``, ``create cronjob``,
#: ``create deployment``.
MESSAGES_FILE = Path(__file__).with_name("protobuf_messages.json")
_GENERATED_KINDS = {
    ("batch/v1", "Job"): "k8s.io.api.batch.v1.Job",
    ("batch/v1", "CronJob"): "k8s.io.api.batch.v1.CronJob",
    ("apps/v1", "Deployment"): "k8s.io.api.apps.v1.Deployment",
}
#: Messages whose JSON form is a scalar (resource.Quantity, intstr.IntOrString, meta/v1 Time) or raw JSON.
_SPECIAL = {
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "intorstring",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "rawjson",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "rawjson",
}


@functools.cache
def _generated_tables() -> dict[str, dict[str, list[Any]]]:
    loaded: dict[str, dict[str, list[Any]]] = json.loads(MESSAGES_FILE.read_text())
    return loaded


def _generated(name: str, built: dict[str, dict[int, Field]] | None = None) -> Message:
    """The Message of a generated table's message ``name`` (messages referring to each other share objects)."""
    built = {} if built is None else built
    if name in built:
        return built[name]
    message: dict[int, Field] = {}
    built[name] = message
    for number, (field, kind, repeated) in _generated_tables()[name].items():
        value: str | Mapping[int, Field] = "string"
        if kind.startswith("map:"):
            value = _field_type(kind[4:], built)
            kind = "map"
        message[int(number)] = Field(field, _field_type(kind, built), repeated=repeated, value=value)
    return message


def _field_type(kind: str, built: dict[str, dict[int, Field]]) -> str | Mapping[int, Field]:
    if kind in _SPECIAL:
        return _SPECIAL[kind]
    if kind in _generated_tables():
        return _generated(kind, built)
    return kind


MESSAGES.update({kind: _generated(name) for kind, name in _GENERATED_KINDS.items() if kind not in MESSAGES})

# ``kubectl create role``, ``create clusterrole``, ``create rolebinding`` and ``create clusterrolebinding``
# (k8s.io/api rbac/v1 generated.proto): how a binding of Kueue's ``kueue-batch-user-role`` or
# ``kueue-batch-admin-role`` ("Setup RBAC") is typed at a prompt rather than applied from a manifest.
_POLICY_RULE: Message = {
    1: Field("verbs", "string", repeated=True),
    2: Field("apiGroups", "string", repeated=True),
    3: Field("resources", "string", repeated=True),
    4: Field("resourceNames", "string", repeated=True),
    5: Field("nonResourceURLs", "string", repeated=True),
}
_SUBJECTS = Field(
    "subjects",
    {
        1: Field("kind", "string"),
        2: Field("apiGroup", "string"),
        3: Field("name", "string"),
        4: Field("namespace", "string"),
    },
    repeated=True,
)
_ROLE_REF = Field("roleRef", {1: Field("apiGroup", "string"), 2: Field("kind", "string"), 3: Field("name", "string")})
_LABEL_SELECTOR = _generated("k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector")
MESSAGES[("rbac.authorization.k8s.io/v1", "Role")] = {
    1: Field("metadata", OBJECT_META),
    2: Field("rules", _POLICY_RULE, repeated=True),
}
MESSAGES[("rbac.authorization.k8s.io/v1", "ClusterRole")] = {
    1: Field("metadata", OBJECT_META),
    2: Field("rules", _POLICY_RULE, repeated=True),
    3: Field("aggregationRule", {1: Field("clusterRoleSelectors", _LABEL_SELECTOR, repeated=True)}),
}
for _binding in ("RoleBinding", "ClusterRoleBinding"):
    MESSAGES[("rbac.authorization.k8s.io/v1", _binding)] = {
        1: Field("metadata", OBJECT_META),
        2: _SUBJECTS,
        3: _ROLE_REF,
    }

_UNKNOWN: Message = {
    1: Field("typeMeta", {1: Field("apiVersion", "string"), 2: Field("kind", "string")}),
    2: Field("raw", "bytes"),
    3: Field("contentEncoding", "string"),
    4: Field("contentType", "string"),
}


def is_protobuf(content_type: str) -> bool:
    """Whether a Content-Type header names Kubernetes' protobuf encoding."""
    return content_type.split(";", 1)[0].strip().lower() == MEDIA_TYPE


def decode(body: bytes, *, api_version: str, kind: str) -> dict[str, Any]:
    """The JSON object of a protobuf body for ``api_version`` ``kind`` (the URL's); raises Unsupported."""
    if not body.startswith(MAGIC):
        raise Unsupported("the protobuf body lacks Kubernetes' k8s\\x00 prefix")
    envelope = _message(body[len(MAGIC) :], _UNKNOWN, where="runtime.Unknown")
    type_meta = envelope.get("typeMeta") or {}
    sent = (type_meta.get("apiVersion", api_version), type_meta.get("kind", kind))
    schema = MESSAGES.get(sent)
    if schema is None:
        readable = ", ".join(f"{k} ({v})" for v, k in sorted(MESSAGES) if not k.endswith("Review"))
        raise Unsupported(
            f"the emulator reads protobuf bodies only for {readable}, not {sent[1]} ({sent[0]}): send JSON"
            " (kubectl create -f FILE, kubectl apply -f FILE)"
        )
    obj = _message(envelope.get("raw", b""), schema, where=sent[1])
    return {"apiVersion": sent[0], "kind": sent[1], **obj}


def _message(data: bytes, schema: Message, *, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data, where=where):
        field = schema.get(number)
        if field is None:
            raise Unsupported(f"{where}: field {number} is not one the emulator reads from protobuf: send JSON")
        decoded = _value(field, wire, value, where=f"{where}.{field.name}")
        if field.repeated:
            out.setdefault(field.name, []).append(decoded)
        elif field.type == "map":
            key, item = decoded
            out.setdefault(field.name, {})[key] = item
        else:
            out[field.name] = decoded
    return {name: value for name, value in out.items() if _kept(schema, name, value)}


def _kept(schema: Message, name: str, value: Any) -> bool:
    field = next(f for f in schema.values() if f.name == name)
    return field.keep_zero or value not in ("", 0, False, None, b"", {}, [])


def _value(field: Field, wire: int, value: int | bytes, *, where: str) -> Any:
    kind = field.type
    if kind == "double":
        if not isinstance(value, bytes) or len(value) != 8:
            raise Unsupported(f"{where}: a fixed64 double was expected (wire type {wire})")
        return struct.unpack("<d", value)[0]
    if isinstance(kind, Mapping) or kind in ("string", "bytes", "time", "map", "quantity", "intorstring", "rawjson"):
        if not isinstance(value, bytes):
            raise Unsupported(f"{where}: a length-delimited value was expected (wire type {wire})")
        if isinstance(kind, Mapping):
            return _message(value, kind, where=where)
        if kind == "string":
            return value.decode("utf-8")
        if kind == "bytes":
            return value
        if kind == "time":
            return _time(value, where=where)
        if kind == "quantity":
            return _message(value, {1: Field("string", "string")}, where=where).get("string", "")
        if kind == "intorstring":
            parts = _message(
                value, {1: Field("type", "int"), 2: Field("intVal", "int"), 3: Field("strVal", "string")}, where=where
            )
            return parts.get("strVal", "") if parts.get("type") == 1 else parts.get("intVal", 0)
        if kind == "rawjson":
            raw = _message(value, {1: Field("raw", "bytes")}, where=where).get("raw", b"")
            try:
                return json.loads(raw) if raw else None
            except ValueError as exc:
                raise Unsupported(f"{where}: raw JSON that does not parse") from exc
        entry = _message(value, {1: Field("key", "string"), 2: Field("value", field.value)}, where=where)
        return entry.get("key", ""), entry.get("value", "")
    if not isinstance(value, int):
        raise Unsupported(f"{where}: a varint was expected (wire type {wire})")
    if kind == "bool":
        return bool(value)
    return value - (1 << 64) if value >= 1 << 63 else value  # int32 and int64: two's complement in 64 bits


def _time(data: bytes, *, where: str) -> str | None:
    """A meta/v1 Time ({1: seconds, 2: nanos}) as RFC 3339; None for Go's zero time (an empty message)."""
    parts = _message(data, {1: Field("seconds", "int"), 2: Field("nanos", "int")}, where=where)
    if not parts:
        return None
    moment = datetime.datetime.fromtimestamp(parts.get("seconds", 0), tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _fields(data: bytes, *, where: str) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of a message, in order."""
    found: list[tuple[int, int, int | bytes]] = []
    position = 0
    while position < len(data):
        key, position = _varint(data, position, where=where)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(data, position, where=where)
            found.append((number, wire, value))
        elif wire == 2:
            length, position = _varint(data, position, where=where)
            if position + length > len(data):
                raise Unsupported(f"{where}: field {number} runs past the end of the body")
            found.append((number, wire, data[position : position + length]))
            position += length
        elif wire == 1:  # fixed64: a double
            if position + 8 > len(data):
                raise Unsupported(f"{where}: field {number} runs past the end of the body")
            found.append((number, wire, data[position : position + 8]))
            position += 8
        elif wire == 5:  # fixed32: no field read here has one
            raise Unsupported(f"{where}: field {number} has a fixed-width value the emulator does not read")
        else:
            raise Unsupported(f"{where}: wire type {wire} of field {number} is not protobuf's")
    return found


def _varint(data: bytes, position: int, *, where: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise Unsupported(f"{where}: a truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position
