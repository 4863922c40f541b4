"""Kueue's workload retention rules (objectRetentionPolicies.workloads) as pure functions: scheduling/retention.py.

Kueue's workload_controller.go deletes a Finished Workload once ``afterFinished`` has passed since the Finished
condition's lastTransitionTime; its job reconciler deletes the job of a Workload deactivated by Kueue (inactive,
Evicted ``DeactivatedDueTo...``) once ``afterDeactivatedByKueue`` has passed since the Evicted condition's
lastTransitionTime. Without the configuration nothing is deleted; ``0s`` deletes at once.
"""

from __future__ import annotations

import pytest

from kueue_es.events import models
from kueue_es.scheduling import retention
from kueue_es.scheduling.retention import Policy, Rule, Standing

MINUTE = 60_000
T0 = 1_767_225_600_000


def config(after_finished: str | None = None, after_deactivated: str | None = None) -> models.Configuration:
    return models.Configuration(
        object_retention_policies=models.ObjectRetentionPolicies(
            workloads=models.WorkloadRetentionPolicy(
                after_finished=after_finished, after_deactivated_by_kueue=after_deactivated
            )
        )
    )


FINISHED = Standing(finished_since_ms=T0)
DEACTIVATED = Standing(evicted_reason="DeactivatedDueToMaximumExecutionTimeExceeded", evicted_since_ms=T0, active=False)


def test_go_durations_become_the_periods() -> None:
    assert retention.policy_of(config("1h", "90s")) == Policy(after_finished_ms=3_600_000, after_deactivated_ms=90_000)
    assert retention.policy_of(config("1m30s")) == Policy(after_finished_ms=90_000)
    assert retention.policy_of(config("0s", "0")) == Policy(after_finished_ms=0, after_deactivated_ms=0)
    assert retention.policy_of(config("1.5h")).after_finished_ms == 5_400_000


def test_without_the_configuration_nothing_is_deleted() -> None:
    for configuration in (
        models.Configuration(),
        models.Configuration(object_retention_policies=models.ObjectRetentionPolicies()),
        config(),
    ):
        policy = retention.policy_of(configuration)
        assert policy == retention.NO_POLICY and not policy.enabled
        for standing in (FINISHED, DEACTIVATED):
            assert retention.due(standing, policy, now_ms=T0 + 10**12) is None


@pytest.mark.parametrize("text", ["-1m", "one hour", "1d"])
def test_a_period_that_is_no_go_duration_or_negative_turns_its_rule_off(text: str) -> None:
    """The watcher refuses such a file; a Configuration from elsewhere (a scenario) with one deletes nothing."""
    assert retention.policy_of(config(text, text)) == retention.NO_POLICY


def test_a_finished_workload_is_due_once_after_finished_has_passed_since_it_finished() -> None:
    policy = retention.policy_of(config("1m"))
    assert retention.due(FINISHED, policy, now_ms=T0 + MINUTE - 1) is None
    assert retention.due(FINISHED, policy, now_ms=T0 + MINUTE) is Rule.FINISHED  # not before the expiration: due
    assert retention.retained(FINISHED) == retention.Retained(Rule.FINISHED, T0)
    assert retention.Retained(Rule.FINISHED, T0).due_ms(policy) == T0 + MINUTE


def test_zero_deletes_at_once() -> None:
    policy = retention.policy_of(config("0s", "0s"))
    assert retention.due(FINISHED, policy, now_ms=T0) is Rule.FINISHED
    assert retention.due(DEACTIVATED, policy, now_ms=T0) is Rule.DEACTIVATED


def test_a_workload_deactivated_by_kueue_is_due_after_its_eviction_plus_the_period() -> None:
    policy = retention.policy_of(config(after_deactivated="2m"))
    assert retention.due(DEACTIVATED, policy, now_ms=T0 + 2 * MINUTE - 1) is None
    assert retention.due(DEACTIVATED, policy, now_ms=T0 + 2 * MINUTE) is Rule.DEACTIVATED
    # each rule has its own period: afterFinished alone deletes no deactivated workload
    assert retention.due(DEACTIVATED, retention.policy_of(config("0s")), now_ms=T0 + 10**9) is None
    for cause in ("AdmissionCheck", "RequeuingLimitExceeded", "MaximumExecutionTimeExceeded"):
        standing = Standing(evicted_reason=f"DeactivatedDueTo{cause}", evicted_since_ms=T0, active=False)
        assert retention.due(standing, policy, now_ms=T0 + 2 * MINUTE) is Rule.DEACTIVATED


@pytest.mark.parametrize(
    "standing",
    [
        # deactivated by hand (spec.active false, Evicted "Deactivated"): afterDeactivatedByKueue is not for it
        Standing(evicted_reason="Deactivated", evicted_since_ms=T0, active=False),
        # evicted for another reason while inactive
        Standing(evicted_reason="Preempted", evicted_since_ms=T0, active=False),
        # reactivated since (spec.active true again)
        Standing(evicted_reason="DeactivatedDueToAdmissionCheck", evicted_since_ms=T0, active=True),
        # not evicted (the Evicted condition False or missing)
        Standing(active=False),
        # a Workload created as such, no job: the job reconciler's rule does not reach it
        Standing(evicted_reason="DeactivatedDueToAdmissionCheck", evicted_since_ms=T0, active=False, owned=False),
    ],
)
def test_only_a_jobs_workload_deactivated_by_kueue_counts(standing: Standing) -> None:
    policy = retention.policy_of(config("0s", "0s"))
    assert retention.retained(standing) is None
    assert retention.due(standing, policy, now_ms=T0 + 10**9) is None


def test_a_finished_workload_goes_by_afterfinished_even_if_kueue_deactivated_it() -> None:
    """Kueue's reconciler handles a finished job (step 3) before an eviction (step 6); a Workload created as
    such is deleted by the workload controller once finished, job or not."""
    finished_after_deactivation = Standing(
        finished_since_ms=T0 + MINUTE,
        evicted_reason="DeactivatedDueToAdmissionCheck",
        evicted_since_ms=T0,
        active=False,
        owned=False,
    )
    assert retention.retained(finished_after_deactivation) == retention.Retained(Rule.FINISHED, T0 + MINUTE)
    policy = retention.policy_of(config("1m", "0s"))
    assert retention.due(finished_after_deactivation, policy, now_ms=T0 + MINUTE) is None
    assert retention.due(finished_after_deactivation, policy, now_ms=T0 + 2 * MINUTE) is Rule.FINISHED
