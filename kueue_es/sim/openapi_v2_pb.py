"""``/openapi/v2`` as protobuf: the Swagger 2.0 document in gnostic's ``openapi.v2.Document`` message.

kubectl asks ``/openapi/v2`` for ``application/com.github.proto-openapi.spec.v2@v1.0+protobuf`` only
(client-go's ``DiscoveryClient.OpenAPISchema``). It reads it to validate client-side what the server
cannot validate for it, most often a ``kind: List`` file (what ``kubectl get -o yaml`` writes for
several objects): cli-runtime's query-param verifiers answer "unsupported" for the GVK ``v1/List``,
so kubectl's ``paramVerifyingSchema`` validates each item of the List against the v2 definitions
(k8s.io/kubectl pkg/validation/validation.go ``validateList``) before it sends the items, one by one,
with ``fieldValidation=Strict``.

The message classes are protoc's output for gnostic-models' ``openapiv2/OpenAPIv2.proto``
(github.com/google/gnostic-models, a84a29ee), in :mod:`.openapiv2_pb2` (regenerate with
``python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. openapiv2/OpenAPIv2.proto`` from that
repository and copy ``OpenAPIv2_pb2.py``/``.pyi`` here). Like gnostic, values of ``default``,
``example``, ``enum`` and vendor extensions (``x-kubernetes-group-version-kind``, ...) are YAML text
(JSON, a subset of YAML, here). What Swagger 2.0 cannot say is left out, as kube-apiserver does
when it publishes a CRD's schema in v2: ``anyOf``, ``oneOf``, ``not``, ``nullable``; an ``allOf`` of
one ``$ref`` (how the OpenAPI v3 schemas put a description or default beside a reference) is that
``$ref``, as kube-openapi's v2 builder writes it (kubectl's parser would read an ``allOf`` as any value).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kueue_es.sim import openapiv2_pb2 as pb

#: The media type kubectl's OpenAPI v2 client asks for (client-go discovery ``openAPIV2mimePb``).
MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
#: The Content-Type kube-apiserver answers it with (kube-openapi pkg/handler: Go's mime parser refuses ``@``,
#: so the served type spells it with a dot), which it also takes in Accept.
CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
MEDIA_TYPES = (MEDIA_TYPE, CONTENT_TYPE)

_STRINGS = {"format": "format", "title": "title", "description": "description", "pattern": "pattern"}
_NUMBERS = {"multipleOf": "multiple_of", "maximum": "maximum", "minimum": "minimum"}
_INTEGERS = {
    "maxLength": "max_length",
    "minLength": "min_length",
    "maxItems": "max_items",
    "minItems": "min_items",
    "maxProperties": "max_properties",
    "minProperties": "min_properties",
}
_BOOLEANS = {
    "exclusiveMaximum": "exclusive_maximum",
    "exclusiveMinimum": "exclusive_minimum",
    "uniqueItems": "unique_items",
    "readOnly": "read_only",
}
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch")


def encode(document: Mapping[str, Any]) -> bytes:
    """The protobuf bytes of a Swagger 2.0 ``document`` (a dict as :func:`.openapi.v2_document` returns:
    ``swagger``, ``info``, ``paths``, ``definitions``), deterministic for one document.

    Raises ValueError naming the definition, path or field when the document is not Swagger 2.0 as
    kueue-es writes it (a ``type`` or ``items`` of the wrong shape).
    """
    info = document.get("info") or {}
    doc = pb.Document(
        swagger=str(document.get("swagger", "2.0")),
        info=pb.Info(title=str(info.get("title", "")), version=str(info.get("version", ""))),
    )
    for path, item in (document.get("paths") or {}).items():
        doc.paths.path.add(name=path, value=_path_item(item, where=f"paths[{path}]"))
    for name, schema in (document.get("definitions") or {}).items():
        doc.definitions.additional_properties.add(name=name, value=_schema(schema, where=f"definitions[{name}]"))
    return doc.SerializeToString(deterministic=True)


def _any(value: Any) -> pb.Any:
    return pb.Any(yaml=json.dumps(value, sort_keys=True))


def _extensions(node: Mapping[str, Any]) -> list[pb.NamedAny]:
    return [pb.NamedAny(name=key, value=_any(value)) for key, value in node.items() if key.startswith("x-")]


def _schema(node: Mapping[str, Any], *, where: str) -> pb.Schema:
    """gnostic's Schema of one Swagger 2.0 schema object."""
    if not isinstance(node, Mapping):
        raise ValueError(f"{where}: a schema must be an object, not {type(node).__name__}")
    all_of = node.get("allOf") or []
    if "$ref" not in node and len(all_of) == 1 and set(all_of[0]) == {"$ref"}:
        node = {**{k: v for k, v in node.items() if k != "allOf"}, "$ref": all_of[0]["$ref"]}
        all_of = []
    out = pb.Schema(vendor_extension=_extensions(node))
    if "$ref" in node:
        out._ref = node["$ref"]
    for key, field in _STRINGS.items():
        if key in node:
            setattr(out, field, str(node[key]))
    for key, field in _NUMBERS.items():
        if key in node:
            setattr(out, field, float(node[key]))
    for key, field in _INTEGERS.items():
        if key in node:
            setattr(out, field, int(node[key]))
    for key, field in _BOOLEANS.items():
        if key in node:
            setattr(out, field, bool(node[key]))
    for key in ("default", "example"):
        if key in node:
            getattr(out, key).CopyFrom(_any(node[key]))
    out.required.extend(node.get("required") or [])
    out.enum.extend(_any(value) for value in node.get("enum") or [])
    if "type" in node:
        types = node["type"]
        out.type.value.extend([types] if isinstance(types, str) else types)
    if "items" in node:
        items = node["items"]
        listed = items if isinstance(items, list) else [items]
        out.items.schema.extend(_schema(item, where=f"{where}.items") for item in listed)
    if "additionalProperties" in node:
        extra = node["additionalProperties"]
        if isinstance(extra, bool):
            out.additional_properties.boolean = extra
        else:
            out.additional_properties.schema.CopyFrom(_schema(extra, where=f"{where}.additionalProperties"))
    out.all_of.extend(_schema(part, where=f"{where}.allOf") for part in all_of)
    if "properties" in node:
        out.properties.SetInParent()  # an object whose properties are listed, even none
        for name, sub in node["properties"].items():
            out.properties.additional_properties.add(name=name, value=_schema(sub, where=f"{where}.{name}"))
    return out


def _path_item(item: Mapping[str, Any], *, where: str) -> pb.PathItem:
    out = pb.PathItem(vendor_extension=_extensions(item))
    for method in _METHODS:
        if (operation := item.get(method)) is not None:
            getattr(out, method).CopyFrom(_operation(operation, where=f"{where}.{method}"))
    out.parameters.extend(_parameter(p, where=f"{where}.parameters") for p in item.get("parameters") or [])
    return out


def _operation(op: Mapping[str, Any], *, where: str) -> pb.Operation:
    out = pb.Operation(
        tags=op.get("tags") or [],
        description=str(op.get("description", "")),
        operation_id=str(op.get("operationId", "")),
        consumes=op.get("consumes") or [],
        produces=op.get("produces") or [],
        vendor_extension=_extensions(op),
    )
    out.parameters.extend(_parameter(p, where=f"{where}.parameters") for p in op.get("parameters") or [])
    for code, response in (op.get("responses") or {}).items():
        value = pb.Response(description=str(response.get("description", "")))
        if "schema" in response:
            value.schema.schema.CopyFrom(_schema(response["schema"], where=f"{where}.responses[{code}]"))
        out.responses.response_code.add(name=str(code), value=pb.ResponseValue(response=value))
    return out


def _parameter(param: Mapping[str, Any], *, where: str) -> pb.ParametersItem:
    """A body, query or path parameter (gnostic's oneofs); a header or formData one is an error."""
    name, place = str(param.get("name", "")), param.get("in")
    where = f"{where}[{name}]"
    out = pb.ParametersItem()
    sub: pb.BodyParameter | pb.QueryParameterSubSchema | pb.PathParameterSubSchema
    if place == "body":
        sub = out.parameter.body_parameter
        if "schema" in param:
            sub.schema.CopyFrom(_schema(param["schema"], where=f"{where}.schema"))
    elif place in ("query", "path"):
        typed = param.get("type") or (param.get("schema") or {}).get("type", "string")
        if place == "query":
            sub = out.parameter.non_body_parameter.query_parameter_sub_schema
        else:
            sub = out.parameter.non_body_parameter.path_parameter_sub_schema
        sub.type = str(typed)
    else:
        raise ValueError(f"{where}.in: {place!r} parameters are not written (body, query and path are)")
    sub.name, sub.description = name, str(param.get("description", ""))
    sub.required = place == "path" or bool(param.get("required"))
    setattr(sub, "in", place)  # a Python keyword
    return out
