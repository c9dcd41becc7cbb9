"""``volcano.sh/node-vgpu-register`` (docs/protocol.md §2.1).

Two decoders on purpose: :func:`decode_register` checks our exact grammar (for the plugin, tests
and ``vgpu inspect``); :func:`decode_register_as_volcano` reproduces what a given Volcano
version's ``decodeNodeDevices`` accepts (for the scheduler emulator), including its leniency.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from vgpu.protocol import keys
from vgpu.protocol._fields import INT64_MAX, go_atoi, go_parse_bool, go_uint, is_gpu_uuid, parse_decimal
from vgpu.protocol.errors import ProtocolError

TYPE_PREFIX: Final = "NVIDIA-"
FIELDS: Final = ("uuid", "count", "devmem", "type", "health", "mode")

# One record of our grammar; [0-9] is ASCII-only. Groups: uuid, count, devmem, type, health, mode.
_RECORD_PATTERN: Final = (
    r"(GPU-[0-9A-Fa-f-]{36}),([0-9]+),([0-9]+),(NVIDIA-[^,:]+),(true|false),"
    r"(hami-core|mig):"
)
_RECORD_RE: Final = re.compile(_RECORD_PATTERN)
_VALUE_RE: Final = re.compile(f"(?:{_RECORD_PATTERN})+")


@dataclass(frozen=True, slots=True)
class RegisterRecord:
    """One GPU of the register annotation: ``uuid,count,devmem,type,health,mode:``."""

    uuid: str
    count: int
    """deviceSplitCount: how many tasks may share the GPU."""
    devmem: int
    """Card memory in gpuMemoryFactor units."""
    type: str
    """``"NVIDIA-" + nvmlDeviceGetName`` (see :func:`register_type`)."""
    health: bool
    mode: str = keys.MODE_HAMI_CORE


def register_type(nvml_name: str) -> str:
    """Field 3 for a GPU name: ``NVIDIA-<name>`` with ``,`` and ``:`` replaced by ``_`` (our choice)."""
    return TYPE_PREFIX + nvml_name.replace(",", "_").replace(":", "_")


def register_devmem(memory_total_bytes: int, gpu_memory_factor: int) -> int:
    """Field 2: ``floor(floor(total_bytes / MiB) / gpuMemoryFactor)``; deviceMemoryScaling is not applied."""
    if gpu_memory_factor < 1:
        raise ValueError(f"gpuMemoryFactor must be >= 1, got {gpu_memory_factor}")
    if memory_total_bytes < 0:
        raise ValueError(f"memory total must be >= 0, got {memory_total_bytes}")
    return (memory_total_bytes // 1048576) // gpu_memory_factor


def _check_record(record: RegisterRecord, where: str) -> None:
    """Refuse to encode anything our own strict decoder would reject."""
    ann = keys.REGISTER
    if not is_gpu_uuid(record.uuid):
        raise ProtocolError(ann, f"{where}, field uuid", 'not "GPU-" followed by 36 hex digits or "-"', record.uuid)
    for name in ("count", "devmem"):
        value = getattr(record, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
            raise ProtocolError(ann, f"{where}, field {name}", "not a non-negative int64", str(value))
    t = record.type
    if not t.startswith(TYPE_PREFIX) or len(t) == len(TYPE_PREFIX) or "," in t or ":" in t or not t.isprintable():
        raise ProtocolError(
            ann, f"{where}, field type", 'not "NVIDIA-" followed by a printable name without "," or ":"', t
        )
    if not isinstance(record.health, bool):
        raise ProtocolError(ann, f"{where}, field health", "not a bool", str(record.health))
    if record.mode not in keys.MODES:
        raise ProtocolError(ann, f"{where}, field mode", 'not "hami-core" or "mig"', str(record.mode))


def encode_register(records: Sequence[RegisterRecord], minors: Sequence[int] | None = None) -> str:
    """Build the annotation value: every record ``:``-terminated, no whitespace, no empty segments.

    ``minors`` (one NVML minor number per record) sorts the records by ascending minor, as
    docs/decisions.md decision 4 requires; without it the records are written in the order given.
    Raises :class:`ProtocolError` for a record that would not decode, ``ValueError`` for no records
    (the grammar needs at least one; a node without GPUs must not write the annotation).
    """
    if not records:
        raise ValueError("encode_register needs at least one record (value = 1*record)")
    if minors is not None:
        if len(minors) != len(records):
            raise ValueError(f"{len(minors)} minors for {len(records)} records")
        order = sorted(range(len(records)), key=lambda i: minors[i])
        records = [records[i] for i in order]
    text = "".join(
        [f"{r.uuid},{r.count},{r.devmem},{r.type},{'true' if r.health is True else 'false'},{r.mode}:" for r in records]
    )
    ok = _VALUE_RE.fullmatch(text) is not None
    if ok:
        for r in records:
            if (
                type(r.count) is not int
                or type(r.devmem) is not int
                or type(r.health) is not bool
                or r.count > INT64_MAX
                or r.devmem > INT64_MAX
                or not r.type.isprintable()
            ):
                ok = False
                break
    if not ok:
        for i, r in enumerate(records):
            _check_record(r, f"record {i}")
        raise ProtocolError(keys.REGISTER, "", "does not encode to the register grammar", text)
    return text


def decode_register(value: str) -> tuple[RegisterRecord, ...]:
    """Strictly decode our 6-field grammar; :class:`ProtocolError` names the record and field.

    Fast path: one whole-value grammar match and one ``findall``; a value that fails them is
    split again to say exactly what is wrong.
    """
    ann = keys.REGISTER
    if _VALUE_RE.fullmatch(value) is not None:
        out = []
        for uuid, count, devmem, typ, health, mode in _RECORD_RE.findall(value):
            c, m = parse_decimal(count, INT64_MAX), parse_decimal(devmem, INT64_MAX)
            if c is None or m is None or not typ.isprintable():
                break
            out.append(RegisterRecord(uuid, c, m, typ, health == "true", mode))
        else:
            return tuple(out)
    if not value:
        raise ProtocolError(ann, "", "no GPU records", value)
    if not value.endswith(":"):
        tail = value.rsplit(":", 1)[-1]
        raise ProtocolError(ann, f"record {value.count(':')}", 'not terminated by ":"', tail)
    segments = value[:-1].split(":")
    for i, seg in enumerate(segments):
        where = f"record {i}"
        if not seg:
            raise ProtocolError(ann, where, "empty record", seg)
        fields = seg.split(",")
        if len(fields) != 6:
            raise ProtocolError(
                ann, where, f"has {len(fields)} fields, expected 6 (uuid,count,devmem,type,health,mode)", seg
            )
        uuid, count, devmem, typ, health, mode = fields
        if not is_gpu_uuid(uuid):
            raise ProtocolError(ann, f"{where}, field uuid", 'not "GPU-" followed by 36 hex digits or "-"', uuid)
        for name, text in (("count", count), ("devmem", devmem)):
            if parse_decimal(text, INT64_MAX) is None:
                raise ProtocolError(ann, f"{where}, field {name}", "not a decimal integer", text)
        if not typ.startswith(TYPE_PREFIX) or len(typ) == len(TYPE_PREFIX) or not typ.isprintable():
            raise ProtocolError(ann, f"{where}, field type", 'not "NVIDIA-" followed by a printable name', typ)
        if health not in ("true", "false"):
            raise ProtocolError(ann, f"{where}, field health", 'not "true" or "false"', health)
        if mode not in keys.MODES:
            raise ProtocolError(ann, f"{where}, field mode", 'not "hami-core" or "mig"', mode)
    raise ProtocolError(ann, "", "does not match the register grammar", value)


@dataclass(frozen=True, slots=True)
class VolcanoGpu:
    """One GPU as a Volcano scheduler sees it after ``decodeNodeDevices``."""

    id: int
    """The segment index (ids need not be dense if the value holds junk segments)."""
    uuid: str
    number: int
    """``uint(Atoi(count))``; a parse error gives 0."""
    memory: int
    """``uint(Atoi(devmem))``; a parse error gives 0."""
    type: str
    health: bool
    """``ParseBool`` (errors give false); never used by any Volcano version."""
    mode: str
    """``mig`` if field 5 is exactly ``mig``, else ``hami-core`` (always hami-core before v1.12)."""


@dataclass(frozen=True, slots=True)
class VolcanoRegister:
    devices: tuple[VolcanoGpu, ...]
    mode: str
    """The node mode: the mode of the last record."""


def decode_register_as_volcano(value: str, *, min_fields: int = 6) -> VolcanoRegister:
    """What Volcano's ``decodeNodeDevices`` makes of ``value``.

    ``min_fields`` is 5 for Volcano v1.9–v1.11 (no mode field: every GPU is hami-core) and 6 from
    v1.12. A value without ``:`` has no devices; segments without ``,`` are skipped but still
    consume an id. A segment with fewer than ``min_fields`` fields rejects the whole node: that
    raises :class:`ProtocolError` (Volcano logs ``wrong Node GPU info``).
    """
    ann = keys.REGISTER
    if ":" not in value:
        return VolcanoRegister((), keys.MODE_HAMI_CORE)
    devices = []
    node_mode = keys.MODE_HAMI_CORE
    for index, seg in enumerate(value.split(":")):
        if "," not in seg:
            continue
        items = seg.split(",")
        if len(items) < min_fields:
            raise ProtocolError(
                ann,
                f"record {index}",
                f"wrong Node GPU info: {len(items)} fields, this Volcano needs at least {min_fields}",
                seg,
            )
        count = go_atoi(items[1])
        devmem = go_atoi(items[2])
        mode = keys.MODE_HAMI_CORE
        if min_fields >= 6 and items[5] == keys.MODE_MIG:
            mode = keys.MODE_MIG
        node_mode = mode
        devices.append(
            VolcanoGpu(
                id=index,
                uuid=items[0],
                number=go_uint(count or 0),
                memory=go_uint(devmem or 0),
                type=items[3],
                health=bool(go_parse_bool(items[4])),
                mode=mode,
            )
        )
    return VolcanoRegister(tuple(devices), node_mode)


def register_records(records: Iterable[tuple[int, RegisterRecord]]) -> str:
    """Convenience: encode ``(minor, record)`` pairs sorted by minor (docs/decisions.md decision 4)."""
    pairs = list(records)
    return encode_register([r for _, r in pairs], [m for m, _ in pairs])
