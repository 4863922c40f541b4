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


def test_quantities_are_stored_in_their_canonical_form() -> None:
    """kube-apiserver decodes every quantity of a pod spec into a resource.Quantity and encodes it back
    canonically: numbers become strings, ``0.5`` is ``500m``, ``1024Mi`` is ``1Gi``, ``1000`` is ``1k``;
    what is not a quantity is left for validation to name. Defaulting again changes nothing."""
    pod = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "resources": {"requests": {"cpu": 0.5, "memory": "1024Mi"}, "limits": {"cpu": 1}},
                }
            ],
            "initContainers": [{"name": "i", "image": "i", "resources": {"requests": {"example.com/dev": "1000"}}}],
            "ephemeralContainers": [{"name": "e", "image": "i", "resources": {"limits": {"cpu": "1.5"}}}],
            "overhead": {"memory": "1.5Gi"},
            "resources": {"requests": {"cpu": "2000m"}},
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "0.5Gi"}}, {"name": "w", "emptyDir": {}}],
        }
    }
    pod["spec"]["containers"].append({"name": "bad", "image": "i", "resources": {"requests": {"cpu": "two"}}})
    defaulting.default_pod(pod)
    spec = pod["spec"]
    assert spec["containers"][0]["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "1"},
    }
    assert spec["containers"][1]["resources"] == {"requests": {"cpu": "two"}}
    assert spec["initContainers"][0]["resources"] == {"requests": {"example.com/dev": "1k"}}
    assert spec["ephemeralContainers"][0]["resources"] == {"limits": {"cpu": "1500m"}}
    assert spec["overhead"] == {"memory": "1536Mi"}
    assert spec["resources"] == {"requests": {"cpu": "2"}}
    assert spec["volumes"] == [{"name": "v", "emptyDir": {"sizeLimit": "512Mi"}}, {"name": "w", "emptyDir": {}}]
    again = copy.deepcopy(pod)
    defaulting.default_pod(again)
    assert again == pod
