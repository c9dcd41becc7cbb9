"""PodDevices: ``volcano.sh/vgpu-ids-new`` and ``volcano.sh/devices-to-allocate`` (docs/protocol.md §3.1).

::

    pod-devices = ctr-segment *( ";" ctr-segment )      ; no trailing ";"
    ctr-segment = *device                               ; empty once consumed by the plugin
    device      = dev-id "," "NVIDIA" "," usedmem "," usedcores ":"
    dev-id      = gpu-uuid [ "[" group "-" position "]" ] ; MIG (docs/mig.md §4)

Per the grammar the empty string is ONE empty segment (a one-container pod fully consumed), so
:func:`decode_pod_devices` never returns zero segments and :func:`encode_pod_devices` refuses to
encode zero segments: the round trip is exact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from vgpu.protocol import keys
from vgpu.protocol._fields import INT64_MAX, UINT32_MAX, go_atoi, go_uint, is_gpu_uuid, parse_decimal
from vgpu.protocol.errors import ProtocolError

MAX_CORES: Final = 100

_DEV_ID_RE: Final = re.compile(r"(GPU-[0-9A-Fa-f-]{36})(?:\[([^\[\]\-,:;]+)-([0-9]+)\])?")
_GROUP_BAD: Final = frozenset("-[],:;")


@dataclass(frozen=True, slots=True)
class MigSlot:
    """The ``[group-position]`` suffix of a MIG device id."""

    group: str
    position: int


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    """One device of a container segment."""

    uuid: str
    """Physical GPU UUID (the text before ``[``)."""
    usedmem: int
    """Memory per GPU in gpuMemoryFactor units (the request, also for MIG)."""
    usedcores: int
    """Percent of one GPU, 0..100."""
    mig: MigSlot | None = None

    @property
    def device_id(self) -> str:
        """The dev-id as written: ``UUID`` or ``UUID[group-position]``."""
        if self.mig is None:
            return self.uuid
        return f"{self.uuid}[{self.mig.group}-{self.mig.position}]"


ContainerDevices = tuple[ContainerDevice, ...]
PodDevices = tuple[ContainerDevices, ...]


def _check_device(d: ContainerDevice, where: str, annotation: str) -> None:
    if not is_gpu_uuid(d.uuid):
        raise ProtocolError(annotation, f"{where}, field id", 'not "GPU-" followed by 36 hex digits or "-"', d.uuid)
    if d.mig is not None:
        g = d.mig.group
        if not g or any(c in _GROUP_BAD for c in g):
            raise ProtocolError(annotation, f"{where}, field id", 'MIG group must be non-empty without "-[],:;"', g)
        if isinstance(d.mig.position, bool) or not isinstance(d.mig.position, int) or d.mig.position < 0:
            raise ProtocolError(
                annotation, f"{where}, field id", "MIG position must be a non-negative int", str(d.mig.position)
            )
    m = d.usedmem
    if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m <= UINT32_MAX:
        raise ProtocolError(annotation, f"{where}, field usedmem", "not a uint32", str(m))
    c = d.usedcores
    if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c <= MAX_CORES:
        raise ProtocolError(annotation, f"{where}, field usedcores", "not an integer 0..100", str(c))


# One device of the grammar; [0-9] is ASCII-only (unlike \d). Groups: uuid, group, position, mem, cores.
_DEVICE_PATTERN: Final = r"(GPU-[0-9A-Fa-f-]{36})(?:\[([^\[\]\-,:;]+)-([0-9]+)\])?,NVIDIA,([0-9]+),([0-9]+):"
_DEVICE_RE: Final = re.compile(_DEVICE_PATTERN)
_SEGMENT_RE: Final = re.compile(f"(?:{_DEVICE_PATTERN})*")


def encode_container_devices(
    devices: Sequence[ContainerDevice], *, annotation: str = keys.DEVICES_TO_ALLOCATE, segment: int = 0
) -> str:
    """One ``ctr-segment``: every device ``:``-terminated; empty for no devices.

    Raises :class:`ProtocolError` (naming segment, device and field) for a device that would not
    decode; the check is one grammar match of the built text plus range checks.
    """
    text = "".join([f"{d.device_id},NVIDIA,{d.usedmem},{d.usedcores}:" for d in devices])
    ok = _SEGMENT_RE.fullmatch(text) is not None
    if ok:
        for d in devices:
            if (
                type(d.usedmem) is not int
                or type(d.usedcores) is not int
                or d.usedmem > UINT32_MAX
                or d.usedcores > MAX_CORES
            ):
                ok = False
                break
    if not ok:
        for j, d in enumerate(devices):
            _check_device(d, f"segment {segment}, device {j}", annotation)
        raise ProtocolError(annotation, f"segment {segment}", "does not encode to the grammar", text)
    return text


def encode_pod_devices(pod: Sequence[Sequence[ContainerDevice]], *, annotation: str = keys.DEVICES_TO_ALLOCATE) -> str:
    """Segments joined by ``;`` (no trailing ``;``); one segment per vGPU container."""
    if not pod:
        raise ValueError("encode_pod_devices needs at least one container segment")
    return ";".join([encode_container_devices(c, annotation=annotation, segment=i) for i, c in enumerate(pod)])


def _diagnose_device(dev: str, annotation: str, index: int, j: int) -> None:
    """Raise the precise error for one device text that failed the fast grammar match."""
    fields = dev.split(",")
    if len(fields) != 4:
        raise ProtocolError(
            annotation,
            f"segment {index}, device {j}",
            f"has {len(fields)} fields, expected 4 (id,NVIDIA,usedmem,usedcores)",
            dev,
        )
    dev_id, typ, mem, cores = fields
    if _DEV_ID_RE.fullmatch(dev_id) is None:
        raise ProtocolError(
            annotation,
            f"segment {index}, device {j}, field id",
            'not "GPU-<36 hex or ->" optionally followed by "[group-position]"',
            dev_id,
        )
    if typ != keys.DEVICE_TYPE:
        raise ProtocolError(annotation, f"segment {index}, device {j}, field type", 'not "NVIDIA"', typ)
    if parse_decimal(mem, UINT32_MAX) is None:
        raise ProtocolError(annotation, f"segment {index}, device {j}, field usedmem", "not a uint32", mem)
    if parse_decimal(cores, MAX_CORES) is None:
        raise ProtocolError(annotation, f"segment {index}, device {j}, field usedcores", "not an integer 0..100", cores)


def decode_container_devices(
    segment: str, *, annotation: str = keys.DEVICES_TO_ALLOCATE, index: int = 0
) -> ContainerDevices:
    """Strictly decode one segment; :class:`ProtocolError` names segment, device and field.

    Fast path: one whole-segment grammar match and one ``findall`` (both in C); only a value
    that fails them is split again to say exactly what is wrong.
    """
    if not segment:
        return ()
    if _SEGMENT_RE.fullmatch(segment) is not None:
        out = []
        for uuid, group, pos, mem, cores in _DEVICE_RE.findall(segment):
            m, c = parse_decimal(mem, UINT32_MAX), parse_decimal(cores, MAX_CORES)
            p = parse_decimal(pos, INT64_MAX) if group else 0
            if m is None or c is None or p is None:
                break
            out.append(ContainerDevice(uuid, m, c, MigSlot(group, p) if group else None))
        else:
            return tuple(out)
    if segment[-1] != ":":
        tail = segment.rsplit(":", 1)[-1]
        raise ProtocolError(annotation, f"segment {index}, device {segment.count(':')}", 'not terminated by ":"', tail)
    for j, dev in enumerate(segment[:-1].split(":")):
        _diagnose_device(dev, annotation, index, j)
    raise ProtocolError(annotation, f"segment {index}", "does not match the PodDevices grammar", segment)


def decode_pod_devices(value: str, *, annotation: str = keys.DEVICES_TO_ALLOCATE) -> PodDevices:
    """Strictly decode a PodDevices value (``""`` is one empty segment)."""
    return tuple(
        [decode_container_devices(seg, annotation=annotation, index=i) for i, seg in enumerate(value.split(";"))]
    )


def split_segments(value: str) -> list[str]:
    """The raw ``;`` segments, without decoding them."""
    return value.split(";")


def consume_segment(value: str, index: int, *, annotation: str = keys.DEVICES_TO_ALLOCATE) -> str:
    """Replace segment ``index`` by the empty string, keeping every separator (docs/protocol.md §3.1).

    ``A,NVIDIA,3000,50:;B,NVIDIA,2000,0:`` → ``;B,NVIDIA,2000,0:`` → ``;``.
    The other segments are kept byte for byte.
    """
    segments = value.split(";")
    if not 0 <= index < len(segments):
        raise ProtocolError(annotation, f"segment {index}", f"no such segment (the value has {len(segments)})", value)
    segments[index] = ""
    return ";".join(segments)


def all_consumed(value: str) -> bool:
    """True when every segment is empty: the allocation is complete."""
    return not value.replace(";", "")


def segment_gpu_uuids(devices: Sequence[ContainerDevice]) -> frozenset[str]:
    """The physical GPU UUIDs of a segment (the text before ``[`` of each id)."""
    return frozenset(d.uuid for d in devices)


# --- What a Volcano scheduler makes of a PodDevices value (its own ledger rebuild) ---


@dataclass(frozen=True, slots=True)
class VolcanoPodDevice:
    """A device as Volcano's ``decodeContainerDevices`` keeps it: the raw id, numbers coerced."""

    id: str
    type: str
    usedmem: int
    usedcores: int


def _go_parse_int32(text: str) -> int | None:
    """Go ``strconv.ParseInt(text, 10, 32)``; ``None`` on error."""
    v = go_atoi(text)
    return v if v is not None and -(2**31) <= v <= 2**31 - 1 else None


def decode_pod_devices_as_volcano(
    value: str, *, strict_devices: bool
) -> tuple[tuple[tuple[VolcanoPodDevice, ...], ...], tuple[str, ...]]:
    """Volcano's ``decodePodDevices``: returns the segments and the problems it logged.

    ``""`` gives no segments. Parts of a segment without ``,`` are ignored. A device with fewer
    than 4 fields is skipped (before master, Go would index out of range; the emulator skips it
    and reports it). ``strict_devices`` (master) also skips devices whose mem/cores are not
    uint32; older versions parse them with ``ParseInt(…, 10, 32)`` and use 0 on error.
    """
    if not value:
        return (), ()
    problems: list[str] = []
    out = []
    for si, seg in enumerate(value.split(";")):
        devs = []
        if seg:
            for part in seg.split(":"):
                if "," not in part:
                    continue
                f = part.split(",")
                if len(f) < 4:
                    problems.append(f"segment {si}: device {part[:120]!r} has {len(f)} fields, needs 4")
                    continue
                if strict_devices:
                    smem, scores = parse_decimal(f[2], UINT32_MAX), parse_decimal(f[3], UINT32_MAX)
                    if smem is None or scores is None:
                        problems.append(f"segment {si}: device {part[:120]!r} has a non-uint32 usedmem/usedcores")
                        continue
                    mem, cores = smem, scores
                else:
                    mem = go_uint(_go_parse_int32(f[2]) or 0)
                    cores = go_uint(_go_parse_int32(f[3]) or 0)
                devs.append(VolcanoPodDevice(f[0], f[1], mem, cores))
        out.append(tuple(devs))
    return tuple(out), tuple(problems)


def parse_mig_id_as_volcano(device_id: str) -> MigSlot | None:
    """Volcano's ``decodeMIGID``: text between the first ``[`` and ``]`` split on ``-`` into exactly
    two parts, the second an ``Atoi``; ``None`` where Volcano reports an error."""
    start, end = device_id.find("["), device_id.find("]")
    if start == -1 or end == -1 or start > end:
        return None
    parts = device_id[start + 1 : end].split("-")
    if len(parts) != 2:
        return None
    position = go_atoi(parts[1])
    return None if position is None else MigSlot(parts[0], position)
