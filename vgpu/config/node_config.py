"""Validation of parsed per-node `config.json` data into a `NodeConfig` (docs/configuration.md §3).

Pure: takes the data `json` produced, the file name and this node's name; returns the entry for
this node (or an empty `NodeConfig` when none matches) and the warnings, or raises `ConfigError`.

Rules, including choices where the format is silent (docs/configuration.md §7):
- Every entry is type-checked (JSON types); only the entry whose ``name`` equals the node name
  exactly gets range checks and produces warnings about ignored keys.  Duplicate non-empty names
  are an error; entries without a name match no node (warning).
- Keys match case-insensitively (``deviceSplitCount`` = ``devicesplitcount``), exactly as Go's
  ``encoding/json`` reads this file upstream, so existing files keep working.
- ``null`` means "not set", as in Go.
- ``devicesplitcount``/``devicecorescaling`` override only when > 0 (0 = no override; a negative
  value also means no override, with a warning).  An override must still give at least one
  vgpu-cores ID per GPU.
- ``libcudaloglevel`` accepts a numeric string like the device config does.
- ``gpumemoryfactor`` (global only, see docs/kubelet-api.md §7.3), HAMi-only keys,
  ``devicememoryscaling`` ≠ 1 and a ``migstrategy`` other than none produce warnings.
"""

from __future__ import annotations

from typing import Any

from vgpu.config.checks import Checker, child, core_scaling, item
from vgpu.config.limits import INT64_MAX, INT64_MIN, MAX_GPU_INDEX, MAX_SPLIT_COUNT
from vgpu.config.model import MODE_HAMI_CORE, MODE_MIG, FilterDevices, NodeConfig

ROOT_KEY = "nodeconfig"
OPERATING_MODES = (MODE_HAMI_CORE, MODE_MIG)

# Canonical (lower-case) keys of one entry that we read.
_ENTRY_KEYS = (
    "name",
    "operatingmode",
    "devicesplitcount",
    "devicecorescaling",
    "devicememoryscaling",
    "migstrategy",
    "libcudaloglevel",
    "filterdevices",
)
_FILTER_KEYS = ("uuid", "index")
_GPU_MEMORY_FACTOR = "gpumemoryfactor"
_HAMI_ONLY_KEYS = ("preconfigureddevicememory", "enablenumatopology", "enablegetpreferredallocation")
_ALL_ENTRY_KEYS = _ENTRY_KEYS + (_GPU_MEMORY_FACTOR,) + _HAMI_ONLY_KEYS

# One entry, canonical key -> (key path as written, value); `_type_checked_entry` has checked each
# value's JSON type, so the range checks use them as the type they hold.
_Entry = dict[str, tuple[str, Any]]


def node_config_from_data(data: object, source: str, node_name: str) -> tuple[NodeConfig, list[str]]:
    """Validate parsed `config.json` content; returns (this node's config, warnings)."""
    c = Checker(source, json=True)
    empty = NodeConfig(source=source)
    if not isinstance(data, dict):
        c.fail("(root)", 'must be a JSON object with a "nodeconfig" array', data)
    root = _canonical_keys(c, "", data, (ROOT_KEY,))
    if ROOT_KEY not in root:
        c.warn(ROOT_KEY, "key is missing; no per-node settings apply")
        return empty, c.warnings
    entries_key, raw_entries = root[ROOT_KEY]
    if raw_entries is None:
        return empty, c.warnings
    entries = c.sequence(entries_key, raw_entries)

    first_index: dict[str, int] = {}
    match: tuple[str, dict[Any, Any], _Entry] | None = None
    for i, raw in enumerate(entries):
        key = item(entries_key, i)
        data = c.mapping(key, raw)
        entry = _type_checked_entry(c, key, data)
        name = entry["name"][1] if "name" in entry else ""
        if not name:
            c.warn(key, "entry has no name; it applies to no node")
            continue
        if name in first_index:
            c.fail(
                entry["name"][0],
                f"duplicate node name (also {item(entries_key, first_index[name])})",
                name,
            )
        first_index[name] = i
        if name == node_name:
            match = (key, data, entry)
    if match is None:
        return empty, c.warnings
    return _matching_entry(c, source, *match), c.warnings


def _canonical_keys(
    c: Checker, path: str, data: dict[Any, Any], known: tuple[str, ...], *, warn_unknown: bool = True
) -> dict[str, tuple[str, object]]:
    """Map lower-cased known keys to (key path as written, value); later duplicates win."""
    result: dict[str, tuple[str, object]] = {}
    for name, value in data.items():
        canonical = name.lower()
        key = child(path, name)
        if canonical not in known:
            if warn_unknown:
                c.unknown_key(key, name, known)
            continue
        if canonical in result:
            c.warn(key, f"same key as {result[canonical][0]} (keys are case-insensitive); the last value is used")
        result[canonical] = (key, value)
    return result


def _type_checked_entry(c: Checker, key: str, data: dict[Any, Any]) -> _Entry:
    """JSON type checks only (every entry, matching or not); nulls are dropped."""
    fields = _canonical_keys(c, key, data, _ALL_ENTRY_KEYS, warn_unknown=False)
    entry = {name: field for name, field in fields.items() if field[1] is not None}
    for name, (path, value) in entry.items():
        if name in ("name", "operatingmode", "migstrategy"):
            c.string(path, value)
        elif name == "devicesplitcount":
            c.integer(path, value, minimum=INT64_MIN, maximum=INT64_MAX)
        elif name in ("devicecorescaling", "devicememoryscaling"):
            c.number(path, value)
        elif name == "libcudaloglevel":
            c.integer_or_numeric_string(path, value)
        elif name == "filterdevices":
            _filter_devices(c, path, value, strict=False)
    return entry


def _filter_devices(c: Checker, key: str, value: object, *, strict: bool) -> FilterDevices:
    data = c.mapping(key, value)
    fields = _canonical_keys(c, key, data, _FILTER_KEYS, warn_unknown=strict)
    uuids: set[str] = set()
    indices: set[int] = set()
    if fields.get("uuid", (None, None))[1] is not None:
        path, raw = fields["uuid"]
        for i, uuid in enumerate(c.sequence(path, raw)):
            uuids.add(c.string(item(path, i), uuid, non_empty=strict))
    if fields.get("index", (None, None))[1] is not None:
        path, raw = fields["index"]
        for i, index in enumerate(c.sequence(path, raw)):
            if strict:
                indices.add(c.integer(item(path, i), index, minimum=0, sane_max=MAX_GPU_INDEX))
            else:
                indices.add(c.integer(item(path, i), index, minimum=INT64_MIN, maximum=INT64_MAX))
    return FilterDevices(uuids=frozenset(uuids), indices=frozenset(indices))


def _matching_entry(c: Checker, source: str, key: str, raw: dict[Any, Any], entry: _Entry) -> NodeConfig:
    """Range checks, overrides and warnings for this node's entry."""
    for name in raw:
        if name.lower() not in _ALL_ENTRY_KEYS:
            c.unknown_key(child(key, name), name, _ENTRY_KEYS)

    name = entry["name"][1]
    mode = MODE_HAMI_CORE
    if "operatingmode" in entry:
        path, value = entry["operatingmode"]
        if value not in ("",) + OPERATING_MODES:
            c.fail(path, 'must be "hami-core" or "mig" (or empty for hami-core)', value)
        mode = value or MODE_HAMI_CORE

    split_count = None
    if "devicesplitcount" in entry:
        path, value = entry["devicesplitcount"]
        if value > MAX_SPLIT_COUNT:
            c.fail(path, f"must be <= {MAX_SPLIT_COUNT}", value)
        if value > 0:
            split_count = value
        elif value < 0:
            c.warn(path, f"{value} is negative; the device config's deviceSplitCount applies")

    scaling = None
    if "devicecorescaling" in entry:
        path, value = entry["devicecorescaling"]
        if value > 0:
            scaling = core_scaling(c, path, value)
        elif value < 0:
            c.warn(path, f"{value} is negative; the device config's deviceCoreScaling applies")

    log_level = None
    if "libcudaloglevel" in entry:
        path, value = entry["libcudaloglevel"]
        log_level = c.integer_or_numeric_string(path, value, minimum=0, maximum=4)

    filters = FilterDevices()
    if "filterdevices" in entry:
        path, value = entry["filterdevices"]
        filters = _filter_devices(c, path, value, strict=True)

    if "devicememoryscaling" in entry and entry["devicememoryscaling"][1] != 1:
        path, value = entry["devicememoryscaling"]
        c.warn(path, f"{value:g} is accepted but ignored: memory oversubscription is not supported in Volcano mode")
    if "migstrategy" in entry and entry["migstrategy"][1] not in ("", "none"):
        path, value = entry["migstrategy"]
        c.warn(
            path,
            f'"{value}" is ignored: static MIG strategies are not supported; '
            'use "operatingmode": "mig" for dynamic MIG',
        )
    if _GPU_MEMORY_FACTOR in entry:
        c.warn(
            entry[_GPU_MEMORY_FACTOR][0],
            "is not supported per node and is ignored: gpuMemoryFactor is global (device-config.yaml) "
            "so that a vgpu-memory request means the same on every node",
        )
    for hami_key in _HAMI_ONLY_KEYS:
        if hami_key in entry:
            c.warn(entry[hami_key][0], "is a HAMi setting that the Volcano plugin does not support; ignored")

    return NodeConfig(
        name=name,
        operating_mode=mode,
        device_split_count=split_count,
        device_core_scaling=scaling,
        lib_cuda_log_level=log_level,
        filter_devices=filters,
        source=source,
    )
