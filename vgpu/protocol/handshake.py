"""``volcano.sh/node-vgpu-handshake`` values (docs/protocol.md §2.2).

The plugin writes ``Reported <UTC time>``; Volcano v1.9–v1.15 answers ``Requesting_<local time>``
and, for a silent plugin, ``Deleted_<local time>``. The scheduler's stamps carry no zone; Volcano
parses them as UTC (docs/failures.md R-6), so nothing here turns a stamp into a deadline except
:func:`volcano_requesting_stamp`, which reproduces that exact (flawed) reading for the emulator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Final, Literal

from vgpu.protocol import keys
from vgpu.protocol.errors import ProtocolError

REPORTED: Final = "Reported"
REQUESTING: Final = "Requesting"
DELETED: Final = "Deleted"

SCHEDULER_LAYOUT: Final = "%Y.%m.%d %H:%M:%S"
"""Go layout ``2006.01.02 15:04:05`` (no zone)."""

HANDSHAKE_TIMEOUT: Final = timedelta(seconds=60)

_GO_ZERO_TIME: Final = datetime(1, 1, 1, tzinfo=UTC)

# Go time.Time.String(): "2006-01-02 15:04:05.999999999 -0700 MST" plus " m=±s.nnnnnnnnn"
# when the value carries a monotonic reading. The fraction is trimmed (and absent when zero).
_REPORTED_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))? ([+-])(\d{2})(\d{2})"
    r"(?::(\d{2}))? ([A-Za-z0-9+-]{1,10})(?: m=[+-]\d+\.\d{9})?",
    re.ASCII,  # \d is ASCII 0-9 only: int() would also read '２０２６' (docs/protocol.md §2.2)
)
_STAMP_RE: Final = re.compile(r"\d{4}\.\d{2}\.\d{2} \d{2}:\d{2}:\d{2}", re.ASCII)


@dataclass(frozen=True, slots=True)
class Handshake:
    """A decoded handshake value."""

    kind: Literal["Reported", "Requesting", "Deleted"]
    time: datetime
    """Reported: zone-aware. Requesting/Deleted: naive wall-clock time of the scheduler's zone."""
    nanosecond: int = 0
    """Sub-second part in ns (``time`` holds it truncated to µs)."""


def _stamp(t: datetime) -> str:
    """``SCHEDULER_LAYOUT`` with a 4-digit year, as Go writes it (``%Y`` gives "999" for 999)."""
    return f"{t.year:04d}.{t:%m.%d %H:%M:%S}"


def encode_reported(now: datetime) -> str:
    """``Reported YYYY-MM-DD HH:MM:SS.nnnnnnnnn +0000 UTC`` (our format; always UTC, 9 digits)."""
    if now.tzinfo is None:
        raise ValueError("encode_reported needs a timezone-aware datetime")
    t = now.astimezone(UTC)
    return f"{REPORTED} {t.year:04d}-{t:%m-%d %H:%M:%S}.{t.microsecond * 1000:09d} +0000 UTC"


def encode_requesting(local_now: datetime) -> str:
    """``Requesting_YYYY.MM.DD HH:MM:SS`` of the scheduler's local wall clock (the zone is dropped)."""
    return f"{REQUESTING}_{_stamp(local_now)}"


def encode_deleted(local_now: datetime) -> str:
    """``Deleted_YYYY.MM.DD HH:MM:SS`` of the scheduler's local wall clock."""
    return f"{DELETED}_{_stamp(local_now)}"


def decode_handshake(value: str) -> Handshake:
    """Strictly decode one of the three forms; anything else raises :class:`ProtocolError`.

    ``Reported`` accepts both our format and Go's ``time.Now().String()`` (trimmed fraction, any
    offset and zone abbreviation, optional monotonic ``m=`` suffix).
    """
    ann = keys.HANDSHAKE
    if value.startswith(REPORTED + " "):
        text = value[len(REPORTED) + 1 :]
        m = _REPORTED_RE.fullmatch(text)
        if m is None:
            raise ProtocolError(ann, "Reported time", 'not "YYYY-MM-DD HH:MM:SS[.fraction] ±hhmm ZONE"', text)
        y, mo, d, h, mi, s, frac, sign, oh, om, osec, _zone = m.groups()
        offset = timedelta(hours=int(oh), minutes=int(om), seconds=int(osec or 0))
        if offset >= timedelta(hours=24):
            raise ProtocolError(ann, "Reported time", "zone offset out of range", text)
        tz = timezone(-offset if sign == "-" else offset)
        ns = int((frac or "").ljust(9, "0"))
        try:
            t = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), ns // 1000, tzinfo=tz)
        except ValueError as exc:
            raise ProtocolError(ann, "Reported time", f"invalid date or time: {exc}", text) from None
        return Handshake("Reported", t, ns)
    for kind in (REQUESTING, DELETED):
        if value.startswith(kind + "_"):
            text = value[len(kind) + 1 :]
            if _STAMP_RE.fullmatch(text) is None:
                raise ProtocolError(ann, f"{kind} time", 'not "YYYY.MM.DD HH:MM:SS"', text)
            try:
                t = datetime.strptime(text, SCHEDULER_LAYOUT)
            except ValueError as exc:
                raise ProtocolError(ann, f"{kind} time", f"invalid date or time: {exc}", text) from None
            return Handshake(kind, t)
    raise ProtocolError(ann, "", 'not "Reported <time>", "Requesting_<time>" or "Deleted_<time>"', value)


def volcano_handshake_state(value: str) -> Literal["Requesting", "Deleted", "other"]:
    """How ``NewGPUDevices`` classifies the value: substring tests, ``Requesting`` first."""
    if REQUESTING in value:
        return "Requesting"
    if DELETED in value:
        return "Deleted"
    return "other"


def volcano_requesting_stamp(value: str) -> datetime:
    """The stamp exactly as Volcano reads it: the text after the first ``_``, layout
    ``2006.01.02 15:04:05``, interpreted as **UTC**; a parse error gives Go's zero time
    (so the node is dropped at once)."""
    parts = value.split("_")
    if len(parts) < 2 or _STAMP_RE.fullmatch(parts[1]) is None:
        return _GO_ZERO_TIME
    try:
        return datetime.strptime(parts[1], SCHEDULER_LAYOUT).replace(tzinfo=UTC)
    except ValueError:
        return _GO_ZERO_TIME
