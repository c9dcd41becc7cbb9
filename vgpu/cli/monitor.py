"""`vgpu monitor`: flags and environment variables (docs/metrics.md §7, docs/configuration.md §5.2).

Flag > env var (non-empty) > default; the defaults are `MonitorOptions`' field defaults.
``--device-config`` supplies the MIG geometries (for ``hami_mig_device_info``) and the vGPU
resource names; a missing file means built-in defaults.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from vgpu.cli import settings
from vgpu.cli.checks import (
    StartupError,
    check_config_file,
    check_kubeconfig,
    check_port_free,
    start_daemon,
)
from vgpu.cli.settings import Setting, add_settings, defaults_from, field_default, resolve_settings, source_of
from vgpu.configfiles import DEVICE_CONFIG_PATH
from vgpu.httpserve import ListenAddressError, parse_listen
from vgpu.monitor.daemon import MonitorDaemon, MonitorOptions

SETTINGS: tuple[Setting, ...] = defaults_from(
    MonitorOptions,
    (
        Setting("listen", "VGPU_LISTEN", "HOST:PORT of the /metrics endpoint (port 0: any free port)"),
        settings.NODE_NAME,
        settings.HOOK_PATH.with_help("HAMi-core files; regions are scanned under <hook-path>/containers"),
        settings.KUBECONFIG,
        settings.NVML_LIBRARY,
        settings.DEVICE_CONFIG.with_help("device-config.yaml (MIG info only)"),
        settings.FAIL_ON_INIT_ERROR.with_help(
            "exit when NVML cannot start (true), or serve container metrics and retry NVML with backoff (false)"
        ),
    ),
)


def configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Serve per-container GPU usage (legacy Volcano and HAMi v2.10 metric families) and host "
        "GPU metrics at /metrics, and run the HAMi-core priority feedback loop every 5 s. "
        "SIGTERM stops."
    )
    add_settings(p, SETTINGS)
    p.add_argument(
        "--legacy-metrics",
        action=argparse.BooleanOptionalAction,
        default=field_default(MonitorOptions, "legacy_metrics"),
        help="export the legacy Volcano families (HostGPUMemoryUsage, vGPU_device_*, Device_*) (default on)",
    )
    p.add_argument(
        "--hami-metrics",
        action=argparse.BooleanOptionalAction,
        default=field_default(MonitorOptions, "hami_metrics"),
        help="export the HAMi v2.10 hami_* families (default on)",
    )
    p.set_defaults(func=main)


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> MonitorOptions:
    """Flag > env var (non-empty) > default; ValueError for a value that is not a boolean."""
    values = resolve_settings(args, environ, SETTINGS)
    values["fail_on_init_error"] = settings.parse_bool(values["fail_on_init_error"], settings.FAIL_ON_INIT_ERROR)
    return MonitorOptions(legacy_metrics=args.legacy_metrics, hami_metrics=args.hami_metrics, **values)


def check(opts: MonitorOptions, args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """Every setting that can be checked before the pod watch and NVML (vgpu/cli/checks.py)."""
    where = {s.dest: source_of(args, environ, s) for s in SETTINGS}
    if not opts.node_name:
        raise StartupError("the node name is required (--node-name or NODE_NAME)")
    try:
        host, port = parse_listen(opts.listen)
    except ListenAddressError as exc:
        raise StartupError(str(exc).replace("--listen", where["listen"], 1)) from None
    check_port_free(host, port, where["listen"])
    check_kubeconfig(opts.kubeconfig, where["kubeconfig"], required=True)
    check_config_file(opts.device_config, where["device_config"], DEVICE_CONFIG_PATH)


def main(args: argparse.Namespace) -> int:
    return start_daemon("monitor", args, os.environ, resolve, check, MonitorDaemon)
