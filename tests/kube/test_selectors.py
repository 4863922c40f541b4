"""Label and field selectors parse and match as Kubernetes defines them."""

from __future__ import annotations

import pytest

from kueue_es.sim import selectors

LABELS = {"app": "web", "tier": "front", "rank": "5"}


@pytest.mark.parametrize(
    ("selector", "want_match"),
    [
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("missing!=db", True),
        ("app in (web,db)", True),
        ("app in (db, cache)", False),
        ("missing in (web)", False),
        ("app notin (db,cache)", True),
        ("app notin (web)", False),
        ("missing notin (web)", True),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("app in (web,db),!missing,tier", True),
        ("rank>3", True),
        ("rank<3", False),
        ("", True),
    ],
)
def test_label_selector_forms(selector: str, want_match: bool) -> None:
    """Every selector form matches (or not) the label set {app=web, tier=front, rank=5}."""
    assert selectors.parse_label_selector(selector).matches(LABELS) is want_match


@pytest.mark.parametrize("selector", ["app in (web", "app=", "=web", "a b", "app,,tier", "rank>x"])
def test_label_selector_rejects_bad_syntax(selector: str) -> None:
    """Malformed selectors raise SelectorError (the emulator turns it into 400) -- except `app=`, an empty value."""
    if selector == "app=":
        assert selectors.parse_label_selector(selector).matches({"app": ""})
        return
    with pytest.raises(selectors.SelectorError):
        selectors.parse_label_selector(selector)


def test_label_selector_without_labels_matches_only_negative_terms() -> None:
    """An object without labels satisfies !key and key!=v but not key."""
    assert selectors.parse_label_selector("!app,app!=x,app notin (y)").matches(None)
    assert not selectors.parse_label_selector("app").matches(None)


@pytest.mark.parametrize(
    ("selector", "want_match"),
    [
        ("metadata.name=j1", True),
        ("metadata.name==j1", True),
        ("metadata.name!=j1", False),
        ("metadata.namespace=default", True),
        ("metadata.name=j1,metadata.namespace=other", False),
        ("spec.suspend=true", True),
        ("status.phase=", True),
    ],
)
def test_field_selector_forms(selector: str, want_match: bool) -> None:
    """Field selectors compare dotted paths as strings; a missing field is the empty string."""
    obj = {"metadata": {"name": "j1", "namespace": "default"}, "spec": {"suspend": True}}
    assert selectors.parse_field_selector(selector).matches(obj) is want_match


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        pytest.param(None, "<none>", id="no selector"),
        pytest.param({}, "<none>", id="an empty one selects everything, printed as none"),
        pytest.param({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2", id="match labels by key"),
        pytest.param(
            {
                "matchLabels": {"tier": "front"},
                "matchExpressions": [
                    {"key": "app", "operator": "In", "values": ["web", "db"]},
                    {"key": "zone", "operator": "NotIn", "values": ["b"]},
                    {"key": "gpu", "operator": "Exists"},
                    {"key": "spot", "operator": "DoesNotExist"},
                ],
            },
            "app in (db,web),gpu,!spot,tier=front,zone notin (b)",
            id="expressions and labels sorted by key, values sorted",
        ),
        pytest.param({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "<error>", id="In without values"),
        pytest.param({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "<error>", id="an unknown operator"),
    ],
)  # fmt: skip
def test_a_label_selector_prints_as_kubectls_wide_columns_show_it(selector: object, want: str) -> None:
    """metav1.FormatLabelSelector: the terms of a LabelSelector sorted by key, in the selector grammar."""
    assert selectors.format_label_selector(selector) == want
