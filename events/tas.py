"""Topology-Aware Scheduling vocabulary shared by the watcher, the TAS placer and the dispatcher.

- :class:`Assignment` / :class:`DomainAssignment`: the plain form of a TopologyAssignment
  (levels, then one ``(values, count)`` per domain), what placement produces and pods consume.
- :func:`encode` / :func:`decode`: to and from Kueue's compact v1beta2 encoding
  (:class:`kueue_es.events.models.TopologyAssignment`), byte-identical to what Kueue writes
  (SEMANTICS-ADVANCED A.8.3; Kueue pkg/util/tas/tas_assignment.go) and accepting any valid
  encoding (A.8.2).
- :func:`tas_fact`: a Topology, Node or Pod manifest to its fact.
- the topology requests of A.4 (annotations, :func:`validate_topology_request`,
  :func:`validate_pod_set_groups`, :func:`topology_request_from_annotations`,
  :func:`requests_tas`) live in :mod:`kueue_es.events.tas_requests`, below
  :mod:`kueue_es.events.manifests`, which validates with them; they are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import msgspec

from kueue_es.events import manifests, models, types
from kueue_es.events.tas_requests import (
    GROUP_NAME_ANNOTATION as GROUP_NAME_ANNOTATION,
)
from kueue_es.events.tas_requests import (
    HOSTNAME_LABEL as HOSTNAME_LABEL,
)
from kueue_es.events.tas_requests import (
    PREFERRED_ANNOTATION as PREFERRED_ANNOTATION,
)
from kueue_es.events.tas_requests import (
    REQUIRED_ANNOTATION as REQUIRED_ANNOTATION,
)
from kueue_es.events.tas_requests import (
    SLICE_CONSTRAINTS_ANNOTATION as SLICE_CONSTRAINTS_ANNOTATION,
)
from kueue_es.events.tas_requests import (
    SLICE_REQUIRED_ANNOTATION as SLICE_REQUIRED_ANNOTATION,
)
from kueue_es.events.tas_requests import (
    SLICE_SIZE_ANNOTATION as SLICE_SIZE_ANNOTATION,
)
from kueue_es.events.tas_requests import (
    TAS_POD_ANNOTATIONS as TAS_POD_ANNOTATIONS,
)
from kueue_es.events.tas_requests import (
    UNCONSTRAINED_ANNOTATION as UNCONSTRAINED_ANNOTATION,
)
from kueue_es.events.tas_requests import (
    TopologyRequestError as TopologyRequestError,
)
from kueue_es.events.tas_requests import (
    requests_tas as requests_tas,
)
from kueue_es.events.tas_requests import (
    slice_layers as slice_layers,
)
from kueue_es.events.tas_requests import (
    topology_request_from_annotations as topology_request_from_annotations,
)
from kueue_es.events.tas_requests import (
    validate_pod_set_groups as validate_pod_set_groups,
)
from kueue_es.events.tas_requests import (
    validate_topology_request as validate_topology_request,
)

MAX_DOMAINS_PER_SLICE = 100_000
MAX_SLICES = 1_000


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


def tas_fact(manifest: Mapping[str, object]) -> types.Fact | None:
    """The fact for a Topology, v1 Node or v1 Pod manifest (TopologyObserved, NodeObserved,
    PodObserved), or None for a TAS pod (not non-TAS usage). Raises
    :class:`kueue_es.events.manifests.ManifestError` for an invalid object or another kind.

    For the watcher and the scenario loader.
    """
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
