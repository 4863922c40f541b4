"""The public event contract (docs/events.md): golden payloads of every event type and every schema
version decode with the current code, re-encode to their bytes and validate against the published
JSON Schema; the schema names its dialect and version; a new event type or field without a new
version and its goldens fails here.

The goldens are tests/fixtures/events/v<version>/<Type>.json (scripts/golden_events.py), each
version's schema beside them (``schema.json``).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from kueue_es.events import codec, subjects, types

ROOT = Path(__file__).parent.parent.parent
EVENTS = ROOT / "tests" / "fixtures" / "events"
LOGS = ROOT / "tests" / "fixtures" / "logs"
VERSIONS = (*types.EARLIER_SCHEMA_VERSIONS, types.SCHEMA_VERSION)
GOLDENS = sorted(p for v in VERSIONS for p in (EVENTS / f"v{v}").glob("*.json") if p.name != "schema.json")


@cache
def validator(version: int | None = None) -> jsonschema.protocols.Validator:
    """A draft 2020-12 validator of the current schema, or of ``version``'s committed one."""
    schema = (
        codec.json_schema() if version is None else json.loads((EVENTS / f"v{version}" / "schema.json").read_text())
    )
    return jsonschema.Draft202012Validator(schema)


def raw_bytes(golden: dict[str, Any]) -> bytes:
    """A golden's payload as it is on the log (compact JSON, UTF-8)."""
    return json.dumps(golden["data"], separators=(",", ":"), ensure_ascii=False).encode()


def _without_prose(node: Any) -> Any:
    """A schema without its descriptions, titles and comments (docstrings may change in any release)."""
    if isinstance(node, dict):
        return {k: _without_prose(v) for k, v in node.items() if k not in ("description", "title", "$comment")}
    if isinstance(node, list):
        return [_without_prose(v) for v in node]
    return node


def test_the_schema_names_its_dialect_and_version() -> None:
    """``$schema`` is draft 2020-12, ``$id`` carries the version the messages' Kq-Schema header says."""
    schema = codec.json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://kueue-es.dev/schemas/events/v{types.SCHEMA_VERSION}.json"
    jsonschema.Draft202012Validator.check_schema(schema)
    header = subjects.message(
        types.SchedulingRequested(request_id="r", mode="cycle"), subject="kq.in.cmd._.r", msg_id="m"
    )
    assert header.headers["Kq-Schema"] == str(types.SCHEMA_VERSION)


def test_docs_state_the_schema_version_and_id() -> None:
    """docs/events.md names the current version and its ``$id`` (a version bump updates them)."""
    text = (ROOT / "docs" / "events.md").read_text()
    assert f"| schema version | **{types.SCHEMA_VERSION}** " in text
    assert f"`{codec.schema_id()}`" in text
    history = re.findall(r"^\| (\d+) \| ", text, flags=re.M)
    assert [int(v) for v in history] == list(range(1, types.SCHEMA_VERSION + 1))


def test_every_event_type_has_a_golden_payload_of_this_version() -> None:
    """An event type added without its golden payload (scripts/golden_events.py) fails here."""
    folder = EVENTS / f"v{types.SCHEMA_VERSION}"
    have = {p.stem for p in folder.glob("*.json")} - {"schema"}
    assert have == {codec.tag_of(cls) for cls in types.ALL_TYPES}


def test_the_schema_is_the_one_committed_for_its_version() -> None:
    """A field or type added without a new schema version (and its goldens) fails here: the schema
    of a version never changes once committed, prose aside."""
    committed = json.loads((EVENTS / f"v{types.SCHEMA_VERSION}" / "schema.json").read_text())
    assert committed["$id"] == codec.schema_id()
    assert _without_prose(codec.json_schema()) == _without_prose(committed)


#: Properties a version made optional, by (definition, property): the version and the widening, a function of the
#: property's earlier schema giving the later one. Each only lets more through (an absent value, read as its
#: default), so every earlier payload stays valid and keeps its bytes.
WIDENED = {
    # 13: a LocalQueue may name no ClusterQueue, as Kueue's (localqueue_types.go +optional); "" is the model's
    # reading of an absent one, left out when encoded
    ("LocalQueue", "spec"): (13, lambda was: {**was, "default": {}}),
    ("LocalQueueSpec", "clusterQueue"): (13, lambda was: {**was, "default": "", "pattern": "^$|" + was["pattern"]}),
}


def test_every_earlier_schema_is_a_subset_of_this_one() -> None:
    """Versions only grow: every definition of an earlier version is still here, with no new
    required property and no property whose schema changed, but for the widenings of :data:`WIDENED`."""
    now = codec.json_schema()["$defs"]
    for version in types.EARLIER_SCHEMA_VERSIONS:
        old = json.loads((EVENTS / f"v{version}" / "schema.json").read_text())["$defs"]
        for name, definition in old.items():
            assert name in now, f"v{version} {name} is gone"
            current = now[name]
            assert set(current.get("required", [])) <= set(definition.get("required", [])), name
            for prop, prop_schema in definition.get("properties", {}).items():
                was, now_is = _without_prose(prop_schema), _without_prose(current["properties"][prop])
                if (name, prop) == ("DecisionRecord", "schemaVersion"):  # its default is the version itself
                    was, now_is = {**was, "default": None}, {**now_is, "default": None}
                widened, widen = WIDENED.get((name, prop), (0, None))
                if widen is not None and version < widened:
                    was = widen(was)
                assert now_is == was, (name, prop)


def test_a_local_queue_without_a_cluster_queue_is_valid_from_version_13_only() -> None:
    """Kueue's LocalQueue may name no ClusterQueue (spec.clusterQueue and spec are ``+optional``): from version 13
    such a payload decodes (``cluster_queue`` "") and re-encodes to its bytes; version 12's schema refused it.
    One that names a ClusterQueue keeps its version 12 bytes."""
    bare = {"type": "LocalQueueObserved", "localQueue": {"metadata": {"name": "lq", "namespace": "ns"}}}
    for payload in (bare, {**bare, "localQueue": {**bare["localQueue"], "spec": {"stopPolicy": "Hold"}}}):
        data = json.dumps(payload, separators=(",", ":")).encode()
        event = codec.decode(data)
        assert isinstance(event, types.LocalQueueObserved) and event.local_queue.spec.cluster_queue == ""
        assert codec.encode(event) == data
        validator().validate(payload)
        assert not validator(12).is_valid(payload)
    with pytest.raises(codec.DecodeError, match="clusterQueue"):  # still a name when given
        codec.decode(
            b'{"type":"LocalQueueObserved","localQueue":{"metadata":{"name":"lq"},"spec":{"clusterQueue":"A"}}}'
        )
    golden = json.loads((EVENTS / "v12" / "LocalQueueObserved.json").read_text())
    assert codec.encode(codec.decode(raw_bytes(golden))) == raw_bytes(golden)


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_golden_payload_decodes_re_encodes_and_validates(path: Path) -> None:
    """Each golden decodes to its type with the current code, re-encodes to its exact bytes (replay
    compares bytes), and validates against the current schema and its own version's."""
    golden = json.loads(path.read_text())
    version = int(golden["headers"]["Kq-Schema"])
    assert path.parent.name == f"v{version}"
    assert golden["headers"]["Kq-Type"] == golden["data"]["type"] == path.stem
    data = raw_bytes(golden)
    event = codec.decode(data)
    assert codec.type_name(event) == path.stem
    assert codec.encode(event) == data
    validator().validate(golden["data"])
    validator(version).validate(golden["data"])


def test_an_old_workload_admitted_decodes_without_flavors_and_a_new_one_with_them() -> None:
    """Schema version 1's WorkloadAdmitted has no podSetAssignments (UNSET, left out when encoded);
    version 2's carries them, with the flavor of every resource."""
    old = codec.decode(raw_bytes(json.loads((EVENTS / "v1" / "WorkloadAdmitted.json").read_text())))
    assert isinstance(old, types.WorkloadAdmitted)
    assert old.pod_set_assignments is msgspec.UNSET
    assert b"podSetAssignments" not in codec.encode(old)
    new = codec.decode(raw_bytes(json.loads((EVENTS / "v2" / "WorkloadAdmitted.json").read_text())))
    assert isinstance(new, types.WorkloadAdmitted)
    assert isinstance(new.pod_set_assignments, list) and new.pod_set_assignments
    for assignment in new.pod_set_assignments:
        assert assignment.flavors and set(assignment.flavors) == set(assignment.resource_usage)


def test_a_workload_admitted_without_the_field_is_invalid_nowhere() -> None:
    """The new field is optional in the schema: a version 1 payload is valid under version 2."""
    definition = codec.json_schema()["$defs"]["WorkloadAdmitted"]
    assert "podSetAssignments" in definition["properties"]
    assert "podSetAssignments" not in definition["required"]


@pytest.mark.parametrize("log", ["demo-preempt.jsonl", "demo-preempt-v2.jsonl"])
def test_every_payload_of_a_recorded_log_validates_against_the_schema(log: str) -> None:
    """Real payloads, as running services wrote them (schema 1 and 2), all validate."""
    check = validator()
    versions = set()
    for line in (LOGS / log).read_text().splitlines():
        raw = json.loads(line)
        versions.add(raw["headers"]["Kq-Schema"])
        check.validate(json.loads(raw["data"]))
    assert len(versions) == 1


def test_the_admitted_helper_carries_the_reservation_with_delayed_requests_ready() -> None:
    """``types.admitted`` copies the reservation's assignments; a delayed topology request reads Ready."""
    ref = types.WorkloadRef(namespace="ns", name="w", uid="u")
    reserved = types.QuotaReserved(
        workload=ref,
        cluster_queue="cq",
        at_ms=5,
        pod_set_assignments=[
            types.PodSetAssignment(
                name="main",
                flavors={"cpu": "tas"},
                resource_usage={"cpu": 2000},
                count=2,
                delayed_topology_request="Pending",
            ),
            types.PodSetAssignment(name="side", flavors={"cpu": "f"}, resource_usage={"cpu": 500}, count=1),
        ],
    )
    admitted = types.admitted(reserved, at_ms=9)
    assert (admitted.workload, admitted.cluster_queue, admitted.at_ms) == (ref, "cq", 9)
    assert isinstance(admitted.pod_set_assignments, list)
    assert [a.delayed_topology_request for a in admitted.pod_set_assignments] == ["Ready", ""]
    assert [a.flavors for a in admitted.pod_set_assignments] == [{"cpu": "tas"}, {"cpu": "f"}]
    validator().validate(json.loads(codec.encode(admitted)))
