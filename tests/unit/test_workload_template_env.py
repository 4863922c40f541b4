"""The pod templates a Workload object carries name each environment variable once (Kueue SanitizePodSets)."""

from __future__ import annotations

from kueue_es.services.dispatcher.status import without_repeated_env


def test_a_repeated_variable_keeps_its_first_place_and_its_last_value() -> None:
    template = {
        "metadata": {"labels": {"app": "a"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "b"}, {"name": "A", "value": "2"}],
                }
            ],
            "initContainers": [{"name": "i", "env": [{"name": "X", "value": "x1"}, {"name": "X", "value": "x2"}]}],
        },
    }
    out = without_repeated_env(template)
    assert out["spec"]["containers"][0]["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "b"}]
    assert out["spec"]["initContainers"][0]["env"] == [{"name": "X", "value": "x2"}]
    assert out["metadata"] == template["metadata"]
    # the job's template is not touched: the Job keeps its repetitions
    assert len(template["spec"]["containers"][0]["env"]) == 3


def test_a_template_without_env_or_with_odd_entries_is_copied_as_it_is() -> None:
    template = {"spec": {"containers": [{"name": "c"}, "not-a-container", {"name": "d", "env": ["odd"]}]}}
    assert without_repeated_env(template) == template
    assert without_repeated_env({"spec": None}) == {"spec": None}
