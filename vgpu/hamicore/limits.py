"""HAMi-core's env-var value semantics (docs/hami-core.md §3.1, §3.2), both directions.

Emitting: :func:`memory_limit_env` and :func:`sm_limit_env` are the only producers of limit
strings — plain decimal MiB with a lowercase ``m``, plain decimal percent — so none of the
parser traps (octal, ``Gi``, suffixed SM values) can be hit.

Parsing: :func:`parse_limit` reproduces libvgpu's parser (``strtoul(s, &end, 0)`` then a
multiplier chosen by the string's LAST character), so the region writer and tests see exactly
the limit a real workload would stamp into its file.
"""

from __future__ import annotations

from collections.abc import Mapping

from vgpu.hamicore.layouts import MAX_DEVICES

_ULONG_MAX = 2**64 - 1
_SUFFIX = {"g": 2**30, "G": 2**30, "m": 2**20, "M": 2**20, "k": 2**10, "K": 2**10}


def memory_limit_env(mib: int) -> str:
    """``CUDA_DEVICE_MEMORY_LIMIT_<i>`` value for ``mib`` MiB: ``"3000m"``; ``"0m"`` = unlimited."""
    if isinstance(mib, bool) or not isinstance(mib, int) or mib < 0:
        raise ValueError(f"memory limit must be a non-negative integer number of MiB, got {mib!r}")
    return f"{mib}m"


def sm_limit_env(percent: int) -> str:
    """``CUDA_DEVICE_SM_LIMIT[_<i>]`` value: plain decimal, never a suffix; ``"0"`` = unlimited."""
    if isinstance(percent, bool) or not isinstance(percent, int) or percent < 0:
        raise ValueError(f"SM limit must be a non-negative integer percent, got {percent!r}")
    return str(percent)


def _strtoul0(s: str) -> tuple[int, bool]:
    """C ``strtoul(s, NULL, 0)``: (value, overflowed)."""
    i, n = 0, len(s)
    while i < n and s[i] in " \t\n\v\f\r":
        i += 1
    negative = False
    if i < n and s[i] in "+-":
        negative = s[i] == "-"
        i += 1
    base = 10
    if s[i : i + 2] in ("0x", "0X") and i + 2 < n and s[i + 2] in "0123456789abcdefABCDEF":
        base, i = 16, i + 2
    elif s[i : i + 1] == "0":
        base = 8
    digits = "0123456789abcdef"[:base]
    value = 0
    while i < n and s[i].lower() in digits:
        value = value * base + int(s[i], 16)
        i += 1
    if value > _ULONG_MAX:
        return _ULONG_MAX, True
    if negative:
        value = (-value) & _ULONG_MAX
    return value, False


def parse_limit(value: str) -> int:
    """libvgpu's limit parser: ``"3000m"`` → 3,145,728,000; ``"010m"`` → 8 MiB; ``"3Gi"`` → 3.

    Returns 0 (unlimited) on overflow, as libvgpu does.
    """
    number, overflow = _strtoul0(value)
    if overflow:
        return 0
    scaled = number * _SUFFIX.get(value[-1:], 1)
    return 0 if scaled > _ULONG_MAX else scaled


def atoi(value: str) -> int:
    """C ``atoi``: leading whitespace, optional sign, digits; anything else gives 0."""
    s = value.lstrip(" \t\n\v\f\r")
    sign, k = 1, 0
    if s[:1] in ("+", "-"):
        sign, k = (-1 if s[0] == "-" else 1), 1
    digits = ""
    while k < len(s) and s[k].isascii() and s[k].isdigit():
        digits += s[k]
        k += 1
    result = sign * int(digits) if digits else 0
    return ((result + 2**31) % 2**32) - 2**31  # int wrap, as a C int would end up


TASK_PRIORITY_ENV = "CUDA_TASK_PRIORITY"
DEFAULT_TASK_PRIORITY = 1


def task_priority_from_env(value: str | None) -> int:
    """The ``priority`` libvgpu stamps into a new region for ``CUDA_TASK_PRIORITY=value``.

    ``atoi`` of a non-empty value; unset or empty gives the default 1 (docs/hami-core.md §3.1)."""
    return atoi(value) if value else DEFAULT_TASK_PRIORITY


def limits_from_env(env: Mapping[str, str]) -> tuple[list[int], list[int]]:
    """``(limit[16], sm_limit[16])`` exactly as libvgpu stamps them into a new region."""

    def value(name: str) -> int:
        raw = env.get(name)
        return parse_limit(raw) if raw else 0

    mem_global = value("CUDA_DEVICE_MEMORY_LIMIT")
    sm_global = value("CUDA_DEVICE_SM_LIMIT")
    limits, sm_limits = [], []
    for i in range(MAX_DEVICES):
        mem = value(f"CUDA_DEVICE_MEMORY_LIMIT_{i}")
        limits.append(mem if mem > 0 else mem_global)
        sm = value(f"CUDA_DEVICE_SM_LIMIT_{i}")
        sm = sm if sm > 0 else sm_global
        sm_limits.append(sm if sm > 0 else 100)
    return limits, sm_limits
