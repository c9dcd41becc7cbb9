"""Node lock ``hamivgpu``: Go RFC3339 format and 5-minute expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from vgpu.protocol import (
    NODE_LOCK_TTL,
    ProtocolError,
    decode_node_lock,
    encode_node_lock,
    keys,
    node_lock_expired,
    node_lock_release_patch,
)

UTC = UTC
CST = timezone(timedelta(hours=8))


def test_golden_values():
    assert encode_node_lock(datetime(2026, 8, 20, 10, 7, 21, 999999, tzinfo=CST)) == "2026-08-20T10:07:21+08:00"
    assert encode_node_lock(datetime(2026, 8, 20, 2, 1, 3, tzinfo=UTC)) == "2026-08-20T02:01:03Z"
    assert (
        encode_node_lock(datetime(2026, 8, 20, 2, 1, 3, tzinfo=timezone(-timedelta(hours=3, minutes=30))))
        == "2026-08-20T02:01:03-03:30"
    )
    with pytest.raises(ValueError):
        encode_node_lock(datetime(2026, 8, 20))


def test_decode_and_same_instant():
    a = decode_node_lock("2026-08-20T10:07:21+08:00")
    b = decode_node_lock("2026-08-20T02:07:21Z")
    assert a == b
    assert decode_node_lock("2026-08-20T02:07:21.25Z").microsecond == 250000


@pytest.mark.parametrize(
    "value",
    [
        "",
        "2026-08-20 02:07:21Z",
        "2026-08-20T02:07:21",
        "2026-08-20T02:07:21+0800",
        "2026-02-30T02:07:21Z",
        "2026-08-20T02:07:21+24:00",
        "yesterday",
        "2026-08-20T02:07:21z",
    ],
)
def test_rejects(value):
    with pytest.raises(ProtocolError) as exc:
        decode_node_lock(value)
    assert exc.value.annotation == "hamivgpu"


def test_expiry():
    locked = decode_node_lock("2026-08-20T10:00:00+08:00")
    assert not node_lock_expired(locked, datetime(2026, 8, 20, 2, 5, 0, tzinfo=UTC))
    assert node_lock_expired(locked, datetime(2026, 8, 20, 2, 5, 1, tzinfo=UTC))
    assert NODE_LOCK_TTL == timedelta(minutes=5)


def test_release_patch():
    assert node_lock_release_patch() == {"metadata": {"annotations": {"hamivgpu": None}}}
    assert keys.NODE_LOCK == "hamivgpu"
