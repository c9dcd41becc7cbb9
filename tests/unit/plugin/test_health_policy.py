"""docs/health.md §3: DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS, the full truth table."""

from __future__ import annotations

import logging

import pytest

from vgpu.nvml.health import ALL_XIDS, DEFAULT_IGNORED_XIDS, XidPolicy, parse_xid_list


def policy(disable: str | None = None, enable: str | None = None) -> XidPolicy:
    env = {}
    if disable is not None:
        env["DP_DISABLE_HEALTHCHECKS"] = disable
    if enable is not None:
        env["DP_ENABLE_HEALTHCHECKS"] = enable
    return XidPolicy.from_env(env)


def test_defaults_ignore_exactly_the_six_xids():
    p = policy()
    assert not p.all_disabled()
    assert DEFAULT_IGNORED_XIDS == {13, 31, 43, 45, 68, 109}
    for x in DEFAULT_IGNORED_XIDS:
        assert p.is_disabled(x)
    for x in (48, 79, 94, 999, 0, 2**64 - 1):
        assert not p.is_disabled(x)


@pytest.mark.parametrize("value", ["all", "xids", "0", "ALL", " Xids ", "79,all,94", "all,garbage"])
def test_all_xids_or_zero_disables_checks(value):
    p = policy(value)
    assert p.all_disabled()
    assert p.is_disabled(79) and p.is_disabled(48)


def test_disable_all_with_enable_of_one_xid_stays_off():
    p = policy("all", "48")
    assert p.all_disabled()
    assert not p.is_disabled(48)  # 48 itself was enabled explicitly
    assert p.is_disabled(79)


def test_disable_all_and_enable_all_makes_every_xid_fatal():
    p = policy("all", "all")
    assert not p.all_disabled()
    for x in (13, 31, 43, 45, 68, 109, 79, 999):
        assert not p.is_disabled(x)


def test_extra_disabled_xids_add_to_the_defaults():
    p = policy("79,94")
    assert p.is_disabled(79) and p.is_disabled(94) and p.is_disabled(13)
    assert not p.is_disabled(48)


def test_enable_turns_defaults_fatal():
    p = policy(None, "31, 109")
    assert not p.is_disabled(31) and not p.is_disabled(109)
    assert all(p.is_disabled(x) for x in (13, 43, 45, 68))


def test_enable_wins_over_disable_for_the_same_xid():
    assert not policy("13", "13").is_disabled(13)


def test_malformed_tokens_are_logged_and_skipped(caplog):
    caplog.set_level(logging.WARNING, logger="vgpu.nvml.health")
    assert parse_xid_list("79, x12, -3, +5, 1_0, , 18446744073709551616, 94,") == {79, 94}
    for bad in ("x12", "-3", "+5", "1_0", "18446744073709551616"):
        assert f"Ignoring malformed Xid value {bad}" in caplog.text
    assert parse_xid_list(None) == set() and parse_xid_list("") == set()
    assert parse_xid_list("0") == {ALL_XIDS}
