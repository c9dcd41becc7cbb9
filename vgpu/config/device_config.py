"""Validation of parsed `device-config.yaml` data into a `DeviceConfig` (docs/configuration.md §2, docs/mig.md §2).

Pure: takes the data PyYAML produced plus the file name for messages, returns the config and
the warnings, or raises `ConfigError` for the first violation (in file order).

Choices where the format is silent (docs/configuration.md §7):
- Keys are case-sensitive, as in the scheduler; a key that differs only in case is an unknown
  key (warning with the correct spelling) and is NOT applied.
- A key present with an empty value (``deviceSplitCount:``) is treated as omitted: the built-in
  default applies and a warning says so.  Likewise an empty ``nvidia:`` section.
- Root keys other than ``nvidia:`` (the file is shared with HAMi's other vendors) are ignored.
- ``resourceMemoryPercentageName`` and ``resourcePriorityName`` may be empty (Volcano ignores an
  empty percentage name); when set they must be valid resource names, and a set percentage name
  must differ from the count/memory/cores names.
- ``defaultMemory``/``defaultCores``/``defaultGPUNum`` are type-checked only (unused everywhere).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from vgpu.config.checks import Checker, child, core_scaling, item, resource_name_problem
from vgpu.config.limits import (
    INT64_MAX,
    INT64_MIN,
    MAX_GPU_MEMORY_FACTOR,
    MAX_HEALTH_RECOVERY_SECONDS,
    MAX_MIG_INSTANCES,
    MAX_MIG_MEMORY_MIB,
    MAX_SCALING,
    MAX_SPLIT_COUNT,
)
from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES
from vgpu.config.model import (
    DEFAULT_CORES_NAME,
    DEFAULT_COUNT_NAME,
    DEFAULT_MEMORY_NAME,
    DeviceConfig,
    MigGeometryEntry,
    MigGroup,
    MigTemplate,
)

ROOT_KEY = "nvidia"
GPU_CORE_POLICIES = ("default", "force", "disable")
MIG_INSTANCE_NAME = re.compile(r"[0-9]+g\.[0-9]+gb(\+me)?", re.ASCII)

_ENTRY_KEYS = ("models", "allowedGeometries")
_GROUP_KEYS = ("group", "geometries")
_TEMPLATE_KEYS = ("name", "memory", "count")


def default_device_config() -> DeviceConfig:
    """Built-in defaults (docs/decisions.md decision 2), including the upstream shipped MIG geometries."""
    return DeviceConfig(known_mig_geometries=DEFAULT_KNOWN_MIG_GEOMETRIES)


# -- per-key parsers: (checker, key path, value) -> field value ------------------------------


def _resource_name(c: Checker, key: str, value: object) -> str:
    name = c.string(key, value)
    problem = resource_name_problem(name) if name else "must not be empty"
    if problem:
        c.fail(key, problem, value)
    return name


def _optional_resource_name(c: Checker, key: str, value: object) -> str:
    name = c.string(key, value)
    if name:
        problem = resource_name_problem(name)
        if problem:
            c.fail(key, problem, value)
    return name


def _gpu_core_policy(c: Checker, key: str, value: object) -> str:
    policy = c.string(key, value)
    if policy not in GPU_CORE_POLICIES:
        c.fail(key, 'must be one of "default", "force", "disable"', value)
    return policy


def _known_mig_geometries(c: Checker, key: str, value: object) -> tuple[MigGeometryEntry, ...]:
    entries = []
    first_entry_for_model: dict[str, int] = {}
    for i, raw_entry in enumerate(c.sequence(key, value)):
        entry_key = item(key, i)
        entry = parse_mig_entry(c, entry_key, raw_entry)
        for model in entry.models:
            if model in first_entry_for_model:
                c.warn(
                    child(entry_key, "models"),
                    f'model "{model}" is also in {item(key, first_entry_for_model[model])}; the first entry wins',
                )
            else:
                first_entry_for_model[model] = i
        entries.append(entry)
    return tuple(entries)


def parse_mig_entry(c: Checker, key: str, value: object) -> MigGeometryEntry:
    """One `knownMigGeometries` entry (docs/mig.md §2)."""
    data = c.mapping(key, value)
    _warn_unknown(c, key, data, _ENTRY_KEYS)
    models_key = child(key, "models")
    raw_models = _required(c, key, data, "models")
    models = tuple(
        c.string(item(models_key, j), m, non_empty=True)
        for j, m in enumerate(c.sequence(models_key, raw_models, non_empty=True))
    )
    groups_key = child(key, "allowedGeometries")
    raw_groups = c.sequence(groups_key, _required(c, key, data, "allowedGeometries"), non_empty=True)
    groups: list[MigGroup] = []
    seen: dict[str, int] = {}
    for j, raw_group in enumerate(raw_groups):
        group = _parse_mig_group(c, item(groups_key, j), raw_group)
        if group.group in seen:
            c.fail(
                child(item(groups_key, j), "group"),
                f"duplicate group name (also {item(groups_key, seen[group.group])})",
                group.group,
            )
        seen[group.group] = j
        groups.append(group)
    return MigGeometryEntry(models=models, groups=tuple(groups))


def _parse_mig_group(c: Checker, key: str, value: object) -> MigGroup:
    if isinstance(value, list):
        c.fail(
            key,
            "must be a mapping with group and geometries (the older bare-list format is not supported)",
            value,
        )
    data = c.mapping(key, value)
    _warn_unknown(c, key, data, _GROUP_KEYS)
    name_key = child(key, "group")
    name = c.string(name_key, _required(c, key, data, "group"), non_empty=True)
    if "-" in name:
        c.fail(name_key, 'must not contain "-"', name)
    templates_key = child(key, "geometries")
    raw_templates = c.sequence(templates_key, _required(c, key, data, "geometries"), non_empty=True)
    templates = tuple(_parse_mig_template(c, item(templates_key, k), t) for k, t in enumerate(raw_templates))
    group = MigGroup(group=name, geometries=templates)
    if group.positions > MAX_MIG_INSTANCES:
        c.fail(
            templates_key,
            f"must have at most {MAX_MIG_INSTANCES} instances in all (the counts add up to {group.positions})",
        )
    return group


def _parse_mig_template(c: Checker, key: str, value: object) -> MigTemplate:
    data = c.mapping(key, value)
    _warn_unknown(c, key, data, _TEMPLATE_KEYS)
    name_key = child(key, "name")
    name = c.string(name_key, _required(c, key, data, "name"))
    if not MIG_INSTANCE_NAME.fullmatch(name):
        c.fail(name_key, "must be a MIG profile name like 1g.10gb or 1g.10gb+me", name)
    memory = c.integer(child(key, "memory"), _required(c, key, data, "memory"), minimum=1, sane_max=MAX_MIG_MEMORY_MIB)
    count = c.integer(child(key, "count"), _required(c, key, data, "count"), minimum=1, sane_max=MAX_MIG_INSTANCES)
    return MigTemplate(name=name, memory_mib=memory, count=count)


def _required(c: Checker, key: str, data: dict[Any, Any], name: str) -> object:
    if name not in data:
        c.fail(child(key, name), "required key is missing")
    return data[name]


def _warn_unknown(c: Checker, key: str, data: dict[Any, Any], known: tuple[str, ...]) -> None:
    for name in data:
        if name not in known:
            c.unknown_key(child(key, name), name, known)


_Parser = Callable[[Checker, str, object], object]

# YAML key -> (DeviceConfig field, parser).  Order = the table in docs/configuration.md §2.1.
_KEYS: dict[str, tuple[str, _Parser]] = {
    "resourceCountName": ("resource_count_name", _resource_name),
    "resourceMemoryName": ("resource_memory_name", _resource_name),
    "resourceCoreName": ("resource_core_name", _resource_name),
    "resourceMemoryPercentageName": ("resource_memory_percentage_name", _optional_resource_name),
    "resourcePriorityName": ("resource_priority_name", _optional_resource_name),
    "overwriteEnv": ("overwrite_env", lambda c, k, v: c.boolean(k, v)),
    "defaultMemory": ("default_memory", lambda c, k, v: c.integer(k, v, minimum=INT64_MIN, maximum=INT64_MAX)),
    "defaultCores": ("default_cores", lambda c, k, v: c.integer(k, v, minimum=INT64_MIN, maximum=INT64_MAX)),
    "defaultGPUNum": ("default_gpu_num", lambda c, k, v: c.integer(k, v, minimum=INT64_MIN, maximum=INT64_MAX)),
    "deviceSplitCount": ("device_split_count", lambda c, k, v: c.integer(k, v, minimum=1, sane_max=MAX_SPLIT_COUNT)),
    "deviceMemoryScaling": (
        "device_memory_scaling",
        lambda c, k, v: c.number(k, v, positive=True, maximum=MAX_SCALING),
    ),
    "deviceCoreScaling": ("device_core_scaling", core_scaling),
    "disableCoreLimit": ("disable_core_limit", lambda c, k, v: c.boolean(k, v)),
    "gpuMemoryFactor": (
        "gpu_memory_factor",
        lambda c, k, v: c.integer(k, v, minimum=1, sane_max=MAX_GPU_MEMORY_FACTOR),
    ),
    "knownMigGeometries": ("known_mig_geometries", _known_mig_geometries),
    "passDeviceSpecs": ("pass_device_specs", lambda c, k, v: c.boolean(k, v)),
    "gpuCorePolicy": ("gpu_core_policy", _gpu_core_policy),
    "libCudaLogLevel": ("lib_cuda_log_level", lambda c, k, v: c.integer_or_numeric_string(k, v, minimum=0, maximum=4)),
    "healthRecoverySeconds": (
        "health_recovery_seconds",
        lambda c, k, v: c.integer(k, v, minimum=0, sane_max=MAX_HEALTH_RECOVERY_SECONDS),
    ),
}

KNOWN_KEYS: tuple[str, ...] = tuple(_KEYS)

# Extra advice for unknown keys that people copy from other docs (docs/failures.md C-3).
_UNKNOWN_KEY_NOTES = {
    "disablecorelimit": "disableCoreLimit has no effect; use gpuCorePolicy to change core limiting",
    "migstrategy": "static MIG strategies are not supported; dynamic MIG is chosen per node with "
    'operatingmode "mig" in config.json',
}


def device_config_from_data(data: object, source: str) -> tuple[DeviceConfig, list[str]]:
    """Validate parsed `device-config.yaml` content; returns (config, warnings)."""
    c = Checker(source)
    if data is None:
        c.fail("(root)", "file is empty; it must be a mapping with an nvidia: key")
    if not isinstance(data, dict):
        c.fail("(root)", "must be a mapping with an nvidia: key", data)
    if ROOT_KEY not in data:
        near = [k for k in data if isinstance(k, str) and k.lower() == ROOT_KEY]
        reason = "required root key is missing"
        if near:
            reason += f' (found "{near[0]}"; keys are case-sensitive)'
        c.fail(ROOT_KEY, reason)
    section = data[ROOT_KEY]
    if section is None:
        c.warn(ROOT_KEY, "section is empty; using built-in defaults")
        section = {}
    section = c.mapping(ROOT_KEY, section)

    values: dict[str, Any] = {}  # field name -> the value its parser returned (typed per field)
    for name, raw in section.items():
        key = child(ROOT_KEY, name)
        if name not in _KEYS:
            c.unknown_key(key, name, KNOWN_KEYS, note=_UNKNOWN_KEY_NOTES.get(str(name).lower(), ""))
            continue
        field_name, parse = _KEYS[name]
        if raw is None:
            c.warn(key, "empty value; using the built-in default")
            continue
        values[field_name] = parse(c, key, raw)

    config = replace(default_device_config(), source=source, **values)
    _check_distinct_names(c, section, config)
    _semantic_warnings(c, config)
    return config, c.warnings


def _check_distinct_names(c: Checker, section: dict[Any, Any], config: DeviceConfig) -> None:
    names = [
        ("resourceCountName", config.resource_count_name),
        ("resourceMemoryName", config.resource_memory_name),
        ("resourceCoreName", config.resource_core_name),
        ("resourceMemoryPercentageName", config.resource_memory_percentage_name),
    ]
    seen: dict[str, str] = {}
    for key, name in names:
        if not name:
            continue
        if name in seen:
            # Report on whichever of the two keys the file actually sets.
            culprit = key if key in section else seen[name]
            other = seen[name] if culprit == key else key
            c.fail(child(ROOT_KEY, culprit), f"must differ from {child(ROOT_KEY, other)}", name)
        seen[name] = key


def _semantic_warnings(c: Checker, config: DeviceConfig) -> None:
    for key, default, actual in (
        ("resourceCountName", DEFAULT_COUNT_NAME, config.resource_count_name),
        ("resourceMemoryName", DEFAULT_MEMORY_NAME, config.resource_memory_name),
        ("resourceCoreName", DEFAULT_CORES_NAME, config.resource_core_name),
    ):
        if actual != default:
            c.warn(
                child(ROOT_KEY, key),
                f'"{actual}" is not the default "{default}": Volcano master checks the default names '
                "for node allocatable, and the scheduler must be configured with the same names",
            )
    if config.device_memory_scaling != 1:
        c.warn(
            child(ROOT_KEY, "deviceMemoryScaling"),
            f"{config.device_memory_scaling:g} is accepted but ignored: memory oversubscription is not "
            "supported in Volcano mode, each GPU advertises its real memory",
        )
    if config.disable_core_limit:
        c.warn(
            child(ROOT_KEY, "disableCoreLimit"),
            "is accepted but has no effect; use gpuCorePolicy to change core limiting",
        )
    if config.pass_device_specs:
        c.warn(child(ROOT_KEY, "passDeviceSpecs"), "is accepted but ignored")
