"""`vgpu plugin`: flags and environment variables (docs/configuration.md §5.1), flag > env > default.

Only the settings this build uses are offered.  ``--kubeconfig``, ``--handshake`` and
``--hook-path`` drive node registration and Allocate (vgpu/plugin/volcano.py).  The defaults
are `PluginOptions`' field defaults.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from vgpu.cli import settings
from vgpu.cli.checks import StartupError, check_choice, check_config_file, check_kubeconfig, start_daemon
from vgpu.cli.settings import Setting, add_settings, defaults_from, resolve_settings, source_of
from vgpu.configfiles import DEVICE_CONFIG_PATH, NODE_CONFIG_PATH
from vgpu.kube.registrar import HandshakeMode
from vgpu.plugin.daemon import PluginDaemon, PluginOptions

SETTINGS: tuple[Setting, ...] = defaults_from(
    PluginOptions,
    (
        settings.NODE_NAME,
        Setting("kubelet_socket", "KUBELET_SOCKET", "kubelet registration socket; our sockets go in its directory"),
        settings.DEVICE_CONFIG,
        Setting("node_config", "NODE_CONFIG", "per-node config.json (missing: no overrides)"),
        settings.NVML_LIBRARY,
        settings.KUBECONFIG,
        settings.HOOK_PATH,
        Setting("handshake", "VGPU_HANDSHAKE", "Volcano node handshake: auto | on | off"),
        Setting(
            "device_list_strategy",
            "DEVICE_LIST_STRATEGY",
            "how device lists reach the runtime: envvar | volume-mounts | cdi-annotations | cdi-cri, or a comma list",
        ),
        Setting("cdi_annotation_prefix", "CDI_ANNOTATION_PREFIX", "key prefix of the cdi-annotations annotation"),
        Setting("cdi_device_name_strategy", "CDI_DEVICE_NAME_STRATEGY", "CDI device names: uuid | index"),
        Setting("cdi_kind", "CDI_KIND", "CDI vendor/class of the device names"),
        Setting("cdi_spec_dirs", "CDI_SPEC_DIRS", "comma list of the CDI spec directories the runtime reads"),
        Setting(
            "metrics_listen",
            "VGPU_METRICS_LISTEN",
            "HOST:PORT of /healthz, /livez and /metrics (loopback only unless you say otherwise)",
        ),
        Setting(
            "unhealthy_gpu_policy",
            "UNHEALTHY_GPU_POLICY",
            "withdraw: an unhealthy GPU leaves the register annotation until it recovers | "
            "report: it stays there with health=false",
        ),
        settings.FAIL_ON_INIT_ERROR,
    ),
)


def configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Serve the three vGPU resources to the kubelet, keep them registered across kubelet "
        "restarts and mark GPUs unhealthy on NVML XID events. Health env vars: DP_DISABLE_HEALTHCHECKS, "
        "DP_ENABLE_HEALTHCHECKS. Signals: SIGHUP reloads the config files; SIGTERM stops."
    )
    add_settings(p, SETTINGS)
    p.set_defaults(func=main)


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> PluginOptions:
    """Flag > env var (non-empty) > default; ValueError for a value that is not a boolean."""
    values = resolve_settings(args, environ, SETTINGS)
    values["fail_on_init_error"] = settings.parse_bool(values["fail_on_init_error"], settings.FAIL_ON_INIT_ERROR)
    return PluginOptions(**values)


def check(opts: PluginOptions, args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """Every setting that can be checked without NVML or the API server (vgpu/cli/checks.py)."""
    where = {s.dest: source_of(args, environ, s) for s in SETTINGS}
    if not opts.node_name:
        raise StartupError("the node name is required (--node-name or NODE_NAME)")
    check_choice(opts.handshake, where["handshake"], tuple(m.value for m in HandshakeMode))
    check_kubeconfig(opts.kubeconfig, where["kubeconfig"], required=False)
    check_config_file(opts.device_config, where["device_config"], DEVICE_CONFIG_PATH)
    check_config_file(opts.node_config, where["node_config"], NODE_CONFIG_PATH)


def main(args: argparse.Namespace) -> int:
    return start_daemon("plugin", args, os.environ, resolve, check, PluginDaemon)
