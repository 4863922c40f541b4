"""Topology requests (SEMANTICS-ADVANCED A.4): what a pod set asks of Topology-Aware Scheduling.

- the pod-template annotations (:data:`REQUIRED_ANNOTATION`, ...) and
  :func:`topology_request_from_annotations`, which reads them into a
  :class:`kueue_es.events.models.PodSetTopologyRequest` (A.4.1; Kueue pkg/controller/jobframework/tas.go);
- :func:`validate_topology_request`, :func:`validate_pod_set_groups`: the webhook rules of A.4.2,
  raising :class:`TopologyRequestError`;
- :func:`requests_tas`, :func:`slice_layers`: whether and how a pod set asks for TAS (A.4.3).

:mod:`kueue_es.events.manifests` validates objects with these rules, and
:mod:`kueue_es.events.tas` (assignments, and manifests to TAS facts) builds on manifests, so the
rules live here, below both; :mod:`kueue_es.events.tas` re-exports every public name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kueue_es.events import gojson, models

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

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
"""The range of the API's int32 sizes (Kueue reads the slice size with strconv.ParseInt(value, 10, 32))."""


class TopologyRequestError(ValueError):
    """A topology request (or its annotations) that Kueue's webhooks would reject.

    ``field`` names the offending field or annotation, ``problem`` says what is wrong.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


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


def valid_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


def validate_topology_request(
    request: models.PodSetTopologyRequest,
    *,
    count: int,
    field: str = "topologyRequest",
    multi_layer: bool = True,
    workload_object: bool = False,
) -> None:
    """Kueue's webhook rules for one pod set's topology request (A.4.2).

    ``count`` is the pod set's count; ``multi_layer`` the TASMultiLayerTopology gate;
    ``workload_object`` True for a Workload object: its ``podSetGroupName`` is then not checked at
    all. The group rules (not a number, only with required or preferred, not with slices) are the
    job webhooks', on a pod template's annotations (jobframework/tas_validation.go); Kueue's
    Workload webhook (webhooks/workload_webhook.go) and CRD check nothing of the group name but
    its length, and its placement takes a group's slices from the workers and places an
    unconstrained group.
    Raises TopologyRequestError naming the field.
    """
    modes = [n for n, v in (("required", request.required), ("preferred", request.preferred)) if v is not None]
    if request.unconstrained is not None:
        modes.append("unconstrained")
    if len(modes) > 1:
        raise TopologyRequestError(f"{field}.{modes[1]}", f"must not be set together with {modes[0]}")
    for name in ("required", "preferred", "pod_set_slice_required_topology"):
        value = getattr(request, name)
        if value is not None and not valid_label_key(value):
            raise TopologyRequestError(f"{field}.{_camel(name)}", f"{value!r} is not a valid label key")
    single_topology = request.pod_set_slice_required_topology
    single_size = request.pod_set_slice_size
    if (single_topology is None) != (single_size is None):
        missing = "podSetSliceSize" if single_size is None else "podSetSliceRequiredTopology"
        raise TopologyRequestError(f"{field}.{missing}", "is required when the other slice field is set")
    if single_size is not None and not 1 <= single_size <= max(count, 1):
        raise TopologyRequestError(f"{field}.podSetSliceSize", f"must be between 1 and the pod set count {count}")
    group = request.pod_set_group_name
    if group is not None and not workload_object:
        if group.isdigit():
            raise TopologyRequestError(f"{field}.podSetGroupName", "must not be a number")
        if request.required is None and request.preferred is None:
            raise TopologyRequestError(f"{field}.podSetGroupName", "needs required or preferred topology")
        slices = single_topology is not None or bool(request.podset_slice_required_topology_constraints)
        if slices:
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
            if not valid_label_key(layer.topology) or layer.topology in seen:
                raise TopologyRequestError(f"{where}[{i}].topology", f"{layer.topology!r} is not a unique label key")
            seen.add(layer.topology)
            if layer.size < 1:
                raise TopologyRequestError(f"{where}[{i}].size", "must be >= 1")
            if i and layers[i - 1].size % layer.size:
                raise TopologyRequestError(
                    f"{where}[{i}].size", f"{layer.size} must evenly divide the outer layer size {layers[i - 1].size}"
                )


def validate_pod_set_groups(pod_sets: Sequence[models.PodSet], *, field: str = "spec.podSets") -> None:
    """Leader+workers groups of a job's pod sets (A.4.2): exactly 2 pod sets per group name, one of
    them with count 1, both with the same required (or preferred) level. Raises TopologyRequestError.

    The job webhooks' rule, on the ``podset-group-name`` annotations (jobframework/tas_validation.go
    ValidatePodSetGroupingTopology); Kueue's Workload webhook has none of it, so a Workload object
    is not checked with it (its placement takes the larger of a group's first two pod sets as the
    workers, the other as the leader, tas_flavor_snapshot.go findLeaderAndWorkers)."""
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


#: Kueue's Go struct of one slice layer and its JSON fields' Go types (apis/kueue/v1beta2/workload_types.go).
_CONSTRAINT_STRUCT = "PodsetSliceRequiredTopologyConstraint"
_CONSTRAINT_FIELDS: dict[str, gojson.FieldType] = {"topology": "string", "size": "int32"}
CONSTRAINT_LAYERS_PROBLEM = "topology constraints must contain between 1 and 3 entries"
"""Kueue's words (jobframework/tas.go errTopologyConstraintsLayerCount) for a list of no or more than 3 layers."""


def decode_slice_constraints(raw: str) -> list[dict[str, Any]]:
    """The multi-layer slice annotation's JSON as Kueue's Go reads it (``json.Unmarshal`` into
    ``[]PodsetSliceRequiredTopologyConstraint``): ``{"topology": str, "size": int}`` per layer, zero values
    for what is missing (keys match case-insensitively, unknown ones are ignored, ``null`` is no layer).
    Raises :class:`kueue_es.events.gojson.GoJSONError` with Go's error text."""
    return gojson.decode_struct_list(raw, struct=_CONSTRAINT_STRUCT, package="v1beta2", fields=_CONSTRAINT_FIELDS)


def _slice_layers_of(raw: str) -> list[models.PodsetSliceRequiredTopologyConstraint]:
    """The layers of the multi-layer slice annotation, as Kueue's NewPodSetTopologyRequest reads them: Go's
    JSON, then 1 to 3 layers; raises TopologyRequestError naming the annotation. A layer without a topology
    or with a size under 1 (which Kueue's job webhooks refuse, and its Workload webhook) is refused too, and one
    the Workload's CRD refuses."""
    try:
        decoded = decode_slice_constraints(raw)
    except gojson.GoJSONError as err:
        raise TopologyRequestError(SLICE_CONSTRAINTS_ANNOTATION, f"must be a valid JSON array: {err}") from err
    if not 1 <= len(decoded) <= 3:
        raise TopologyRequestError(SLICE_CONSTRAINTS_ANNOTATION, CONSTRAINT_LAYERS_PROBLEM)
    for index, layer in enumerate(decoded):
        if layer["size"] < 1:
            raise TopologyRequestError(
                SLICE_CONSTRAINTS_ANNOTATION, f"[{index}].size: {layer['size']} must be greater than or equal to 1"
            )
        if not valid_label_key(layer["topology"]):
            raise TopologyRequestError(
                SLICE_CONSTRAINTS_ANNOTATION, f"[{index}].topology: {layer['topology']!r} is not a valid label key"
            )
    try:  # the Workload's own bounds (a topology of at most 63 characters: Kueue's CRD)
        return msgspec.convert(decoded, list[models.PodsetSliceRequiredTopologyConstraint])
    except msgspec.ValidationError as err:
        raise TopologyRequestError(SLICE_CONSTRAINTS_ANNOTATION, str(err)) from err


def topology_request_from_annotations(
    annotations: Mapping[str, str], *, multi_layer: bool = True
) -> models.PodSetTopologyRequest | None:
    """The topology request a pod template's annotations ask for (A.4.1), or None when they
    ask for none (Kueue jobframework/tas.go NewPodSetTopologyRequest).

    ``unconstrained: "false"`` is kept (``unconstrained: false``: not a TAS request, but Kueue's PodSetUpdate
    then injects no ``"true"`` of its own, pkg/podset/podset.go FromAssignment, which would conflict with the
    template's annotation). Precedence required > preferred > unconstrained; the group name is kept only with
    required/preferred; the multi-layer JSON is read only when ``multi_layer`` (the
    TASMultiLayerTopology gate) is on. Rank hints (podIndexLabel ...) are the integration's
    business and are not set here. Raises TopologyRequestError naming the annotation for a
    value Kueue's job webhooks reject (A.4.2): two modes at once, a non-boolean
    unconstrained, a bad slice size, multi-layer JSON Go cannot read into 1 to 3 layers
    (:func:`decode_slice_constraints`).
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
        raw_size = str(annotations[SLICE_SIZE_ANNOTATION])
        if not re.fullmatch(r"[+-]?[0-9]+", raw_size):  # Go's strconv.ParseInt(value, 10, 32), as Kueue reads it
            raise TopologyRequestError(SLICE_SIZE_ANNOTATION, "must be an integer")
        size = int(raw_size)
        if not _INT32_MIN <= size <= _INT32_MAX:
            raise TopologyRequestError(SLICE_SIZE_ANNOTATION, f"{raw_size} is out of the int32 range")
        fields["pod_set_slice_required_topology"] = annotations[SLICE_REQUIRED_ANNOTATION]
        fields["pod_set_slice_size"] = size
    if multi_layer and SLICE_CONSTRAINTS_ANNOTATION in annotations:
        fields["podset_slice_required_topology_constraints"] = _slice_layers_of(
            annotations[SLICE_CONSTRAINTS_ANNOTATION]
        )
    if GROUP_NAME_ANNOTATION in annotations and ("required" in fields or "preferred" in fields):
        fields["pod_set_group_name"] = annotations[GROUP_NAME_ANNOTATION]
    if not fields:
        return None
    request = models.PodSetTopologyRequest(**fields)  # type: ignore[arg-type]
    if not requests_tas(request) and request.unconstrained is None:
        return None
    return request
