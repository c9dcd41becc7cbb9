"""Typed configuration: `device-config.yaml` (root `nvidia:`) and the per-node `config.json`.

Pure: text in, typed config out.  Reading the files is :mod:`vgpu.configfiles`.
"""

from vgpu.config.loader import (
    effective_config,
    log_warnings,
    parse_device_config,
    parse_node_config,
)
from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES
from vgpu.config.model import (
    ConfigError,
    DeviceConfig,
    EffectiveConfig,
    FilterDevices,
    MigGeometryEntry,
    MigGroup,
    MigTemplate,
    NodeConfig,
)

__all__ = [
    "DEFAULT_KNOWN_MIG_GEOMETRIES",
    "ConfigError",
    "DeviceConfig",
    "EffectiveConfig",
    "FilterDevices",
    "MigGeometryEntry",
    "MigGroup",
    "MigTemplate",
    "NodeConfig",
    "effective_config",
    "log_warnings",
    "parse_device_config",
    "parse_node_config",
]
