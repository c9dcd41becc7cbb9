"""Typed configuration: `device-config.yaml` (root `nvidia:`) and the per-node `config.json`."""

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
    "ConfigError",
    "DeviceConfig",
    "EffectiveConfig",
    "FilterDevices",
    "MigGeometryEntry",
    "MigGroup",
    "MigTemplate",
    "NodeConfig",
]
