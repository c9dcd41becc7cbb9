"""The node lock annotation ``hamivgpu`` (docs/protocol.md §2.4).

The value is Go's ``time.Now().Format(time.RFC3339)`` of the scheduler: seconds precision, ``Z``
for UTC, otherwise ``±hh:mm``. The lock expires 5 minutes after that instant.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final

from vgpu.protocol import keys
from vgpu.protocol.errors import ProtocolError

NODE_LOCK_TTL: Final = timedelta(minutes=5)

# Go's RFC3339 parser also accepts a fraction of a second.
_RFC3339_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:(Z)|([+-])(\d{2}):(\d{2}))",
    re.ASCII,  # \d is ASCII 0-9 only: int() would also read '２０２６' (docs/protocol.md §2.4)
)


def encode_node_lock(now: datetime) -> str:
    """RFC3339 as Go formats it, e.g. ``2026-08-20T10:07:21+08:00`` or ``2026-08-20T02:01:03Z``."""
    if now.tzinfo is None:
        raise ValueError("encode_node_lock needs a timezone-aware datetime")
    offset = now.utcoffset() or timedelta(0)
    base = f"{now.year:04d}-{now:%m-%dT%H:%M:%S}"  # 4-digit year, as Go writes it ("%Y" gives "999")
    if offset == timedelta(0):
        return base + "Z"
    total = int(offset.total_seconds())
    sign = "-" if total < 0 else "+"
    total = abs(total) // 60
    return f"{base}{sign}{total // 60:02d}:{total % 60:02d}"


def decode_node_lock(value: str) -> datetime:
    """Parse the lock value into an aware datetime; :class:`ProtocolError` if it is not RFC3339."""
    m = _RFC3339_RE.fullmatch(value)
    if m is None:
        raise ProtocolError(keys.NODE_LOCK, "", "not an RFC3339 time like 2026-08-20T10:07:21+08:00", value)
    y, mo, d, h, mi, s, frac, z, sign, oh, om = m.groups()
    if z:
        tz = UTC
    else:
        off = timedelta(hours=int(oh), minutes=int(om))
        if off >= timedelta(hours=24):
            raise ProtocolError(keys.NODE_LOCK, "", "zone offset out of range", value)
        tz = timezone(-off if sign == "-" else off)
    micro = int((frac or "")[:6].ljust(6, "0"))
    try:
        return datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), micro, tzinfo=tz)
    except ValueError as exc:
        raise ProtocolError(keys.NODE_LOCK, "", f"invalid date or time: {exc}", value) from None


def node_lock_expired(locked_at: datetime, now: datetime, ttl: timedelta = NODE_LOCK_TTL) -> bool:
    """True when the lock is older than ``ttl`` (the scheduler may then replace it)."""
    return now - locked_at > ttl


def node_lock_release_patch() -> dict[str, Any]:
    """The strategic-merge patch that deletes the lock (a no-op when it is absent)."""
    return {"metadata": {"annotations": {keys.NODE_LOCK: None}}}
