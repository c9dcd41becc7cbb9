"""`vgpu plugin`: flags and environment variables (config.md §5.1), flag > env > default.

Only the settings this build uses are offered.  ``--kubeconfig``, ``--handshake`` and
``--hook-path`` drive node registration and Allocate (vgpu/plugin/volcano.py).
"""
from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping

from vgpu.plugin.api import KUBELET_SOCKET
from vgpu.plugin.daemon import EXIT_CONFIG, PluginDaemon, PluginOptions

log = logging.getLogger(__name__)

# flag dest -> (env var, default, help)
SETTINGS: dict[str, tuple[str, str | None, str]] = {
    "node_name": ("NODE_NAME", None, "this node's name (required; from the downward API)"),
    "kubelet_socket": ("KUBELET_SOCKET", KUBELET_SOCKET,
                       "kubelet registration socket; our sockets go in its directory"),
    "device_config": ("DEVICE_CONFIG", "/config/device-config.yaml", "device-config.yaml (missing: built-in defaults)"),
    "node_config": ("NODE_CONFIG", "/config/config.json", "per-node config.json (missing: no overrides)"),
    "nvml_library": ("VGPU_NVML_LIBRARY", None, "libnvidia-ml.so.1 to load (default: the system's)"),
    "kubeconfig": ("KUBECONFIG", None, "kubeconfig for the API server (default: in-cluster service account)"),
    "hook_path": ("HOOK_PATH", "/usr/local/vgpu", "HAMi-core files and the containers/ cache root"),
    "handshake": ("VGPU_HANDSHAKE", "auto", "Volcano node handshake: auto | on | off"),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plugin", help="kubelet device plugin: vgpu-number, vgpu-memory and vgpu-cores",
        description="Serve the three vGPU resources to the kubelet, keep them registered across kubelet "
        "restarts and mark GPUs unhealthy on NVML XID events. Health env vars: DP_DISABLE_HEALTHCHECKS, "
        "DP_ENABLE_HEALTHCHECKS. Signals: SIGHUP reloads the config files; SIGTERM stops.")
    for dest, (env, default, text) in SETTINGS.items():
        shown = f"default {default}" if default else "no default"
        p.add_argument("--" + dest.replace("_", "-"), dest=dest, default=None, metavar=env,
                       help=f"{text} [env {env}; {shown}]")
    p.set_defaults(func=main)


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> PluginOptions:
    """Flag > env var (non-empty) > default."""
    values = {dest: getattr(args, dest, None) or environ.get(env) or default
              for dest, (env, default, _text) in SETTINGS.items()}
    return PluginOptions(**values)


def main(args: argparse.Namespace) -> int:
    opts = resolve(args, os.environ)
    if not opts.node_name:
        log.error("vgpu plugin: the node name is required (--node-name or NODE_NAME)")
        return EXIT_CONFIG
    daemon = PluginDaemon(opts)
    daemon.install_signal_handlers()
    return daemon.run()
