"""Limits as Kubernetes quantities (docs/protocol.md §4): whole numbers in int64 range, else a reason.

Issue 15: a pod author writes the limit, so no text may raise, take long or flood a log line.
"""

from __future__ import annotations

import time

import pytest

from vgpu.protocol.pod_model import (
    BAD_QUANTITY,
    LIMIT_MAX,
    ResourceKind,
    ResourceNames,
    parse_whole_quantity,
    pod_view,
    whole_quantity,
)

NAMES = ResourceNames("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", 2),
        (" 2 ", 2),
        ("+3", 3),
        ("3k", 3000),
        ("1Ki", 1024),
        ("7Ei", 7 * 2**60),
        ("1000m", 1),
        ("1e18", 10**18),
        ("100e-2", 1),
        (".5e1", 5),
        ("1.0", 1),
        ("0e-999", 0),
        ("-0", 0),
        ("9223372036854775807", LIMIT_MAX),
        (5, 5),
    ],
)
def test_whole_quantities(text, value):
    assert whole_quantity(text) == value
    assert parse_whole_quantity(text) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1e1000000", "out of range"),
        ("1e19", "out of range"),
        ("8Ei", "out of range"),
        ("9223372036854775808", "out of range"),
        ("9" * 5000, "longer than 64 characters"),
        ("1e-1000000", "not a whole number"),
        ("1.5", "not a whole number"),
        ("500m", "not a whole number"),
        ("-3", "negative"),
        ("", "not a Kubernetes quantity"),
        ("２", "not a Kubernetes quantity"),  # fullwidth digit: ASCII only
        ("1E400Ki", "not a Kubernetes quantity"),
        (True, "not a quantity"),
        ([1], "not a quantity"),
        (2**70, "out of range"),
        (-1, "negative"),
    ],
)
def test_unusable_quantities_give_a_reason_and_never_raise(text, reason):
    got = whole_quantity(text)
    assert isinstance(got, str) and reason in got
    assert parse_whole_quantity(text) == BAD_QUANTITY


def test_hostile_quantities_are_cheap():
    start = time.perf_counter()
    for text in ("1e1000000", "1e-1000000", "9" * 5000, "1" + "0" * 63, "0." + "0" * 61 + "1e128"):
        whole_quantity(text)
    assert time.perf_counter() - start < 1  # microseconds each; 1e1000000 raised Overflow before


def test_a_pod_names_its_unusable_limit_in_one_short_line():
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [
                {"name": "ok", "resources": {"limits": {NAMES.count: "1"}}},
                {"name": "c", "resources": {"limits": {NAMES.count: "1", NAMES.memory: "9" * 5000}}},
            ]
        },
    }
    v = pod_view(pod, NAMES)
    assert v.containers[1].limit(ResourceKind.MEMORY) == BAD_QUANTITY
    problem = v.limit_problem
    assert problem is not None and problem.startswith('container c: limits["volcano.sh/vgpu-memory"] = "999')
    assert "(5000 characters)" in problem and len(problem) < 160
    pod["spec"]["containers"][1]["resources"]["limits"][NAMES.memory] = "2000"
    assert pod_view(pod, NAMES).limit_problem is None
