"""Read `device-config.yaml` and `config.json` from disk; :mod:`vgpu.config` turns their text into config.

This is the daemons' one I/O edge for configuration (``vgpu.config`` itself does no I/O).  Both
`vgpu plugin` (at startup and on SIGHUP) and `vgpu monitor` call it; it imports neither daemon.

- A path that is None, empty or does not exist (also a dangling symlink, as a ConfigMap volume
  without the key leaves it) → built-in defaults (docs/decisions.md decision 2; logged at INFO, not a warning):
  the three default resource names, split count 10, factor 1, core scaling 1 and the upstream
  shipped `knownMigGeometries` (docs/mig.md §2.1).  A missing `config.json` → no per-node overrides,
  mode ``hami-core``.
- A file that exists but cannot be read or is invalid → `ConfigError`, whose message is
  ``vgpu: invalid configuration in <path>: <key path>: <reason> (got <value>)`` (docs/configuration.md §2.3).
  The CLI turns `ConfigError` into exit status 2; runtime errors exit with status 1.
- Warnings (unknown keys, non-default resource names, ignored settings, …) are returned in
  ``EffectiveConfig.warnings`` and logged by `load_config` on the ``vgpu.config`` logger with
  ``extra={"config_warning": True}``.  `load_device_config`/`load_node_config` only return them.

Every call returns new immutable objects.
"""

from __future__ import annotations

import logging
import os

from vgpu.config.device_config import default_device_config
from vgpu.config.limits import MAX_CONFIG_BYTES
from vgpu.config.loader import effective_config, log_warnings, parse_device_config, parse_node_config
from vgpu.config.model import ConfigError, DeviceConfig, EffectiveConfig, NodeConfig

# Where the DaemonSet mounts the two ConfigMap keys: the defaults of --device-config / --node-config.
DEVICE_CONFIG_PATH = "/config/device-config.yaml"
NODE_CONFIG_PATH = "/config/config.json"

log = logging.getLogger("vgpu.config")  # the same logger as the parsers' warnings

PathLike = str | os.PathLike | None


def read_config_text(path: PathLike) -> tuple[str, str | None]:
    """(path as text, file content or None when the file does not exist).  Raises `ConfigError`."""
    if path is None:
        return "", None
    name = os.fspath(path)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if not name:
        return name, None
    try:
        with open(name, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)  # never more: the file may be anything
    except (FileNotFoundError, NotADirectoryError):
        return name, None
    except IsADirectoryError:
        raise ConfigError(name, "(file)", "is a directory, not a file", show_value=False) from None
    except OSError as exc:
        raise ConfigError(name, "(file)", f"cannot be read: {exc.strerror or exc}", show_value=False) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            name, "(file)", f"is larger than {MAX_CONFIG_BYTES} bytes (the most a ConfigMap holds)", show_value=False
        )
    try:
        return name, raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, "(file)", f"is not valid UTF-8 (byte {exc.start})", show_value=False) from None


def load_device_config(path: PathLike) -> tuple[DeviceConfig, list[str]]:
    """Read `device-config.yaml`; built-in defaults when it does not exist.  Raises `ConfigError`."""
    name, text = read_config_text(path)
    if text is None:
        log.info("device config %s not found; using built-in defaults", name or "(none)")
        return default_device_config(), []
    return parse_device_config(text, name)


def load_node_config(path: PathLike, node_name: str) -> tuple[NodeConfig, list[str]]:
    """Read `config.json` and pick the entry for ``node_name``; no overrides when it does not exist."""
    name, text = read_config_text(path)
    if text is None:
        log.info("node config %s not found; no per-node settings", name or "(none)")
        return NodeConfig(), []
    config, warnings = parse_node_config(text, name, node_name)
    if not config.matched:
        log.info("node config %s has no entry for node %r; no per-node settings", name, node_name)
    return config, warnings


def load_config(device_config_path: PathLike, node_config_path: PathLike, node_name: str) -> EffectiveConfig:
    """Load both files for ``node_name``; warnings are returned and logged.  Raises `ConfigError`."""
    device, device_warnings = load_device_config(device_config_path)
    node, node_warnings = load_node_config(node_config_path, node_name)
    config = effective_config(device, node, device_warnings + node_warnings)
    log_warnings(config.warnings)
    return config
