"""Scenario YAML files (shared/scenarios/README.md) to :class:`~kueue_es.scenarios.specs.Scenario`.

Everything is checked here, before any engine starts: a file that does not parse,
an unknown top-level key, a manifest that does not convert (the same
:func:`kueue_es.events.manifests.parse_object` the watcher uses), an unknown event kind, or
an ``expect`` of the wrong shape raises :class:`ScenarioError` naming the file and
the problem (``objects[2]: ClusterQueue cq: field spec.x: ...``).

Two top-level keys beyond the README, for test suites:

- ``xfail: "<reason>"``: the scenario is known to fail for that reason (pytest
  marks it ``xfail(strict=True)``; ``scenario check`` reports XFAIL/XPASS);
- ``engines: [core]``: run only on these engines (default: every engine).

A v1 LimitRange (in ``objects`` or an ``apply``/``delete`` event) is no fact of its own: as the watcher
does for a Workload made by hand, the Workloads of its namespace that follow it in the file are counted and
checked against it (:func:`kueue_es.services.watcher.convert.adjusted`), and an event that applies or deletes
one carries the namespace's Workloads checked anew (``refreshed``).

and one event kind beyond it: ``{decide: admit|preempt|place}``, one decider alone takes a step
(:class:`~kueue_es.scenarios.specs.DecideEvent`), for the moments between two deciders.

Topology, v1 Node and v1 Pod objects become TopologyObserved / NodeObserved / PodObserved
facts (:func:`kueue_es.events.tas.tas_fact`; resource.k8s.io/v1 DeviceClass and ResourceClaimTemplate
objects become DeviceClassObserved / ResourceClaimTemplateObserved, :func:`kueue_es.events.dra.dra_fact`; a TAS pod, one with a topology annotation, gives no fact and
is kept in ``Scenario.ignored_objects``); an ``expect`` that relies on a topology assignment (a
pod set's ``topology``) is checked at check time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import msgspec
import yaml

from kueue_es.events import dra, manager_config, manifests, models, tas, types
from kueue_es.events.quantities import QuantityError, to_amount
from kueue_es.projections import afs
from kueue_es.scenarios.specs import (
    ENGINE_NAMES,
    AdmittedWorkload,
    ApplyEvent,
    CheckEvent,
    DecideEvent,
    DeleteEvent,
    Expect,
    FinishEvent,
    PodsReadyEvent,
    RemoteEvent,
    RunSpec,
    Scenario,
    ScenarioEvent,
    ScenarioObject,
    WaitEvent,
    WorkerEvent,
)
from kueue_es.services.watcher.convert import adjusted, kueue_fact

TOP_LEVEL_KEYS = (
    "name", "source", "description", "objects", "admitted", "pending", "events", "run", "expect", "xfail", "engines",
    "podsReady",
)  # fmt: skip
EVENT_KINDS = ("finish", "delete", "apply", "check", "podsReady", "wait", "decide", "remote", "worker")
DECIDER_ROLES = ("admit", "preempt", "place", "multikueue")
"""The roles a ``decide`` event may name (the services' deciders, kueue_es.deciders.BY_ROLE)."""
CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")
REMOTE_STATES = ("QuotaReserved", "Admitted", "Evicted", "Finished", "Gone")
TAS_KINDS = frozenset(
    {
        ("v1", "Node"),
        ("v1", "Pod"),
        (manifests.KUEUE_API, "Topology"),
        ("kueue.x-k8s.io/v1alpha1", "Topology"),
    }
)
"""(apiVersion, kind) of the TAS inputs, turned into facts by :func:`kueue_es.events.tas.tas_fact`."""
IGNORED_KINDS: frozenset[tuple[str, str]] = frozenset()
"""(apiVersion, kind) accepted but not modelled yet: kept out of the fact stream."""
MODELLED_KINDS = frozenset(
    {*manifests.KUEUE_KINDS, "Namespace", "Configuration", *(k for _, k in TAS_KINDS), *(k for _, k in dra.DRA_KINDS)}
)
LIMIT_RANGE = ("v1", "LimitRange")
"""(apiVersion, kind) of a LimitRange: it changes the Workloads of its namespace (:class:`_LimitRanges`)."""
_KEY = re.compile(r"^[^/\s]+/[^/\s]+$")


class ScenarioError(Exception):
    """A scenario file that cannot be run: ``file`` and ``problem`` say where and what."""

    def __init__(self, file: str | Path, problem: str) -> None:
        self.file, self.problem = str(file), problem
        super().__init__(f"{file}: {problem}")


class _Problem(Exception):
    """A problem inside the file; :func:`load_scenario` adds the file name."""


def find_scenario_files(paths: Iterable[str | Path]) -> list[Path]:
    """The scenario files named by ``paths``: a file as is, a directory's ``*.yaml`` recursively, sorted.

    Raises ScenarioError for a path that does not exist.
    """
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.yaml") if p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise ScenarioError(path, "no such file or directory")
    return found


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate one scenario file; raises ScenarioError naming ``path`` and the problem."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(path, f"cannot read the file: {err}") from err
    return parse_scenario(text, path=str(path))


#: libyaml's parser when PyYAML was built with it: the same documents as the pure-Python SafeLoader (the same
#: constructor) about seven times as fast, which is most of a generated scenario's run and of collecting the suite
#: (every scenario file is read). A file it refuses is read again by the pure-Python loader, whose messages say where.
_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_scenario(text: str, *, path: str = "<scenario>") -> Scenario:
    """Parse scenario YAML ``text`` (``path`` names it in messages); raises ScenarioError."""
    try:
        doc = yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ScenarioError(path, _yaml_problem(err)) from err
    try:
        return _scenario(doc, path=path)
    except _Problem as err:
        raise ScenarioError(path, str(err)) from err


def _yaml_problem(err: yaml.YAMLError) -> str:
    """One line: where the YAML breaks and why, with a hint for the most common slip."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None)
    if mark is None or problem is None:
        return f"is not valid YAML: {err}"
    text = f"is not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    if problem == "mapping values are not allowed here":
        text += " (quote a plain value that contains ': ')"
    return text


class _LimitRanges:
    """The scenario's LimitRanges as the file has them so far, and the last fact of each Workload: what the
    watcher keeps to count and check a Workload made by hand (:mod:`kueue_es.services.watcher.standalone`)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], list[Any]] = {}  # (namespace, name) -> its spec.limits
        self.workloads: dict[str, tuple[dict[str, Any], types.WorkloadObserved]] = {}  # key -> manifest, fact

    def observed(self, fact: types.Fact, raw: dict[str, Any], *, where: str) -> types.Fact:
        """A Workload's fact as the watcher publishes it: counted and checked against its namespace's
        LimitRanges; remembered, so a LimitRange applied later checks it again."""
        if not isinstance(fact, types.WorkloadObserved):
            return fact
        fact = self._checked(fact, raw, where=where)
        self.workloads[fact.workload.key] = (raw, fact)
        return fact

    def changed(self, namespace: str, name: str, limits: list[Any] | None, *, where: str) -> tuple[types.Fact, ...]:
        """LimitRange ``namespace/name`` applied with ``limits`` (None: deleted): the facts of the namespace's
        Workloads that it changes, checked anew (the watcher publishes only a fact that changes)."""
        if limits is None:
            self.items.pop((namespace, name), None)
        else:
            self.items[(namespace, name)] = limits
        out: list[types.Fact] = []
        for key, (raw, before) in sorted(self.workloads.items()):
            if before.workload.metadata.namespace != namespace:
                continue
            fact = self._checked(before, raw, where=where)
            if fact != before:
                self.workloads[key] = (raw, fact)
                out.append(fact)
        return tuple(out)

    def forget(self, key: str) -> None:
        """A Workload deleted or finished: a LimitRange changes it no more."""
        self.workloads.pop(key, None)

    def _checked(self, fact: types.WorkloadObserved, raw: dict[str, Any], *, where: str) -> types.WorkloadObserved:
        namespace = fact.workload.metadata.namespace
        limits = [item for (ns, _), items in sorted(self.items.items()) if ns == namespace for item in items]
        base = kueue_fact(raw)  # the pod sets as the object writes them: the LimitRanges apply to those
        assert isinstance(base, types.WorkloadObserved)
        spec = msgspec.structs.replace(fact.workload.spec, pod_sets=base.workload.spec.pod_sets)
        fact = msgspec.structs.replace(fact, workload=msgspec.structs.replace(fact.workload, spec=spec))
        checked = adjusted(fact, raw, runtime_classes={}, limit_ranges=limits)
        if isinstance(checked, types.ObjectRejected):
            raise _Problem(f"{where}: Workload {checked.namespace}/{checked.name}: {checked.field}: {checked.problem}")
        assert isinstance(checked, types.WorkloadObserved)
        return checked


def _limit_range(raw: dict[str, Any], *, where: str) -> tuple[str, str, list[Any]]:
    """``(namespace, name, spec.limits)`` of a v1 LimitRange manifest; _Problem naming the field when it is not
    one (namespace ``default`` when it has none)."""
    meta = raw.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise _Problem(f"{where}: LimitRange <unnamed>: field metadata.name: is required")
    name, namespace = meta["name"], meta.get("namespace") or "default"
    spec = raw.get("spec")
    limits = spec.get("limits") if isinstance(spec, dict) else None
    if not isinstance(limits, list) or not all(isinstance(item, dict) for item in limits):
        raise _Problem(f"{where}: LimitRange {namespace}/{name}: field spec.limits: must be a list of mappings")
    return str(namespace), name, limits


def _scenario(doc: Any, *, path: str) -> Scenario:
    if not isinstance(doc, dict):
        raise _Problem("must be a mapping with name, objects, pending, expect (see shared/scenarios/README.md)")
    unknown = [str(k) for k in doc if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise _Problem(f"unknown top-level key {', '.join(unknown)} (known: {', '.join(TOP_LEVEL_KEYS)})")
    ranges = _LimitRanges()
    objects = tuple(_object(raw, where=f"objects[{i}]", ranges=ranges) for i, raw in enumerate(_list(doc, "objects")))
    admitted = tuple(
        _admitted(raw, where=f"admitted[{i}]", ranges=ranges) for i, raw in enumerate(_list(doc, "admitted"))
    )
    pending = tuple(
        _workload_object(raw, where=f"pending[{i}]", ranges=ranges) for i, raw in enumerate(_list(doc, "pending"))
    )
    known = {o.workload.key for o in (*objects, *pending, *(a.workload for a in admitted)) if o.workload}
    events = tuple(
        _event(raw, where=f"events[{i}]", known=known, ranges=ranges) for i, raw in enumerate(_list(doc, "events"))
    )
    return Scenario(
        path=path,
        name=_text(doc, "name", required=True),
        source=_text(doc, "source"),
        description=_text(doc, "description"),
        objects=objects,
        admitted=admitted,
        pending=pending,
        events=events,
        run=_run(doc.get("run")),
        expect=_expect(doc.get("expect")),
        xfail=_text(doc, "xfail") or None,
        engines=_engines(doc.get("engines")),
        pods_ready=_pods_ready_mode(doc.get("podsReady")),
    )


def _pods_ready_mode(value: Any) -> str:
    if value is None:
        return "auto"
    if value not in ("auto", "manual"):
        raise _Problem(f"podsReady: must be auto (reported when admitted) or manual (podsReady events), got {value!r}")
    return str(value)


def _text(doc: dict[str, Any], key: str, *, required: bool = False) -> str:
    value = doc.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise _Problem(f"{key}: must be a non-empty string")
    return value


def _list(doc: dict[str, Any], key: str) -> list[Any]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Problem(f"{key}: must be a list")
    return value


def _mapping(value: Any, *, where: str, allowed: Iterable[str], required: Iterable[str] = ()) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Problem(f"{where}: must be a mapping")
    allowed = tuple(allowed)
    unknown = [str(k) for k in value if k not in allowed]
    if unknown:
        raise _Problem(f"{where}: unknown key {', '.join(unknown)} (known: {', '.join(allowed)})")
    missing = [k for k in required if value.get(k) is None]
    if missing:
        raise _Problem(f"{where}: {', '.join(missing)} is required")
    return value


def _object(raw: Any, *, where: str, ranges: _LimitRanges | None = None) -> ScenarioObject:
    """A manifest: parsed into its fact, or kept as an ignored object of a kind not modelled yet. A LimitRange
    gives no fact (``ranges`` keeps it); a Workload's is checked against the LimitRanges so far."""
    if not isinstance(raw, dict):
        raise _Problem(f"{where}: must be a manifest (a mapping)")
    kind, name = manifests.describe(raw)
    if (raw.get("apiVersion"), kind) == LIMIT_RANGE:
        namespace, name, limits = _limit_range(raw, where=where)
        if ranges is not None:
            ranges.changed(namespace, name, limits, where=where)
        return ScenarioObject(manifest=raw, fact=None)
    if (raw.get("apiVersion"), kind) in IGNORED_KINDS:
        if not name:
            raise _Problem(f"{where}: {kind} <unnamed>: field metadata.name: is required")
        return ScenarioObject(manifest=raw, fact=None)
    if (raw.get("apiVersion"), kind) in TAS_KINDS:
        try:
            return ScenarioObject(manifest=raw, fact=tas.tas_fact(raw))
        except manifests.ManifestError as err:
            raise _Problem(f"{where}: {err}") from err
    if (raw.get("apiVersion"), kind) in dra.DRA_KINDS:
        try:
            return ScenarioObject(manifest=raw, fact=dra.dra_fact(raw))
        except manifests.ManifestError as err:
            raise _Problem(f"{where}: {err}") from err
    try:
        manifests.parse_object(raw)
        gates = raw.get("featureGates") if kind == "Configuration" else None
        problem = (
            manager_config.unknown_feature_gate_problem(gates) or manager_config.feature_gate_problem(gates)
            if isinstance(gates, dict)
            else None
        )
        if problem is not None:  # as the watcher refuses the file (the cluster engine's --config)
            raise _Problem(f"{where}: featureGates: {problem}")
        if kind == "Configuration":
            _complete_fair_sharing(raw)
            # held to the watcher's checks of the file (the cluster engine's --config)
            config = manager_config.parse(json.dumps(raw), source=where).configuration
            if _has_sources(raw):  # what only the manager's own parsing reads
                return ScenarioObject(manifest=raw, fact=types.ConfigurationObserved(configuration=config))
    except manifests.ManifestError as err:
        raise _Problem(f"{where}: {err}") from err
    fact = kueue_fact(raw)
    if isinstance(fact, types.ObjectRejected):  # parse_object passed, so this is a converter bug
        raise _Problem(f"{where}: {kind} {name}: {fact.problem}")
    if isinstance(fact, types.WorkloadObserved):
        fact = _with_owner(fact, raw, where=where)
        if ranges is not None:
            fact = ranges.observed(fact, raw, where=where)
    return ScenarioObject(manifest=raw, fact=fact)


#: The preemption strategies a scenario's ``fairSharing`` without any gets: Kueue's defaults for fair sharing
#: turned on (v1beta1 ``enable: true``; a v1beta2 manager file must name them, and the watcher refuses one that
#: does not). Scenarios written from Kueue's tests often give ``fairSharing: {}`` to mean "fair sharing on".
SCENARIO_FAIR_SHARING_STRATEGIES: Final = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


def _complete_fair_sharing(raw: dict[str, Any]) -> None:
    """Give a scenario Configuration's ``fairSharing`` that names no ``preemptionStrategies`` Kueue's default
    strategies (:data:`SCENARIO_FAIR_SHARING_STRATEGIES`), in place, so every engine runs it with fair sharing
    on, the cluster engine's watcher reading the completed file."""
    fair = raw.get("fairSharing")
    if isinstance(fair, dict) and not fair.get("preemptionStrategies"):
        fair["preemptionStrategies"] = list(SCENARIO_FAIR_SHARING_STRATEGIES)


def _has_sources(raw: dict[str, Any]) -> bool:
    """Whether a Configuration manifest's ``resources.deviceClassMappings`` name ``sources`` (DRA counters)."""
    mappings = ((raw.get("resources") or {}).get("deviceClassMappings") or []) if isinstance(raw, dict) else []
    return any(isinstance(m, dict) and m.get("sources") for m in mappings)


def _with_owner(fact: types.WorkloadObserved, raw: dict[str, Any], *, where: str) -> types.WorkloadObserved:
    """A Workload with a controller ``metadata.ownerReferences`` entry stands for that job (ours: the job
    a scenario has no object for, e.g. a batch/v1 Job for MultiKueue's adapters, SEMANTICS-ADVANCED E.2); one owned
    by a kueue.x-k8s.io Workload is a ConcurrentAdmission variant, standalone as the watcher publishes it (its parent
    in the annotation ``kueue-es.dev/variant-of``, :func:`kueue_es.services.watcher.convert.variant_marked`)."""
    owners = (raw.get("metadata") or {}).get("ownerReferences") or []
    controller = [o for o in owners if isinstance(o, dict) and o.get("controller")]
    if not controller or str(controller[0].get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
        return fact
    try:
        owner = msgspec.convert(controller[0], models.OwnerReference, str_keys=True)
    except msgspec.ValidationError as err:
        raise _Problem(f"{where}.metadata.ownerReferences: {err}") from None
    return types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, owner=owner))


def _workload_object(raw: Any, *, where: str, ranges: _LimitRanges | None = None) -> ScenarioObject:
    if isinstance(raw, dict) and raw.get("kind") != "Workload":
        raise _Problem(f"{where}: must be a kueue.x-k8s.io/v1beta2 Workload, got kind {raw.get('kind')!r}")
    return _object(raw, where=where, ranges=ranges)


def _admitted(raw: Any, *, where: str, ranges: _LimitRanges | None = None) -> AdmittedWorkload:
    """An ``admitted:`` entry: the workload and the podSetAssignments it holds."""
    entry = _mapping(raw, where=where, allowed=("workload", "admission"), required=("workload", "admission"))
    obj = _workload_object(entry["workload"], where=f"{where}.workload", ranges=ranges)
    workload = obj.workload
    assert workload is not None
    admission = _mapping(
        entry["admission"],
        where=f"{where}.admission",
        allowed=("clusterQueue", "podSetAssignments"),
        required=("clusterQueue", "podSetAssignments"),
    )
    if not isinstance(admission["clusterQueue"], str):
        raise _Problem(f"{where}.admission.clusterQueue: must be a string")
    raw_psas = admission["podSetAssignments"]
    if not isinstance(raw_psas, list) or not raw_psas:
        raise _Problem(f"{where}.admission.podSetAssignments: must be a non-empty list")
    pod_sets = {ps.name: ps for ps in workload.spec.pod_sets}
    assignments = []
    for i, raw_psa in enumerate(raw_psas):
        psa_where = f"{where}.admission.podSetAssignments[{i}]"
        psa = _mapping(raw_psa, where=psa_where, allowed=("name", "flavors", "count", "resourceUsage"))
        name = psa.get("name", "main")
        if name not in pod_sets:
            raise _Problem(f"{psa_where}.name: the workload has no pod set {name!r} (it has {', '.join(pod_sets)})")
        assignments.append(_assignment(psa, pod_set=pod_sets[name], where=psa_where))
    missing = [n for n in pod_sets if n not in {a.name for a in assignments}]
    if missing:
        raise _Problem(f"{where}.admission.podSetAssignments: no assignment for pod set {', '.join(missing)}")
    status = entry["workload"].get("status") or {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    reserved = next((c for c in conditions if c.get("type") == "QuotaReserved"), {})
    evicted = next((c for c in conditions if c.get("type") == "Evicted" and c.get("status") == "True"), None)
    try:
        at_ms = manifests.parse_time_ms(
            reserved.get("lastTransitionTime"), kind="Workload", name=workload.key, field="status.conditions"
        )
        evicted_at_ms = (
            manifests.parse_time_ms(
                evicted.get("lastTransitionTime"), kind="Workload", name=workload.key, field="status.conditions"
            )
            if evicted is not None
            else 0
        )
    except manifests.ManifestError as err:
        raise _Problem(f"{where}.workload: {err}") from err
    reserved_at_ms = at_ms or workload.metadata.creation_timestamp_ms
    eviction = None
    if evicted is not None:
        reason, message = evicted.get("reason") or "Preempted", evicted.get("message") or ""
        if not isinstance(reason, str) or not isinstance(message, str):
            raise _Problem(
                f"{where}.workload.status.conditions: the Evicted condition's reason and message are strings"
            )
        eviction = (reason, message, evicted_at_ms or reserved_at_ms)
    return AdmittedWorkload(
        workload=obj,
        cluster_queue=admission["clusterQueue"],
        pod_set_assignments=tuple(assignments),
        reserved_at_ms=reserved_at_ms,
        eviction=eviction,
    )


def _assignment(psa: dict[str, Any], *, pod_set: Any, where: str) -> types.PodSetAssignment:
    flavors = psa.get("flavors") or {}
    if not isinstance(flavors, dict) or not all(isinstance(v, str) for v in flavors.values()):
        raise _Problem(f"{where}.flavors: must map resource names to flavor names")
    count = psa.get("count", pod_set.count)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise _Problem(f"{where}.count: must be a non-negative integer, got {count!r}")
    given = psa.get("resourceUsage")
    if given is None:
        usage = {res: per_pod * count for res, per_pod in pod_set.requests.items() if per_pod > 0}
    elif isinstance(given, dict):
        try:
            usage = {str(res): to_amount(str(res), q) for res, q in given.items()}
        except QuantityError as err:
            raise _Problem(f"{where}.resourceUsage: {err}") from err
    else:
        raise _Problem(f"{where}.resourceUsage: must map resource names to quantities")
    return types.PodSetAssignment(
        name=pod_set.name,
        flavors={str(k): v for k, v in sorted(flavors.items())},
        resource_usage=dict(sorted(usage.items())),
        count=count,
    )


def _event(raw: Any, *, where: str, known: set[str], ranges: _LimitRanges | None = None) -> ScenarioEvent:
    """One ``events:`` entry; ``known`` (workload keys submitted so far) grows with applies; ``ranges`` follows
    the LimitRanges applied and deleted, and the Workloads they change."""
    ranges = ranges or _LimitRanges()
    if not isinstance(raw, dict) or len(raw) != 1:
        raise _Problem(f"{where}: must be a mapping with one key: {', '.join(EVENT_KINDS)}")
    ((kind, value),) = raw.items()
    match kind:
        case "finish":
            key = _workload_key(value, where=f"{where}.finish", known=known)
            ranges.forget(key)
            return FinishEvent(workload=key)
        case "delete" if isinstance(value, str):
            key = _workload_key(value, where=f"{where}.delete", known=known)
            ranges.forget(key)
            namespace, name = key.split("/")
            return DeleteEvent(kind="Workload", namespace=namespace, name=name)
        case "delete" if isinstance(value, dict) and value.get("kind") == LIMIT_RANGE[1]:
            _mapping(value, where=f"{where}.delete", allowed=("apiVersion", "kind", "name", "namespace"))
            namespace, name = str(value.get("namespace") or "default"), str(value.get("name") or "")
            refreshed = ranges.changed(namespace, name, None, where=f"{where}.delete")
            return DeleteEvent(kind=LIMIT_RANGE[1], namespace=namespace, name=name, modelled=False, refreshed=refreshed)
        case "delete":
            return _delete(value, where=f"{where}.delete")
        case "apply" if isinstance(value, dict) and (value.get("apiVersion"), value.get("kind")) == LIMIT_RANGE:
            namespace, name, limits = _limit_range(value, where=f"{where}.apply")
            refreshed = ranges.changed(namespace, name, limits, where=f"{where}.apply")
            return ApplyEvent(object=ScenarioObject(manifest=value, fact=None), refreshed=refreshed)
        case "apply":
            obj = _object(value, where=f"{where}.apply", ranges=ranges)
            if obj.workload is not None:
                known.add(obj.workload.key)
            return ApplyEvent(object=obj)
        case "check":
            return _check_event(value, where=f"{where}.check", known=known)
        case "podsReady" if isinstance(value, str):
            return PodsReadyEvent(workload=_workload_key(value, where=f"{where}.podsReady", known=known))
        case "podsReady":
            spec = _mapping(value, where=f"{where}.podsReady", allowed=("workload", "ready"), required=("workload",))
            ready = spec.get("ready", True)
            if not isinstance(ready, bool):
                raise _Problem(f"{where}.podsReady.ready: must be true or false")
            key = _workload_key(spec["workload"], where=f"{where}.podsReady.workload", known=known)
            return PodsReadyEvent(workload=key, ready=ready)
        case "wait":
            return WaitEvent(ms=_duration_ms(value, where=f"{where}.wait"))
        case "decide":
            if value not in DECIDER_ROLES:
                raise _Problem(f"{where}.decide: must be one of {', '.join(DECIDER_ROLES)}, got {value!r}")
            return DecideEvent(role=value)
        case "remote":
            return _remote_event(value, where=f"{where}.remote", known=known)
        case "worker":
            spec = _mapping(
                value,
                where=f"{where}.worker",
                allowed=("cluster", "active", "reason", "message"),
                required=("cluster", "active"),
            )
            if not isinstance(spec["active"], bool):
                raise _Problem(f"{where}.worker.active: must be true or false")
            return WorkerEvent(
                cluster=str(spec["cluster"]),
                active=spec["active"],
                reason=str(spec.get("reason", "")),
                message=str(spec.get("message", "")),
            )
    raise _Problem(f"{where}: unknown event kind {kind!r} (use {', '.join(EVENT_KINDS)})")


def _check_event(value: Any, *, where: str, known: set[str]) -> CheckEvent:
    allowed = ("workload", "name", "state", "message", "requeueAfterSeconds", "podSetUpdates")
    spec = _mapping(value, where=where, allowed=allowed, required=("workload", "name", "state"))
    if spec["state"] not in CHECK_STATES:
        raise _Problem(f"{where}.state: must be one of {', '.join(CHECK_STATES)}, got {spec['state']!r}")
    if not isinstance(spec["name"], str) or not spec["name"]:
        raise _Problem(f"{where}.name: must be the AdmissionCheck's name")
    after = spec.get("requeueAfterSeconds")
    if after is not None and (not isinstance(after, int) or isinstance(after, bool) or after < 0):
        raise _Problem(f"{where}.requeueAfterSeconds: must be a non-negative integer")
    message = spec.get("message", "")
    if not isinstance(message, str):
        raise _Problem(f"{where}.message: must be a string")
    try:
        updates = msgspec.convert(spec.get("podSetUpdates") or [], tuple[models.PodSetUpdate, ...], str_keys=True)
    except msgspec.ValidationError as err:
        raise _Problem(f"{where}.podSetUpdates: {err}") from None
    return CheckEvent(
        workload=_workload_key(spec["workload"], where=f"{where}.workload", known=known),
        check=spec["name"],
        state=spec["state"],
        message=message,
        requeue_after_seconds=after,
        pod_set_updates=updates,
    )


def _remote_event(value: Any, *, where: str, known: set[str]) -> RemoteEvent:
    allowed = ("workload", "cluster", "state", "reason", "message", "admittedAgo", "topologyAssigned")
    spec = _mapping(value, where=where, allowed=allowed, required=("workload", "cluster", "state"))
    if spec["state"] not in REMOTE_STATES:
        raise _Problem(f"{where}.state: must be one of {', '.join(REMOTE_STATES)}, got {spec['state']!r}")
    ago = spec.get("admittedAgo")
    if ago is not None and spec["state"] != "Admitted":
        raise _Problem(f"{where}.admittedAgo: only for state Admitted")
    placed = spec.get("topologyAssigned", [])
    if not isinstance(placed, list) or not all(isinstance(name, str) and name for name in placed):
        raise _Problem(f"{where}.topologyAssigned: must be a list of pod set names, got {placed!r}")
    if placed and spec["state"] == "Gone":
        raise _Problem(f"{where}.topologyAssigned: not for state Gone (no copy)")
    return RemoteEvent(
        workload=_workload_key(spec["workload"], where=f"{where}.workload", known=known),
        cluster=str(spec["cluster"]),
        state=spec["state"],
        reason=str(spec.get("reason", "")),
        message=str(spec.get("message", "")),
        admitted_ago_ms=_duration_ms(ago, where=f"{where}.admittedAgo") if ago is not None else 0,
        topology_assigned=tuple(sorted(set(placed))),
    )


def _duration_ms(value: Any, *, where: str) -> int:
    """A Go duration (``90s``, ``31m``, ``1h30m``) as ms."""
    try:
        seconds = afs.go_duration_seconds(str(value))
    except ValueError:
        raise _Problem(f"{where}: must be a duration such as 90s, 31m or 1h30m, got {value!r}") from None
    if seconds <= 0:
        raise _Problem(f"{where}: must be a positive duration, got {value!r}")
    return int(seconds * 1000)


def _workload_key(value: Any, *, where: str, known: set[str]) -> str:
    if not isinstance(value, str) or not _KEY.match(value):
        raise _Problem(f"{where}: must be a workload as namespace/name, got {value!r}")
    if value not in known:
        submitted = ", ".join(sorted(known)) or "none"
        raise _Problem(f"{where}: {value} is not a workload submitted before this event (submitted: {submitted})")
    return value


def _delete(value: Any, *, where: str) -> DeleteEvent:
    ref = _mapping(value, where=where, allowed=("apiVersion", "kind", "name", "namespace"), required=("kind", "name"))
    kind, name, namespace = ref["kind"], ref["name"], ref.get("namespace") or ""
    if not all(isinstance(v, str) for v in (kind, name, namespace)):
        raise _Problem(f"{where}: kind, name and namespace must be strings")
    ignored = kind in {k for _, k in IGNORED_KINDS}
    if not ignored and kind not in MODELLED_KINDS:
        raise _Problem(f"{where}: kind {kind!r} is not an object a scenario can hold")
    if (kind in manifests.NAMESPACED_KINDS or kind in ("Pod", "ResourceClaimTemplate")) and not namespace:
        namespace = "default"
    return DeleteEvent(kind=kind, namespace=namespace, name=name, modelled=not ignored)


def _run(value: Any) -> RunSpec:
    if value is None:
        return RunSpec()
    spec = _mapping(value, where="run", allowed=("cycles",), required=("cycles",))
    cycles = spec["cycles"]
    if not isinstance(cycles, int) or isinstance(cycles, bool) or cycles < 0:
        raise _Problem(f"run.cycles: must be a non-negative integer, got {cycles!r}")
    return RunSpec(cycles=cycles)


def _expect(value: Any) -> Expect:
    if value is None:
        return Expect()
    if not isinstance(value, dict):
        raise _Problem("expect: must be a mapping with admitted, reserved, preempted and/or pending")
    raw = dict(value)
    if isinstance(raw.get("admitted"), dict):  # ``default/w1:`` with nothing checks only that it is admitted
        raw["admitted"] = {k: {} if v is None else v for k, v in raw["admitted"].items()}
    elif raw.get("admitted") is None:
        raw.pop("admitted", None)
    try:
        expect = msgspec.convert(raw, Expect)
    except msgspec.ValidationError as err:
        problem, _, at = str(err).partition(" - at `")
        where = at.rstrip("`").removeprefix("$")
        raise _Problem(f"expect{where}: {problem}") from err
    for where, keys in (
        ("admitted", expect.admitted),
        ("multikueue", expect.multikueue),
        ("reserved", expect.reserved),
        ("preempted", expect.preempted),
        ("pending", expect.pending),
    ):
        for key in keys or ():
            if not _KEY.match(key):
                raise _Problem(f"expect.{where}: {key!r} is not a workload as namespace/name")
    return expect


def _engines(value: Any) -> tuple[str, ...]:
    if value is None:
        return ENGINE_NAMES
    if not isinstance(value, list) or not value or not all(v in ENGINE_NAMES for v in value):
        raise _Problem(f"engines: must be a non-empty list of {', '.join(ENGINE_NAMES)}, got {value!r}")
    return tuple(value)
