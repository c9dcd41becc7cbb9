"""`vgpu monitor` as a process: API access, NVML, the monitor loop and the HTTP endpoint.

Startup order (each step logs what it did):
1. the Kubernetes client (``--kubeconfig`` or in-cluster; no usable configuration is a startup
   error) and the node-scoped pod watch; we wait up to ``POD_SYNC_WAIT_S`` for its first LIST so
   the first scrapes carry pod names, and continue regardless (an API outage never stops the
   monitor: unknown pods are exported by UID and GC waits until the list is complete);
2. NVML, initialised once: discovery of the GPUs' identities plus the cffi sampler, and the MIG
   identity source (``--device-config`` geometries, its own NVML context).  If NVML cannot be
   initialised, ``--fail-on-init-error`` (default true) exits 1; when false, the host families and
   ``hami_mig_device_info`` are omitted, a warning is logged once, container metrics and the
   feedback loop keep working (docs/metrics.md §7), and NVML is retried with backoff: the host
   families appear as soon as it starts.  An invalid ``--device-config`` is logged and only costs
   the MIG family;
3. a first tick (GC, scan, feedback), then the 5-second loop;
4. the HTTP server on ``--listen`` — its log line names the bound address (``:0`` picks a port).

SIGTERM/SIGINT stop everything and exit 0.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass
from types import FrameType

from vgpu import buildinfo
from vgpu.config.device_config import default_device_config
from vgpu.config.loader import effective_config, log_warnings
from vgpu.config.model import ConfigError, DeviceConfig, NodeConfig
from vgpu.configfiles import DEVICE_CONFIG_PATH, load_device_config
from vgpu.hamicore.paths import DEFAULT_HOOK_PATH
from vgpu.httpserve import ListenAddressError, MetricsServer
from vgpu.kube.client import KubeClient, KubeConfigError
from vgpu.mig.errors import MigError
from vgpu.mig.manager import MigManager
from vgpu.monitor.allocation import Capacity
from vgpu.monitor.collectors import BuildInfoCollector
from vgpu.monitor.core import INTERVAL_S, Monitor
from vgpu.monitor.host import DEFAULT_BOUND_S, HostGpu, HostSource
from vgpu.monitor.mig_info import MigInfoSource
from vgpu.monitor.pods import PodLookup, WatchedPods, default_resource_names, resource_names
from vgpu.nvml import backoff
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.discovery import discover_gpus
from vgpu.nvml.errors import NvmlError
from vgpu.nvml.library import read_driver_version
from vgpu.nvml.sampler import Sampler

log = logging.getLogger(__name__)

EXIT_CONFIG = 2
EXIT_RUNTIME = 1
POD_SYNC_WAIT_S = 5.0


@dataclass(frozen=True)
class MonitorOptions:
    """Resolved `vgpu monitor` settings (flag > env > default, docs/configuration.md §5.2).

    These defaults are the CLI's.
    """

    node_name: str
    hook_path: str = DEFAULT_HOOK_PATH
    listen: str = "0.0.0.0:9394"
    kubeconfig: str | None = None
    nvml_library: str | None = None
    device_config: str = DEVICE_CONFIG_PATH
    legacy_metrics: bool = True
    hami_metrics: bool = True
    interval_s: float = INTERVAL_S
    nvml_bound_s: float = DEFAULT_BOUND_S
    fail_on_init_error: bool = True


def open_nvml(
    library: str | None, bound_s: float, *, quiet: bool = False
) -> tuple[HostSource | None, list[GpuInfo], str]:
    """NVML: (host source, GPUs, ""), or (None, [], why) -- logged as a warning unless ``quiet``."""
    try:
        gpus = discover_gpus(library)
        sampler = Sampler(library, max_processes=0)
    except (NvmlError, OSError) as exc:
        if not quiet:
            log.warning(
                "NVML is not available: %s -- host GPU metrics and hami_mig_device_info are omitted; "
                "container metrics and the feedback loop keep working",
                exc,
            )
        return None, [], str(exc)
    log.info("NVML: %d GPU(s): %s", len(gpus), ", ".join(f"{g.index}={g.uuid} ({g.name})" for g in gpus))
    return HostSource(sampler, [HostGpu.of(g) for g in gpus], bound_s=bound_s).start(), gpus, ""


def load_device_settings(path: str) -> DeviceConfig | None:
    """``--device-config`` (MIG geometries and resource names); None, with an error logged, when invalid.

    The monitor keeps running on an invalid file (default resource names, no MIG identities):
    its usage metrics and the feedback loop do not depend on it.
    """
    try:
        device, warnings = load_device_config(path)
    except ConfigError as exc:
        log.error("vgpu monitor: %s -- hami_mig_device_info is omitted", exc)
        return None
    log_warnings(warnings, log)
    return device


def open_mig_source(
    library: str | None, device: DeviceConfig, gpus: list[GpuInfo], pods: PodLookup, bound_s: float
) -> MigInfoSource | None:
    """The MIG identity source over its own NVML context; None (logged) when it cannot start."""
    try:
        manager = MigManager.open(library, effective_config(device, NodeConfig()), gpus)
    except (NvmlError, MigError, OSError) as exc:
        log.warning("MIG queries are not available (%s); hami_mig_device_info is omitted", exc)
        return None
    return MigInfoSource(pods, manager, bound_s=bound_s).start()


def allocation_capacity(device: DeviceConfig | None) -> Capacity:
    """Per-GPU capacities of the allocation families from ``--device-config`` (defaults when invalid)."""
    d = device or default_device_config()
    return Capacity(
        memory_factor=d.gpu_memory_factor, cores=int(100 * d.device_core_scaling), shares=d.device_split_count
    )


class MonitorDaemon:
    def __init__(self, opts: MonitorOptions):
        self.opts = opts
        self._stop = threading.Event()
        self.pods: WatchedPods | None = None
        self.host: HostSource | None = None
        self.mig: MigInfoSource | None = None
        self.monitor: Monitor | None = None
        self.server: MetricsServer | None = None
        self._client: KubeClient | None = None
        self._device: DeviceConfig | None = None
        self._retry: threading.Thread | None = None

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: FrameType | None) -> None:
            log.info("received %s; stopping", signal.Signals(signum).name)
            self._stop.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        o = self.opts
        try:
            self._client = KubeClient.from_kubeconfig(o.kubeconfig, user_agent="vgpu-monitor")
        except KubeConfigError as exc:
            log.error("vgpu monitor: %s", exc)
            return EXIT_CONFIG
        device = load_device_settings(o.device_config)
        names = default_resource_names() if device is None else resource_names(device)
        try:
            self.pods = WatchedPods(self._client, o.node_name, names).start()
            if self.pods.wait_synced(POD_SYNC_WAIT_S):
                log.info("pod watch on node %s synced: %d pod(s)", o.node_name, len(self.pods))
            else:
                log.warning(
                    "pod watch on node %s not synced after %.0f s; continuing (unknown pods are "
                    "exported by UID, GC waits)",
                    o.node_name,
                    POD_SYNC_WAIT_S,
                )
            self._device = device
            self.host, gpus, why = open_nvml(o.nvml_library, o.nvml_bound_s)
            if self.host is None and o.fail_on_init_error:
                log.error("vgpu monitor: NVML cannot start (fail-on-init-error is true): %s", why)
                return EXIT_RUNTIME
            if self.host is not None:
                self.mig = self._mig_source(gpus)
            self.monitor = Monitor(
                o.hook_path,
                self.pods,
                self.host,
                o.node_name,
                legacy=o.legacy_metrics,
                hami=o.hami_metrics,
                interval_s=o.interval_s,
                mig=self.mig,
                capacity=allocation_capacity(device),
            )
            driver = read_driver_version(o.nvml_library) if self.host is not None else None
            self.monitor.registry.register(BuildInfoCollector(buildinfo.build_labels("monitor", driver, os.environ)))
            self.monitor.tick()
            self.monitor.start()
            if self.host is None:
                log.info(
                    "retrying NVML every %.0f s to %.0f s (fail-on-init-error is false)",
                    backoff.FIRST_S,
                    backoff.MAX_S,
                )
                self._retry = threading.Thread(target=self._retry_nvml, name="vgpu-nvml-retry", daemon=True)
                self._retry.start()
            try:
                self.server = MetricsServer(
                    o.listen, self.monitor.render_metrics, self.monitor.healthy, stats=self.monitor.stats
                ).start()
            except ListenAddressError as exc:
                log.error("vgpu monitor: %s", exc)
                return EXIT_CONFIG
            except OSError as exc:
                log.error("vgpu monitor: cannot listen on %s: %s", o.listen, exc.strerror or exc)
                return EXIT_RUNTIME
            log.info(
                "serving metrics on http://%s:%d/metrics (containers root %s, node %s)",
                self.server.host,
                self.server.port,
                self.monitor.containers_root,
                o.node_name,
            )
            self._stop.wait()
            return 0
        finally:
            self._shutdown()

    def _mig_source(self, gpus: list[GpuInfo]) -> MigInfoSource | None:
        o = self.opts
        if self._device is None or not o.hami_metrics or self.pods is None:
            return None
        return open_mig_source(o.nvml_library, self._device, gpus, self.pods, o.nvml_bound_s)

    def _retry_nvml(self) -> None:
        """fail-on-init-error=false: NVML again with backoff; the host families join once it starts."""
        for delay in backoff.retry_delays():
            if self._stop.wait(delay):
                return
            host, gpus, why = open_nvml(self.opts.nvml_library, self.opts.nvml_bound_s, quiet=True)
            if host is None:
                log.debug("NVML still cannot start: %s", why)
                continue
            if self._stop.is_set() or self.monitor is None:
                host.stop()
                return
            log.info("NVML is up: %d GPU(s); serving host GPU metrics", len(gpus))
            self.mig = self._mig_source(gpus)
            self.host = host
            self.monitor.attach_host(host, self.mig)
            return

    def _shutdown(self) -> None:
        self._stop.set()
        if self._retry is not None:
            self._retry.join(timeout=5)
        if self.server is not None:
            self.server.stop()
        if self.monitor is not None:
            self.monitor.close()
        if self.mig is not None:
            self.mig.stop()
        if self.host is not None:
            self.host.stop()
        if self.pods is not None:
            self.pods.stop()
        if self._client is not None:
            self._client.close()
        log.info("vgpu monitor stopped")
