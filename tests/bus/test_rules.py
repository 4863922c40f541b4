"""Subject matching and filter reduction, shared by both buses, against NATS's wildcard rules."""

from __future__ import annotations

import pytest

from kueue_es.events.bus import base, rules


@pytest.mark.parametrize(
    ("subject", "pattern", "want"),
    [
        ("kq.in.wl.ns.a", "kq.>", True),
        ("kq.in.wl.ns.a", "kq.in.wl.*.*", True),
        ("kq.in.wl.ns.a", "kq.in.wl.*", False),
        ("kq.in", "kq.in.>", False),
        ("kq.dec.p0.head", "kq.dec.*.head", True),
        ("kq.dec.p0.wl.ns.a", "kq.dec.*.head", False),
        ("kq.disp.c1.wl.ns.a", ">", True),
    ],
)
def test_matches_follows_nats_wildcards(subject: str, pattern: str, want: bool) -> None:
    """'*' matches one token, '>' one or more trailing tokens, literals match exactly."""
    assert rules.matches(subject, pattern) is want


@pytest.mark.parametrize(
    ("wide", "narrow", "want"),
    [
        ("kq.>", "kq.in.>", True),
        ("kq.in.>", "kq.>", False),
        ("kq.*.a", "kq.in.a", True),
        ("kq.in.a", "kq.*.a", False),
        ("kq.*", "kq.*", True),
        ("kq.*", "kq.>", False),
        ("kq.in.>", "kq.in", False),
    ],
)
def test_covers_means_every_match_of_the_narrow_filter_matches_the_wide_one(wide: str, narrow: str, want: bool) -> None:
    """A filter covers another when it accepts a superset of its subjects."""
    assert rules.covers(wide, narrow) is want


def test_normalize_filters_drops_covered_and_repeated_filters() -> None:
    """Covered and repeated filters are dropped; partial overlaps are kept; order is preserved."""
    assert rules.normalize_filters(["kq.in.>", "kq.>", "kq.in.wl.>"]) == ("kq.>",)
    assert rules.normalize_filters(["kq.dec.*.head", "kq.dec.*.head"]) == ("kq.dec.*.head",)
    assert rules.normalize_filters(["kq.in.*.a", "kq.in.wl.*"]) == ("kq.in.*.a", "kq.in.wl.*")


@pytest.mark.parametrize("bad", ["", "kq..a", "kq.>.a", "kq.a*", "kq. a", []])
def test_normalize_filters_refuses_malformed_subjects(bad: str | list[str]) -> None:
    """Empty tokens, inner '>', partial '*', whitespace and an empty set raise BusError."""
    with pytest.raises(base.BusError):
        rules.normalize_filters(bad)


def test_subject_filter_short_cuts_a_filter_covering_the_stream() -> None:
    """A filter set covering every KQ_LOG subject accepts without matching; others match per subject."""
    assert rules.SubjectFilter(["kq.>"]).everything
    assert rules.SubjectFilter(["kq.in.>", "kq.dec.>", "kq.disp.>"]).everything
    partial = rules.SubjectFilter(["kq.in.>"])
    assert not partial.everything
    assert partial("kq.in.wl.ns.a") and not partial("kq.dec.p0.head")


@pytest.mark.parametrize(
    "raw",
    [
        {"Nats-Msg-Id": "a", "Kq-Type": "QuotaReserved", "Kq-Schema": "4"},
        {"Nats-Msg-Id": "a", "Nats-Batch-Id": "b", "nats-expected-last-sequence": "3", "NATS-X": "y", "Kq-Type": "t"},
        {"": "no name", "N": "short", "Nats": "no dash", "Kq-Type": "t"},
        {},
        None,
    ],
)
def test_stored_headers_hide_protocol_headers_and_keep_the_rest(raw: dict[str, str] | None) -> None:
    want = {k: v for k, v in (raw or {}).items() if k == "Nats-Msg-Id" or not k.lower().startswith("nats-")}
    assert rules.stored_headers(raw) == want


def test_stored_headers_pass_a_block_with_nothing_to_hide_as_it_is() -> None:
    """Read once a message by every reader: no copy when nothing is dropped."""
    raw = {"Nats-Msg-Id": "a", "Kq-Type": "QuotaReserved", "Kq-Schema": "4"}
    assert rules.stored_headers(raw) is raw


@pytest.mark.parametrize(
    "subject",
    ["a b", "a.\tb", "a..b", ".a", "a.", "", "a.\u00a0b", "a.\x1cb", "a.\u2003", "kq.in.wl.ns.a\nb"],
)
def test_a_subject_with_white_space_or_an_empty_token_is_refused(subject: str) -> None:
    """White space is any ``str.isspace`` character, ASCII or not (printable ASCII is decided at once)."""
    with pytest.raises(base.BusError, match="not a valid NATS subject"):
        rules.tokens(subject)


@pytest.mark.parametrize("subject", ["kq.in.wl.ns.a", "kq.in.wl.é.a", "a.*.b", "a.>", "a.\x00b", "kq.dec.p0.head"])
def test_a_subject_without_white_space_or_empty_tokens_splits(subject: str) -> None:
    assert rules.tokens(subject) == subject.split(".")
