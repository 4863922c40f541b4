"""A start adds the flavors' tolerations to the job's template once (Kueue's podset.go Merge).

Kueue PR #11757 (0.17.4, 0.16.9): a ResourceFlavor's toleration and the template's own that differ only by
``operator: ""`` against ``operator: "Equal"`` are one toleration to Kubernetes (the empty operator means
Equal), so Kueue injected a duplicate the API server then refused on update, leaving Pods scheduling-gated.
"""

from __future__ import annotations

import pytest

from kueue_es.events import types
from kueue_es.services.dispatcher import core

REF = types.WorkloadRef(namespace="default", name="w", uid="u")


def _start(*tolerations: dict[str, object]) -> core.StartJob:
    return core.StartJob(workload=REF, namespace="default", name="job", tolerations=list(tolerations))


@pytest.mark.parametrize(
    ("own", "flavor"),
    [
        (
            {"key": "gpu", "operator": "", "value": "a", "effect": "NoSchedule"},
            {"key": "gpu", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
        ),
        (
            {"key": "gpu", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
            {"key": "gpu", "value": "a", "effect": "NoSchedule"},
        ),
    ],
    ids=["template empty operator, flavor Equal", "template Equal, flavor without operator"],
)
def test_a_toleration_differing_only_by_the_empty_operator_is_not_added_again(
    own: dict[str, object], flavor: dict[str, object]
) -> None:
    patch = _start(flavor).patch(current_tolerations=[own])
    assert "tolerations" not in patch["spec"]["template"]["spec"]


def test_a_different_toleration_is_added_after_the_templates_own() -> None:
    own = {"key": "gpu", "operator": "Equal", "value": "a", "effect": "NoSchedule"}
    flavor = {"key": "gpu", "operator": "Equal", "value": "b", "effect": "NoSchedule"}
    patch = _start(flavor).patch(current_tolerations=[own])
    assert patch["spec"]["template"]["spec"]["tolerations"] == [own, flavor]
