"""``kueue-es events asyncapi``: the document validates against the official AsyncAPI 3.0.0 JSON Schema
(tests/fixtures/asyncapi/, vendored with its source and license), and describes what is on the wire."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing

from kueue_es import asyncapi, cli
from kueue_es.events import subjects, types
from kueue_es.events.bus import permissions
from kueue_es.services.publisher import core
from tests import publisher_log
from tests.unit.test_publisher import publish_all

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "asyncapi"


@pytest.fixture(scope="module")
def spec_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((FIXTURES / "3.0.0.json").read_text()))


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return json.loads(json.dumps(asyncapi.document()))  # as a file holds it


def test_the_document_is_valid_asyncapi_3(spec_validator: jsonschema.Draft7Validator, document: dict[str, Any]) -> None:
    """No error against the AsyncAPI 3.0.0 schema; and the schema is strict enough to catch a broken one
    (an unknown operation action, an OpenAPI-style discriminator object, a server without protocol)."""
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in spec_validator.iter_errors(document)]
    assert errors == []
    assert document["asyncapi"] == "3.0.0"
    breakages = [
        lambda d: d["operations"]["receiveWorkload"].__setitem__("action", "take"),
        lambda d: d["components"]["schemas"]["QuotaReserved"].__setitem__("discriminator", {"propertyName": "type"}),
        lambda d: d["servers"]["nats"].pop("protocol"),
    ]
    for breakage in breakages:
        broken = copy.deepcopy(document)
        breakage(broken)
        assert list(spec_validator.iter_errors(broken)), breakage


def test_channels_operations_and_permissions(document: dict[str, Any]) -> None:
    """The public subjects and the log's, one receive operation each (a subscriber publishes nothing),
    every event type somewhere, and the reader user's permissions as published to nats-server."""
    addresses = {key: channel["address"] for key, channel in document["channels"].items()}
    assert addresses["workload"] == "kq.pub.wl.{namespace}.{name}"
    assert addresses["record"] == "kq.pub.rec.{partition}.{decider}"
    assert {"kq.in.{kind}.{namespace}.{name}", "kq.dec.{partition}.head.{decider}"} <= set(addresses.values())
    assert {op["action"] for op in document["operations"].values()} == {"receive"}
    for op in document["operations"].values():  # reader may not pull or ack (events/bus/permissions.py)
        assert op["description"].startswith("An ordered JetStream consumer (push, no acks)")
        assert "or durable" not in op["description"]
    assert {op["channel"]["$ref"] for op in document["operations"].values()} == {f"#/channels/{k}" for k in addresses}
    tags = {msg["name"] for msg in document["components"]["messages"].values()}
    assert tags == {t.__struct_config__.tag for t in types.ALL_TYPES}
    public = document["channels"]["workload"]["messages"]
    assert "schema 17" in document["channels"]["workload"]["description"]
    assert "schema 17" in document["channels"]["logDecisions"]["title"]
    assert {"WorkloadObserved", "QuotaReserved", "WorkloadAdmitted", "DispatchApplied", "WorkloadFinished"} <= set(
        public
    )
    granted = permissions.permissions(permissions.READER)
    assert granted is not None
    assert document["x-kueue-es-permissions"]["publish"] == granted["publish"]
    assert not any(s.startswith("kq.") for s in granted["publish"]["allow"])  # reads only


def _validator(document: dict[str, Any], ref: str) -> jsonschema.Draft202012Validator:
    resource = referencing.Resource.from_contents(document, default_specification=referencing.jsonschema.DRAFT202012)
    registry = referencing.Registry().with_resource("urn:doc", resource)
    return jsonschema.Draft202012Validator({"$ref": f"urn:doc{ref}"}, registry=registry)


@pytest.mark.parametrize("schema_version", [16, types.SCHEMA_VERSION])
def test_every_published_message_matches_its_message_in_the_document(
    document: dict[str, Any], schema_version: int
) -> None:
    """Each message the publisher writes for the test log, in the old layout (a record followed by its
    output messages) and in schema 17 (the record carrying its decisions, each published with Kq-Entry):
    its payload validates against the document's schema of its type, its headers against the message's
    headers schema; a payload of another type, a decision without its record's headers, or a Kq-Entry that
    is not <i>/<n>, does not."""
    out, _ = publish_all(publisher_log.stored(publisher_log.messages(schema_version=schema_version)))
    assert out
    entries = [m for m in out if core.KQ_ENTRY in m.headers]
    assert len(entries) == (3 if schema_version >= 17 else 0)  # the record (0/2) and its two decisions
    for message in out:
        tag = message.headers[core.KQ_TYPE]
        channel = "record" if tag == "DecisionRecord" else "workload"
        ref = document["channels"][channel]["messages"][tag]["$ref"]
        name = ref.rsplit("/", 1)[1]
        payload = _validator(document, f"#/components/schemas/{tag}")
        headers = _validator(document, f"#/components/messages/{name}/headers")
        payload.validate(json.loads(message.data))
        headers.validate({**message.headers, "Nats-Msg-Id": message.msg_id})
        other = "WorkloadFinished" if tag != "WorkloadFinished" else "QuotaReserved"
        assert not _validator(document, f"#/components/schemas/{other}").is_valid(json.loads(message.data))
        if core.KQ_ENTRY in message.headers:
            assert not headers.is_valid({**message.headers, "Nats-Msg-Id": message.msg_id, core.KQ_ENTRY: "1"})
        if core.KQ_RECORD_SEQ in message.headers:
            stripped = {k: v for k, v in message.headers.items() if k != core.KQ_RECORD_DIGEST}
            assert not headers.is_valid({**stripped, "Nats-Msg-Id": message.msg_id})


def test_the_command_writes_the_document(tmp_path: Path, document: dict[str, Any]) -> None:
    """``kueue-es events asyncapi --output F --server H:P`` writes it, naming that server."""
    target = tmp_path / "asyncapi.json"
    assert cli.main(["events", "asyncapi", "--output", str(target), "--server", "nats.example:4222"]) == 0
    written = json.loads(target.read_text())
    assert written["servers"]["nats"]["host"] == "nats.example:4222"
    written["servers"]["nats"]["host"] = document["servers"]["nats"]["host"]
    assert written == document


def test_the_vendored_schema_is_the_official_one() -> None:
    """The fixture says where it came from and under which license."""
    sources = (FIXTURES / "SOURCES.md").read_text()
    assert "asyncapi/spec-json-schemas" in sources and "Apache" in sources
    assert (FIXTURES / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert (
        json.loads((FIXTURES / "3.0.0.json").read_text())["$id"]
        == "http://asyncapi.com/definitions/3.0.0/asyncapi.json"
    )


def _subscribing_row(subject: str) -> str:
    """The row of docs/subscribing.md's table "What is on it" for ``subject``."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "subscribing.md").read_text()
    [row] = [line for line in text.splitlines() if line.startswith(f"| `{subject}")]
    return row


def test_the_subscribing_guide_names_every_type_of_the_workload_channel(document: dict[str, Any]) -> None:
    """docs/subscribing.md's row for ``kq.pub.wl.<namespace>.<name>`` names every message type the document
    lists on the workload channel, and no other event type but the log's DispatchBatchApplied (which it says is
    published as DispatchApplied messages), so the guide and the document cannot drift apart."""
    named = set(re.findall(r"`([A-Za-z]+)`", _subscribing_row("kq.pub.wl.<namespace>.<name>")))
    channel = set(document["channels"]["workload"]["messages"])
    assert channel - named == set(), "add these to docs/subscribing.md's kq.pub.wl row"
    tags = {t.__struct_config__.tag for t in types.ALL_TYPES}
    assert (named & tags) - channel == {"DispatchBatchApplied"}


def test_the_subscribing_guide_names_every_decider_of_the_record_channel() -> None:
    """Every head a decider of a running system writes records on (all but the scenario runner's ``seed``)."""
    row = _subscribing_row("kq.pub.rec.<partition>.<decider>")
    named = set(re.findall(r"`([a-z-]+)`", row))
    assert set(subjects.HEAD_TOKENS.values()) - {"seed"} <= named
