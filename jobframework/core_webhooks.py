"""Kueue's webhooks of its own kinds: ClusterQueue, Cohort and ResourceFlavor (pkg/webhooks).

Why this module exists: Kueue ships, beside its job and Workload webhooks, ``mclusterqueue.kb.io`` and
``mresourceflavor.kb.io`` (defaulting, on CREATE) and ``vclusterqueue.kb.io``, ``vcohort.kb.io`` and
``vresourceflavor.kb.io`` (validation, on CREATE and UPDATE) (config/components/webhook/manifests.yaml).
Their checks are those a CRD schema cannot say; a real API server runs them only on what the schema
accepted. One set of rules serves both places that play them: ``kueue-es service webhook`` (an
AdmissionReview, :mod:`kueue_es.services.webhook.review`) and the emulated API server and ``kueue-es apply``
(through :mod:`kueue_es.validation`, whose refusals by these rules are 403 ``Denied``).

The objects are JSON (``dict``) with the CRD's defaults applied, as kube-apiserver hands them to a webhook.
Refusals are :class:`Refusal` (Kubernetes' field path, CauseType and ``field.Error`` body). Pure: no I/O.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kueue_es.events import quantities
from kueue_es.jobframework import workload_webhook
from kueue_es.jobframework.webhooks import FieldError

GROUP: Final = "kueue.x-k8s.io"
VERSION: Final = "v1beta2"
#: Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer (apis/kueue/v1beta2 constants.go ResourceInUseFinalizerName).
RESOURCE_IN_USE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"

#: Kubernetes' CauseType values (apimachinery field.ErrorType) of the refusals here.
INVALID: Final = "FieldValueInvalid"
DUPLICATE: Final = "FieldValueDuplicate"
NOT_SUPPORTED: Final = "FieldValueNotSupported"
REQUIRED: Final = "FieldValueRequired"
FORBIDDEN: Final = "FieldValueForbidden"
_CAUSE_TYPES: Final = {"Invalid": INVALID, "Required": REQUIRED, "Forbidden": FORBIDDEN, "NotSupported": NOT_SUPPORTED}


@dataclasses.dataclass(frozen=True)
class Hook:
    """One of Kueue's webhooks of its own kinds: ``kind`` (``ClusterQueue``), its ``plural`` and whether it
    defaults (``mutating``: its Default adds the ``resource-in-use`` finalizer) or validates."""

    kind: str
    plural: str
    mutating: bool

    @property
    def name(self) -> str:
        """Kueue's webhook name: ``mclusterqueue.kb.io``, ``vcohort.kb.io``."""
        return f"{'m' if self.mutating else 'v'}{self.kind.lower()}.kb.io"

    @property
    def path(self) -> str:
        """controller-runtime's path: ``/mutate-kueue-x-k8s-io-v1beta2-clusterqueue``."""
        verb = "mutate" if self.mutating else "validate"
        return f"/{verb}-{GROUP.replace('.', '-')}-{VERSION}-{self.kind.lower()}"

    @property
    def operations(self) -> list[str]:
        """The operations it is registered for: Kueue's Default on CREATE only, its validation on CREATE and
        UPDATE (the ``verbs`` of the kubebuilder markers)."""
        return ["CREATE"] if self.mutating else ["CREATE", "UPDATE"]


#: Kueue's webhooks of its own kinds at its HEAD (pkg/webhooks/*.go kubebuilder markers); Kueue has none for
#: LocalQueue, AdmissionCheck, Topology, WorkloadPriorityClass or the MultiKueue kinds: their CRDs' rules
#: are all there is.
HOOKS: Final[tuple[Hook, ...]] = (
    Hook("ClusterQueue", "clusterqueues", mutating=True),
    Hook("ResourceFlavor", "resourceflavors", mutating=True),
    Hook("ClusterQueue", "clusterqueues", mutating=False),
    Hook("Cohort", "cohorts", mutating=False),
    Hook("ResourceFlavor", "resourceflavors", mutating=False),
)
#: The kinds a validating webhook of :data:`HOOKS` checks.
VALIDATED_KINDS: Final = frozenset(h.kind for h in HOOKS if not h.mutating)
#: The kinds whose mutating webhook puts the ``resource-in-use`` finalizer on at creation.
FINALIZED_AT_CREATE: Final = frozenset(h.kind for h in HOOKS if h.mutating)


def hook_of_path(path: str) -> Hook | None:
    """The webhook of :data:`HOOKS` served at ``path``, or None."""
    return next((h for h in HOOKS if h.path == path), None)


@dataclasses.dataclass(frozen=True)
class Refusal:
    """One thing a validating webhook refuses: ``field`` (``spec.resourceGroups[0].flavors[1].name``), ``reason``
    (a Kubernetes CauseType) and ``message`` (the field.Error body without the field)."""

    field: str
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


def message(refusals: Sequence[Refusal]) -> str:
    """The denial text controller-runtime answers with: one refusal as it is, more as ``[r1, r2]``
    (utilerrors.Aggregate); kube-apiserver prefixes ``admission webhook "<name>" denied the request: ``."""
    texts = [str(r) for r in refusals]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def default(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as Kueue's mutating webhook of ``kind`` leaves it at creation (a copy): a ClusterQueue or
    ResourceFlavor gets the ``resource-in-use`` finalizer unless it has it (clusterqueue_webhook.go and
    resourceflavor_webhook.go Default). Other kinds come back unchanged."""
    out = copy.deepcopy(dict(obj))
    if kind in FINALIZED_AT_CREATE:
        meta = out.setdefault("metadata", {})
        finalizers = list(meta.get("finalizers") or [])
        if RESOURCE_IN_USE_FINALIZER not in finalizers:
            meta["finalizers"] = [*finalizers, RESOURCE_IN_USE_FINALIZER]
    return out


def validate(kind: str, obj: Mapping[str, Any], *, old: Mapping[str, Any] | None = None) -> list[Refusal]:
    """Every refusal of Kueue's validating webhook of ``kind`` (ClusterQueue, Cohort, ResourceFlavor; ``[]`` for
    another kind) for ``obj``, created, or updated from ``old`` (both with the CRD's defaults), in Kueue's order.

    The checks a schema cannot say (pkg/webhooks clusterqueue_webhook.go validateClusterQueueSpec,
    cohort_webhook.go validateCohort, common.go, resourceflavor_webhook.go): per quota its name is its covered
    resource, its nominalQuota, borrowingLimit and lendingLimit are not negative, a limit only with a cohort
    (a Cohort's: with a parent), a ClusterQueue's lendingLimit at most its nominalQuota; a covered resource is a
    label key and is covered once, a flavor is named once; at most 256 flavors and 256 covered resources in all
    and 512 flavor-resource pairs a group; a ClusterQueue's namespaceSelector is a label selector and its
    admission checks' onFlavors are its flavors; a fair-sharing weight is not negative and, when not 0, above
    1n; a ResourceFlavor's node labels, taints and tolerations. What Kueue's CRDs say themselves (a
    ClusterQueue's borrowingLimit without a cohort, the preemption and flavor fungibility rules) is the
    schema's and not repeated here. Quantities are named in their canonical form (``1000m`` as ``"1"``)."""
    refusals: list[Refusal] = []
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    if kind == "ClusterQueue":
        refusals += _resource_groups(spec, has_parent=bool(spec.get("cohortName")), cohort=False)
        if isinstance(spec.get("namespaceSelector"), Mapping):
            refusals += _refusals(
                workload_webhook.label_selector_errors(spec["namespaceSelector"], "spec.namespaceSelector")
            )
        refusals += _fair_sharing(spec)
        refusals += _totals(spec)
        old_spec = None if old is None else (old.get("spec") or {})
        refusals += _admission_check_on_flavors(spec, old_spec=old_spec)
    if kind == "Cohort":
        refusals += _fair_sharing(spec)
        refusals += _resource_groups(spec, has_parent=bool(spec.get("parentName")), cohort=True)
    if kind == "ResourceFlavor":
        refusals += _resource_flavor(spec)
    return refusals


CONCURRENT_ADMISSION_GATE: Final = "ConcurrentAdmission"
"""Kueue's alpha gate (off by default) under which its ClusterQueue webhook checks ``spec.concurrentAdmissionPolicy``."""
TRY_PREFERRED_FLAVORS: Final = "TryPreferredFlavors"
MAX_CONCURRENT_ADMISSION_FLAVORS: Final = 16


def concurrent_admission_refusals(spec: Mapping[str, Any], *, gates: Mapping[str, bool]) -> list[Refusal]:
    """The refusals of a ClusterQueue's ``spec`` (with the CRD's defaults, created or updated) for its
    ``concurrentAdmissionPolicy`` while ``gates`` turn ConcurrentAdmission on (alpha, off by default: then none),
    as Kueue's clusterqueue_webhook.go validateConcurrentAdmissionPolicy: exactly one resource group, at most 16
    flavors in it, ``migration.constraints`` only with mode TryPreferredFlavors, a ``lastAcceptableFlavorName``
    that is one of the ClusterQueue's flavors (listed sorted here; Kueue lists a Go set, in no fixed order), and no
    StrictFIFO queueing. ``[]`` when the ClusterQueue has no policy. Kueue's check that the policy is immutable
    (ValidateClusterQueueUpdate) is not made here."""
    policy = spec.get("concurrentAdmissionPolicy")
    if not gates.get(CONCURRENT_ADMISSION_GATE, False) or not isinstance(policy, Mapping):
        return []
    refusals: list[Refusal] = []
    groups = _list(spec.get("resourceGroups"))
    if len(groups) != 1:
        refusals.append(
            Refusal(
                "spec.resourceGroups",
                INVALID,
                f"Invalid value: {len(groups)}: must have exactly one ResourceGroup when ConcurrentAdmissionPolicy "
                "is defined",
            )
        )
    elif len(flavors := _list((groups[0] or {}).get("flavors"))) > MAX_CONCURRENT_ADMISSION_FLAVORS:
        refusals.append(
            Refusal(
                "spec.resourceGroups[0].flavors",
                INVALID,
                f"Invalid value: {len(flavors)}: cannot have more than {MAX_CONCURRENT_ADMISSION_FLAVORS} resource "
                "flavors in the ResourceGroup when ConcurrentAdmissionPolicy is defined",
            )
        )
    migration = policy.get("migration")
    constraints = migration.get("constraints") if isinstance(migration, Mapping) else None
    if isinstance(constraints, Mapping) and isinstance(migration, Mapping):
        mode = str(migration.get("mode") or "")
        where = "spec.concurrentAdmissionPolicy.migration.constraints"
        if mode and mode != TRY_PREFERRED_FLAVORS:
            refusals.append(
                Refusal(
                    where,
                    FORBIDDEN,
                    f'Forbidden: may only be set when migration.mode is "{TRY_PREFERRED_FLAVORS}" (got {_show(mode)})',
                )
            )
        elif (last := constraints.get("lastAcceptableFlavorName")) is not None:
            names = sorted({str(name) for name in _flavor_names(spec)})
            if last not in names:
                refusals.append(
                    Refusal(
                        f"{where}.lastAcceptableFlavorName",
                        INVALID,
                        f"Invalid value: {_show(last)}: must be one of the flavors defined in the ClusterQueue: "
                        f"[{' '.join(names)}]",
                    )
                )
    if spec.get("queueingStrategy") == "StrictFIFO":
        refusals.append(
            Refusal(
                "spec.queueingStrategy",
                INVALID,
                'Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be used when '
                "ConcurrentAdmissionPolicy is defined",
            )
        )
    return refusals


def _resource_groups(spec: Mapping[str, Any], *, has_parent: bool, cohort: bool) -> list[Refusal]:
    """common.go validateResourceGroups and validateFlavorQuotas, in their order: per group its covered resources
    (each a label key, each once in the spec), then per flavor its quotas (:func:`_quota`) and its name (once in
    the spec). ``has_parent``: the ClusterQueue has a cohort, or the Cohort a parent; ``cohort``: the spec is a
    Cohort's (its limits' message says "parent", and its lendingLimit may exceed its nominalQuota)."""
    refusals: list[Refusal] = []
    seen_resources: set[Any] = set()
    seen_flavors: set[Any] = set()
    for g, group in enumerate(_list(spec.get("resourceGroups"))):
        if not isinstance(group, Mapping):
            continue
        covered = _list(group.get("coveredResources"))
        for r, resource in enumerate(covered):
            where = f"spec.resourceGroups[{g}].coveredResources[{r}]"
            refusals += _refusals(workload_webhook.label_name_errors(str(resource), where))
            if resource in seen_resources:
                refusals.append(Refusal(where, DUPLICATE, f"Duplicate value: {_show(resource)}"))
            seen_resources.add(resource)
        for f, flavor in enumerate(_list(group.get("flavors"))):
            if not isinstance(flavor, Mapping):
                continue
            where = f"spec.resourceGroups[{g}].flavors[{f}]"
            for q, quota in enumerate(_list(flavor.get("resources"))[: len(covered)]):
                if isinstance(quota, Mapping):
                    refusals += _quota(quota, covered[q], f"{where}.resources[{q}]", has_parent, cohort)
            if flavor.get("name") in seen_flavors:
                refusals.append(Refusal(f"{where}.name", DUPLICATE, f"Duplicate value: {_show(flavor.get('name'))}"))
            seen_flavors.add(flavor.get("name"))
    return refusals


def _quota(quota: Mapping[str, Any], covered: Any, where: str, has_parent: bool, cohort: bool) -> list[Refusal]:
    """common.go validateFlavorQuotas for one quota at ``where``: its name is ``covered``; nominalQuota not
    negative; a borrowingLimit only with a parent (validateLimit), not negative; a lendingLimit not negative,
    only with a parent, and for a ClusterQueue at most the nominalQuota (validateLendingLimit)."""
    refusals: list[Refusal] = []
    if quota.get("name") != covered:
        refusals.append(
            Refusal(
                f"{where}.name",
                INVALID,
                f"Invalid value: {_show(quota.get('name'))}: must match the name in coveredResources",
            )
        )
    nominal = quota.get("nominalQuota")
    refusals += _negative(nominal, f"{where}.nominalQuota")
    without_parent = f"must be nil when {'parent' if cohort else 'cohort'} is empty"
    if (borrowing := quota.get("borrowingLimit")) is not None:
        if not has_parent:
            refusals.append(
                Refusal(f"{where}.borrowingLimit", INVALID, f"Invalid value: {_quantity(borrowing)}: {without_parent}")
            )
        refusals += _negative(borrowing, f"{where}.borrowingLimit")
    if (lending := quota.get("lendingLimit")) is not None:
        refusals += _negative(lending, f"{where}.lendingLimit")
        if not has_parent:
            refusals.append(
                Refusal(f"{where}.lendingLimit", INVALID, f"Invalid value: {_quantity(lending)}: {without_parent}")
            )
        if not cohort and parses_as_quantity(lending) and parses_as_quantity(nominal if nominal is not None else 0):
            if quantities.parse_decimal(lending) > quantities.parse_decimal(nominal if nominal is not None else 0):
                refusals.append(
                    Refusal(
                        f"{where}.lendingLimit",
                        INVALID,
                        f"Invalid value: {_quantity(lending)}: must be less than or equal to the nominalQuota",
                    )
                )
    return refusals


def _negative(value: Any, where: str) -> list[Refusal]:
    """validateResourceQuantity: ``value`` (a quantity) at ``where`` is not negative."""
    if parses_as_quantity(value) and quantities.parse_decimal(value) < 0:
        return [Refusal(where, INVALID, f"Invalid value: {_quantity(value)}: must be greater than or equal to 0")]
    return []


def _fair_sharing(spec: Mapping[str, Any]) -> list[Refusal]:
    """common.go validateFairSharing, on ``spec.fairSharing`` (a ClusterQueue's or a Cohort's; Kueue has no
    webhook for LocalQueues, whose weight is not checked): the weight is not negative, and when above 0 it is
    above 1n (a smaller one collapses to 0 in the share's arithmetic, kueue#6986)."""
    fair_sharing = spec.get("fairSharing")
    weight: Any = fair_sharing.get("weight") if isinstance(fair_sharing, Mapping) else None
    if not parses_as_quantity(weight):
        return []
    number = quantities.parse_decimal(weight)
    refusals = _negative(weight, "spec.fairSharing")
    if 0 < number <= NANO:
        refusals.append(
            Refusal(
                "spec.fairSharing", INVALID, f"Invalid value: {_quantity(weight)}: When not 0, weight must be > 10e-9"
            )
        )
    return refusals


NANO: Final = quantities.parse_decimal("1n")
MAX_TOTAL_FLAVORS: Final = 256
MAX_TOTAL_COVERED_RESOURCES: Final = 256
MAX_FLAVOR_RESOURCES_PER_GROUP: Final = 512


def _totals(spec: Mapping[str, Any]) -> list[Refusal]:
    """clusterqueue_webhook.go validateTotalFlavors, validateTotalCoveredResources and
    validateFlavorResourceCombinations: the bounds the CRD's per-list limits leave open."""
    refusals: list[Refusal] = []
    groups = [g for g in _list(spec.get("resourceGroups")) if isinstance(g, Mapping)]
    for what, field, limit in (
        ("flavors", "flavors", MAX_TOTAL_FLAVORS),
        ("covered resources", "coveredResources", MAX_TOTAL_COVERED_RESOURCES),
    ):
        total = sum(len(_list(g.get(field))) for g in groups)
        if total > limit:
            message = f"total number of {what} across all resourceGroups must be ≤ {limit}, got {total}"
            refusals.append(Refusal("spec.resourceGroups", INVALID, f"Invalid value: {total}: {message}"))
    for g, group in enumerate(_list(spec.get("resourceGroups"))):
        if not isinstance(group, Mapping):
            continue
        pairs = sum(len(_list(f.get("resources"))) for f in _list(group.get("flavors")) if isinstance(f, Mapping))
        if pairs > MAX_FLAVOR_RESOURCES_PER_GROUP:
            refusals.append(
                Refusal(
                    f"spec.resourceGroups[{g}]",
                    INVALID,
                    f"Invalid value: {pairs}: number of flavor-resource combinations in a resourceGroup must be "
                    f"≤ {MAX_FLAVOR_RESOURCES_PER_GROUP}, got {pairs}",
                )
            )
    return refusals


def _resource_flavor(spec: Mapping[str, Any]) -> list[Refusal]:
    """resourceflavor_webhook.go ValidateResourceFlavor: ``nodeLabels`` are labels (qualified keys, label
    values); each of ``nodeTaints`` has a qualified key and a label value and is the only one of its key and
    effect; each of ``tolerations`` with a key has a qualified one (workload_webhook.go validateTolerations)."""
    node_labels = spec.get("nodeLabels")
    refusals = _refusals(
        workload_webhook.label_errors(node_labels if isinstance(node_labels, Mapping) else {}, "spec.nodeLabels")
    )
    seen: set[tuple[str, Any]] = set()
    for i, taint in enumerate(_list(spec.get("nodeTaints"))):
        if not isinstance(taint, Mapping):
            continue
        where, key, value = f"spec.nodeTaints[{i}]", str(taint.get("key") or ""), str(taint.get("value") or "")
        refusals += _refusals(workload_webhook.label_name_errors(key, f"{where}.key"))
        if problems := workload_webhook.label_value_problems(value):
            refusals.append(Refusal(f"{where}.value", INVALID, f"Invalid value: {_show(value)}: {';'.join(problems)}"))
        effect = str(taint.get("effect") or "")
        if (key, effect) in seen:
            # field.Duplicate of a corev1.Taint, which Go prints as its %#v
            shown = (
                f"v1.Taint{{Key:{_show(key)}, Value:{_show(value)}, Effect:{_show(effect)}, TimeAdded:(*v1.Time)(nil)}}"
            )
            refusals.append(
                Refusal(where, DUPLICATE, f"Duplicate value: {shown}: taints must be unique by key and effect pair")
            )
        seen.add((key, effect))
    for i, toleration in enumerate(_list(spec.get("tolerations"))):
        if isinstance(toleration, Mapping) and toleration.get("key"):
            where = f"spec.tolerations[{i}].key"
            refusals += _refusals(workload_webhook.label_name_errors(str(toleration["key"]), where))
    return refusals


def _admission_check_on_flavors(spec: Mapping[str, Any], *, old_spec: Mapping[str, Any] | None) -> list[Refusal]:
    """Each ``spec.admissionChecksStrategy.admissionChecks[i].onFlavors[j]`` must be a flavor of the
    ClusterQueue's resource groups (Kueue PR #10336/#10369, clusterqueue_webhook.go
    validateAdmissionCheckOnFlavors): a check on a flavor the queue has no quota in would never apply.
    An update (``old_spec`` not None) that keeps both the queue's flavors and a check's onFlavors as they
    were lets that check through, so a ClusterQueue stored before the rule can still be edited
    (validateAdmissionCheckOnFlavorsUpdate with the alpha gate RejectUpdatesToCQWithInvalidOnFlavors
    off, its default)."""
    checks = _list((spec.get("admissionChecksStrategy") or {}).get("admissionChecks"))
    flavors = _flavor_names(spec)
    kept: dict[Any, set[Any]] = {}
    if old_spec is not None and set(_flavor_names(old_spec)) == set(flavors):
        old_checks = _list((old_spec.get("admissionChecksStrategy") or {}).get("admissionChecks"))
        kept = {c.get("name"): set(c.get("onFlavors") or []) for c in old_checks if isinstance(c, Mapping)}
    supported = ", ".join(json.dumps(f) for f in flavors)
    refusals: list[Refusal] = []
    for i, check in enumerate(checks):
        if not isinstance(check, Mapping):
            continue
        on_flavors = check.get("onFlavors") or []
        if kept.get(check.get("name")) == set(on_flavors):
            continue
        for j, flavor in enumerate(on_flavors):
            if flavor not in flavors:
                text = f"Unsupported value: {_show(flavor)}" + (f": supported values: {supported}" if flavors else "")
                where = f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]"
                refusals.append(Refusal(where, NOT_SUPPORTED, text))
    return refusals


def _flavor_names(spec: Mapping[str, Any]) -> list[Any]:
    """The flavors of a ClusterQueue spec's resource groups, in order, each once."""
    names: list[Any] = []
    for group in _list(spec.get("resourceGroups")):
        for flavor in _list((group or {}).get("flavors")):
            if isinstance(flavor, Mapping) and flavor.get("name") not in names:
                names.append(flavor.get("name"))
    return names


def _refusals(errors: list[FieldError]) -> list[Refusal]:
    """Field errors of a shared Kueue rule as refusals, their field split off the text."""
    return [
        Refusal(error.field, _CAUSE_TYPES.get(error.type, INVALID), str(error).removeprefix(f"{error.field}: "))
        for error in errors
    ]


def parses_as_quantity(value: Any) -> bool:
    """Whether ``value`` (a YAML scalar) is a Kubernetes quantity: a string or number
    :func:`~kueue_es.events.quantities.parse_decimal` reads; None and booleans are not."""
    try:
        quantities.parse_decimal(value)
    except (quantities.QuantityError, ValueError, TypeError, ArithmeticError):
        return False
    return value is not None and not isinstance(value, bool)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _quantity(value: Any) -> str:
    """A quantity as Kueue's webhooks name it in a field error: ``resource.Quantity.String()``, quoted."""
    try:
        return json.dumps(quantities.canonical(value))
    except (quantities.QuantityError, ValueError, TypeError, ArithmeticError):
        return _show(value)


def _show(value: Any) -> str:
    """A value as Kubernetes' field errors print it: strings quoted, numbers bare, else its JSON type."""
    if isinstance(value, str | bool | int | float):
        return json.dumps(value)
    return '"object"' if isinstance(value, dict) else '"array"' if isinstance(value, list) else '"null"'
