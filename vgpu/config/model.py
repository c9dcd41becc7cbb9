"""Dataclasses for the effective configuration (docs/configuration.md).

These types are the contract between the parsers (`vgpu.config.loader`, fed by
`vgpu.configfiles`) and every consumer (plugin, monitor, MIG).  They are immutable so one loaded config can be
shared across threads; a SIGHUP reload produces a new object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

DEFAULT_COUNT_NAME = "volcano.sh/vgpu-number"
DEFAULT_MEMORY_NAME = "volcano.sh/vgpu-memory"
DEFAULT_CORES_NAME = "volcano.sh/vgpu-cores"
DEFAULT_MEMORY_PERCENTAGE_NAME = "volcano.sh/vgpu-memory-percentage"

MODE_HAMI_CORE = "hami-core"
MODE_MIG = "mig"


class ConfigError(Exception):
    """Invalid configuration; the message follows docs/configuration.md §2.3.

    ``vgpu: invalid configuration in <path>: <key path>: <reason> (got <value>)``
    """

    def __init__(self, path: str, key: str, reason: str, value: object = None, *, show_value: bool = True):
        self.path = path
        self.key = key
        self.reason = reason
        self.value = value
        msg = f"vgpu: invalid configuration in {path}: {shorten(key)}: {reason}"
        if show_value:
            msg += f" (got {format_config_value(value)})"
        super().__init__(msg)


MAX_SHOWN_KEY = 200
"""Key paths in messages are cut here: a key is operator text too (one of 1 MiB is one line)."""


def shorten(text: str, limit: int = MAX_SHOWN_KEY) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text)} characters)"


@dataclass(frozen=True)
class OversizedNumber:
    """A number written with more than ``MAX_NUMBER_CHARS`` characters, kept unread.

    The parsers return it instead of calling ``int()`` on it (Python refuses more than 4,300
    digits with a ValueError, and a long one is never a sane value), so that the validator can
    name the key: every numeric check refuses it as out of range."""

    text: str
    """The first characters as written."""
    length: int

    def shown(self) -> str:
        return f"{self.text[:20]}… ({self.length} characters)"

    def __str__(self) -> str:
        return self.shown()


class _Full(Exception):
    """The rendered value reached its limit: stop walking it."""


def format_config_value(value: object, limit: int = 120) -> str:
    """Render an offending value as the operator wrote it: JSON/YAML spelling, not Python's.

    ``"group-1"``, ``true``, ``null``, ``[1, 2]`` (never ``True``/``None``); long values are cut
    so one bad key cannot flood the log.  The walk stops as soon as ``limit`` characters are
    written, so a value built from YAML aliases (shared, and exponentially large when expanded)
    or a recursive one costs ``limit`` characters, never its expanded size.
    """
    out: list[str] = []
    size = 0

    def emit(text: str) -> None:
        nonlocal size
        out.append(text)
        size += len(text)
        if size > limit:
            raise _Full

    def key_text(key: object) -> str:
        if isinstance(key, bool) or key is None:
            return json.dumps(json.dumps(key))
        return json.dumps(str(key)[: limit + 1], ensure_ascii=False)

    def walk(v: object, active: set[int]) -> None:
        if isinstance(v, OversizedNumber):
            emit(v.shown())
        elif v is None or isinstance(v, (bool, float)):
            emit(json.dumps(v))
        elif isinstance(v, int):
            emit(str(v) if v.bit_length() <= 256 else f"<an integer of {v.bit_length()} bits>")
        elif isinstance(v, str):
            emit(json.dumps(v[: limit + 1], ensure_ascii=False))
        elif isinstance(v, (dict, list, tuple)):
            if id(v) in active:
                emit("{…}" if isinstance(v, dict) else "[…]")
                return
            active.add(id(v))
            is_dict = isinstance(v, dict)
            emit("{" if is_dict else "[")
            items = v.items() if isinstance(v, dict) else enumerate(v)
            for i, (k, member) in enumerate(items):
                if i:
                    emit(", ")
                if is_dict:
                    emit(key_text(k) + ": ")
                walk(member, active)
            emit("}" if is_dict else "]")
            active.discard(id(v))
        else:
            emit(str(v)[: limit + 1])

    try:
        walk(value, set())
    except _Full:
        pass
    text = "".join(out)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


@dataclass(frozen=True)
class MigTemplate:
    """One instance type of a MIG layout, e.g. ``{name: 1g.10gb, memory: 9728, count: 7}``."""

    name: str
    memory_mib: int
    count: int


@dataclass(frozen=True)
class MigGroup:
    """One full layout of a GPU ("group"), instance types in config order."""

    group: str
    geometries: tuple[MigTemplate, ...]

    @property
    def positions(self) -> int:
        return sum(t.count for t in self.geometries)


@dataclass(frozen=True)
class MigGeometryEntry:
    """A `knownMigGeometries` entry: model substrings and their allowed groups."""

    models: tuple[str, ...]
    groups: tuple[MigGroup, ...]

    def matches(self, gpu_name: str) -> bool:
        return any(m in gpu_name for m in self.models)


@dataclass(frozen=True)
class DeviceConfig:
    """Values of `device-config.yaml` under `nvidia:`; defaults per docs/decisions.md decision 2."""

    resource_count_name: str = DEFAULT_COUNT_NAME
    resource_memory_name: str = DEFAULT_MEMORY_NAME
    resource_core_name: str = DEFAULT_CORES_NAME
    resource_memory_percentage_name: str = DEFAULT_MEMORY_PERCENTAGE_NAME
    resource_priority_name: str = ""
    overwrite_env: bool = False
    default_memory: int = 0
    default_cores: int = 0
    default_gpu_num: int = 1
    device_split_count: int = 10
    device_memory_scaling: float = 1.0
    device_core_scaling: float = 1.0
    disable_core_limit: bool = False
    gpu_memory_factor: int = 1
    # Empty tuple here; the loader fills in the upstream shipped list (docs/mig.md §2.1).
    known_mig_geometries: tuple[MigGeometryEntry, ...] = ()
    pass_device_specs: bool = False
    gpu_core_policy: str = "default"
    lib_cuda_log_level: int | None = None
    health_recovery_seconds: int = 0
    source: str = "<built-in defaults>"


@dataclass(frozen=True)
class FilterDevices:
    """GPUs excluded from every resource and from the register annotation."""

    uuids: frozenset[str] = frozenset()
    indices: frozenset[int] = frozenset()

    def excludes(self, index: int, uuid: str) -> bool:
        return index in self.indices or uuid in self.uuids


@dataclass(frozen=True)
class NodeConfig:
    """The `config.json` entry whose `name` equals this node (or an empty one)."""

    name: str = ""
    operating_mode: str = MODE_HAMI_CORE
    device_split_count: int | None = None
    device_core_scaling: float | None = None
    lib_cuda_log_level: int | None = None
    filter_devices: FilterDevices = field(default_factory=FilterDevices)
    source: str = "<none>"

    @property
    def matched(self) -> bool:
        """True when `config.json` had an entry for this node (otherwise no overrides apply)."""
        return bool(self.name)


@dataclass(frozen=True)
class EffectiveConfig:
    """Defaults → device-config.yaml → matching config.json entry (docs/configuration.md §4)."""

    device: DeviceConfig
    node: NodeConfig
    warnings: tuple[str, ...] = ()

    @property
    def split_count(self) -> int:
        return self.node.device_split_count or self.device.device_split_count

    @property
    def core_scaling(self) -> float:
        return self.node.device_core_scaling or self.device.device_core_scaling

    @property
    def cores_per_gpu(self) -> int:
        """vgpu-cores IDs per GPU: ``int(100 × deviceCoreScaling)``."""
        return int(100 * self.core_scaling)

    @property
    def gpu_memory_factor(self) -> int:
        return self.device.gpu_memory_factor

    @property
    def operating_mode(self) -> str:
        return self.node.operating_mode

    @property
    def lib_cuda_log_level(self) -> int | None:
        if self.node.lib_cuda_log_level is not None:
            return self.node.lib_cuda_log_level
        return self.device.lib_cuda_log_level

    def is_filtered(self, index: int, uuid: str) -> bool:
        return self.node.filter_devices.excludes(index, uuid)

    def mig_entry_for(self, gpu_name: str) -> MigGeometryEntry | None:
        """First `knownMigGeometries` entry with a model that is a substring of the name."""
        for entry in self.device.known_mig_geometries:
            if entry.matches(gpu_name):
                return entry
        return None
