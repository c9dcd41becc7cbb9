"""Load `device-config.yaml` and `config.json` into an `EffectiveConfig` (config.md §1–§4).

This is the I/O edge: it reads the files and hands the text to pure parsers/validators
(`parsing`, `device_config`, `node_config`).  Call it at startup and again on SIGHUP; every call
returns new immutable objects.

- A path that is None, empty or does not exist (also a dangling symlink, as a ConfigMap volume
  without the key leaves it) → built-in defaults (decision 2; logged at INFO, not a warning):
  the three default resource names, split count 10, factor 1, core scaling 1 and the upstream
  shipped `knownMigGeometries` (mig.md §2.1).  A missing `config.json` → no per-node overrides,
  mode ``hami-core``.
- A file that exists but cannot be read or is invalid → `ConfigError`, whose message is
  ``vgpu: invalid configuration in <path>: <key path>: <reason> (got <value>)`` (config.md §2.3).
  The CLI turns `ConfigError` into exit status 2; runtime errors exit with status 1.
- Warnings (unknown keys, non-default resource names, ignored settings, …) are returned in
  ``EffectiveConfig.warnings`` and logged by `load_config` on the ``vgpu.config`` logger with
  ``extra={"config_warning": True}``.  `load_device_config`/`load_node_config` only return them.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import replace

from vgpu.config.device_config import default_device_config, device_config_from_data
from vgpu.config.model import MODE_MIG, ConfigError, DeviceConfig, EffectiveConfig, NodeConfig
from vgpu.config.node_config import node_config_from_data
from vgpu.config.parsing import parse_json, parse_yaml

log = logging.getLogger("vgpu.config")

PathLike = str | os.PathLike[str] | None


def _read_text(path: PathLike) -> tuple[str, str | None]:
    """(path as text, file content or None when the file does not exist)."""
    if path is None:
        return "", None
    name = os.fspath(path)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if not name:
        return name, None
    try:
        with open(name, "rb") as handle:
            raw = handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return name, None
    except IsADirectoryError:
        raise ConfigError(name, "(file)", "is a directory, not a file", show_value=False) from None
    except OSError as exc:
        raise ConfigError(name, "(file)", f"cannot be read: {exc.strerror or exc}", show_value=False) from None
    try:
        return name, raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, "(file)", f"is not valid UTF-8 (byte {exc.start})", show_value=False) from None


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


def load_device_config(path: PathLike) -> tuple[DeviceConfig, list[str]]:
    """Read `device-config.yaml`; built-in defaults when it does not exist.  Raises `ConfigError`."""
    name, text = _read_text(path)
    if text is None:
        log.info("device config %s not found; using built-in defaults", name or "(none)")
        return default_device_config(), []
    return parse_device_config(text, name)


def load_node_config(path: PathLike, node_name: str) -> tuple[NodeConfig, list[str]]:
    """Read `config.json` and pick the entry for ``node_name``; no overrides when it does not exist."""
    name, text = _read_text(path)
    if text is None:
        log.info("node config %s not found; no per-node settings", name or "(none)")
        return NodeConfig(), []
    config, warnings = parse_node_config(text, name, node_name)
    if not config.matched:
        log.info("node config %s has no entry for node %r; no per-node settings", name, node_name)
    return config, warnings


def effective_config(device: DeviceConfig, node: NodeConfig, warnings: Iterable[str] = ()) -> EffectiveConfig:
    """Combine (config.md §4) and add the warnings that need both files; pure."""
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


def log_warnings(warnings: Iterable[str], logger: logging.Logger = log) -> None:
    """Log each configuration warning (the text already names file and key)."""
    for warning in warnings:
        logger.warning("configuration: %s", warning, extra={"config_warning": True})


def load_config(device_config_path: PathLike, node_config_path: PathLike, node_name: str) -> EffectiveConfig:
    """Load both files for ``node_name``; warnings are returned and logged.  Raises `ConfigError`."""
    device, device_warnings = load_device_config(device_config_path)
    node, node_warnings = load_node_config(node_config_path, node_name)
    config = effective_config(device, node, device_warnings + node_warnings)
    log_warnings(config.warnings)
    return config
