"""Handshake values: exact formats of both sides and the scheduler's reading of its stamp."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from vgpu.protocol import (
    ProtocolError,
    decode_handshake,
    encode_deleted,
    encode_reported,
    encode_requesting,
    volcano_handshake_state,
    volcano_requesting_stamp,
)

UTC = UTC


def test_reported_format_matches_spec_example():
    assert (
        encode_reported(datetime(2026, 8, 20, 2, 0, 0, tzinfo=UTC))
        == "Reported 2026-08-20 02:00:00.000000000 +0000 UTC"
    )
    # always converted to UTC, 9 fraction digits
    t = datetime(2026, 8, 20, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=8)))
    assert encode_reported(t) == "Reported 2026-08-20 02:00:00.123456000 +0000 UTC"
    with pytest.raises(ValueError):
        encode_reported(datetime(2026, 8, 20))


def test_scheduler_stamps_match_spec_examples():
    assert encode_requesting(datetime(2025, 8, 4, 2, 27, 7)) == "Requesting_2025.08.04 02:27:07"
    assert encode_deleted(datetime(2025, 8, 4, 2, 28, 10)) == "Deleted_2025.08.04 02:28:10"
    # the zone is dropped: the wall clock of the given datetime is written
    local = datetime(2025, 8, 4, 10, 27, 7, tzinfo=timezone(timedelta(hours=8)))
    assert encode_requesting(local) == "Requesting_2025.08.04 10:27:07"


def test_decode_upstream_go_time_string():
    h = decode_handshake("Reported 2023-10-18 08:42:42.360494312 +0000 UTC m=+0.116513880")
    assert h.kind == "Reported"
    assert h.time == datetime(2023, 10, 18, 8, 42, 42, 360494, tzinfo=UTC)
    assert h.nanosecond == 360494312


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Reported 2023-10-18 16:42:42 +0800 CST", datetime(2023, 10, 18, 8, 42, 42, tzinfo=UTC)),
        ("Reported 2023-10-18 03:42:42.5 -0500 -05", datetime(2023, 10, 18, 8, 42, 42, 500000, tzinfo=UTC)),
    ],
)
def test_decode_go_time_with_zones(text, expected):
    assert decode_handshake(text).time == expected


def test_round_trips():
    t = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    h = decode_handshake(encode_reported(t))
    assert (h.kind, h.time, h.nanosecond) == ("Reported", t, 678901000)
    s = datetime(2025, 12, 31, 23, 59, 59)
    assert decode_handshake(encode_requesting(s)).time == s
    assert decode_handshake(encode_deleted(s)).kind == "Deleted"


@pytest.mark.parametrize(
    "value, where",
    [
        ("", ""),
        ("reported 2026-08-20 02:00:00 +0000 UTC", ""),
        ("Reported", ""),
        ("Reported yesterday", "Reported time"),
        ("Reported 2026-13-20 02:00:00 +0000 UTC", "Reported time"),
        ("Reported 2026-08-20 02:00:00", "Reported time"),
        ("Requesting_2025-08-04 02:27:07", "Requesting time"),
        ("Requesting_2025.02.30 02:27:07", "Requesting time"),
        ("Deleted_", "Deleted time"),
        ("Requesting 2025.08.04 02:27:07", ""),
    ],
)
def test_strict_decoder_rejects(value, where):
    with pytest.raises(ProtocolError) as exc:
        decode_handshake(value)
    assert exc.value.annotation == "volcano.sh/node-vgpu-handshake"
    assert exc.value.where == where


def test_volcano_classification_is_substring_based():
    assert volcano_handshake_state("Requesting_2025.08.04 02:27:07") == "Requesting"
    assert volcano_handshake_state("Deleted_2025.08.04 02:27:07") == "Deleted"
    assert volcano_handshake_state("xRequestingDeleted") == "Requesting"
    assert volcano_handshake_state("Reported 2026-08-20 02:00:00.000000000 +0000 UTC") == "other"
    assert volcano_handshake_state("anything") == "other"


def test_volcano_reads_stamp_as_utc_and_zero_time_on_error():
    assert volcano_requesting_stamp("Requesting_2025.08.04 02:27:07") == datetime(2025, 8, 4, 2, 27, 7, tzinfo=UTC)
    zero = datetime(1, 1, 1, tzinfo=UTC)
    assert volcano_requesting_stamp("Requesting") == zero
    assert volcano_requesting_stamp("Requesting_soon") == zero
