"""Kubernetes label and field selectors: parsing and matching.

Why this module exists: the emulated API server must filter lists and watches
by ``labelSelector`` and ``fieldSelector`` the way a real one does, and that is
a small grammar worth keeping pure and tested on its own.

Label selectors (comma = AND): ``key``, ``!key``, ``key=v``, ``key==v``,
``key!=v``, ``key in (a,b)``, ``key notin (a,b)``, ``key>3``, ``key<3``.
As in Kubernetes, ``!=`` and ``notin`` also match objects without the label.

Field selectors (comma = AND): ``path=v``, ``path==v``, ``path!=v`` where path
is a dotted path such as ``metadata.name`` or ``status.phase``; a missing field
compares as the empty string. As a real server, only the paths a kind declares
selectable are accepted (:func:`check_selectable`: ``metadata.name``, a namespaced
kind's ``metadata.namespace``, a few per built-in kind, such as a Pod's
``spec.nodeName`` or an Event's ``involvedObject.name``, and a custom kind's CRD
``selectableFields``, such as a Kueue Workload's ``status.admission.clusterQueue``); any
other is refused with the message of the kind's field label conversion.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EXISTS = re.compile(rf"^\s*({_KEY})\s*$")
_NOT_EXISTS = re.compile(rf"^\s*!\s*({_KEY})\s*$")
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_COMPARE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=|>|<)\s*({_VALUE})\s*$")
_FIELD = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(==|=|!=)\s*(.*?)\s*$")


class SelectorError(ValueError):
    """A selector string does not follow the Kubernetes grammar."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabelRequirement:
    """One ANDed term of a label selector.

    ``operator`` is one of ``exists``, ``!exists``, ``=``, ``!=``, ``in``,
    ``notin``, ``>``, ``<``; ``values`` holds the operand(s).
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this term."""
        present = self.key in labels
        value = labels.get(self.key)
        match self.operator:
            case "exists":
                return present
            case "!exists":
                return not present
            case "=" | "in":
                return present and value in self.values
            case "!=" | "notin":
                return not present or value not in self.values
            case ">" | "<":
                return present and _compare_ints(value, self.values[0], greater=self.operator == ">")
        raise AssertionError(f"unknown operator {self.operator!r}")  # pragma: no cover


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether a label set (``metadata.labels``, may be None) satisfies every term."""
        labels = labels or {}
        return all(requirement.matches(labels) for requirement in self.requirements)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FieldRequirement:
    """One ANDed term of a field selector: ``path`` ``=``/``!=`` ``value``."""

    path: str
    operator: str
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether the object's field at ``path`` compares as required."""
        equal = _field_as_string(obj, self.path) == self.value
        return equal if self.operator == "=" else not equal


@dataclasses.dataclass(frozen=True, kw_only=True)
class FieldSelector:
    """A parsed field selector; the empty selector matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether the object satisfies every term."""
        return all(requirement.matches(obj) for requirement in self.requirements)


#: The empty selectors: they match every object.
EVERYTHING = LabelSelector()
ANY_FIELDS = FieldSelector()


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector string; raises SelectorError naming the bad term."""
    if not text or not text.strip():
        return LabelSelector()
    return LabelSelector(requirements=tuple(_parse_label_term(term) for term in _split_terms(text)))


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a field selector string; raises SelectorError naming the bad term."""
    if not text or not text.strip():
        return FieldSelector()
    requirements = []
    for term in _split_terms(text):
        match = _FIELD.match(term)
        if match is None:
            raise SelectorError(f"invalid field selector term {term!r}: expected path=value or path!=value")
        path, operator, value = match.groups()
        requirements.append(FieldRequirement(path=path, operator="!=" if operator == "!=" else "=", value=value))
    return FieldSelector(requirements=tuple(requirements))


#: How a LabelSelector's matchExpressions operators print (apimachinery labels.Requirement.String).
_EXPRESSION_FORMATS = {"In": "{key} in ({values})", "NotIn": "{key} notin ({values})"}


def format_label_selector(selector: Any) -> str:
    """A ``metav1.LabelSelector`` (``matchLabels``, ``matchExpressions``) as kubectl's wide columns print it
    (apimachinery metav1.FormatLabelSelector): its terms sorted by key, ``key=value``, ``key in (a,b)``, ``key
    notin (a,b)``, ``key`` (Exists), ``!key`` (DoesNotExist), comma-separated; ``<none>`` for no selector or an
    empty one, ``<error>`` for one that cannot be read (an unknown operator, In without values, ...)."""
    if not isinstance(selector, Mapping):
        return "<none>"
    match_labels, expressions = selector.get("matchLabels") or {}, selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        return "<error>"
    terms = [(str(key), f"{key}={value}") for key, value in match_labels.items()]
    for expression in expressions:
        term = _expression_term(expression)
        if term is None:
            return "<error>"
        terms.append(term)
    return ",".join(text for _, text in sorted(terms, key=lambda term: term[0])) or "<none>"


def _expression_term(expression: Any) -> tuple[str, str] | None:
    """(key, printed term) of one ``matchExpressions`` entry; None when LabelSelectorAsSelector refuses it."""
    if not isinstance(expression, Mapping):
        return None
    key, operator, values = str(expression.get("key") or ""), expression.get("operator"), expression.get("values")
    values = values if isinstance(values, list) else []
    if operator in _EXPRESSION_FORMATS and values:
        return key, _EXPRESSION_FORMATS[operator].format(key=key, values=",".join(sorted(str(v) for v in values)))
    if operator in ("Exists", "DoesNotExist") and not values:
        return key, key if operator == "Exists" else f"!{key}"
    return None


def _parse_label_term(term: str) -> LabelRequirement:
    if match := _NOT_EXISTS.match(term):
        return LabelRequirement(key=match.group(1), operator="!exists")
    if match := _SET.match(term):
        key, operator, raw_values = match.groups()
        values = tuple(value.strip() for value in raw_values.split(","))
        if not all(re.fullmatch(_VALUE, value) for value in values):
            raise SelectorError(f"invalid label selector term {term!r}: a value in the set is not a label value")
        return LabelRequirement(key=key, operator=operator, values=values)
    if match := _COMPARE.match(term):
        key, operator, value = match.groups()
        if operator in (">", "<") and not re.fullmatch(r"-?\d+", value):
            raise SelectorError(f"invalid label selector term {term!r}: {operator} needs an integer")
        return LabelRequirement(key=key, operator="=" if operator == "==" else operator, values=(value,))
    if match := _EXISTS.match(term):
        return LabelRequirement(key=match.group(1), operator="exists")
    raise SelectorError(f"invalid label selector term {term!r}")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses; empty terms are errors."""
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in selector {text!r}")
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise SelectorError(f"unbalanced '(' in selector {text!r}")
    terms.append("".join(current))
    if any(not term.strip() for term in terms):
        raise SelectorError(f"empty term in selector {text!r}")
    return terms


def _compare_ints(value: str | None, operand: str, *, greater: bool) -> bool:
    try:
        number = int(value or "")
    except ValueError:
        return False
    return number > int(operand) if greater else number < int(operand)


def _field_as_string(obj: Mapping[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return ""
        current = current[part]
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


#: The fields besides ``metadata.name`` and ``metadata.namespace`` each built-in kind's field selectors
#: may name, by (group, kind): the field label conversion functions of Kubernetes' API types
#: (pkg/apis/core/v1/conversion.go, pkg/apis/batch/v1/conversion.go, ...).
SELECTABLE: dict[tuple[str, str], frozenset[str]] = {
    ("", "Pod"): frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        }
    ),
    ("", "Event"): frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    # the same Events through events.k8s.io/v1, by its own names (pkg/apis/events/v1/conversion.go; the emulator
    # selects on the core/v1 fields they stand for: kueue_es.sim.event_versions.FIELD_LABELS)
    ("events.k8s.io", "Event"): frozenset(
        {
            "reason",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reportingController",
            "type",
        }
    ),
    ("", "Node"): frozenset({"spec.unschedulable"}),
    ("", "Namespace"): frozenset({"status.phase"}),
    ("", "Secret"): frozenset({"type"}),
    ("", "Service"): frozenset({"spec.clusterIP", "spec.type"}),
    ("batch", "Job"): frozenset({"status.successful"}),
    ("apps", "ReplicaSet"): frozenset({"status.replicas"}),
}


def check_selectable(
    selector: FieldSelector,
    *,
    group: str,
    kind: str,
    namespaced: bool,
    custom: bool,
    selectable: tuple[str, ...] = (),
) -> None:
    """Raise SelectorError for a field the kind's objects cannot be selected by, worded as the API server's
    field label conversion words it (then answered 400 BadRequest): a custom resource (a CRD's kind; Kueue's
    kinds are ones) takes ``metadata.name``, ``metadata.namespace`` when namespaced, and the paths of its
    CRD's ``selectableFields`` (``selectable``, without the leading dot); a built-in kind its own list
    (:data:`SELECTABLE`) or, without one, the two metadata fields."""
    for requirement in selector.requirements:
        label = requirement.path
        if custom:
            if label == "metadata.name" or (namespaced and label == "metadata.namespace") or label in selectable:
                continue
            raise SelectorError(f"field label not supported: {label}")
        own = SELECTABLE.get((group, kind))
        if own is None:
            if label not in ("metadata.name", "metadata.namespace"):
                raise SelectorError(
                    f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'
                )
            continue
        if label in own or label == "metadata.name" or (label == "metadata.namespace" and kind != "Node"):
            continue
        if group == "batch":
            raise SelectorError(f'field label "{label}" not supported for {kind}')
        raise SelectorError(f"field label not supported: {label}")
