"""The CRDs in deploy/crds/: generated from events/models.py, structural, and accepting Kueue's own objects.

- the committed files are exactly what ``kueue-es deploy crds`` writes;
- every schema is a valid Kubernetes structural schema (kubernetes-validate checks
  the CRD objects themselves in test_manifests.py);
- every kueue.x-k8s.io object in ../shared/kueue-examples/ (all YAML files, all
  documents) of a kind we serve validates against our schema, loses no field to
  pruning, and is read by kueue-es's own parser; objects of kinds we do not serve
  are only those listed in NOT_SERVED, each with the reason;
- where the Kueue mirror is on this machine, every field of Kueue's published
  v1beta2 CRDs for our kinds exists in ours with a compatible type.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es import cli, crds
from kueue_es.events import manifests, models
from tests.deploy import schemas

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "deploy" / "crds"
EXAMPLES = ROOT.parent / "shared" / "kueue-examples"
KUEUE_MIRROR = Path("/work/.mirror/kubernetes-sigs+kueue/repo")

#: kueue.x-k8s.io kinds in Kueue's examples that kueue-es does not serve (no CRD), and why.
NOT_SERVED = {
    "Topology": "topology-aware scheduling is not modelled yet (the TAS placer decides nothing)",
    "MultiKueueCluster": "MultiKueue (dispatching to worker clusters) is not part of kueue-es",
    "MultiKueueConfig": "MultiKueue (dispatching to worker clusters) is not part of kueue-es",
}
SCHEMAS = {kind.kind: crds.object_schema(kind) for kind in crds.KINDS}


def example_objects() -> list[tuple[str, dict[str, Any]]]:
    """Every kueue.x-k8s.io object in the examples, as ``(file:index kind/name, object)``."""
    found = []
    for path in sorted([*EXAMPLES.rglob("*.yaml"), *EXAMPLES.rglob("*.yml")]):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            docs = doc.get("items", []) if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
            for obj in docs:
                if isinstance(obj, dict) and str(obj.get("apiVersion", "")).startswith(f"{crds.GROUP}/"):
                    name = (obj.get("metadata") or {}).get("name")
                    found.append((f"{path.relative_to(EXAMPLES)}:{index} {obj.get('kind')}/{name}", obj))
    return found


EXAMPLE_OBJECTS = example_objects() if EXAMPLES.is_dir() else []
SERVED_EXAMPLES = [(label, obj) for label, obj in EXAMPLE_OBJECTS if obj.get("kind") in SCHEMAS]


def test_committed_crds_are_the_generated_ones() -> None:
    """deploy/crds/ holds exactly the generator's output (regenerate: kueue-es deploy crds -o deploy/crds)."""
    assert crds.stale(CRD_DIR) == []
    expected = set(crds.render_files())
    assert {p.name for p in CRD_DIR.iterdir()} == expected


# -- status: Kueue's own schemas ------------------------------------------------------------------

KUEUE_CRDS = ROOT / "tests" / "fixtures" / "crds" / "kueue"


def test_kueue_status_json_is_taken_from_kueues_crds() -> None:
    """kueue_status.json is what ``python -m kueue_es.crds tests/fixtures/crds/kueue`` writes, and every kind
    with a status subresource declares Kueue's v1beta2 status schema, as Kueue's CRD has it."""
    documents = crds.read_kueue_crds(KUEUE_CRDS)
    assert crds.KUEUE_STATUS_FILE.read_text() == crds.render_kueue_status(documents)
    theirs = {
        doc["spec"]["names"]["kind"]: version["schema"]["openAPIV3Schema"]["properties"].get("status")
        for doc in documents
        for version in doc["spec"]["versions"]
        if version["name"] == crds.VERSION
    }
    for kind in crds.KINDS:
        ours = crds.object_schema(kind)["properties"].get("status")
        assert (ours is not None) == kind.status
        if ours is None:
            continue
        additions = crds.STATUS_ADDITIONS.get(kind.kind, {})
        kueues = {**ours, "properties": {k: v for k, v in ours["properties"].items() if k not in additions}}
        assert kueues == theirs[kind.kind], kind.kind
        for name, addition in additions.items():  # a kueue-es addition: the schema Kueue gives it elsewhere
            like_kind, like_field = addition.like
            assert name not in theirs[kind.kind]["properties"]
            like = theirs[like_kind]["properties"][like_field]
            assert ours["properties"][name] == {**like, "description": addition.description}
    workload = SCHEMAS["Workload"]["properties"]["status"]["properties"]
    assert {"admission", "admissionChecks", "conditions", "requeueState", "schedulingStats"} <= set(workload)
    assert "flavorsUsage" in SCHEMAS["ClusterQueue"]["properties"]["status"]["properties"]
    assert set(SCHEMAS["Cohort"]["properties"]["status"]["properties"]) == {"fairSharing", "conditions"}


def test_kueue_status_schemas_refuse_crds_that_do_not_fit() -> None:
    """A CRD without v1beta2, or a kind whose status subresource and Kueue's status schema disagree, is an
    error naming it; other groups are skipped."""
    documents = crds.read_kueue_crds(KUEUE_CRDS)
    other = {"kind": "CustomResourceDefinition", "spec": {"group": "ray.io", "versions": []}}
    assert crds.kueue_status_schemas([*documents, other]) == crds.kueue_status_schemas(documents)
    no_v1beta2 = [
        {**doc, "spec": {**doc["spec"], "versions": [v for v in doc["spec"]["versions"] if v["name"] != "v1beta2"]}}
        if doc["spec"]["names"]["kind"] == "Cohort"
        else doc
        for doc in documents
    ]
    with pytest.raises(ValueError, match="cohorts.kueue.x-k8s.io: spec.versions has no v1beta2"):
        crds.kueue_status_schemas(no_v1beta2)
    without_workloads = [doc for doc in documents if doc["spec"]["names"]["kind"] != "Workload"]
    with pytest.raises(ValueError, match="Workload: Kueue's CRD has no v1beta2 status schema, but Kind.status is True"):
        crds.kueue_status_schemas(without_workloads)
    flavor_with_status = [
        {**doc, "spec": {**doc["spec"], "versions": [with_status(v) for v in doc["spec"]["versions"]]}}
        if doc["spec"]["names"]["kind"] == "ResourceFlavor"
        else doc
        for doc in documents
    ]
    with pytest.raises(ValueError, match="ResourceFlavor: Kueue's CRD has a v1beta2 status schema, but Kind.status"):
        crds.kueue_status_schemas(flavor_with_status)


def with_status(version: dict[str, Any]) -> dict[str, Any]:
    """A CRD version whose schema also declares a ``status``."""
    schema = version["schema"]["openAPIV3Schema"]
    properties = {**schema["properties"], "status": {"type": "object"}}
    return {**version, "schema": {"openAPIV3Schema": {**schema, "properties": properties}}}


def test_python_m_kueue_es_crds_rewrites_the_status_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m kueue_es.crds DIR`` writes kueue_status.json from DIR; a missing DIR or CRDs it cannot use
    exit 2 with a message."""
    committed = crds.KUEUE_STATUS_FILE.read_text()
    committed_v1beta1 = crds.KUEUE_V1BETA1_FILE.read_text()
    target = tmp_path / "kueue_status.json"
    monkeypatch.setattr(crds, "KUEUE_STATUS_FILE", target)
    monkeypatch.setattr(crds, "KUEUE_V1BETA1_FILE", tmp_path / "kueue_v1beta1.json")
    assert crds.main([str(KUEUE_CRDS)]) == 0
    assert target.read_text() == committed
    assert (tmp_path / "kueue_v1beta1.json").read_text() == committed_v1beta1
    assert crds.main([str(tmp_path / "absent")]) == 2
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "a.yaml").write_text("kind: CustomResourceDefinition\nspec: {group: kueue.x-k8s.io}\n")
    assert crds.main([str(tmp_path / "broken")]) == 2


# -- v1beta1: Kueue's deprecated version, converted ----------------------------------------------------


def test_kueue_v1beta1_json_is_taken_from_kueues_crds() -> None:
    """kueue_v1beta1.json is what ``python -m kueue_es.crds tests/fixtures/crds/kueue`` writes: Kueue's v1beta1
    entry of every CRD, with its pod templates kept as preserved objects; a kind without v1beta1 is an error."""
    documents = crds.read_kueue_crds(KUEUE_CRDS)
    assert crds.KUEUE_V1BETA1_FILE.read_text() == crds.render_kueue_v1beta1(documents)
    versions = crds.kueue_v1beta1_versions(documents)
    assert list(versions) == [kind.kind for kind in crds.KINDS]
    template = versions["Workload"]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["podSets"]
    assert template["items"]["properties"]["template"]["x-kubernetes-preserve-unknown-fields"] is True
    without = [doc for doc in documents if doc["spec"]["names"]["kind"] != "Topology"]
    with pytest.raises(ValueError, match="Topology: Kueue's CRD has no v1beta1"):
        crds.kueue_v1beta1_versions(without)


@pytest.mark.parametrize("kind", crds.KINDS, ids=lambda k: k.kind)
def test_v1beta1_is_served_deprecated_and_converted_as_kueues(kind: crds.Kind) -> None:
    """Every CRD serves Kueue's v1beta1 beside v1beta2 (storage), deprecated with Kueue's warning where Kueue's is,
    with Kueue's v1beta1 schema fields and printer columns; the kinds Kueue's CRDs convert through its webhook
    call the kueue-es webhook service at Kueue's path /convert, the others use strategy None."""
    theirs = yaml.safe_load((KUEUE_CRDS / crds.file_name(kind)).read_text())
    (their_v1,) = [v for v in theirs["spec"]["versions"] if v["name"] == "v1beta1"]
    ours = crds.crd(kind)
    by_name = {v["name"]: v for v in ours["spec"]["versions"]}
    assert list(by_name) == ["v1beta2", "v1beta1"]
    assert by_name["v1beta2"]["storage"] is True and by_name["v1beta1"]["storage"] is False
    assert by_name["v1beta1"]["served"] is True
    assert by_name["v1beta1"].get("deprecated") == their_v1.get("deprecated")
    assert by_name["v1beta1"].get("deprecationWarning") == their_v1.get("deprecationWarning")
    if kind.kind != "MultiKueueConfig":  # Kueue does not deprecate MultiKueueConfig's v1beta1
        assert by_name["v1beta1"]["deprecationWarning"] == "This version is deprecated. Use v1beta2 instead."
    assert by_name["v1beta1"].get("additionalPrinterColumns") == their_v1.get("additionalPrinterColumns")
    assert by_name["v1beta1"].get("subresources") == their_v1.get("subresources")
    assert field_types(by_name["v1beta1"]["schema"]["openAPIV3Schema"]).items() <= {
        path: kind_of
        for path, kind_of in field_types(their_v1["schema"]["openAPIV3Schema"]).items()
        if ".template." not in path
    }.items() | {(p, "preserved") for p in field_types(by_name["v1beta1"]["schema"]["openAPIV3Schema"])}
    conversion = ours["spec"]["conversion"]
    if kind.kind in ("ClusterQueue", "Cohort", "LocalQueue", "Workload", "MultiKueueCluster"):
        assert conversion == {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {
                    "service": {
                        "name": "kueue-es-webhook-service",
                        "namespace": "kueue-es",
                        "path": "/convert",
                        "port": 443,
                    }
                },
                "conversionReviewVersions": ["v1"],
            },
        }
    else:
        assert conversion == {"strategy": "None"}


@pytest.mark.parametrize("kind", crds.KINDS, ids=lambda k: k.kind)
def test_schema_is_structural(kind: crds.Kind) -> None:
    assert schemas.structural_problems(crds.object_schema(kind)) == []


def test_every_kueue_kind_is_served() -> None:
    """The CRDs cover the kinds kueue-es parses (kueue_es.events.manifests.KUEUE_KINDS, and Topology for
    TAS), and no other."""
    assert set(SCHEMAS) == {*manifests.KUEUE_KINDS, "Topology"}
    for kind in crds.KINDS:
        assert kind.namespaced == (kind.kind in manifests.NAMESPACED_KINDS)


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="../shared/kueue-examples is not beside the repo")
def test_examples_cover_the_kinds_and_only_known_kinds_are_not_served() -> None:
    kinds = {obj["kind"] for _, obj in EXAMPLE_OBJECTS}
    assert kinds - set(SCHEMAS) <= set(NOT_SERVED), f"kinds neither served nor listed: {kinds - set(SCHEMAS)}"
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck"} <= kinds
    assert len(SERVED_EXAMPLES) >= 50


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="../shared/kueue-examples is not beside the repo")
@pytest.mark.parametrize(("label", "obj"), SERVED_EXAMPLES, ids=[label for label, _ in SERVED_EXAMPLES])
def test_kueue_example_validates_against_our_crd(label: str, obj: dict[str, Any]) -> None:
    schema = SCHEMAS[obj["kind"]]
    assert schemas.validation_errors(schema, obj) == []
    assert schemas.pruned(schema, obj) == [], "fields the API server would drop"
    manifests.parse_object(obj)  # and kueue-es reads it


@pytest.mark.parametrize(
    ("kind", "obj", "problem"),
    [
        ("ClusterQueue", {"spec": {"queueingStrategy": "LIFO"}}, "'LIFO' is not one of"),
        ("ClusterQueue", {"spec": {"cohortName": 3}}, "is not of type 'string'"),
        (
            "ClusterQueue",
            {
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "9 cpus"}]}],
                        }
                    ]
                }
            },
            "does not match",
        ),
        ("LocalQueue", {"spec": {"clusterQueue": ""}}, "does not match"),  # optional, never empty (Kueue's pattern)
        ("Workload", {"spec": {"podSets": [{"name": "main", "count": 1}]}}, "'template' is a required property"),
        ("WorkloadPriorityClass", {}, "'value' is a required property"),
    ],
)
def test_invalid_objects_are_refused(kind: str, obj: dict[str, Any], problem: str) -> None:
    full = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": "x"}, **obj}
    errors = schemas.validation_errors(SCHEMAS[kind], full)
    assert any(problem in e for e in errors), errors


@pytest.mark.parametrize("obj", [{}, {"spec": {}}, {"spec": {"stopPolicy": "Hold"}}])
def test_a_local_queue_may_name_no_cluster_queue(obj: dict[str, Any]) -> None:
    """Kueue's LocalQueue ``spec`` and ``spec.clusterQueue`` are ``+optional`` (localqueue_types.go; its kueuectl
    tests create such queues): the CRD takes one without them, and kueue-es reads it as naming none."""
    full = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq"}, **obj}
    assert schemas.validation_errors(SCHEMAS["LocalQueue"], full) == []
    parsed = manifests.parse_object(full)
    assert isinstance(parsed, models.LocalQueue) and parsed.spec.cluster_queue == ""


def test_misspelt_field_is_pruned_not_kept() -> None:
    """No preserve-unknown-fields on a spec: a typo is dropped (or refused under kubectl's strict validation)."""
    obj = {"spec": {"clusterQueue": "cq", "clusterQeue": "typo"}}
    assert schemas.pruned(SCHEMAS["LocalQueue"], obj) == [".spec.clusterQeue"]


def test_quantities_defaults_and_columns() -> None:
    cq = SCHEMAS["ClusterQueue"]["properties"]["spec"]["properties"]
    quota = cq["resourceGroups"]["items"]["properties"]["flavors"]["items"]["properties"]["resources"]["items"]
    assert quota["properties"]["nominalQuota"]["x-kubernetes-int-or-string"] is True
    assert cq["queueingStrategy"]["default"] == "BestEffortFIFO"
    assert (
        cq["preemption"]["default"] == {} and cq["preemption"]["properties"]["withinClusterQueue"]["default"] == "Never"
    )
    by_kind = {doc["spec"]["names"]["kind"]: doc for doc in crds.all_crds()}
    workload = by_kind["Workload"]["spec"]["versions"][0]
    assert [c["name"] for c in workload["additionalPrinterColumns"]] == [
        "Queue",
        "Reserved in",
        "Admitted",
        "Finished",
        "Age",
    ]
    assert "subresources" not in by_kind["ResourceFlavor"]["spec"]["versions"][0]
    assert by_kind["LocalQueue"]["spec"]["scope"] == "Namespaced"


def run_cli(*argv: str) -> int:
    """One CLI command in this process, without main()'s logging set-up (it would outlive the test)."""
    args = cli._parser().parse_args(list(argv))
    return int(args.run(args) or 0)


def test_cli_prints_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("deploy", "crds") == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["metadata"]["name"] for d in docs if d] == [k.name for k in crds.KINDS]
    out = tmp_path / "crds"
    assert run_cli("deploy", "crds", "--output-dir", str(out), "--check") == 1
    assert run_cli("deploy", "crds", "--output-dir", str(out)) == 0
    assert run_cli("deploy", "crds", "--output-dir", str(out), "--check") == 0
    (out / "kueue.x-k8s.io_cohorts.yaml").write_text("changed\n")
    assert run_cli("deploy", "crds", "--output-dir", str(out), "--check") == 1
    assert "kueue.x-k8s.io_cohorts.yaml" in capsys.readouterr().err


def test_console_script_checks_the_committed_crds() -> None:
    """``kueue-es deploy crds -o deploy/crds --check``, as a developer runs it after changing a model."""
    result = subprocess.run(
        [sys.executable, "-m", "kueue_es.cli", "deploy", "crds", "-o", str(CRD_DIR), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


# -- against Kueue's published CRDs (only where the mirror is on this machine) ------------------------


def kueue_schema(plural: str) -> dict[str, Any]:
    text = subprocess.run(
        ["git", "-C", str(KUEUE_MIRROR), "show", f"HEAD:config/components/crd/bases/kueue.x-k8s.io_{plural}.yaml"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    crd = yaml.safe_load(text)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == crds.VERSION]
    return {"crd": crd, "version": version}


def field_types(schema: dict[str, Any]) -> dict[str, str]:
    """``{path: type}`` of every node, stopping below nodes that keep unknown fields."""
    out = {}
    for path, node in schemas.nodes(schema):
        if "<anyOf" in path or any(f"{p}." in path or f"{p}[" in path for p in out if out[p] == "preserved"):
            continue
        if path.startswith((".metadata.", ".status")):
            continue
        if node.get("x-kubernetes-preserve-unknown-fields"):
            out[path] = "preserved"
        elif node.get("x-kubernetes-int-or-string"):
            out[path] = "int-or-string"
        else:
            out[path] = node.get("type", "?")
    return out


@pytest.mark.skipif(
    not (KUEUE_MIRROR / "HEAD").exists() and not (KUEUE_MIRROR / ".git").exists(), reason="no Kueue mirror here"
)
@pytest.mark.parametrize("kind", crds.KINDS, ids=lambda k: k.kind)
def test_compatible_with_kueues_published_crd(kind: crds.Kind) -> None:
    """Names, scope, subresources and every v1beta2 field of Kueue's CRD are in ours (ours may keep
    a field as preserved where Kueue spells it out, e.g. a Workload's pod template)."""
    theirs = kueue_schema(kind.plural)
    ours = crds.crd(kind)
    assert ours["spec"]["names"] == {k: v for k, v in theirs["crd"]["spec"]["names"].items() if k != "categories"}
    assert ours["spec"]["scope"] == theirs["crd"]["spec"]["scope"]
    assert bool(theirs["version"].get("subresources", {}).get("status") is not None) == kind.status
    their_columns = [(c["name"], c["jsonPath"]) for c in theirs["version"].get("additionalPrinterColumns", [])]
    our_columns = [(c["name"], c["jsonPath"]) for c in ours["spec"]["versions"][0].get("additionalPrinterColumns", [])]
    assert our_columns == their_columns
    our_types = field_types(crds.object_schema(kind))
    missing, different = [], []
    for path, kind_of in field_types(theirs["version"]["schema"]["openAPIV3Schema"]).items():
        covering = [
            p
            for p, t in our_types.items()
            if t == "preserved" and (path.startswith(p + ".") or path.startswith(p + "["))
        ]
        if covering:
            continue
        if path not in our_types:
            missing.append(path)
        elif our_types[path] not in (kind_of, "preserved"):
            different.append(f"{path}: Kueue {kind_of}, ours {our_types[path]}")
    assert missing == [] and different == []
