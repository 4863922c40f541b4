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
