"""Field and label selector grammar and matching, as the real API server accepts them."""

from __future__ import annotations

import re

import pytest

from vgpu.sim.apiserver.selectors import SelectorError, parse_field_selector, parse_label_selector


def fields_of(obj: dict[str, str]):
    return lambda key: obj.get(key, "")


@pytest.mark.parametrize(
    "text, obj, expected",
    [
        ("spec.nodeName=n1", {"spec.nodeName": "n1"}, True),
        ("spec.nodeName==n1", {"spec.nodeName": "n1"}, True),
        ("spec.nodeName=n1", {"spec.nodeName": "n2"}, False),
        ("spec.nodeName!=n1", {"spec.nodeName": "n2"}, True),
        ("spec.nodeName!=n1", {"spec.nodeName": "n1"}, False),
        ("spec.nodeName=", {}, True),  # unscheduled pods: the empty value
        ("spec.nodeName!=", {}, False),
        ("spec.nodeName=n1,status.phase=Running", {"spec.nodeName": "n1", "status.phase": "Running"}, True),
        ("spec.nodeName=n1,status.phase!=Running", {"spec.nodeName": "n1", "status.phase": "Running"}, False),
        (r"metadata.name=a\,b", {"metadata.name": "a,b"}, True),
        (r"metadata.name=a\=b", {"metadata.name": "a=b"}, True),
        ("", {}, True),
    ],
)
def test_field_selector_matches(text, obj, expected):
    assert parse_field_selector(text).matches(fields_of(obj)) is expected


def test_field_selector_exact_is_the_pinned_value():
    sel = parse_field_selector("status.phase!=Failed,spec.nodeName=n7")
    assert sel.exact("spec.nodeName") == "n7"
    assert sel.exact("status.phase") is None


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("spec.nodeName", "expected KEY=VALUE"),
        ("=n1", "empty key"),
        ("metadata.name=a=b", "unescaped '='"),
        (r"metadata.name=a\x", "invalid escape"),
    ],
)
def test_field_selector_errors_name_the_term(text, fragment):
    with pytest.raises(SelectorError, match=fragment):
        parse_field_selector(text)


LABELS = {"app": "web", "tier": "frontend", "gen": "3"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app in (db, web)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("app notin (web,db)", False),
        ("missing notin (x)", True),
        ("app", True),
        ("!app", False),
        ("!missing", True),
        ("missing", False),
        ("gen>2", True),
        ("gen<3", False),
        ("missing>1", False),
        ("app=web,tier in (frontend),!missing", True),
        ("app=web,tier=backend", False),
        ("example.com/key=v", False),
        ("", True),
    ],
)
def test_label_selector_matches(text, expected):
    assert parse_label_selector(text).matches(LABELS) is expected


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("app in web", "expected '('"),
        ("app in (a", "missing ')'"),
        ("app in ()", "must not be empty"),
        ("app web", "expected one of"),
        ("a b c", "expected one of"),
        ("app=web,", "trailing ','"),
        ("-bad=x", "invalid label key"),
        ("app=bad value", "expected ','"),
        ("app=-x-", "invalid label value"),
        ("gen>x", "must be an integer"),
        ("=x", "expected a label key"),
    ],
)
def test_label_selector_errors_name_the_problem(text, fragment):
    with pytest.raises(SelectorError, match=re.escape(fragment)):
        parse_label_selector(text)
