"""kube-apiserver's defaulting of pod specs and Jobs (:mod:`kueue_es.sim.defaulting`), as pure functions."""

from __future__ import annotations

import copy

import pytest

from kueue_es.sim import defaulting


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),  # no tag means latest
        ("busybox:latest", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("registry:5000/busybox", "Always"),  # the port is the registry's, not a tag
        ("registry:5000/team/busybox:v1", "IfNotPresent"),
        ("busybox@sha256:" + "a" * 64, "IfNotPresent"),  # a digest and no tag: no default tag either
        ("busybox:latest@sha256:" + "a" * 64, "Always"),
    ],
)
def test_the_image_pull_policy_follows_the_images_tag(image: str, policy: str) -> None:
    """SetDefaults_Container: Always for an image tagged latest or not tagged, else IfNotPresent, with the tag
    read as parsers.ParseImageName reads it."""
    assert defaulting.image_pull_policy(image) == policy


def test_defaulting_again_changes_nothing_and_keeps_what_was_set() -> None:
    """Every write is decoded, so defaulted, again: a defaulted Job defaulted once more is the same, and a value
    the user set (a zero grace period, a pull policy) is never replaced."""
    job = {
        "metadata": {"name": "j"},
        "spec": {
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Never"}],
                }
            },
        },
    }
    defaulting.default_job(job)
    once = copy.deepcopy(job)
    defaulting.default_job(job)
    assert job == once
    spec = job["spec"]
    assert spec["podReplacementPolicy"] == "Failed"  # with a pod failure policy (SetDefaults_Job)
    assert spec["podFailurePolicy"]["rules"][0]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]
    pod_spec = spec["template"]["spec"]
    assert pod_spec["terminationGracePeriodSeconds"] == 0 and pod_spec["containers"][0]["imagePullPolicy"] == "Never"
    assert "labels" not in job["metadata"]  # a template without labels gives the Job none
