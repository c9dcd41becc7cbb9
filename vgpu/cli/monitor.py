"""`vgpu monitor`: flags and environment variables (docs/metrics.md §7, docs/configuration.md §5.2).

Flag > env var (non-empty) > default; the defaults are `MonitorOptions`' field defaults.
``--device-config`` supplies the MIG geometries (for ``hami_mig_device_info``) and the vGPU
resource names; a missing file means built-in defaults.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping

from vgpu.cli import settings
from vgpu.cli.settings import Setting, add_settings, defaults_from, field_default, resolve_settings
from vgpu.monitor.daemon import EXIT_CONFIG, MonitorDaemon, MonitorOptions

log = logging.getLogger("vgpu.monitor.command")  # the name its log lines have always had

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
        help="export the legacy Volcano families (HostGPUMemoryUsage, vGPU_device_*, Device_*)",
    )
    p.add_argument(
        "--hami-metrics",
        action=argparse.BooleanOptionalAction,
        default=field_default(MonitorOptions, "hami_metrics"),
        help="export the HAMi v2.10 hami_* families",
    )
    p.set_defaults(func=main)


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> MonitorOptions:
    """Flag > env var (non-empty) > default; ValueError for a value that is not a boolean."""
    values = resolve_settings(args, environ, SETTINGS)
    values["fail_on_init_error"] = settings.parse_bool(values["fail_on_init_error"], settings.FAIL_ON_INIT_ERROR)
    return MonitorOptions(legacy_metrics=args.legacy_metrics, hami_metrics=args.hami_metrics, **values)


def main(args: argparse.Namespace) -> int:
    try:
        opts = resolve(args, os.environ)
    except ValueError as exc:
        log.error("vgpu monitor: %s", exc)
        return EXIT_CONFIG
    if not opts.node_name:
        log.error("vgpu monitor: the node name is required (--node-name or NODE_NAME)")
        return EXIT_CONFIG
    daemon = MonitorDaemon(opts)
    daemon.install_signal_handlers()
    return daemon.run()
