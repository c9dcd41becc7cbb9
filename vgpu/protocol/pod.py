"""Scalar pod annotations and the annotation sets each side writes (docs/protocol.md §3.2–§3.3).

Every dict of annotations written to a Pod or Node is built here, so the scheduler emulator, the
plugin and the tests agree on keys and values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from vgpu.protocol import keys
from vgpu.protocol._fields import UINT64_MAX, is_digits, parse_decimal
from vgpu.protocol.errors import ProtocolError
from vgpu.protocol.pod_devices import ContainerDevice, all_consumed, encode_pod_devices

VGPU_TIME_INFINITY: Final = 2**64
"""Sort key for a ``vgpu-time`` that is done, missing or unparsable (+∞, above every real value)."""
_MAX_TIME_CHARS: Final = 20


def encode_unix_seconds(seconds: int | float) -> str:
    """``strconv.FormatInt(time.Now().Unix(), 10)``: whole seconds, decimal."""
    s = int(seconds)
    if s < 0:
        raise ValueError(f"unix seconds must be >= 0, got {seconds}")
    return str(s)


def decode_vgpu_time(value: str, *, annotation: str = keys.VGPU_TIME) -> int:
    """Strict: decimal digits, at most 20 of them, ≤ 2^64−1. ``VGPU_TIME_DONE`` decodes to 2^64−1."""
    seconds = parse_decimal(value, UINT64_MAX) if len(value) <= _MAX_TIME_CHARS else None
    if seconds is None:
        raise ProtocolError(annotation, "", "not decimal Unix seconds", value)
    return seconds


def is_vgpu_time_done(value: str | None) -> bool:
    return value == keys.VGPU_TIME_DONE


def vgpu_time_sort_key(value: str | None) -> int:
    """Order candidates by ``vgpu-time`` (docs/protocol.md §5.2 step 3 rule 2): missing, unparsable, longer than 20
    characters or the done sentinel sort last (``VGPU_TIME_INFINITY``)."""
    if value is None or value == keys.VGPU_TIME_DONE or len(value) > _MAX_TIME_CHARS or not is_digits(value):
        return VGPU_TIME_INFINITY
    return int(value)


def decode_bind_phase(value: str) -> str:
    """Strict: one of ``allocating``, ``success``, ``failed``."""
    if value not in keys.BIND_PHASES:
        raise ProtocolError(keys.BIND_PHASE, "", 'not "allocating", "success" or "failed"', value)
    return value


def scheduler_allocation(
    node_name: str, devices: Sequence[Sequence[ContainerDevice]], now_unix: int | float
) -> dict[str, str]:
    """The six keys the scheduler writes at Allocate (docs/protocol.md §3.2).

    ``devices-to-allocate`` equals ``vgpu-ids-new``.
    """
    if not node_name:
        raise ValueError("node name must not be empty")
    ids = encode_pod_devices(devices, annotation=keys.VGPU_IDS_NEW)
    now = encode_unix_seconds(now_unix)
    return {
        keys.VGPU_NODE: node_name,
        keys.VGPU_TIME: now,
        keys.VGPU_IDS_NEW: ids,
        keys.DEVICES_TO_ALLOCATE: ids,
        keys.BIND_PHASE: keys.BIND_PHASE_ALLOCATING,
        keys.BIND_TIME: now,
    }


def allocation_success() -> dict[str, str]:
    """Written by the plugin when every segment is consumed (docs/protocol.md §3.3)."""
    return {keys.BIND_PHASE: keys.BIND_PHASE_SUCCESS, keys.VGPU_TIME: keys.VGPU_TIME_DONE}


def allocation_failed() -> dict[str, str]:
    """Written by the plugin on any allocation failure (docs/protocol.md §3.3)."""
    return {keys.BIND_PHASE: keys.BIND_PHASE_FAILED, keys.VGPU_TIME: keys.VGPU_TIME_DONE}


def allocation_progress(remaining: str) -> dict[str, str]:
    """After consuming a segment: the remaining ``devices-to-allocate``, plus the success keys
    when nothing is left (combined into one patch, docs/protocol.md §3.3)."""
    out = {keys.DEVICES_TO_ALLOCATE: remaining}
    if all_consumed(remaining):
        out.update(allocation_success())
    return out


def annotations_patch(annotations: Mapping[str, str | None]) -> dict[str, Any]:
    """Strategic-merge patch body ``{"metadata":{"annotations":{...}}}``; ``None`` deletes a key."""
    return {"metadata": {"annotations": dict(annotations)}}
