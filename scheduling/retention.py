"""When Kueue deletes a Workload on its own: the Configuration's ``objectRetentionPolicies.workloads``.

Why this module exists: Kueue keeps every Workload until its job goes, unless its manager configuration says
otherwise (``objectRetentionPolicies.workloads``, Kueue v0.12 on). Two controllers act on it:

- the workload controller (pkg/controller/core/workload_controller.go Reconcile): a Workload whose
  ``Finished`` condition is True is deleted once ``afterFinished`` has passed since that condition's
  ``lastTransitionTime`` (its own finalizer taken off first; the job stays);
- the job reconciler (pkg/controller/jobframework/reconciler.go handleWorkloadAfterDeactivatedPolicy, step 6
  "handle eviction"): the job of a Workload deactivated by Kueue -- ``spec.active`` false and the ``Evicted``
  condition True with a reason ``DeactivatedDueTo...`` (evict.go IsEvictedDueToDeactivationByKueue: a check
  Rejected, the requeuing limit or the maximum execution time; not ``Deactivated``, a hand's) -- is deleted
  with propagation ``Background`` once ``afterDeactivatedByKueue`` has passed since that condition's
  ``lastTransitionTime``; its Workload goes with it (owner reference). A finished job is handled before its
  eviction (step 3), so a finished Workload is only ever deleted by the first rule, and a Workload of no job
  (created as such) never by the second.

Without the section, or without a duration, nothing is deleted; ``0s`` deletes at once.

Pure: the caller gives the Workload's standing (its conditions as the dispatcher writes them) and the time;
the dispatcher (services/dispatcher/retention.py) deletes what is due and records it on the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kueue_es.events import models
from kueue_es.scheduling.multikueue import duration_ms

DEACTIVATED_BY_KUEUE_PREFIX = "DeactivatedDueTo"
"""The Evicted reasons of a deactivation by Kueue (patching.ReasonWithCause(WorkloadDeactivated, cause))."""
DELETE_PROPAGATION = "Background"
"""The propagation policy Kueue deletes a deactivated Workload's job with (metav1.DeletePropagationBackground)."""
FINISHED_EVENT_MESSAGE = "Deleted finished workload due to elapsed retention"
"""Kueue's Normal ``Deleted`` Event on the Workload it deleted (workload_controller.go)."""
DEACTIVATED_EVENT_MESSAGE = "Deleted job: deactivation retention period expired"
"""Kueue's Normal ``Deleted`` Event on the job it deleted (reconciler.go ReasonDeleted)."""


class Rule(Enum):
    """Which retention rule makes a Workload due, and so what is deleted."""

    FINISHED = "afterFinished"  # the Workload object itself
    DEACTIVATED = "afterDeactivatedByKueue"  # its job (or its pods), the Workload with it


@dataclass(frozen=True, slots=True)
class Policy:
    """``objectRetentionPolicies.workloads`` in milliseconds; None: that rule deletes nothing."""

    after_finished_ms: int | None = None
    after_deactivated_ms: int | None = None

    def after(self, rule: Rule) -> int | None:
        """The retention period of ``rule`` (ms), or None when that rule is off."""
        return self.after_finished_ms if rule is Rule.FINISHED else self.after_deactivated_ms

    @property
    def enabled(self) -> bool:
        """Whether either rule can delete anything."""
        return self.after_finished_ms is not None or self.after_deactivated_ms is not None


NO_POLICY = Policy()


def policy_of(configuration: models.Configuration) -> Policy:
    """The retention policy of ``configuration`` (Kueue's default, none, without the section). A duration that is
    not a Go duration or is negative turns its rule off: the watcher refuses such a file (manager_config), so only
    a Configuration written otherwise (a scenario, an older writer) can carry one."""
    section = configuration.object_retention_policies
    workloads = section.workloads if section is not None else None
    if workloads is None:
        return NO_POLICY
    return Policy(
        after_finished_ms=_period_ms(workloads.after_finished),
        after_deactivated_ms=_period_ms(workloads.after_deactivated_by_kueue),
    )


def _period_ms(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        period = duration_ms(text)
    except ValueError:
        return None
    return period if period >= 0 else None


@dataclass(frozen=True, slots=True)
class Standing:
    """What the rules read of a Workload: its ``Finished`` condition's ``lastTransitionTime`` when it is True
    (``finished_since_ms``, None otherwise), its ``Evicted`` condition's reason and ``lastTransitionTime`` when it
    is True (``evicted_reason`` "" otherwise), ``spec.active``, and whether a job (or pods) owns it."""

    finished_since_ms: int | None = None
    evicted_reason: str = ""
    evicted_since_ms: int = 0
    active: bool = True
    owned: bool = True


@dataclass(frozen=True, slots=True)
class Retained:
    """A Workload one rule will delete: the rule and the time its period counts from (ms)."""

    rule: Rule
    since_ms: int

    def due_ms(self, policy: Policy) -> int | None:
        """When ``policy`` makes it due (ms), or None when the rule is off."""
        after = policy.after(self.rule)
        return None if after is None else self.since_ms + after


def retained(standing: Standing) -> Retained | None:
    """The rule that applies to a Workload whatever the periods are (None: neither ever deletes it): a finished
    one counts from its finish; one deactivated by Kueue, not finished and owned by a job, from its eviction."""
    if standing.finished_since_ms is not None:
        return Retained(Rule.FINISHED, standing.finished_since_ms)
    if standing.owned and not standing.active and standing.evicted_reason.startswith(DEACTIVATED_BY_KUEUE_PREFIX):
        return Retained(Rule.DEACTIVATED, standing.evicted_since_ms)
    return None


def due(standing: Standing, policy: Policy, *, now_ms: int) -> Rule | None:
    """The rule under which ``policy`` deletes the Workload at ``now_ms`` (its period over: ``now >= since +
    period``, as Kueue deletes once ``now`` is not before the expiration), or None: kept for now."""
    found = retained(standing)
    if found is None:
        return None
    at = found.due_ms(policy)
    return found.rule if at is not None and now_ms >= at else None
