"""The objects ``kubectl kueue create`` builds, from its flags as kueuectl parses them.

kueuectl's rules (cmd/kueuectl/app/create/create_clusterqueue.go, create_resourceflavor.go):

- ``--nominal-quota``, ``--borrowing-limit``, ``--lending-limit`` take ``FLAVOR:RESOURCE=VALUE;...``, several
  flavors separated by commas (or the flag repeated). The entries of one flavor across the three flags
  must name the same resources (else ``invalid flavor``); flavors covering the same set of resources
  form one resource group, in the order first seen; a set that is part of another group's set is
  refused (``invalid resource group``). Values are Kubernetes quantities of word characters only (``9``,
  ``36Gi``, ``500m``; not ``1.5``) - ``invalid resources specification`` otherwise.
- The ClusterQueue gets ``queueingStrategy: BestEffortFIFO`` and both preemption policies ``Never`` unless
  given, and ``namespaceSelector: {}`` (every namespace) unless ``--namespace-selector`` is.
- ``--node-taints KEY[=VALUE]:EFFECT`` (an effect is required; NoSchedule, PreferNoSchedule or NoExecute;
  one taint per key and effect) and ``--tolerations KEY[=VALUE][:EFFECT]`` or ``:EFFECT`` (operator
  Equal when a value is given, else Exists).

Each function returns the manifest as a dict and raises :class:`~kueue_es.kueuectl.connect.Failure` with
kueuectl's message.
"""

from __future__ import annotations

import re
from typing import Any

from kueue_es.events.quantities import QuantityError, canonical
from kueue_es.events.tas_requests import valid_label_key
from kueue_es.kueuectl.connect import Failure

API_VERSION = "kueue.x-k8s.io/v1beta2"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_ITEM = r"(?:\w(?:[.-]?\w)*[.-]?)?/?\w+=\w+"  # kueuectl's (\w+[\.-]?)*\/?\w+=\w+, without nested repeats
_QUOTA_SPEC = re.compile(rf"([a-z0-9][a-z0-9\-.]{{0,252}}):(?:{_ITEM};)*{_ITEM};?", re.ASCII)
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_QUOTA_FIELDS = {"nominal-quota": "nominalQuota", "borrowing-limit": "borrowingLimit", "lending-limit": "lendingLimit"}


def split_list(values: list[str] | None) -> list[str]:
    """A StringSlice flag's values: each occurrence split at commas (pflag's CSV reading), empties dropped."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def parse_key_values(values: list[str] | None, flag: str) -> dict[str, str]:
    """A StringToString flag (``k1=v1,k2=v2``, repeatable) as a dict; raises Failure naming ``flag`` for an
    entry without ``=`` (pflag's ``invalid argument``)."""
    result: dict[str, str] = {}
    for part in split_list(values):
        key, eq, value = part.partition("=")
        if not eq:
            raise Failure(f'invalid argument "{part}" for "--{flag}" flag: {part} must be formatted as key=value')
        result[key] = value
    return result


def resource_groups(nominal: list[str], borrowing: list[str], lending: list[str]) -> list[dict[str, Any]]:
    """``spec.resourceGroups`` from the three quota flags (each a list of ``FLAVOR:R=V;R=V`` entries)."""
    flavors: dict[str, list[dict[str, Any]]] = {}  # flavor -> its resources, in order first seen
    for flag, entries in (("nominal-quota", nominal), ("borrowing-limit", borrowing), ("lending-limit", lending)):
        for entry in entries:
            if not _QUOTA_SPEC.fullmatch(entry):
                raise Failure("invalid resources specification")
            flavor, _, spec = entry.partition(":")
            flavor = flavor.strip()
            quotas = []
            for item in (part for part in spec.split(";") if part.strip()):
                name, _, value = item.partition("=")
                try:
                    quantity = canonical(value.strip())
                except QuantityError:
                    raise Failure("invalid resource quota") from None
                quotas.append({"name": name.strip(), _QUOTA_FIELDS[flag]: quantity})
            known = flavors.get(flavor)
            if known is None:
                flavors[flavor] = quotas
                continue
            if sorted(q["name"] for q in known) != sorted(q["name"] for q in quotas):
                raise Failure("invalid flavor")  # kueuectl: the same flavor listed with other resources
            for quota in quotas:
                target = next(q for q in known if q["name"] == quota["name"])
                for key, value in quota.items():
                    target.setdefault(key, value)
    groups: list[dict[str, Any]] = []
    group_of: dict[str, int] = {}
    for flavor, quotas in flavors.items():
        for quota in quotas:
            quota.setdefault("nominalQuota", "0")
        covered = [q["name"] for q in quotas]
        group_id = ".".join(sorted(covered))
        if group_id in group_of:
            groups[group_of[group_id]]["flavors"].append({"name": flavor, "resources": quotas})
            continue
        if any(group_id in other for other in group_of):  # kueuectl: a group sharing resources with another
            raise Failure("invalid resource group")
        group_of[group_id] = len(groups)
        groups.append({"coveredResources": covered, "flavors": [{"name": flavor, "resources": quotas}]})
    return groups


def cluster_queue(
    name: str,
    *,
    cohort: str = "",
    queueing_strategy: str | None = None,
    namespace_selector: dict[str, str] | None = None,
    reclaim_within_cohort: str | None = None,
    preemption_within_cluster_queue: str | None = None,
    nominal_quota: list[str] | None = None,
    borrowing_limit: list[str] | None = None,
    lending_limit: list[str] | None = None,
) -> dict[str, Any]:
    """The ClusterQueue ``kubectl kueue create clusterqueue NAME ...`` sends (the quota flags as
    :func:`resource_groups` reads them; None: the flag was not given)."""
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": namespace_selector} if namespace_selector else {},
        "preemption": {
            "reclaimWithinCohort": reclaim_within_cohort if reclaim_within_cohort is not None else "Never",
            "withinClusterQueue": (
                preemption_within_cluster_queue if preemption_within_cluster_queue is not None else "Never"
            ),
        },
        "queueingStrategy": queueing_strategy if queueing_strategy is not None else "BestEffortFIFO",
    }
    if cohort:
        spec["cohortName"] = cohort
    groups = resource_groups(split_list(nominal_quota), split_list(borrowing_limit), split_list(lending_limit))
    if groups:
        spec["resourceGroups"] = groups
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
    """The LocalQueue ``kubectl kueue create localqueue NAME -c CQ`` sends in ``namespace``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def resource_flavor(
    name: str,
    *,
    node_labels: dict[str, str] | None = None,
    node_taints: list[str] | None = None,
    tolerations: list[str] | None = None,
    topology_name: str | None = None,
) -> dict[str, Any]:
    """The ResourceFlavor ``kubectl kueue create resourceflavor NAME ...`` sends."""
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    taints = parse_taints(split_list(node_taints))
    if taints:
        spec["nodeTaints"] = taints
    parsed_tolerations = [parse_toleration(t) for t in split_list(tolerations)]
    if parsed_tolerations:
        spec["tolerations"] = parsed_tolerations
    if topology_name:
        spec["topologyName"] = topology_name
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def _split_item(text: str) -> tuple[str, str, str] | None:
    parts = text.split(":")
    if len(parts) > 2:
        return None
    key_value = parts[0].split("=")
    if len(key_value) > 2:
        return None
    return key_value[0], key_value[1] if len(key_value) > 1 else "", parts[1] if len(parts) > 1 else ""


def _check_effect(effect: str) -> None:
    if effect not in TAINT_EFFECTS:
        raise Failure(f"invalid taint effect: {effect}, unsupported taint effect")


def _check_key_value(text: str, key: str, value: str, what: str) -> None:
    if key and not valid_label_key(key):
        raise Failure(f"invalid {what} spec: {text}, {key!r} is not a valid label key")
    if value and (len(value) > 63 or not _LABEL_VALUE.fullmatch(value)):
        raise Failure(f"invalid {what} spec: {text}, {value!r} is not a valid label value")


def parse_taints(specs: list[str]) -> list[dict[str, str]]:
    """``--node-taints`` entries (``KEY[=VALUE]:EFFECT``) as taints; raises Failure for a bad one or a
    second taint with the same key and effect."""
    taints: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for text in specs:
        parts = _split_item(text)
        if parts is None or not parts[2]:
            raise Failure(f"invalid taint spec: {text}")
        key, value, effect = parts
        _check_effect(effect)
        if not key:
            raise Failure(f"invalid taint spec: {text}, '' is not a valid label key")
        _check_key_value(text, key, value, "taint")
        if (key, effect) in seen:
            shown = f"{key}={value}:{effect}" if value else f"{key}:{effect}"
            raise Failure(f"duplicated taints with the same key and effect: {shown}")
        seen.add((key, effect))
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        taints.append(taint)
    return taints


def parse_toleration(text: str) -> dict[str, str]:
    """One ``--tolerations`` entry (``KEY[=VALUE][:EFFECT]`` or ``:EFFECT``) as a toleration."""
    parts = _split_item(text)
    if parts is None:
        raise Failure(f"invalid toleration spec: {text}")
    key, value, effect = parts
    if not key and value:
        raise Failure(f"invalid toleration spec: {text}")
    if effect:
        _check_effect(effect)
    _check_key_value(text, key, value, "toleration")
    toleration = {"operator": "Equal" if key and value else "Exists"}
    if key:
        toleration["key"] = key
    if value:
        toleration["value"] = value
    if effect:
        toleration["effect"] = effect
    return toleration
