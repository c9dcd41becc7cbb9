"""Field validators shared by the decoders (strict grammar: ASCII digits only, bounded)."""

from __future__ import annotations

import re
from typing import Final

UINT32_MAX: Final = 2**32 - 1
UINT64_MAX: Final = 2**64 - 1
INT64_MAX: Final = 2**63 - 1

GPU_UUID_RE: Final = re.compile(r"GPU-[0-9A-Fa-f-]{36}")
"""``uuid = "GPU-" 36(HEXDIG / "-")`` (docs/protocol.md §2.1)."""


def is_digits(text: str) -> bool:
    """``1*DIGIT`` — ASCII only (``str.isdigit`` alone accepts '²' and other Unicode digits)."""
    return text.isdigit() and text.isascii()


def parse_decimal(text: str, maximum: int) -> int | None:
    """ASCII ``1*DIGIT`` with a value <= ``maximum``, else ``None``; never raises.

    Leading zeros are allowed (as Go's ``strconv`` allows them) but the value is only converted
    once it has at most as many significant digits as ``maximum``: ``int()`` on more than 4,300
    digits raises ValueError, and on thousands of digits costs time (a hostile annotation)."""
    if not is_digits(text):
        return None
    significant = text.lstrip("0")
    if len(significant) > len(str(maximum)):
        return None
    value = int(significant or "0")
    return value if value <= maximum else None


def is_gpu_uuid(text: str) -> bool:
    return GPU_UUID_RE.fullmatch(text) is not None


def go_atoi(text: str) -> int | None:
    """Go ``strconv.Atoi``: optional sign, ASCII digits, int64 range; ``None`` on error."""
    negative = text[:1] == "-"
    body = text[1:] if text[:1] in ("+", "-") else text
    magnitude = parse_decimal(body, INT64_MAX + 1 if negative else INT64_MAX)
    if magnitude is None:
        return None
    return -magnitude if negative else magnitude


def go_uint(value: int) -> int:
    """Go ``uint(int)`` conversion on a 64-bit platform (wraps negatives)."""
    return value % 2**64


_GO_BOOLS: Final = {
    "1": True,
    "t": True,
    "T": True,
    "TRUE": True,
    "true": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "FALSE": False,
    "false": False,
    "False": False,
}


def go_parse_bool(text: str) -> bool | None:
    """Go ``strconv.ParseBool``; ``None`` on error."""
    return _GO_BOOLS.get(text)
