"""Daemon settings shared by `vgpu plugin` and `vgpu monitor`: flag > env var > default.

One table names each setting's flag, environment variable and help text, so the two daemons
(and the DaemonSet that sets their env) cannot drift apart on a shared setting such as
``HOOK_PATH``, whose plugin and monitor values must be the same directory (docs/decisions.md decision 5).
Defaults are written once, as the field defaults of the daemon's options dataclass
(``PluginOptions``, ``MonitorOptions``); `defaults_from` copies them into the table, where the
help texts show them and `resolve_settings` falls back to them.  A value both daemons share
(the hook path, the device-config path) is one constant that both dataclasses name.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Setting:
    """A ``--flag`` mirrored by an environment variable (docs/configuration.md §5)."""

    dest: str
    env: str
    help: str
    default: str | None = None  # filled in from the options dataclass by `defaults_from`

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")

    def with_help(self, text: str) -> Setting:
        return replace(self, help=text)


NODE_NAME = Setting("node_name", "NODE_NAME", "this node's name (required; from the downward API)")
HOOK_PATH = Setting("hook_path", "HOOK_PATH", "HAMi-core files and the containers/ cache root")
KUBECONFIG = Setting("kubeconfig", "KUBECONFIG", "kubeconfig for the API server (default: in-cluster service account)")
NVML_LIBRARY = Setting("nvml_library", "VGPU_NVML_LIBRARY", "libnvidia-ml.so.1 to load (default: the system's)")
DEVICE_CONFIG = Setting("device_config", "DEVICE_CONFIG", "device-config.yaml (missing: built-in defaults)")
FAIL_ON_INIT_ERROR = Setting(
    "fail_on_init_error",
    "FAIL_ON_INIT_ERROR",
    "exit when NVML cannot start (true), or stay up and retry with backoff until it does (false)",
)
_TRUE = frozenset({"1", "t", "true", "y", "yes", "on"})
_FALSE = frozenset({"0", "f", "false", "n", "no", "off"})


def parse_bool(value: str | bool, setting: Setting) -> bool:
    """A boolean setting's value (true/false, 1/0, yes/no, on/off; any case); ValueError names the setting."""
    if isinstance(value, bool):
        return value
    word = value.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ValueError(f"{setting.flag} / {setting.env}: {value!r} is not a boolean (true or false)")


def field_default(options: type, name: str) -> Any:
    """The default of field ``name`` of the dataclass ``options``; None when it has none."""
    for f in dataclasses.fields(options):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            return f.default_factory() if f.default_factory is not dataclasses.MISSING else None
    raise KeyError(f"{options.__name__} has no field {name!r}")


def defaults_from(options: type, settings: Iterable[Setting]) -> tuple[Setting, ...]:
    """``settings``, each with the default of the same-named field of the dataclass ``options``."""
    return tuple(replace(s, default=field_default(options, s.dest)) for s in settings)


def add_settings(parser: argparse.ArgumentParser, settings: Iterable[Setting]) -> None:
    """One ``--flag`` per setting; its help names the env var and the default."""
    for s in settings:
        shown = f"default {s.default}" if s.default else "no default"
        parser.add_argument(s.flag, dest=s.dest, default=None, metavar=s.env, help=f"{s.help} [env {s.env}; {shown}]")


def resolve_settings(
    args: argparse.Namespace, environ: Mapping[str, str], settings: Iterable[Setting]
) -> dict[str, Any]:
    """Flag > env var (non-empty) > default, by ``dest``.

    Each value is a ``str`` or None; typed ``Any`` as the keyword arguments of an options dataclass.
    """
    return {s.dest: getattr(args, s.dest, None) or environ.get(s.env) or s.default for s in settings}
