"""kube-apiserver's Priority admission plugin, for the emulated API server: a Pod's priority from its PriorityClass.

Why this module exists: every real cluster runs the plugin (plugin/pkg/admission/priority/admission.go admitPod),
so a Pod reads back with ``spec.priority`` and ``spec.preemptionPolicy``, a Pod naming a PriorityClass that does not
exist is refused, and what reads a pod's priority sees it: the emulated kube-scheduler's queue order
(higher priority first) and Kueue's pod role hash (``priority`` is part of the shape it hashes), which Kueue's
pod webhook computes after the plugin ran (it runs before the mutating webhooks).

On create only, for a Pod:

* without ``spec.priorityClassName``: the cluster's default class, the ``globalDefault`` PriorityClass of lowest
  value, whose name is written into ``spec.priorityClassName``; without one, priority 0 and
  ``PreemptLowerPriority`` (getDefaultPriority);
* with one: that class's ``value`` and ``preemptionPolicy``; none of that name is 403 Forbidden
  ``no PriorityClass with name NAME was found``;
* a ``spec.priority`` or ``spec.preemptionPolicy`` the request gave that differs from the computed one is 403.

Pure: the caller (:meth:`kueue_es.sim.store.ObjectStore.create`) passes the stored PriorityClasses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kueue_es import validation

#: The priority of a pod with no class when no PriorityClass is the global default
#: (scheduling.DefaultPriorityWhenNoDefaultClassExists).
NO_DEFAULT_CLASS_PRIORITY = 0
#: A PriorityClass's preemption policy when it gives none (SetDefaults_PriorityClass), and a pod's without a class.
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"


class PriorityRefused(ValueError):
    """The plugin refuses the pod (403 Forbidden): the message after ``pods "NAME" is forbidden: ``."""


def admit_pod(pod: dict[str, Any], classes: Iterable[Mapping[str, Any]]) -> None:
    """Write ``spec.priority``, ``spec.preemptionPolicy`` and, from the default class, ``spec.priorityClassName``
    into ``pod`` (a Pod about to be created; ``classes``: every stored PriorityClass), as the module docstring
    says. Raises PriorityRefused."""
    spec = pod.setdefault("spec", {})
    known = {str((c.get("metadata") or {}).get("name")): c for c in classes}
    name = spec.get("priorityClassName")
    if name:
        found = known.get(str(name))
        if found is None:
            raise PriorityRefused(f"no PriorityClass with name {name} was found")
        priority, policy = _value(found), str(found.get("preemptionPolicy") or DEFAULT_PREEMPTION_POLICY)
    else:
        defaults = sorted((c for c in known.values() if c.get("globalDefault") is True), key=_value)
        if defaults:
            chosen = defaults[0]
            priority = _value(chosen)
            policy = str(chosen.get("preemptionPolicy") or DEFAULT_PREEMPTION_POLICY)
            spec["priorityClassName"] = str((chosen.get("metadata") or {}).get("name"))
        else:
            priority, policy = NO_DEFAULT_CLASS_PRIORITY, DEFAULT_PREEMPTION_POLICY
    given = spec.get("priority")
    if given is not None and given != priority:
        raise PriorityRefused(
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {priority} from the given PriorityClass name"
        )
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise PriorityRefused(
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; priority "
            f"admission controller computed {policy} from the given PriorityClass name"
        )
    spec["priority"] = priority
    spec["preemptionPolicy"] = policy


def _value(priority_class: Mapping[str, Any]) -> int:
    value = priority_class.get("value")
    return value if isinstance(value, int) else 0


#: The highest value a PriorityClass that is not a system one may have (scheduling.HighestUserDefinablePriority).
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
#: The prefix of the system PriorityClasses' names (scheduling.SystemPriorityClassPrefix).
SYSTEM_PREFIX = "system-"
#: The system PriorityClasses every API server makes, by name: their values (pkg/apis/scheduling/v1/helpers.go).
SYSTEM_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")


def priority_class_causes(
    priority_class: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> list[tuple[str, str, str]]:
    """What kube-apiserver's validation refuses in ``priority_class`` (created, or updated over ``old``), as
    ``(field, cause type, message)`` for a 422 (pkg/apis/scheduling/validation ValidatePriorityClass,
    ValidatePriorityClassUpdate): a ``system-`` name that is not a system class of that value (and
    ``globalDefault`` false); a value above 1000000000 on another; a ``preemptionPolicy`` that is not one of
    :data:`PREEMPTION_POLICIES`; on update, a changed ``value`` or ``preemptionPolicy``. Cause types are
    :mod:`kueue_es.validation`'s (Kubernetes' ``FieldValueForbidden``...); [] when nothing is wrong."""
    causes: list[tuple[str, str, str]] = []
    name = str((priority_class.get("metadata") or {}).get("name") or "")
    value = _value(priority_class)
    if name.startswith(SYSTEM_PREFIX):
        known = SYSTEM_CLASSES.get(name)
        if known is None:
            why = f"{name} is not a known system priority class"
        elif known != value:
            why = f"value of {name} PriorityClass must be {known}"
        elif priority_class.get("globalDefault") is True:
            why = f"globalDefault of {name} PriorityClass must be false"
        else:
            why = ""
        if why:
            reserved = f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: "
            causes.append(("metadata.name", validation.FORBIDDEN, f"Forbidden: {reserved}{why}"))
    elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
        causes.append(
            (
                "value",
                validation.FORBIDDEN,
                f"Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        )
    policy = priority_class.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in PREEMPTION_POLICIES)
        causes.append(
            (
                "preemptionPolicy",
                validation.NOT_SUPPORTED,
                f'Unsupported value: "{policy}": supported values: {supported}',
            )
        )
    if old is not None:
        if _value(old) != value:
            causes.append(("value", validation.FORBIDDEN, "Forbidden: may not be changed in an update."))
        if old.get("preemptionPolicy") != policy:
            shown = f'"{policy}"' if isinstance(policy, str) else "null"
            causes.append(("preemptionPolicy", validation.INVALID, f"Invalid value: {shown}: field is immutable"))
    return causes


def second_default(priority_class: Mapping[str, Any], classes: Iterable[Mapping[str, Any]]) -> str | None:
    """The Priority plugin's refusal (403) of ``priority_class`` made the global default while another of
    ``classes`` (the stored ones) is: ``PriorityClass NAME is already marked as default. Only one default can
    exist`` (validatePriorityClass); None otherwise."""
    if priority_class.get("globalDefault") is not True:
        return None
    name = (priority_class.get("metadata") or {}).get("name")
    for other in classes:
        other_name = (other.get("metadata") or {}).get("name")
        if other.get("globalDefault") is True and other_name != name:
            return f"PriorityClass {other_name} is already marked as default. Only one default can exist"
    return None


def system_class_deletion(name: str) -> str | None:
    """The refusal (403) of deleting a system PriorityClass (priorityclass storage.go Delete); None for others."""
    return "this is a system priority class and cannot be deleted" if name in SYSTEM_CLASSES else None
