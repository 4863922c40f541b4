"""Kueue's scheduler-performance generator, read as it is, made into kueue-es facts.

The schema is Kueue's ``test/performance/scheduler/runner/generator/generator.go``
(and ``topology_generator.go`` for TAS), described field by field in
shared/research/kueue-perf.md §1. What a configuration makes, as Kueue's generator
makes it:

- one ResourceFlavor (``rf`` unless ``resourceFlavor`` names another);
- per cohort set, ``count`` cohorts ``<className>-<i>`` (implicit: only
  ``spec.cohortName``, no Cohort object);
- per cohort and queue set, ``count`` ClusterQueues
  ``<className>-<queueSetIdx>-<i>-<cohort>`` (BestEffortFIFO, one resource group
  covering ``cpu`` with the flavor, nominalQuota and borrowingLimit from the file,
  preemption ``reclaimWithinCohort``/``withinClusterQueue`` from the file, default
  flavorFungibility, class label), each with a Namespace and a LocalQueue of the
  same name;
- per ClusterQueue and workload set, one creation *stream*: ``count`` times, for
  each template, wait ``creationIntervalMs`` then create Workload
  ``<className>-<setIdx>-<i>-<templateIdx>`` with one pod set ``main`` of
  ``podCount`` (TAS; else 1) pods requesting ``request`` CPU each, the template's
  ``priority`` and its class and runtime as labels. All streams run concurrently.

TAS mode (``topology`` set; Kueue's ``topology_generator.go``), made before the
flavor, as Kueue creates them:

- the nodes, one per combination of level indices: name ``node-b<i>-r<j>-n<k>``
  (``node`` then ``-<first letter of the level name><index>`` per level), labels
  ``<level nodeLabel>=<level name>-<index>`` for every level, ``tas-node-group=tas``
  and the cleanup label, allocatable the last level's ``capacity`` (default 96 CPU,
  256Gi) and ``pods: 110``, Ready. Kueue's quirk kept: with the hostname label as the
  last level its value ``node-<k>`` repeats in every rack, so Kueue's topology tree
  (and ours, :mod:`kueue_es.projections.topology`) merges the 10 nodes of one hostname into one
  leaf, under the rack of the first of them by name;
- the Topology ``topology.name`` with one level per ``nodeLabel``;
- the flavor with ``nodeLabels {<resourceFlavor.nodeLabel>: tas}`` and ``topologyName``.

A template with ``tasLevel`` has ``podCount`` pods and a topology request:
``required`` -> ``required: <tasLevel>``, ``preferred`` -> ``preferred: <tasLevel>``,
``balanced`` -> ``podSetSliceRequiredTopology: <tasLevel>`` + ``podSetSliceSize:
<sliceSize>`` (a slice constraint only, no TASBalancedPlacement: Kueue's
minimalkueue enables no feature gate). The facts are the watcher's own
(NodeObserved, TopologyObserved), published before the streams start.

kueue-es additions, none of which Kueue's test has: every Workload names a
``batch/v1`` Job of its own name as owner (nothing creates that Job), so the
dispatcher's plan turns its admission into one start write and its eviction into
one stop write: the bench's stand-in for Kueue's Workload status patches.
Units: CPU in millicores, times in ms.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kueue_es.events import models, quantities, tas, types

CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
RUNTIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
CLEANUP_LABEL = "kueue.x-k8s.io/performance-scheduler-cleanup"
DEFAULT_FLAVOR = "rf"
TAS_NODE_GROUP_LABEL = "tas-node-group"
TAS_NODE_GROUP_VALUE = "tas"
NODE_PODS = 110
DEFAULT_NODE_CPU = "96"
DEFAULT_NODE_MEMORY = "256Gi"
TAS_CONSTRAINTS = ("required", "preferred", "balanced")


class ConfigError(ValueError):
    """A generator file that cannot be read: the message names the file and the field."""


class _Schema(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Base of the schema structs: Kueue's JSON field names, unknown fields refused."""


class WorkloadTemplate(_Schema, kw_only=True):
    """``WorkloadTemplate``: one workload made at each iteration of its set."""

    class_name: str
    runtime_ms: int = 0
    priority: int = 0
    request: str | int | float
    pod_count: int = 0
    tas_constraint: str = ""
    tas_level: str = ""
    slice_size: int = 0


class WorkloadsSet(_Schema, kw_only=True):
    """``WorkloadsSet``: ``count`` iterations, ``creationIntervalMs`` before each workload."""

    count: int
    creation_interval_ms: int = 0
    workloads: list[WorkloadTemplate] = []


class QueuesSet(_Schema, kw_only=True):
    """``QueuesSet``: ``count`` ClusterQueues per cohort with the same quota and workload sets."""

    class_name: str
    count: int
    nominal_quota: str | int | float
    borrowing_limit: str | int | float | None = None
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    workloads_sets: list[WorkloadsSet] = []


class CohortSet(_Schema, kw_only=True):
    """``CohortSet``: ``count`` cohorts ``<className>-<i>``."""

    class_name: str
    count: int
    queues_sets: list[QueuesSet] = []


class Capacity(_Schema, kw_only=True):
    """A topology level's node capacity (Kueue's defaults: 96 CPU, 256Gi)."""

    cpu: str | int | float = DEFAULT_NODE_CPU
    memory: str | int | float = DEFAULT_NODE_MEMORY


class TopologyLevel(_Schema, kw_only=True):
    """One level of the generated topology; only the last one's capacity is used.

    ``name`` makes the label values (``<name>-<index>``) and, by its first letter, the node names.
    """

    name: str
    count: int
    node_label: str
    capacity: Capacity | None = None


class TopologyConfig(_Schema, kw_only=True):
    """TAS mode: the Topology and the nodes under it."""

    name: str
    levels: list[TopologyLevel]


class ResourceFlavorConfig(_Schema, kw_only=True):
    """The one ResourceFlavor every ClusterQueue uses."""

    name: str = DEFAULT_FLAVOR
    node_label: str = ""
    topology_name: str = ""


class GeneratorConfig(_Schema, kw_only=True):
    """Kueue's generator ``Config``."""

    cohorts: list[CohortSet]
    topology: TopologyConfig | None = None
    resource_flavor: ResourceFlavorConfig | None = None


@dataclass(frozen=True, kw_only=True)
class QueueSpec:
    """One generated ClusterQueue (and its Namespace and LocalQueue of the same name)."""

    name: str
    cohort: str
    class_name: str
    queue_set: QueuesSet
    nominal_m: int
    borrowing_limit_m: int | None


@dataclass(frozen=True, kw_only=True)
class Stream:
    """One creation stream: a ClusterQueue's workload set, run concurrently with all others."""

    queue: QueueSpec
    set_index: int
    workload_set: WorkloadsSet


@dataclass(frozen=True, kw_only=True)
class PlannedWorkload:
    """One workload a stream creates, with its nominal creation offset.

    ``offset_ms``: ms after the stream starts at which it is created if creating
    takes no time ((k+1) x interval for the k-th workload of the stream).
    ``cpu_m``: the whole workload's CPU (pods x request).
    """

    name: str
    namespace: str
    cluster_queue: str
    cohort: str
    class_name: str
    priority: int
    pods: int
    request_m: int
    runtime_ms: int
    offset_ms: int
    topology_request: models.PodSetTopologyRequest | None = None

    @property
    def cpu_m(self) -> int:
        """CPU of the whole workload, in millicores."""
        return self.pods * self.request_m


@dataclass(frozen=True, kw_only=True)
class Generated:
    """A configuration made concrete: flavor, queues and streams, in Kueue's creation order."""

    config: GeneratorConfig
    flavor: ResourceFlavorConfig
    queues: list[QueueSpec]
    streams: list[Stream]
    nodes: int

    @property
    def cohorts(self) -> list[str]:
        """Cohort names in order."""
        return list(dict.fromkeys(q.cohort for q in self.queues))

    def planned(self) -> list[PlannedWorkload]:
        """Every workload of every stream, stream by stream."""
        return [wl for stream in self.streams for wl in planned_workloads(stream)]


def load_config(path: Path) -> GeneratorConfig:
    """Read a generator file; raises ConfigError naming the file and the problem."""
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not YAML: {err}") from None
    return parse_config(raw, source=str(path))


def parse_config(raw: Any, *, source: str = "<config>") -> GeneratorConfig:
    """Check a parsed generator document; raises ConfigError naming ``source`` and the field."""
    try:
        config = msgspec.convert(raw, GeneratorConfig, strict=False)
    except msgspec.ValidationError as err:
        raise ConfigError(f"{source}: {err}") from None
    if not config.cohorts:
        raise ConfigError(f"{source}: cohorts: the config must contain at least one cohort")
    if config.topology is not None:
        _check_topology(config, source)
    for ci, cohort_set in enumerate(config.cohorts):
        where = f"{source}: cohorts[{ci}]"
        _non_negative(cohort_set.count, f"{where}.count")
        for qi, queue_set in enumerate(cohort_set.queues_sets):
            qwhere = f"{where}.queuesSets[{qi}]"
            _non_negative(queue_set.count, f"{qwhere}.count")
            _cpu(queue_set.nominal_quota, f"{qwhere}.nominalQuota")
            if queue_set.borrowing_limit is not None:
                _cpu(queue_set.borrowing_limit, f"{qwhere}.borrowingLimit")
            for field, value, allowed in (
                ("reclaimWithinCohort", queue_set.reclaim_within_cohort, ("Never", "LowerPriority", "Any")),
                (
                    "withinClusterQueue",
                    queue_set.within_cluster_queue,
                    ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
                ),
            ):
                if value not in allowed:
                    raise ConfigError(f"{qwhere}.{field}: {value!r} is not one of {', '.join(allowed)}")
            for si, wl_set in enumerate(queue_set.workloads_sets):
                swhere = f"{qwhere}.workloadsSets[{si}]"
                _non_negative(wl_set.count, f"{swhere}.count")
                _non_negative(wl_set.creation_interval_ms, f"{swhere}.creationIntervalMs")
                for ti, template in enumerate(wl_set.workloads):
                    twhere = f"{swhere}.workloads[{ti}]"
                    _cpu(template.request, f"{twhere}.request")
                    _non_negative(template.runtime_ms, f"{twhere}.runtimeMs")
                    _non_negative(template.pod_count, f"{twhere}.podCount")
                    if not template.class_name:
                        raise ConfigError(f"{twhere}.className: must not be empty")
                    _check_tas_template(template, twhere, config.topology)
    return config


def _check_topology(config: GeneratorConfig, source: str) -> None:
    """Kueue's topology_generator.go rules: >= 2 levels; a TAS flavor needs ``nodeLabel``."""
    assert config.topology is not None
    levels = config.topology.levels
    if len(levels) < 2:
        raise ConfigError(f"{source}: topology.levels: at least two levels are needed, got {len(levels)}")
    for li, level in enumerate(levels):
        where = f"{source}: topology.levels[{li}]"
        if not level.name:
            raise ConfigError(f"{where}.name: must not be empty (it makes the label values and node names)")
        if level.count < 1:
            raise ConfigError(f"{where}.count: {level.count} must be at least 1")
        if not level.node_label:
            raise ConfigError(f"{where}.nodeLabel: must not be empty")
        if level.capacity is not None:
            _cpu(level.capacity.cpu, f"{where}.capacity.cpu")
            try:
                quantities.to_amount("memory", level.capacity.memory)
            except quantities.QuantityError as err:
                raise ConfigError(f"{where}.capacity.memory: {err}") from None
    flavor = config.resource_flavor
    if flavor is not None and flavor.topology_name and not flavor.node_label:
        raise ConfigError(f"{source}: resourceFlavor.nodeLabel: is required when topologyName is set")


def _check_tas_template(template: WorkloadTemplate, where: str, topology: TopologyConfig | None) -> None:
    """A TAS template's constraint must be one Kueue's generator knows and make a valid request, at a
    level of the topology (else its workloads could never be placed and the run would never end)."""
    if not template.tas_level:
        return
    if topology is not None and template.tas_level not in [level.node_label for level in topology.levels]:
        raise ConfigError(f"{where}.tasLevel: {template.tas_level!r} is not a nodeLabel of topology.levels")
    if template.tas_constraint and template.tas_constraint not in TAS_CONSTRAINTS:
        raise ConfigError(
            f"{where}.tasConstraint: {template.tas_constraint!r} is not one of {', '.join(TAS_CONSTRAINTS)}"
        )
    if template.tas_constraint == "balanced" and template.slice_size < 1:
        raise ConfigError(f"{where}.sliceSize: a balanced template needs sliceSize >= 1")
    request = topology_request(template)
    if request is not None:
        try:
            tas.validate_topology_request(request, count=_pods(template), field=f"{where}.topologyRequest")
        except tas.TopologyRequestError as err:
            raise ConfigError(str(err)) from None


def topology_request(template: WorkloadTemplate) -> models.PodSetTopologyRequest | None:
    """The pod set's topology request Kueue's generator gives ``template`` (None without ``tasLevel``
    or a constraint): required / preferred at ``tasLevel``, or for ``balanced`` slices of
    ``sliceSize`` pods each within one ``tasLevel`` domain (generator.go generateWlSet)."""
    level = template.tas_level
    match template.tas_constraint if level else "":
        case "required":
            return models.PodSetTopologyRequest(required=level)
        case "preferred":
            return models.PodSetTopologyRequest(preferred=level)
        case "balanced":
            return models.PodSetTopologyRequest(
                pod_set_slice_required_topology=level, pod_set_slice_size=template.slice_size or None
            )
    return None


def _non_negative(value: int, where: str) -> None:
    if value < 0:
        raise ConfigError(f"{where}: {value} must not be negative")


def _cpu(value: str | int | float, where: str) -> int:
    try:
        return quantities.to_amount("cpu", value)
    except quantities.QuantityError as err:
        raise ConfigError(f"{where}: {err}") from None


def generate(config: GeneratorConfig) -> Generated:
    """The queues and streams ``config`` makes, named and ordered as Kueue's generator names them."""
    flavor = config.resource_flavor or ResourceFlavorConfig()
    queues: list[QueueSpec] = []
    streams: list[Stream] = []
    for cohort_set in config.cohorts:
        for c in range(cohort_set.count):
            cohort = f"{cohort_set.class_name}-{c}"
            for qs_index, queue_set in enumerate(cohort_set.queues_sets):
                for q in range(queue_set.count):
                    borrowing = queue_set.borrowing_limit
                    queue = QueueSpec(
                        name=f"{queue_set.class_name}-{qs_index}-{q}-{cohort}",
                        cohort=cohort,
                        class_name=queue_set.class_name,
                        queue_set=queue_set,
                        nominal_m=_cpu(queue_set.nominal_quota, "nominalQuota"),
                        borrowing_limit_m=None if borrowing is None else _cpu(borrowing, "borrowingLimit"),
                    )
                    queues.append(queue)
                    streams.extend(
                        Stream(queue=queue, set_index=i, workload_set=wl_set)
                        for i, wl_set in enumerate(queue_set.workloads_sets)
                    )
    nodes = 0
    if config.topology is not None:
        nodes = 1
        for level in config.topology.levels:
            nodes *= level.count
    return Generated(config=config, flavor=flavor, queues=queues, streams=streams, nodes=nodes)


def planned_workloads(stream: Stream) -> Iterator[PlannedWorkload]:
    """The workloads ``stream`` creates, in order, with their nominal creation offsets."""
    wl_set, queue = stream.workload_set, stream.queue
    interval = wl_set.creation_interval_ms
    # what a template gives every workload it makes, worked out once per stream, not per workload: a
    # large configuration makes 50,000 workloads from a handful of templates (issue 18)
    made = [
        (ti, template, _pods(template), _cpu(template.request, "request"), topology_request(template))
        for ti, template in enumerate(wl_set.workloads)
    ]
    k = 0
    for si in range(wl_set.count):
        for ti, template, pods, request_m, request in made:
            k += 1
            yield PlannedWorkload(
                name=f"{template.class_name}-{stream.set_index}-{si}-{ti}",
                namespace=queue.name,
                cluster_queue=queue.name,
                cohort=queue.cohort,
                class_name=template.class_name,
                priority=template.priority,
                pods=pods,
                request_m=request_m,
                runtime_ms=template.runtime_ms,
                offset_ms=k * interval,
                topology_request=request,
            )


def _pods(template: WorkloadTemplate) -> int:
    """Kueue: ``podCount`` counts only for TAS templates (``tasLevel`` set), defaulting to 1."""
    if template.tas_level and template.pod_count > 0:
        return template.pod_count
    return 1


# -- facts ------------------------------------------------------------------------------------


def object_facts(generated: Generated, *, now_ms: int) -> list[types.Fact]:
    """In Kueue's creation order: in TAS mode the nodes and the Topology, then the flavor, then per
    ClusterQueue the ClusterQueue, its Namespace and LocalQueue.

    ``now_ms`` is their creationTimestamp.
    """
    labels = {CLEANUP_LABEL: "true"}
    flavor = generated.flavor
    node_labels = {flavor.node_label: TAS_NODE_GROUP_VALUE} if flavor.node_label else {}
    facts: list[types.Fact] = [*topology_facts(generated.config.topology, now_ms=now_ms)]
    facts.append(
        types.ResourceFlavorObserved(
            flavor=models.ResourceFlavor(
                metadata=models.ObjectMeta(name=flavor.name, labels=labels, creation_timestamp_ms=now_ms),
                spec=models.ResourceFlavorSpec(node_labels=node_labels, topology_name=flavor.topology_name or None),
            )
        )
    )
    for queue in generated.queues:
        facts.extend(queue_facts(queue, flavor=flavor.name, now_ms=now_ms))
    return facts


def topology_facts(topology: TopologyConfig | None, *, now_ms: int) -> list[types.Fact]:
    """TAS mode: a NodeObserved per node (Kueue's order: level indices counted widest first), then the
    TopologyObserved; none without ``topology``. ``now_ms`` is their creationTimestamp.

    Each node as the watcher would report it (:mod:`kueue_es.services.watcher.nodes`): labels, allocatable
    (cpu in millicores, memory in bytes, pods), Ready=True, schedulable.
    """
    if topology is None:
        return []
    levels = topology.levels
    capacity = levels[-1].capacity or Capacity()
    allocatable = {
        "cpu": _cpu(capacity.cpu, "topology capacity.cpu"),
        "memory": quantities.to_amount("memory", capacity.memory),
        "pods": NODE_PODS,
    }
    status = models.NodeStatus(allocatable=allocatable, ready="True")
    facts: list[types.Fact] = []
    for indices in itertools.product(*(range(level.count) for level in levels)):
        labels = {CLEANUP_LABEL: "true", TAS_NODE_GROUP_LABEL: TAS_NODE_GROUP_VALUE}
        labels.update({level.node_label: f"{level.name}-{i}" for level, i in zip(levels, indices, strict=True)})
        name = "node" + "".join(f"-{level.name[0]}{i}" for level, i in zip(levels, indices, strict=True))
        node = models.Node(
            metadata=models.ObjectMeta(name=name, labels=labels, creation_timestamp_ms=now_ms), status=status
        )
        facts.append(types.NodeObserved(node=node))
    facts.append(
        types.TopologyObserved(
            topology=models.Topology(
                metadata=models.ObjectMeta(
                    name=topology.name, labels={CLEANUP_LABEL: "true"}, creation_timestamp_ms=now_ms
                ),
                spec=models.TopologySpec(levels=[models.TopologyLevel(node_label=lv.node_label) for lv in levels]),
            )
        )
    )
    return facts


def queue_facts(queue: QueueSpec, *, flavor: str, now_ms: int) -> list[types.Fact]:
    """ClusterQueue, Namespace and LocalQueue of one generated queue."""
    qs = queue.queue_set
    quota = models.ResourceQuota(name="cpu", nominal_quota=queue.nominal_m, borrowing_limit=queue.borrowing_limit_m)
    spec = models.ClusterQueueSpec(
        cohort_name=queue.cohort,
        namespace_selector=models.LabelSelector(),
        queueing_strategy="BestEffortFIFO",
        resource_groups=[
            models.ResourceGroup(
                covered_resources=["cpu"], flavors=[models.FlavorQuotas(name=flavor, resources=[quota])]
            )
        ],
        preemption=models.ClusterQueuePreemption(
            reclaim_within_cohort=qs.reclaim_within_cohort,  # type: ignore[arg-type]
            within_cluster_queue=qs.within_cluster_queue,  # type: ignore[arg-type]
        ),
    )
    cq_labels = {CLASS_LABEL: queue.class_name, CLEANUP_LABEL: "true"}
    return [
        types.ClusterQueueObserved(
            cluster_queue=models.ClusterQueue(
                metadata=models.ObjectMeta(name=queue.name, labels=cq_labels, creation_timestamp_ms=now_ms), spec=spec
            )
        ),
        types.NamespaceObserved(
            namespace=models.Namespace(
                metadata=models.ObjectMeta(
                    name=queue.name, labels={CLEANUP_LABEL: "true"}, creation_timestamp_ms=now_ms
                )
            )
        ),
        types.LocalQueueObserved(
            local_queue=models.LocalQueue(
                metadata=models.ObjectMeta(name=queue.name, namespace=queue.name, creation_timestamp_ms=now_ms),
                spec=models.LocalQueueSpec(cluster_queue=queue.name),
            )
        ),
    ]


def workload_fact(planned: PlannedWorkload, *, uid: str, now_ms: int) -> types.WorkloadObserved:
    """The Workload Kueue's generator creates for ``planned``, created at ``now_ms`` with ``uid``."""
    labels = {RUNTIME_LABEL: str(planned.runtime_ms), CLASS_LABEL: planned.class_name}
    return types.WorkloadObserved(
        workload=models.Workload(
            metadata=models.ObjectMeta(
                name=planned.name, namespace=planned.namespace, uid=uid, labels=labels, creation_timestamp_ms=now_ms
            ),
            spec=models.WorkloadSpec(
                queue_name=planned.cluster_queue,
                priority=planned.priority,
                pod_sets=[
                    models.PodSet(
                        name="main",
                        count=planned.pods,
                        requests={"cpu": planned.request_m},
                        topology_request=planned.topology_request,
                    )
                ],
            ),
            owner=models.OwnerReference(api_version="batch/v1", kind="Job", name=planned.name, uid=f"job-{uid}"),
        )
    )
