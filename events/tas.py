"""Topology-Aware Scheduling vocabulary shared by the watcher, the TAS placer and the dispatcher.

- :class:`Assignment` / :class:`DomainAssignment`: the plain form of a TopologyAssignment
  (levels, then one ``(values, count)`` per domain), what placement produces and pods consume.
- :func:`encode` / :func:`decode`: to and from Kueue's compact v1beta2 encoding
  (:class:`kueue_es.events.models.TopologyAssignment`), byte-identical to what Kueue writes
  (SEMANTICS-ADVANCED A.8.3; Kueue pkg/util/tas/tas_assignment.go) and accepting any valid
  encoding (A.8.2).
- :func:`validate_topology_request`, :func:`validate_pod_set_groups`: the webhook rules of A.4.2.
- :func:`topology_request_from_annotations`: pod-template annotations to a
  :class:`kueue_es.events.models.PodSetTopologyRequest` (A.4.1; Kueue pkg/controller/jobframework/tas.go).
- :func:`requests_tas`: whether a pod set explicitly asks for TAS (A.4.3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import msgspec

from kueue_es.events import models

HOSTNAME_LABEL = "kubernetes.io/hostname"
REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE_ANNOTATION = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP_NAME_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
TAS_POD_ANNOTATIONS = (
    REQUIRED_ANNOTATION,
    PREFERRED_ANNOTATION,
    UNCONSTRAINED_ANNOTATION,
    SLICE_REQUIRED_ANNOTATION,
    SLICE_CONSTRAINTS_ANNOTATION,
)
"""A pod carrying any of these is a TAS pod: it is not charged as non-TAS usage (A.2.2)."""

MAX_DOMAINS_PER_SLICE = 100_000
MAX_SLICES = 1_000
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class TopologyRequestError(ValueError):
    """A topology request (or its annotations) that Kueue's webhooks would reject.

    ``field`` names the offending field or annotation, ``problem`` says what is wrong.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


@dataclass(frozen=True, slots=True)
class DomainAssignment:
    """``count`` pods on the domain named by ``values`` (one value per assignment level)."""

    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class Assignment:
    """A topology assignment in plain form (Kueue's internal utiltas.TopologyAssignment).

    ``levels``: node-label keys (only the hostname label when the topology's lowest level is
    hostname, else every level, A.6.10); ``domains``: in assignment order.
    """

    levels: tuple[str, ...]
    domains: tuple[DomainAssignment, ...]

    @property
    def pod_count(self) -> int:
        """Pods the assignment places (Kueue CountPodsInAssignment)."""
        return sum(d.count for d in self.domains)

    def counts_by_domain(self) -> dict[str, int]:
        """Pods per domain ID (values joined with ``,``, Kueue utiltas.DomainID)."""
        out: dict[str, int] = {}
        for d in self.domains:
            key = domain_id(d.values)
            out[key] = out.get(key, 0) + d.count
        return out

    def node_selectors(self) -> list[tuple[dict[str, str], int]]:
        """``(nodeSelector, count)`` per domain, as the ungater pins pods (A.8.2, A.12)."""
        return [(dict(zip(self.levels, d.values, strict=True)), d.count) for d in self.domains]


def domain_id(values: Iterable[str]) -> str:
    """Kueue's TopologyDomainID: the level values joined with ``,`` (A.2.1)."""
    return ",".join(values)


# --- encoding (A.8) ---------------------------------------------------------------------------


def decode(ta: models.TopologyAssignment) -> Assignment:
    """Any valid v1beta2 encoding to plain form (A.8.2).

    Raises ValueError when the encoding is inconsistent (a level's values or the pod counts
    not matching ``domainCount``, or both/neither of universal and individual set).
    """
    domains: list[DomainAssignment] = []
    for s, piece in enumerate(ta.slices):
        n = piece.domain_count
        if n < 1 or len(piece.values_per_level) != len(ta.levels):
            raise ValueError(f"slices[{s}]: needs domainCount >= 1 and one valuesPerLevel entry per level")
        columns: list[list[str]] = []
        for lvl, values in enumerate(piece.values_per_level):
            if (values.universal is None) == (values.individual is None):
                raise ValueError(f"slices[{s}].valuesPerLevel[{lvl}]: exactly one of universal, individual")
            if values.universal is not None:
                columns.append([values.universal] * n)
                continue
            ind = values.individual
            assert ind is not None
            if len(ind.roots) != n:
                raise ValueError(f"slices[{s}].valuesPerLevel[{lvl}].individual.roots: needs {n} entries")
            prefix, suffix = ind.prefix or "", ind.suffix or ""
            columns.append([prefix + root + suffix for root in ind.roots])
        counts = piece.pod_counts
        if counts.universal is not None and not counts.individual:
            per_domain = [counts.universal] * n
        elif counts.universal is None and len(counts.individual) == n:
            per_domain = list(counts.individual)
        else:
            raise ValueError(f"slices[{s}].podCounts: exactly one of universal, individual[{n}]")
        for i in range(n):
            domains.append(DomainAssignment(values=tuple(col[i] for col in columns), count=per_domain[i]))
    return Assignment(levels=tuple(ta.levels), domains=tuple(domains))


def encode(assignment: Assignment, *, by_hostname_prefix: bool = True) -> models.TopologyAssignment:
    """The v1beta2 encoding Kueue writes for ``assignment`` (A.8.3, Kueue V1Beta2From).

    ``by_hostname_prefix`` is the TASAssignmentsEncodingByHostnamePrefix gate (on by
    default): hostnames are grouped in runs sharing their longest reusable ``-``-terminated
    prefix, one slice per run, unless one compact slice serialises strictly shorter.
    """
    if not by_hostname_prefix:
        return _single_slice_encoding(assignment)
    by_prefix = _prefix_runs_encoding(assignment)
    if len(by_prefix.slices) <= 1 or len(assignment.domains) > MAX_DOMAINS_PER_SLICE:
        return by_prefix
    single = _single_slice_encoding(assignment)
    if len(msgspec.json.encode(single)) < len(msgspec.json.encode(by_prefix)):
        return single
    return by_prefix


def _single_slice_encoding(assignment: Assignment) -> models.TopologyAssignment:
    slices = [_compact_slice(assignment.levels, assignment.domains)] if assignment.domains else []
    return models.TopologyAssignment(levels=list(assignment.levels), slices=slices)


def _compact_values(values: Sequence[str]) -> models.TopologyAssignmentLevelValues:
    """Common prefix and suffix of one level's values (Kueue fillSingleCompactSliceValues)."""
    prefix = suffix = values[0]
    min_len = max_len = len(values[0])
    for value in values[1:]:
        n = len(value)
        min_len, max_len = min(min_len, n), max(max_len, n)
        prefix = prefix[:n]
        if n < len(suffix):
            suffix = suffix[len(suffix) - n :]
        for i in range(len(prefix)):
            if value[i] != prefix[i]:
                prefix = prefix[:i]
                break
        for i in range(len(suffix)):
            if value[n - 1 - i] != suffix[len(suffix) - 1 - i]:
                suffix = suffix[len(suffix) - i :]
                break
    if len(prefix) == max_len:
        return models.TopologyAssignmentLevelValues(universal=prefix)
    if len(prefix) + len(suffix) > min_len:
        prefix = prefix[: min_len - len(suffix)]
    roots = [value[len(prefix) : len(value) - len(suffix)] for value in values]
    return models.TopologyAssignmentLevelValues(
        individual=models.TopologyAssignmentIndividualValues(prefix=prefix or None, suffix=suffix or None, roots=roots)
    )


def _compact_slice(levels: Sequence[str], domains: Sequence[DomainAssignment]) -> models.TopologyAssignmentSlice:
    counts = [d.count for d in domains]
    pod_counts = (
        models.TopologyAssignmentPodCounts(universal=counts[0])
        if all(c == counts[0] for c in counts)
        else models.TopologyAssignmentPodCounts(individual=counts)
    )
    return models.TopologyAssignmentSlice(
        domain_count=len(domains),
        values_per_level=[_compact_values([d.values[lvl] for d in domains]) for lvl in range(len(levels))],
        pod_counts=pod_counts,
    )


def _prefix_runs_encoding(assignment: Assignment) -> models.TopologyAssignment:
    domains = assignment.domains
    keys: list[str] | None = None
    if len(domains) > 1 and assignment.levels and assignment.levels[-1] == HOSTNAME_LABEL:
        keys = _hostname_prefix_keys([d.values[-1] for d in domains])
    slices: list[models.TopologyAssignmentSlice] = []
    for run in _runs(domains, keys):
        for start in range(0, len(run), MAX_DOMAINS_PER_SLICE):
            slices.append(_compact_slice(assignment.levels, run[start : start + MAX_DOMAINS_PER_SLICE]))
    return models.TopologyAssignment(levels=list(assignment.levels), slices=slices)


def _runs(domains: Sequence[DomainAssignment], keys: list[str] | None) -> list[Sequence[DomainAssignment]]:
    if not domains:
        return []
    if not keys:
        return [domains]
    runs: list[Sequence[DomainAssignment]] = []
    start = 0
    for i in range(1, len(domains)):
        if keys[i] != keys[start]:
            runs.append(domains[start:i])
            start = i
    runs.append(domains[start:])
    return runs


def _hostname_prefix_keys(hostnames: Sequence[str]) -> list[str] | None:
    """Each hostname's longest '-'-terminated prefix shared by >= 2 hostnames, at the deepest
    prefix depth that keeps the run count <= 1000 (Kueue reusableHostnamePrefixKeys)."""
    ends_per_host: list[list[int]] = []
    seen: dict[str, int] = {}
    for host in hostnames:
        ends = [i + 1 for i in range(len(host) - 1) if host[i] == "-"]
        ends_per_host.append(ends)
        for end in ends:
            seen[host[:end]] = min(seen.get(host[:end], 0) + 1, 2)
    max_depth = max((len(e) for e in ends_per_host), default=0)
    for depth in range(max_depth, 0, -1):
        keys = []
        for host, ends in zip(hostnames, ends_per_host, strict=True):
            key = ""
            for end in reversed(ends[: min(len(ends), depth)]):
                if seen[host[:end]] >= 2:
                    key = host[:end]
                    break
            keys.append(key)
        slice_count, start = 0, 0
        for i in range(1, len(keys)):
            if keys[i] != keys[start]:
                slice_count += -(-(i - start) // MAX_DOMAINS_PER_SLICE)
                start = i
        slice_count += -(-(len(keys) - start) // MAX_DOMAINS_PER_SLICE)
        if slice_count <= MAX_SLICES:
            return keys
    return None


# --- topology requests (A.4) ------------------------------------------------------------------


def slice_layers(request: models.PodSetTopologyRequest | None) -> list[models.PodsetSliceRequiredTopologyConstraint]:
    """The slice layers, outermost first: the multi-layer list if given, else the single layer
    (size 0 when ``podSetSliceSize`` is missing), else none (Kueue PodSetSliceRequiredTopologyConstraints)."""
    if request is None:
        return []
    if request.podset_slice_required_topology_constraints:
        return list(request.podset_slice_required_topology_constraints)
    if request.pod_set_slice_required_topology is None:
        return []
    return [
        models.PodsetSliceRequiredTopologyConstraint(
            topology=request.pod_set_slice_required_topology, size=request.pod_set_slice_size or 0
        )
    ]


def requests_tas(request: models.PodSetTopologyRequest | None) -> bool:
    """Explicit TAS request: required, preferred, unconstrained=true or slices set (A.4.3)."""
    if request is None:
        return False
    return (
        request.required is not None
        or request.preferred is not None
        or bool(request.unconstrained)
        or bool(slice_layers(request))
    )


def _valid_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


def validate_topology_request(
    request: models.PodSetTopologyRequest, *, count: int, field: str = "topologyRequest", multi_layer: bool = True
) -> None:
    """Kueue's webhook rules for one pod set's topology request (A.4.2).

    ``count`` is the pod set's count; ``multi_layer`` the TASMultiLayerTopology gate.
    Raises TopologyRequestError naming the field.
    """
    modes = [n for n, v in (("required", request.required), ("preferred", request.preferred)) if v is not None]
    if request.unconstrained is not None:
        modes.append("unconstrained")
    if len(modes) > 1:
        raise TopologyRequestError(f"{field}.{modes[1]}", f"must not be set together with {modes[0]}")
    for name in ("required", "preferred", "pod_set_slice_required_topology"):
        value = getattr(request, name)
        if value is not None and not _valid_label_key(value):
            raise TopologyRequestError(f"{field}.{_camel(name)}", f"{value!r} is not a valid label key")
    single_topology = request.pod_set_slice_required_topology
    single_size = request.pod_set_slice_size
    if (single_topology is None) != (single_size is None):
        missing = "podSetSliceSize" if single_size is None else "podSetSliceRequiredTopology"
        raise TopologyRequestError(f"{field}.{missing}", "is required when the other slice field is set")
    if single_size is not None and not 1 <= single_size <= max(count, 1):
        raise TopologyRequestError(f"{field}.podSetSliceSize", f"must be between 1 and the pod set count {count}")
    group = request.pod_set_group_name
    if group is not None:
        if group.isdigit():
            raise TopologyRequestError(f"{field}.podSetGroupName", "must not be a number")
        if request.required is None and request.preferred is None:
            raise TopologyRequestError(f"{field}.podSetGroupName", "needs required or preferred topology")
        if single_topology is not None or request.podset_slice_required_topology_constraints:
            raise TopologyRequestError(f"{field}.podSetGroupName", "must not be set together with slices")
    layers = request.podset_slice_required_topology_constraints
    if layers:
        where = f"{field}.podsetSliceRequiredTopologyConstraints"
        if not multi_layer:
            raise TopologyRequestError(where, "needs the TASMultiLayerTopology feature gate")
        if single_topology is not None:
            raise TopologyRequestError(where, "must not be set together with podSetSliceRequiredTopology")
        if not 1 <= len(layers) <= 3:
            raise TopologyRequestError(where, "must have 1 to 3 layers")
        seen: set[str] = set()
        for i, layer in enumerate(layers):
            if not _valid_label_key(layer.topology) or layer.topology in seen:
                raise TopologyRequestError(f"{where}[{i}].topology", f"{layer.topology!r} is not a unique label key")
            seen.add(layer.topology)
            if layer.size < 1:
                raise TopologyRequestError(f"{where}[{i}].size", "must be >= 1")
            if i and layers[i - 1].size % layer.size:
                raise TopologyRequestError(
                    f"{where}[{i}].size", f"{layer.size} must evenly divide the outer layer size {layers[i - 1].size}"
                )


def validate_pod_set_groups(pod_sets: Sequence[models.PodSet], *, field: str = "spec.podSets") -> None:
    """Leader+workers groups (A.4.2): exactly 2 pod sets per group name, one of them with count
    1, both with the same required (or preferred) level. Raises TopologyRequestError."""
    groups: dict[str, list[tuple[int, models.PodSet]]] = {}
    for i, ps in enumerate(pod_sets):
        if ps.topology_request is not None and ps.topology_request.pod_set_group_name is not None:
            groups.setdefault(ps.topology_request.pod_set_group_name, []).append((i, ps))
    for name, members in groups.items():
        where = f"{field}[{members[0][0]}].topologyRequest.podSetGroupName"
        if len(members) != 2:
            raise TopologyRequestError(where, f"group {name!r} must have exactly 2 pod sets, has {len(members)}")
        (_, a), (_, b) = members
        if a.count != 1 and b.count != 1:
            raise TopologyRequestError(where, f"group {name!r} needs a pod set with count 1 (the leader)")
        ra, rb = a.topology_request, b.topology_request
        assert ra is not None and rb is not None
        if (ra.required, ra.preferred) != (rb.required, rb.preferred):
            raise TopologyRequestError(where, f"pod sets of group {name!r} must request the same topology")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def topology_request_from_annotations(
    annotations: Mapping[str, str], *, multi_layer: bool = True
) -> models.PodSetTopologyRequest | None:
    """The topology request a pod template's annotations ask for (A.4.1), or None when they
    ask for none (Kueue jobframework/tas.go NewPodSetTopologyRequest).

    Precedence required > preferred > unconstrained; the group name is kept only with
    required/preferred; the multi-layer JSON is read only when ``multi_layer`` (the
    TASMultiLayerTopology gate) is on. Rank hints (podIndexLabel ...) are the integration's
    business and are not set here. Raises TopologyRequestError naming the annotation for a
    value Kueue's job webhooks reject (A.4.2): two modes at once, a non-boolean
    unconstrained, a bad slice size, bad JSON.
    """
    present = [a for a in (REQUIRED_ANNOTATION, PREFERRED_ANNOTATION, UNCONSTRAINED_ANNOTATION) if a in annotations]
    if len(present) > 1:
        raise TopologyRequestError(present[1], f"must not be set together with {present[0]}")
    fields: dict[str, object] = {}
    if REQUIRED_ANNOTATION in annotations:
        fields["required"] = annotations[REQUIRED_ANNOTATION]
    elif PREFERRED_ANNOTATION in annotations:
        fields["preferred"] = annotations[PREFERRED_ANNOTATION]
    elif UNCONSTRAINED_ANNOTATION in annotations:
        raw = annotations[UNCONSTRAINED_ANNOTATION].strip().lower()
        if raw not in ("true", "false", "1", "0", "t", "f"):
            raise TopologyRequestError(UNCONSTRAINED_ANNOTATION, f"{raw!r} is not a boolean")
        fields["unconstrained"] = raw in ("true", "1", "t")
    if SLICE_REQUIRED_ANNOTATION in annotations or SLICE_SIZE_ANNOTATION in annotations:
        if SLICE_REQUIRED_ANNOTATION not in annotations or SLICE_SIZE_ANNOTATION not in annotations:
            missing = SLICE_SIZE_ANNOTATION if SLICE_SIZE_ANNOTATION not in annotations else SLICE_REQUIRED_ANNOTATION
            raise TopologyRequestError(missing, "is required together with the other slice annotation")
        try:
            size = int(annotations[SLICE_SIZE_ANNOTATION])
        except ValueError as err:
            raise TopologyRequestError(SLICE_SIZE_ANNOTATION, "must be an integer") from err
        fields["pod_set_slice_required_topology"] = annotations[SLICE_REQUIRED_ANNOTATION]
        fields["pod_set_slice_size"] = size
    if multi_layer and SLICE_CONSTRAINTS_ANNOTATION in annotations:
        try:
            layers = msgspec.convert(
                json.loads(annotations[SLICE_CONSTRAINTS_ANNOTATION]),
                list[models.PodsetSliceRequiredTopologyConstraint],
            )
        except (json.JSONDecodeError, msgspec.ValidationError) as err:
            raise TopologyRequestError(
                SLICE_CONSTRAINTS_ANNOTATION, f"is not a JSON list of {{topology, size}}: {err}"
            ) from err
        fields["podset_slice_required_topology_constraints"] = layers
    if GROUP_NAME_ANNOTATION in annotations and ("required" in fields or "preferred" in fields):
        fields["pod_set_group_name"] = annotations[GROUP_NAME_ANNOTATION]
    if not fields:
        return None
    request = models.PodSetTopologyRequest(**fields)  # type: ignore[arg-type]
    if not requests_tas(request):
        return None
    return request


def tas_fact(manifest: Mapping[str, object]) -> object:
    """The fact for a Topology, v1 Node or v1 Pod manifest (TopologyObserved, NodeObserved,
    PodObserved), or None for a TAS pod (not non-TAS usage). Raises
    :class:`kueue_es.events.manifests.ManifestError` for an invalid object or another kind.

    For the watcher and the scenario loader; returns ``kueue_es.events.types.Fact | None`` (typed
    loosely here because kueue_es.events.types imports this module's neighbours).
    """
    from kueue_es.events import manifests, types  # here: kueue_es.events.manifests imports this module

    raw = dict(manifest)
    match raw.get("kind"):
        case "Topology":
            return types.TopologyObserved(topology=manifests.parse_topology(raw))
        case "Node":
            return types.NodeObserved(node=manifests.parse_node(raw))
        case "Pod":
            usage = manifests.parse_pod_usage(raw)
            return types.PodObserved(pod=usage) if usage is not None else None
    kind, name = manifests.describe(raw)
    raise manifests.ManifestError(kind=kind, name=name, field="kind", problem="is not a Topology, Node or Pod")
