"""Daemon settings shared by `vgpu plugin` and `vgpu monitor`: flag > env var > default.

One table names each setting's flag, environment variable, default and help text, so the two
daemons (and the DaemonSet that sets their env) cannot drift apart on a shared setting such as
``HOOK_PATH``, whose plugin and monitor values must be the same directory (decision 5).
"""
from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from vgpu.hamicore.paths import DEFAULT_HOOK_PATH


@dataclass(frozen=True)
class Setting:
    """A ``--flag`` mirrored by an environment variable (config.md §5)."""

    dest: str
    env: str
    default: str | None
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")

    def with_help(self, text: str) -> "Setting":
        return replace(self, help=text)


NODE_NAME = Setting("node_name", "NODE_NAME", None, "this node's name (required; from the downward API)")
HOOK_PATH = Setting("hook_path", "HOOK_PATH", DEFAULT_HOOK_PATH, "HAMi-core files and the containers/ cache root")
KUBECONFIG = Setting("kubeconfig", "KUBECONFIG", None,
                     "kubeconfig for the API server (default: in-cluster service account)")
NVML_LIBRARY = Setting("nvml_library", "VGPU_NVML_LIBRARY", None, "libnvidia-ml.so.1 to load (default: the system's)")
DEVICE_CONFIG = Setting("device_config", "DEVICE_CONFIG", "/config/device-config.yaml",
                        "device-config.yaml (missing: built-in defaults)")


def add_settings(parser: argparse.ArgumentParser, settings: Iterable[Setting]) -> None:
    """One ``--flag`` per setting; its help names the env var and the default."""
    for s in settings:
        shown = f"default {s.default}" if s.default else "no default"
        parser.add_argument(s.flag, dest=s.dest, default=None, metavar=s.env, help=f"{s.help} [env {s.env}; {shown}]")


def resolve_settings(args: argparse.Namespace, environ: Mapping[str, str],
                     settings: Iterable[Setting]) -> dict[str, str | None]:
    """Flag > env var (non-empty) > default, by ``dest``."""
    return {s.dest: getattr(args, s.dest, None) or environ.get(s.env) or s.default for s in settings}
