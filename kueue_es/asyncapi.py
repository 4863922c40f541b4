"""``kueue-es events asyncapi``: the AsyncAPI 3.0 document of what an outside tool may read.

Generated, never written by hand: the payload schemas are the event types' own JSON Schema
(:func:`kueue_es.events.codec.json_schema`, its ``$defs`` as ``components.schemas``), the headers
are the publisher's (:mod:`kueue_es.services.publisher.core`), the permissions the ``reader`` user's
(:mod:`kueue_es.events.bus.permissions`). It describes:

- the public stream ``KQ_PUB`` (docs/subscribing.md): channel ``workload``
  (``kq.pub.wl.{namespace}.{name}``: each workload's facts, verified decisions and dispatch results)
  and channel ``record`` (``kq.pub.rec.{partition}.{decider}``: the DecisionRecords that verify them);
- the log ``KQ_LOG`` a tool may read too (``kueue-es replay``, ``explain``): facts, per-workload
  decisions, records on the deciders' heads, dispatch results (docs/design.md "The log"); there a
  decision counts only inside a verified batch, which the reader must check itself. Since event
  schema 17 a record carries its cycle's decisions itself (``DecisionRecord.decisions``), so the
  per-workload decision subjects hold only older logs' decisions; ``KQ_PUB`` still delivers each
  decision on its workload's subject (``Kq-Entry`` its place in the record);
- one ``receive`` operation per channel (a subscriber only reads: the ``reader`` user may publish
  nothing), the server (NATS, user and password) and, as ``x-kueue-es-permissions``, the
  ``reader`` user's NATS permissions.

tests/unit/test_asyncapi.py validates the document against the official AsyncAPI 3.0.0 JSON Schema.
"""

from __future__ import annotations

from typing import Any

import kueue_es
from kueue_es.events import codec, types
from kueue_es.events.bus import permissions
from kueue_es.services.publisher import core

ASYNCAPI_VERSION = "3.0.0"
DOCUMENT_ID = "urn:kueue-es:events"


def _tag(event_type: type[types.Event]) -> str:
    return str(event_type.__struct_config__.tag)


WORKLOAD_FACTS: tuple[type[types.Event], ...] = (
    types.WorkloadObserved,
    types.WorkloadFinished,
    types.WorkloadStopped,
    types.WorkloadEvictionObserved,
    types.AdmissionCheckStateChanged,
    types.WorkloadPodsReady,
    types.WorkloadReclaimablePods,
    types.ObjectDeleted,
    types.ObjectRejected,
)
"""The facts on a workload's subject ``kq.in.wl.<ns>.<name>`` (ObjectDeleted and ObjectRejected of kind Workload)."""
OUTPUTS: tuple[type[types.Event], ...] = tuple(t for t in types.DECISION_TYPES if t is not types.DecisionRecord)


def _schemas() -> dict[str, Any]:
    """The event types' JSON Schema definitions with their references moved to ``components.schemas``."""
    definitions = codec.json_schema().get("$defs", {})
    assert isinstance(definitions, dict)
    return {name: _rewrite(schema) for name, schema in definitions.items()}


def _rewrite(node: Any) -> Any:
    """``#/$defs/X`` (or ``<$id>#/$defs/X``) -> ``#/components/schemas/X``; an OpenAPI-style ``discriminator`` object -> its
    property name (an AsyncAPI Schema's ``discriminator`` is a string)."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and "#/$defs/" in value:  # relative, or after an $id
                out[key] = "#/components/schemas/" + value.split("#/$defs/", 1)[1]
            elif key == "discriminator" and isinstance(value, dict):
                out[key] = value.get("propertyName", "type")
            else:
                out[key] = _rewrite(value)
        return out
    if isinstance(node, list):
        return [_rewrite(item) for item in node]
    return node


_DIGITS = {"type": "string", "pattern": "^[0-9]+$"}


def _log_headers(tag: str) -> dict[str, Any]:
    """The headers of an event on ``KQ_LOG``."""
    return {
        "type": "object",
        "properties": {
            core.MSG_ID: {"type": "string", "description": "JetStream's dedup id; docs/design.md gives its form"},
            core.KQ_TYPE: {"type": "string", "const": tag, "description": "the event's type tag"},
            core.KQ_SCHEMA: {**_DIGITS, "description": "the schema version of the payload"},
        },
        "required": [core.MSG_ID, core.KQ_TYPE],
    }


def _public_headers(tag: str, *, verified: bool) -> dict[str, Any]:
    """The headers of an event on ``KQ_PUB`` (:mod:`kueue_es.services.publisher.core`); ``verified``: a
    decision or a record, which carries its record's sequence, id and digest."""
    properties: dict[str, Any] = {
        **_log_headers(tag)["properties"],
        core.KQ_SEQ: {**_DIGITS, "description": "the message's sequence in KQ_LOG"},
        core.KQ_LOG_SUBJECT: {"type": "string", "description": "the message's subject in KQ_LOG"},
        "ce-specversion": {"type": "string", "const": core.SPECVERSION},
        "ce-id": {"type": "string", "description": "CloudEvents id: the Nats-Msg-Id"},
        "ce-source": {"type": "string", "const": core.SOURCE},
        "ce-type": {"type": "string", "const": core.TYPE_PREFIX + tag},
        "ce-time": {"type": "string", "format": "date-time", "description": "RFC 3339, UTC"},
        "ce-subject": {"type": "string", "description": "the workload <namespace>/<name>, or the record's decision_id"},
        "content-type": {"type": "string", "const": core.CONTENT_TYPE},
        "Nats-Expected-Stream": {
            "type": "string",
            "const": "KQ_PUB",
            "description": "the publisher's guard that its write lands in KQ_PUB, kept on the stored message",
        },
    }
    required = [core.MSG_ID, core.KQ_TYPE, core.KQ_SCHEMA, core.KQ_SEQ, core.KQ_LOG_SUBJECT, *core.CE_HEADERS]
    required.append("content-type")
    properties[core.KQ_ENTRY] = {
        "type": "string",
        "pattern": "^[0-9]+/[0-9]+$",
        "description": "<i>/<n> on a message that is one of n parts of one log message, all with its Kq-Seq: an"
        " entry of a DispatchBatchApplied, a fact of a FactBatch, or (schema 17) decision i of the n a"
        " DecisionRecord carries, whose record itself is 0/<n>",
    }
    if verified:
        properties[core.KQ_RECORD_SEQ] = {**_DIGITS, "description": "the verifying DecisionRecord's sequence in KQ_LOG"}
        properties[core.KQ_RECORD_ID] = {"type": "string", "description": "its decision_id"}
        properties[core.KQ_RECORD_DIGEST] = {
            "type": "string",
            "pattern": "^[0-9a-f]{64}$",
            "description": "hex SHA-256 of the record's bytes as stored",
        }
        required += [core.KQ_RECORD_SEQ, core.KQ_RECORD_ID, core.KQ_RECORD_DIGEST]
    return {"type": "object", "properties": properties, "required": required}


def _message(tag: str, *, headers: dict[str, Any], summary: str) -> dict[str, Any]:
    return {
        "name": tag,
        "title": tag,
        "summary": summary,
        "contentType": core.CONTENT_TYPE,
        "headers": headers,
        "payload": {"$ref": f"#/components/schemas/{tag}"},
    }


def _parameters(*names: str) -> dict[str, Any]:
    meaning = {
        "namespace": "the workload's namespace as a subject token (a dot written %2E, a % as %25; _ when empty)",
        "name": "the workload's name as a subject token (escaped as the namespace)",
        "partition": "the decision partition (p0, or a partition of the cohort forest)",
        "decider": "the NATS user of the decider that made the record: admitter, preemptor, tas-placer (seed: tests)",
        "kind": "the object's kind token: wl, cq, lq, rf, cohort, wpc, ns, ac, config, cmd, topo, node, pod",
        "cluster": "the dispatcher's cluster token (local)",
        "recordSeq": "the KQ_LOG sequence of the DecisionRecord whose decisions the results answer",
        "source": "the publisher of a FactBatch: watcher (the bench harness: bench)",
    }
    return {name: {"description": meaning[name]} for name in names}


def document(*, server: str = "127.0.0.1:4222") -> dict[str, Any]:
    """The AsyncAPI 3.0.0 document (a JSON-ready dict); ``server``: the NATS ``host:port`` it names."""
    schemas = _schemas()
    messages: dict[str, Any] = {}
    channels: dict[str, Any] = {}

    def channel(
        key: str, address: str, params: tuple[str, ...], kinds: tuple[type[types.Event], ...], prefix: str, **kw: Any
    ) -> None:
        refs = {}
        for event_type in kinds:
            tag = _tag(event_type)
            name = f"{prefix}.{tag}"
            messages.setdefault(name, kw["make"](tag))
            refs[tag] = {"$ref": f"#/components/messages/{name}"}
        channels[key] = {
            "address": address,
            "title": kw["title"],
            "description": kw["description"],
            "parameters": _parameters(*params),
            "messages": refs,
        }

    single_results = (types.DispatchApplied, types.DispatchFailed)  # a DispatchBatchApplied: one per entry
    workload_kinds = (*WORKLOAD_FACTS, *OUTPUTS, *single_results)
    channel(
        "workload",
        f"{core.PUBLIC_WORKLOAD}.{{namespace}}.{{name}}",
        ("namespace", "name"),
        workload_kinds,
        "public",
        title="A workload's public events (stream KQ_PUB)",
        description="In log order: the workload's facts, its decisions (each only once the batch verifier passed"
        " its batch, with the verifying record's sequence, id and digest) and its dispatch results. Since event"
        " schema 17 the log carries a cycle's decisions in its DecisionRecord (decisions); each is still"
        " delivered here as its own message, as before, with the record's Kq-Seq and Kq-Entry <i>/<n>.",
        make=lambda tag: _message(
            tag,
            headers=_public_headers(tag, verified=tag in {_tag(t) for t in OUTPUTS}),
            summary=f"{tag} on KQ_PUB",
        ),
    )
    channel(
        "record",
        f"{core.PUBLIC_RECORD}.{{partition}}.{{decider}}",
        ("partition", "decider"),
        (types.DecisionRecord,),
        "public",
        title="The DecisionRecords of the published decisions (stream KQ_PUB)",
        description="Each record with outputs, published before them, or carrying finished releases or (since"
        " event schema 17) its decisions, published before each of those (Kq-Entry 0/<n>);"
        " docs/subscribing.md shows how to check a decision against it.",
        make=lambda tag: _message(tag, headers=_public_headers(tag, verified=True), summary=f"{tag} on KQ_PUB"),
    )
    log_channels = (
        ("logFacts", "kq.in.{kind}.{namespace}.{name}", ("kind", "namespace", "name"), types.FACT_TYPES, "Facts"),
        ("logDecisions", "kq.dec.{partition}.wl.{namespace}.{name}", ("partition", "namespace", "name"), OUTPUTS, "Decisions (before schema 17)"),
        ("logRecords", "kq.dec.{partition}.head.{decider}", ("partition", "decider"), (types.DecisionRecord,), "Records"),
        ("logDispatch", "kq.disp.{cluster}.wl.{namespace}.{name}", ("cluster", "namespace", "name"), single_results, "Dispatch results"),
        ("logRecordDispatch", "kq.disp.{cluster}.rec.{partition}.{recordSeq}", ("cluster", "partition", "recordSeq"), (types.DispatchBatchApplied,), "Dispatch results per record"),
        ("logFactBatches", "kq.in.batch.{source}", ("source",), (types.FactBatch,), "Workload facts in batches"),
    )  # fmt: skip
    for key, address, params, kinds, what in log_channels:
        channel(
            key,
            address,
            params,
            kinds,
            "log",
            title=f"{what} on the log (stream KQ_LOG)",
            description="The log itself, as the services read it: a decision there counts only as an output of a"
            " verified batch (docs/design.md, projections/batches.py), which a reader must check itself. Since"
            " event schema 17 a DecisionRecord carries its cycle's decisions (decisions, outputCount 0) and the"
            " per-workload decision subjects carry only older logs' decisions.",
            make=lambda tag: _message(tag, headers=_log_headers(tag), summary=f"{tag} on KQ_LOG"),
        )
    operations = {
        f"receive{key[0].upper()}{key[1:]}": {
            "action": "receive",
            "title": f"Read {channels[key]['title']}",
            "description": "An ordered JetStream consumer (push, no acks) as NATS user reader, which may publish"
            " nothing and may not ack, pull or delete a consumer, so no durable consumer: the subscriber keeps its"
            " own position, the last stream sequence it handled, and starts its next ordered consumer after it"
            " (docs/subscribing.md).",
            "channel": {"$ref": f"#/channels/{key}"},
            "messages": [{"$ref": f"#/channels/{key}/messages/{tag}"} for tag in channels[key]["messages"]],
            "security": [{"$ref": "#/components/securitySchemes/reader"}],
        }
        for key in channels
    }
    granted = permissions.permissions(permissions.READER)
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "id": DOCUMENT_ID,
        "info": {
            "title": "kueue-es events",
            "version": kueue_es.__version__,
            "description": "What outside tools may read from a running kueue-es: the public stream KQ_PUB (verified"
            " per-workload events with CloudEvents 1.0 attributes in the NATS binding's binary mode) and the log"
            f" KQ_LOG. Payloads are the event types of schema version {types.SCHEMA_VERSION} (kueue-es events"
            " schema); docs/subscribing.md says how to subscribe and verify, and the stability policy.",
        },
        "defaultContentType": core.CONTENT_TYPE,
        "servers": {
            "nats": {
                "host": server,
                "protocol": "nats",
                "description": "The kueue-es nats-server (tls:// in a cluster: deploy/README.md).",
                "security": [{"$ref": "#/components/securitySchemes/reader"}],
            }
        },
        "channels": channels,
        "operations": operations,
        "components": {
            "schemas": schemas,
            "messages": messages,
            "securitySchemes": {
                "reader": {
                    "type": "userPassword",
                    "description": "NATS user reader (its password: <run dir>/creds/reader.password, or the Secret"
                    " kueue-es-nats-users): reads KQ_LOG and KQ_PUB and publishes nothing; its NATS permissions"
                    " are in x-kueue-es-permissions.",
                }
            },
        },
        "x-kueue-es-permissions": {"user": permissions.READER, **(granted or {})},
        "x-kueue-es-streams": {
            "KQ_PUB": {"subjects": ["kq.pub.>"], "writer": permissions.PUBLISHER},
            "KQ_LOG": {"subjects": ["kq.in.>", "kq.dec.>", "kq.disp.>"]},
        },
    }
