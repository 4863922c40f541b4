"""Property-based tests of admission over random clusters, workloads and events.

Hypothesis draws a whole scenario document (``../shared/scenarios/README.md``
shape): 1-3 ResourceFlavors; 1-4 ClusterQueues, some in cohorts ``co-a`` /
``co-b`` with optional borrowingLimit / lendingLimit; optional Cohort objects
(``co-a`` may hang under ``co-b``, either under ``co-root``) with their own quota
and limits; one LocalQueue per ClusterQueue; 1-15 Workloads of 1-2 pod sets with
optional minCount, priorities and creation times that may tie (UIDs break ties);
some ClusterQueues require an admission check (on all flavors or some); then
events: finish / delete, a check going Ready / Retry (with or without a backoff) /
Rejected, 31 minutes passing (with ``podsReady: manual`` jobs never get ready, so
PodsReady timeouts evict and back off). Each scenario goes through the loader
(``parse_scenario``) and the core engine (``run_scenario``: the production
deciders, encoders and fold), and the resulting log is checked:

1. quota is never over-used after any committed decision batch, recomputed
   independently from the log's QuotaReserved / QuotaReleased and the manifests;
2. runs are deterministic, in-process and across PYTHONHASHSEED;
3. folding a log twice (or every event twice) gives the same ledger and reservations;
4. every decision replays byte for byte (``kueue_es.replay.check_log``);
5. every scenario settles and no workload is both admitted and pending.

Cluster shape never changes during a run (no event applies an object), so
the quota tree read from the manifests holds for the whole log. Failures print
the falsifying scenario document (``note``) and are kept in Hypothesis's example
database like any other property test.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.replay import check_log
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.scheduling import preemption as targets
from tests.scenario_states import with_releases

API = "kueue.x-k8s.io/v1beta2"
CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
FLAVORS = ("f0", "f1", "f2")
COHORTS = ("co-a", "co-b")
CHECK = "check"
ROOT_COHORT = "co-root"
NAMESPACE = "default"
MILLI = 1000
ROOT = Path(__file__).resolve().parents[2]

MAX_EXAMPLES = int(os.environ.get("KQ_PROPERTY_EXAMPLES", "100"))
"""Examples per property; raise it (``KQ_PROPERTY_EXAMPLES=5000``) for a longer bug hunt."""
SETTINGS = settings(
    max_examples=MAX_EXAMPLES, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
"""A generated run takes ~20-40 ms, so 100 examples a property keeps the module well under a minute.
Random, not derandomized: a failure is saved in the example database and printed with its
scenario YAML and a ``@reproduce_failure`` blob."""


@pytest.fixture(autouse=True, scope="module")
def _quiet_logs() -> Iterator[None]:
    """The core engine logs every decision at debug level: drop those while the properties run."""
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    yield
    structlog.configure(**old)


# --- strategies ------------------------------------------------------------------------------


@st.composite
def resource_groups(draw: st.DrawFn, flavors: tuple[str, ...], *, limits: bool, cohort: bool) -> list[dict]:
    """One cpu resource group over a non-empty ordered subset of ``flavors``.

    ``limits``: borrowingLimit / lendingLimit may be set (the object has a cohort / parent);
    ``cohort``: a Cohort's lendingLimit may exceed its nominal quota, a ClusterQueue's may not.
    """
    order = draw(st.permutations(flavors))
    chosen = order[: draw(st.integers(1, len(flavors)))]
    entries = []
    for name in chosen:
        nominal = draw(st.integers(0, 8))
        resource: dict[str, Any] = {"name": "cpu", "nominalQuota": nominal}
        if limits and draw(st.booleans()):
            resource["borrowingLimit"] = draw(st.integers(0, 8))
        if limits and draw(st.booleans()):
            resource["lendingLimit"] = draw(st.integers(0, 10 if cohort else nominal))
        entries.append({"name": name, "resources": [resource]})
    return [{"coveredResources": ["cpu"], "flavors": entries}]


@st.composite
def preemption_policies(draw: st.DrawFn) -> dict:
    """A ClusterQueue ``preemption`` stanza with any policy values (SEMANTICS §7.2-§7.3)."""
    borrow: dict[str, Any] = {"policy": draw(st.sampled_from(["Never", "LowerPriority"]))}
    if borrow["policy"] != "Never" and draw(st.booleans()):
        borrow["maxPriorityThreshold"] = draw(st.integers(-2, 2))
    return {
        "withinClusterQueue": draw(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])),
        "reclaimWithinCohort": draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
        "borrowWithinCohort": borrow,
    }


@st.composite
def workload_docs(draw: st.DrawFn, index: int, uid: int, cluster_queues: list[str]) -> dict:
    """Workload ``w<index>`` on the LocalQueue of one of ``cluster_queues``."""
    pod_sets = []
    for p in range(draw(st.integers(1, 2))):
        count, cpu = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        container = {"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}
        pod_set: dict[str, Any] = {"name": f"ps{p}", "count": count, "template": {"spec": {"containers": [container]}}}
        if draw(st.booleans()):
            pod_set["minCount"] = draw(st.integers(1, count))
        pod_sets.append(pod_set)
    cq = draw(st.sampled_from(cluster_queues))
    created = draw(st.integers(0, 20))
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": f"w{index:02d}",
            "namespace": NAMESPACE,
            "uid": f"uid-{uid:02d}",
            "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z",
        },
        "spec": {"queueName": f"lq-{cq}", "priority": draw(st.integers(-2, 2)), "podSets": pod_sets},
    }


@st.composite
def scenario_docs(draw: st.DrawFn) -> dict:
    """A whole scenario document: flavors, cohorts, ClusterQueues, LocalQueues, workloads, events."""
    flavors = FLAVORS[: draw(st.integers(1, len(FLAVORS)))]
    objects: list[dict] = [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": f}} for f in flavors]
    under_root = False
    for name in COHORTS:
        if not draw(st.booleans()):
            continue  # implicit cohort (no object): a root without quota of its own
        parent = draw(st.sampled_from([None, ROOT_COHORT, *(["co-b"] if name == "co-a" else [])]))
        spec: dict[str, Any] = {}
        if parent is not None:
            spec["parentName"] = parent
            under_root |= parent == ROOT_COHORT
        if draw(st.booleans()):
            spec["resourceGroups"] = draw(resource_groups(flavors, limits=parent is not None, cohort=True))
        objects.append({"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})
    if under_root and draw(st.booleans()):
        spec = {"resourceGroups": draw(resource_groups(flavors, limits=False, cohort=True))}
        objects.append({"apiVersion": API, "kind": "Cohort", "metadata": {"name": ROOT_COHORT}, "spec": spec})
    cluster_queues = [f"cq{i}" for i in range(draw(st.integers(1, 4)))]
    for name in cluster_queues:
        cohort = draw(st.sampled_from([None, *COHORTS]))
        spec = {
            "namespaceSelector": {},
            "queueingStrategy": draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
            "resourceGroups": draw(resource_groups(flavors, limits=cohort is not None, cohort=False)),
        }
        if draw(st.booleans()):
            spec["preemption"] = draw(preemption_policies())
            spec["flavorFungibility"] = {"whenCanPreempt": draw(st.sampled_from(["TryNextFlavor", "MayStopSearch"]))}
        if draw(st.booleans()):
            spec["fairSharing"] = {"weight": draw(st.sampled_from(["0", "1", "2", "500m"]))}
        if cohort is not None:
            spec["cohortName"] = cohort
        if draw(st.integers(0, 3)) == 0:  # an admission check, on every flavor or on some
            on_flavors = draw(st.lists(st.sampled_from(flavors), max_size=2, unique=True))
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK, "onFlavors": on_flavors}]}
        objects.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    for name in cluster_queues:
        objects.append(
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": f"lq-{name}", "namespace": NAMESPACE},
                "spec": {"clusterQueue": name},
            }
        )
    if draw(st.booleans()):
        strategies = draw(
            st.sampled_from(
                [
                    ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
                    ["LessThanOrEqualToFinalShare"],
                    ["LessThanInitialShare"],
                ]
            )
        )
        objects.insert(
            0, {"apiVersion": CONFIG_API, "kind": "Configuration", "fairSharing": {"preemptionStrategies": strategies}}
        )
    if any("admissionChecksStrategy" in o.get("spec", {}) for o in objects):
        objects.append(
            {
                "apiVersion": API,
                "kind": "AdmissionCheck",
                "metadata": {"name": CHECK},
                "spec": {"controllerName": "x/y"},
                "status": {"conditions": [{"type": "Active", "status": "True"}]},
            }
        )
    count = draw(st.integers(1, 15))
    uids = draw(st.lists(st.integers(0, 99), min_size=count, max_size=count, unique=True))
    pending = [draw(workload_docs(i, uids[i], cluster_queues)) for i in range(count)]
    kinds = st.sampled_from(["finish", "delete", "Ready", "Retry", "Rejected", "wait"])
    events = draw(st.lists(st.tuples(kinds, st.integers(0, count - 1), st.integers(0, 3)), max_size=5))
    pods_ready = draw(st.sampled_from(["auto", "manual"]))
    return {
        "name": "generated",
        "source": "tests/properties (Hypothesis)",
        "podsReady": pods_ready,
        "objects": objects,
        "pending": pending,
        "events": [_event(kind, f"{NAMESPACE}/w{i:02d}", n) for kind, i, n in events],
    }


def _event(kind: str, key: str, n: int) -> dict:
    """One scenario event: a job finishing or deleted, an admission check's new state (Retry
    with a backoff of ``n`` seconds, or none), or 31 minutes passing (PodsReady timeouts)."""
    if kind in ("finish", "delete"):
        return {kind: key}
    if kind == "wait":
        return {"wait": "31m"}
    check: dict[str, Any] = {"workload": key, "name": CHECK, "state": kind}
    if kind == "Retry" and n:
        check["requeueAfterSeconds"] = n
    return {"check": check}


#: libyaml's emitter when PyYAML has it: the same document, written about five times as fast as by the pure-Python one
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def run_doc(doc: dict) -> core_engine.CoreRun:
    """Load ``doc`` as a scenario file would be loaded and run it on the core engine."""
    text = yaml.dump(doc, Dumper=_DUMPER, sort_keys=False)
    note(text)
    return core_engine.run_scenario(parse_scenario(text, path="<generated>"))


# --- an independent model of the quota tree --------------------------------------------------

Node = tuple[str, str]  # ("cq" | "cohort", name)


@dataclass(frozen=True)
class Limits:
    """One node's quota of cpu in one flavor, in millicores (None: no limit)."""

    nominal: int
    borrowing: int | None
    lending: int | None


@dataclass
class Tree:
    """Cohort tree and quotas read straight from the scenario manifests (not from kueue_es.projections.quota)."""

    parent: dict[Node, Node | None] = field(default_factory=dict)
    quotas: dict[Node, dict[str, Limits]] = field(default_factory=dict)
    local_queue_cq: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_doc(cls, doc: dict) -> Tree:
        """Parents, quotas (cpu, millicores) and LocalQueue targets of ``doc``'s objects."""
        tree = cls()
        for obj in doc["objects"]:
            if obj["kind"] == "Configuration":
                continue
            kind, name, spec = obj["kind"], obj["metadata"]["name"], obj.get("spec") or {}
            if kind == "LocalQueue":
                tree.local_queue_cq[name] = spec["clusterQueue"]
                continue
            if kind not in ("ClusterQueue", "Cohort"):
                continue
            node: Node = ("cq" if kind == "ClusterQueue" else "cohort", name)
            up = spec.get("cohortName") if kind == "ClusterQueue" else spec.get("parentName")
            tree.parent[node] = ("cohort", up) if up else None
            if up:
                tree.parent.setdefault(("cohort", up), None)  # implicit until its object says otherwise
            tree.quotas[node] = {
                f["name"]: Limits(
                    nominal=r["nominalQuota"] * MILLI,
                    borrowing=None if r.get("borrowingLimit") is None else r["borrowingLimit"] * MILLI,
                    lending=None if r.get("lendingLimit") is None else r["lendingLimit"] * MILLI,
                )
                for group in spec.get("resourceGroups") or []
                for f in group["flavors"]
                for r in f["resources"]
            }
        return tree

    def cluster_queues(self) -> list[str]:
        """Every ClusterQueue name."""
        return sorted(name for kind, name in self.parent if kind == "cq")

    def root(self, node: Node) -> Node:
        """The root of ``node``'s tree (no cycles by construction)."""
        while self.parent[node] is not None:
            node = self.parent[node]  # type: ignore[assignment]
        return node

    def subtree(self, node: Node) -> list[Node]:
        """``node`` and every node under it."""
        return [n for n in self.parent if self._under(n, node)]

    def _under(self, node: Node, ancestor: Node) -> bool:
        current: Node | None = node
        while current is not None:
            if current == ancestor:
                return True
            current = self.parent[current]
        return False

    def limits(self, node: Node, flavor: str) -> Limits | None:
        """``node``'s declared quota of cpu in ``flavor`` (None: not declared)."""
        return self.quotas.get(node, {}).get(flavor)

    def nominal_sum(self, nodes: list[Node], flavor: str) -> int:
        """Total nominal quota of ``nodes`` in ``flavor``: all the capacity that exists there."""
        return sum(q.nominal for n in nodes if (q := self.limits(n, flavor)) is not None)

    def used(self, nodes: list[Node], usage: dict[str, dict[str, int]], flavor: str) -> int:
        """What the ClusterQueues among ``nodes`` hold in ``flavor``."""
        return sum(usage[name].get(flavor, 0) for kind, name in nodes if kind == "cq")


def quota_violations(tree: Tree, usage: dict[str, dict[str, int]], potential: dict[tuple[str, str], int]) -> list[str]:
    """Every way ``usage`` (cq -> flavor -> millicores) breaks the quota rules of SEMANTICS §6.

    (a) a ClusterQueue without a cohort holds at most its nominal quota; one with a
        borrowingLimit at most nominal + borrowingLimit; none more than its potential
        capacity (``potential``, from kueue_es.projections.quota), and none in an undeclared flavor;
    (b) the ClusterQueues of a tree hold at most the tree's total nominal quota; a
        cohort with a borrowingLimit holds at most its subtree's nominal + the limit;
    (c) the ClusterQueues outside a node's subtree take at most ``lendingLimit`` of the
        quota inside it: they hold at most (tree total - subtree total) + lendingLimit.
    """
    problems = []
    for flavor in FLAVORS:
        for cq in tree.cluster_queues():
            node: Node = ("cq", cq)
            held = usage[cq].get(flavor, 0)
            limits = tree.limits(node, flavor)
            if limits is None:
                if held:
                    problems.append(f"{cq} holds {held}m of {flavor}, which it does not declare")
                continue
            if tree.parent[node] is None and held > limits.nominal:
                problems.append(f"{cq} (no cohort) holds {held}m of {flavor} > nominal {limits.nominal}m")
            if limits.borrowing is not None and held > limits.nominal + limits.borrowing:
                problems.append(
                    f"{cq} holds {held}m of {flavor} > nominal {limits.nominal}m + borrowingLimit {limits.borrowing}m"
                )
            if held > potential[(cq, flavor)]:
                problems.append(f"{cq} holds {held}m of {flavor} > potential capacity {potential[(cq, flavor)]}m")
        for node in tree.parent:
            root = tree.root(node)
            inside, everything = tree.subtree(node), tree.subtree(root)
            if node == root:
                held, total = tree.used(everything, usage, flavor), tree.nominal_sum(everything, flavor)
                if held > total:
                    problems.append(f"tree {node[1]} holds {held}m of {flavor} > its total nominal {total}m")
            limits = tree.limits(node, flavor)
            if limits is None or node[0] != "cohort":
                pass
            elif limits.borrowing is not None:
                held, own = tree.used(inside, usage, flavor), tree.nominal_sum(inside, flavor)
                if held > own + limits.borrowing:
                    problems.append(
                        f"cohort {node[1]} subtree holds {held}m of {flavor} > "
                        f"its nominal {own}m + borrowingLimit {limits.borrowing}m"
                    )
            if limits is not None and limits.lending is not None:
                others = tree.used(everything, usage, flavor) - tree.used(inside, usage, flavor)
                room = tree.nominal_sum(everything, flavor) - tree.nominal_sum(inside, flavor) + limits.lending
                if others > room:
                    problems.append(
                        f"outside {node[0]} {node[1]}, {others}m of {flavor} is held > quota outside + "
                        f"lendingLimit = {room}m"
                    )
    return problems


def potential_capacity(state: ClusterState, tree: Tree) -> dict[tuple[str, str], int]:
    """potential_available per (cq, flavor) from kueue_es.projections.quota (usage-independent)."""
    built = quota.build(state)
    return {
        (cq, flavor): built.potential_available(cq, (flavor, "cpu")) if built.declares(cq, (flavor, "cpu")) else 0
        for cq in tree.cluster_queues()
        for flavor in FLAVORS
    }


def _pod_sets(doc: dict) -> dict[str, dict[str, dict]]:
    return {w["metadata"]["name"]: {ps["name"]: ps for ps in w["spec"]["podSets"]} for w in doc["pending"]}


def _cpu(pod_set: dict) -> int:
    return int(pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]) * MILLI


def reservation_problems(doc: dict, tree: Tree, event: types.QuotaReserved) -> list[str]:
    """Whether a reservation is in the workload's ClusterQueue and matches its pod sets."""
    workload = next(w for w in doc["pending"] if w["metadata"]["name"] == event.workload.name)
    expected_cq = tree.local_queue_cq[workload["spec"]["queueName"]]
    problems = []
    if event.cluster_queue != expected_cq:
        problems.append(f"{event.workload.key} reserved in {event.cluster_queue}, its queue feeds {expected_cq}")
    pod_sets = _pod_sets(doc)[event.workload.name]
    if sorted(a.name for a in event.pod_set_assignments) != sorted(pod_sets):
        problems.append(f"{event.workload.key}: assignments {event.pod_set_assignments} do not cover its pod sets")
    for a in event.pod_set_assignments:
        ps = pod_sets.get(a.name)
        if ps is None:
            continue
        if not (ps.get("minCount", ps["count"]) <= a.count <= ps["count"]):
            problems.append(f"{event.workload.key}/{a.name}: count {a.count} outside [minCount, count]")
        if a.resource_usage.get("cpu") != a.count * _cpu(ps):
            problems.append(f"{event.workload.key}/{a.name}: usage {a.resource_usage} != {a.count} x {_cpu(ps)}m")
    return problems


# --- properties ------------------------------------------------------------------------------


@SETTINGS
@given(doc=scenario_docs())
def test_quota_never_overused(doc: dict) -> None:
    """After every committed decision batch, recomputed usage respects nominal, borrowing and
    lending limits and the cohort trees' total quota (SEMANTICS §6), and every reservation is
    well-formed: the workload's own ClusterQueue, counts within [minCount, count], usage =
    count x request, never for a workload already finished or deleted, never twice at once."""
    run = run_doc(doc)
    tree = Tree.from_doc(doc)
    potential = potential_capacity(run.state, tree)
    usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    held: dict[str, types.QuotaReserved] = {}
    gone: set[str] = set()
    batch_end = -1
    # a record's finished releases (admitter logic 15) right after it, as the fold takes them
    for seq, event in ((seq, one) for seq, logged in run.log for one in with_releases(logged)):
        if isinstance(event, types.WorkloadAdmitted) and types.reserves(event, event.workload.key in held):
            event = types.reservation_of(event)  # reserved and admitted by one message (docs/events.md)
        match event:
            case types.DecisionRecord():
                batch_end = seq + event.output_count
            case types.WorkloadFinished(workload=ref):
                gone.add(ref.key)
            case types.ObjectDeleted(kind="Workload"):
                gone.add(f"{event.namespace}/{event.name}")
            case types.QuotaReserved(workload=ref):
                assert ref.key not in held, f"seq {seq}: {ref.key} reserved twice"
                assert ref.key not in gone, f"seq {seq}: {ref.key} reserved after it finished or was deleted"
                assert not reservation_problems(doc, tree, event), reservation_problems(doc, tree, event)
                held[ref.key] = event
                for a in event.pod_set_assignments:
                    for resource, amount in a.resource_usage.items():
                        usage[event.cluster_queue][a.flavors[resource]] += amount
            case types.QuotaReleased(workload=ref):
                assert ref.key in held, f"seq {seq}: {ref.key} released without a reservation"
                reserved = held.pop(ref.key)
                assert reserved.cluster_queue == event.cluster_queue, f"seq {seq}: released from the wrong queue"
                for a in reserved.pod_set_assignments:
                    for resource, amount in a.resource_usage.items():
                        usage[reserved.cluster_queue][a.flavors[resource]] -= amount
        if seq == batch_end:
            problems = quota_violations(tree, usage, potential)
            assert not problems, f"after the batch ending at seq {seq}: " + "; ".join(problems)
    mine = {cq: {f: {"cpu": v} for f, v in per.items() if v} for cq, per in usage.items()}
    assert _ledger(run.state) == {cq: per for cq, per in mine.items() if per}, "the fold's ledger differs"


def _log_bytes(run: core_engine.CoreRun) -> list[tuple[int, str, bytes, dict[str, str]]]:
    return [(m.seq, m.subject, m.data, dict(m.headers)) for m in run.messages]


@pytest.mark.slow  # the README's run keeps the quota, loop and settling properties
@SETTINGS
@given(doc=scenario_docs())
def test_runs_are_deterministic(doc: dict) -> None:
    """The same scenario run twice in one process gives the same log, byte for byte
    (sequence, subject, payload and headers, Msg-Ids included)."""
    assert _log_bytes(run_doc(doc)) == _log_bytes(run_doc(doc))


DIGEST_SCRIPT = """
import hashlib, logging, sys
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
from kueue_es.scenarios import core_engine, load_scenario
for path in sys.argv[1:]:
    run = core_engine.run_scenario(load_scenario(path))
    digest = hashlib.sha256()
    for m in run.messages:
        digest.update(m.subject.encode() + b"\\0" + m.data + b"\\n")
    print("DIGEST", path, digest.hexdigest())
"""


def _digest(run: core_engine.CoreRun) -> str:
    digest = hashlib.sha256()
    for m in run.messages:
        digest.update(m.subject.encode() + b"\0" + m.data + b"\n")
    return digest.hexdigest()


def _subprocess_digests(paths: list[str], hash_seed: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-c", DIGEST_SCRIPT, *paths],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith("DIGEST ")]
    return {path: digest for _, path, digest in lines}


@pytest.mark.slow
@settings(
    max_examples=2,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(docs=st.lists(scenario_docs(), min_size=4, max_size=4))
def test_runs_are_deterministic_across_hash_seeds(docs: list[dict]) -> None:
    """A few generated scenarios, written as files and run in two fresh interpreters with
    PYTHONHASHSEED=1 and =2, give the same log digest as each other and as this process
    (no set or dict order leaks into decisions)."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, doc in enumerate(docs):
            path = Path(tmp) / f"generated-{i}.yaml"
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
            paths.append(str(path))
        here = {p: _digest(run_doc(doc)) for p, doc in zip(paths, docs, strict=True)}
        first = _subprocess_digests(paths, "1")
        second = _subprocess_digests(paths, "2")
    assert first == here
    assert second == here


def _fold(log: list[tuple[int, types.Event]], *, passes: int = 1, each: int = 1) -> ClusterState:
    """Fold ``log`` as every service does: a DecisionRecord's finished releases (admitter logic 15) right after
    it, as the batch verifier folds them (``types.with_carried``); ``passes`` times over, each message ``each``
    times in a row."""
    state = ClusterState()
    for _ in range(passes):
        for seq, event in log:
            for _ in range(each):
                for one in with_releases(event):  # its carried decisions are the log's next entries
                    apply(state, one, seq=seq)
    return state


def _ledger(state: ClusterState) -> dict[str, dict[str, dict[str, int]]]:
    return {
        cq: {f: {r: v for r, v in res.items() if v} for f, res in per.items() if any(res.values())}
        for cq, per in state.usage.items()
        if any(any(res.values()) for res in per.values())
    }


def _reservations(state: ClusterState) -> dict[str, tuple[types.QuotaReserved | None, bool, bool]]:
    return {
        key: (wl.reservation, wl.admitted, wl.gone) for key, wl in state.workloads.items() if wl.reservation is not None
    }


@pytest.mark.slow  # the README's run keeps the quota, loop and settling properties
@SETTINGS
@given(doc=scenario_docs())
def test_folding_twice_changes_nothing(doc: dict) -> None:
    """Folding a run's log twice into one ClusterState (the whole log again after the first
    pass), or every event twice in a row, leaves the same usage ledger, the same
    reservations (with admitted / gone flags) and the same workloads as folding it once,
    and every decider decides the same on both states: facts are snapshots and a decision
    seen again must not double usage."""
    log = run_doc(doc).log
    once = _fold(log)
    now_ms = max((e.now_ms for _, e in log if isinstance(e, types.DecisionRecord)), default=0) + 1_000
    for twice in (_fold(log, passes=2), _fold(log, each=2)):
        assert _ledger(twice) == _ledger(once)
        assert _reservations(twice) == _reservations(once)
        assert sorted(twice.workloads) == sorted(once.workloads)
        for decider in deciders.BY_ROLE.values():  # the run settled: nothing left to decide either way
            assert decider.decide(twice, now_ms=now_ms) == decider.decide(once, now_ms=now_ms), decider.role


@pytest.mark.slow  # the README's run keeps the quota, loop and settling properties
@SETTINGS
@given(doc=scenario_docs())
def test_every_decision_replays(doc: dict) -> None:
    """kueue_es.replay.check_log re-runs every recorded decision at its basis and gets the
    same bytes: no mismatch, nothing skipped (generated runs have no seed records)."""
    run = run_doc(doc)
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.ok, report.mismatches[0]
    assert report.skipped == 0
    assert report.matched == report.decisions


@SETTINGS
@given(doc=scenario_docs())
def test_preemption_never_loops(doc: dict) -> None:
    """No preemption loop (issue 4): every phase settles, no workload is evicted more often
    than the preemption budget allows, and once settled, more cycles change nothing (no
    eviction keeps going once arrivals stop)."""
    run = run_doc(doc)
    evictions: dict[str, int] = defaultdict(int)
    for _, event in run.log:
        if isinstance(event, types.EvictionRequested) and event.reason == "Preempted":
            evictions[event.workload.key] += 1
    assert all(n <= targets.PREEMPTION_BUDGET for n in evictions.values()), dict(evictions)
    # The next cycle's time: later, PodsReady timeouts of jobs that never get ready may fire.
    now_ms = max(e.now_ms for _, e in run.log if isinstance(e, types.DecisionRecord)) + 1000
    for decider in deciders.BY_ROLE.values():
        assert decider.decide(run.state, now_ms=now_ms) == [], decider.role


@SETTINGS
@given(doc=scenario_docs())
def test_runs_settle_with_a_consistent_outcome(doc: dict) -> None:
    """Every generated scenario settles (no RunError) and its outcome puts each submitted
    workload in exactly one of admitted / reserved / pending / finished / deleted."""
    run = run_doc(doc)
    outcome = run.outcome()
    admitted, reserved, pending = set(outcome.admitted), set(outcome.reserved), set(outcome.pending)
    finished, deleted = set(outcome.finished), set(outcome.deleted)
    assert not admitted & pending, f"both admitted and pending: {sorted(admitted & pending)}"
    assert not reserved & (admitted | pending)
    assert not (admitted | reserved | pending) & (finished | deleted)
    assert not finished & deleted
    assert admitted | reserved | pending | finished | deleted == set(run.scenario.submitted)
