"""The simulated LeaderWorkerSet controller's Available and Progressing conditions (sigs.k8s.io/lws)."""

from __future__ import annotations

from kueue_es.sim.controllers import lws_conditions


def test_progressing_then_available_then_progressing_again() -> None:
    first = lws_conditions([], available=False, now="t1")
    assert first == [
        {
            "type": "Progressing",
            "status": "True",
            "reason": "GroupsProgressing",
            "message": "Replicas are progressing",
            "lastTransitionTime": "t1",
        }
    ]
    assert lws_conditions(first, available=False, now="t2") == first  # nothing changed: the same time
    ready = lws_conditions(first, available=True, now="t3")
    assert [(c["type"], c["status"], c["reason"], c["lastTransitionTime"]) for c in ready] == [
        ("Available", "True", "AllGroupsReady", "t3"),
        ("Progressing", "False", "GroupsProgressing", "t3"),
    ]
    again = lws_conditions(ready, available=False, now="t4")
    # the Available condition turns False with its reason kept, as Kueue's e2e reads it on a deactivated group
    assert [(c["type"], c["status"], c["reason"], c["lastTransitionTime"]) for c in again] == [
        ("Available", "False", "AllGroupsReady", "t4"),
        ("Progressing", "True", "GroupsProgressing", "t4"),
    ]
