"""`device-config.yaml` and `config.json` text into an `EffectiveConfig` (docs/configuration.md §1–§4); no I/O.

The files are read by :mod:`vgpu.configfiles` (the daemons' I/O edge, at startup and on SIGHUP,
which also decides what a missing file means), and their text and name come here: the name is
only used in messages.  An invalid text raises `ConfigError`, whose message is
``vgpu: invalid configuration in <path>: <key path>: <reason> (got <value>)`` (docs/configuration.md §2.3).
Warnings (unknown keys, non-default resource names, ignored settings, …) are returned;
`log_warnings` logs them on the ``vgpu.config`` logger with ``extra={"config_warning": True}``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from vgpu.config.device_config import device_config_from_data
from vgpu.config.model import MODE_MIG, DeviceConfig, EffectiveConfig, NodeConfig
from vgpu.config.node_config import node_config_from_data
from vgpu.config.parsing import parse_json, parse_yaml

log = logging.getLogger("vgpu.config")


def parse_device_config(text: str, source: str) -> tuple[DeviceConfig, list[str]]:
    """`device-config.yaml` text → (config, warnings); pure."""
    data, warnings = parse_yaml(text, source)
    config, more = device_config_from_data(data, source)
    return config, warnings + more


def parse_node_config(text: str, source: str, node_name: str) -> tuple[NodeConfig, list[str]]:
    """`config.json` text → (this node's config, warnings); pure."""
    data, warnings = parse_json(text, source)
    config, more = node_config_from_data(data, source, node_name)
    return config, warnings + more


def effective_config(device: DeviceConfig, node: NodeConfig, warnings: Iterable[str] = ()) -> EffectiveConfig:
    """Combine (docs/configuration.md §4) and add the warnings that need both files; pure."""
    combined = EffectiveConfig(device=device, node=node)
    collected = list(warnings)
    if node.operating_mode == MODE_MIG:
        groups = [group for entry in device.known_mig_geometries for group in entry.groups]
        if not groups:
            collected.append(
                f"{node.source}: node {node.name} is in mig mode but {device.source} has an empty "
                "knownMigGeometries list; every GPU will be excluded"
            )
        else:
            largest = max(group.positions for group in groups)
            if combined.split_count < largest:
                collected.append(
                    f"{node.source}: node {node.name} is in mig mode with split count {combined.split_count}, "
                    f"smaller than the largest MIG group ({largest} instances); the scheduler places at "
                    f"most {combined.split_count} instances per GPU"
                )
    return replace(combined, warnings=tuple(collected))


MAX_LOGGED_WARNINGS = 100
"""Beyond this many, one line counts the rest (a file of 100,000 unknown keys is still a few lines)."""


def log_warnings(warnings: Iterable[str], logger: logging.Logger = log) -> None:
    """Log each configuration warning (the text already names file and key), at most
    ``MAX_LOGGED_WARNINGS`` of them, then how many more there were."""
    more = 0
    for i, warning in enumerate(warnings):
        if i < MAX_LOGGED_WARNINGS:
            logger.warning("configuration: %s", warning, extra={"config_warning": True})
        else:
            more += 1
    if more:
        logger.warning("configuration: %d more warnings not shown", more, extra={"config_warning": True})
