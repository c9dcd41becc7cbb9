"""The `vgpu plugin` daemon: startup order, signals, reload and shutdown.

docs/kubelet-api.md §5: load and validate config → nvmlInit → enumerate and
filter GPUs → size check (docs/kubelet-api.md §7) → health checks → serve and register the three resources.
Then it runs until SIGINT/SIGTERM/SIGQUIT (stop servers, remove sockets, exit 0); SIGHUP
re-reads both config files and applies them, keeping the health state (docs/health.md §4): when the
resource names stay the same, the open ListAndWatch streams carry the new device lists (no
re-registration, so the kubelet never sees the resources disconnect); renamed resources are
re-registered.  A reload with an invalid config is logged and ignored: a
running node keeps its last good configuration.

The HTTP endpoint (``--metrics-listen``: ``/livez``, ``/healthz``, ``/metrics``, docs/metrics.md §10)
starts first, so the probes see the process during the slow steps; its address is checked
before anything else.

Exit statuses: 2 invalid configuration (docs/configuration.md §2.3), 1 runtime errors (NVML cannot
start, the 4 MiB size check, no NVML event set), 0 after a stop signal.

With ``--fail-on-init-error=false`` (docs/configuration.md §5.1) a node whose NVML cannot start, or
which has no GPU, is not an error: the plugin says why once, registers nothing and retries with
backoff (vgpu/nvml/backoff.py: 1 s doubling up to 30 s), then starts as usual as soon
as NVML answers, so a CPU-only node or a driver still loading is no crash loop.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from vgpu import buildinfo
from vgpu.config.model import MODE_MIG, ConfigError, EffectiveConfig
from vgpu.configfiles import DEVICE_CONFIG_PATH, NODE_CONFIG_PATH, load_config
from vgpu.hamicore.paths import DEFAULT_HOOK_PATH
from vgpu.httpserve import ListenAddressError, MetricsServer, parse_listen
from vgpu.kube.registrar import HandshakeMode
from vgpu.mig.node import MigNode, start_mig_node
from vgpu.nvml import backoff
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.discovery import discover_gpus
from vgpu.nvml.errors import INIT_HINT, NvmlError
from vgpu.nvml.health import GpuHealth, HealthInitError, HealthMonitor, XidPolicy
from vgpu.nvml.library import init_nvml, read_driver_version
from vgpu.plugin.api import KUBELET_SOCKET
from vgpu.plugin.cdi import DeviceListPolicy
from vgpu.plugin.cdi_setup import CdiSide
from vgpu.plugin.devices import ResourceKind, resource_specs
from vgpu.plugin.health_metrics import HealthMetrics
from vgpu.plugin.metrics import CDI_UNRESOLVED, MeteredAllocator, PluginCollector, PluginMetrics, registry_of
from vgpu.plugin.registration import PluginSet
from vgpu.plugin.resources import ResourceManager
from vgpu.plugin.responses import Allocator, EmptyAllocator, UnavailableAllocator
from vgpu.plugin.sizecheck import SizeCheckError, check_listandwatch_sizes
from vgpu.plugin.volcano import (
    POLICY_WITHDRAW,
    UNHEALTHY_GPU_POLICIES,
    VolcanoConfigError,
    VolcanoOptions,
    VolcanoSide,
)
from vgpu.protocol import cdi

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_CONFIG = 2
CDI_EVENT_BUDGET_S = 2.0
"""API time a CDI spec-check Event may take inside an Allocate; the retry queue takes the rest."""


@dataclass(frozen=True)
class PluginOptions:
    """Resolved `vgpu plugin` settings (flag > env > default, docs/configuration.md §5.1).

    These defaults are the CLI's.
    """

    node_name: str
    kubelet_socket: str = KUBELET_SOCKET
    device_config: str = DEVICE_CONFIG_PATH
    node_config: str = NODE_CONFIG_PATH
    nvml_library: str | None = None
    kubeconfig: str | None = None
    hook_path: str = DEFAULT_HOOK_PATH
    handshake: str = HandshakeMode.AUTO.value
    # How device lists reach the runtime (docs/cdi.md §3; docs/configuration.md §5.5).
    device_list_strategy: str = cdi.ENVVAR
    cdi_annotation_prefix: str = cdi.DEFAULT_ANNOTATION_PREFIX
    cdi_device_name_strategy: str = cdi.NAME_UUID
    cdi_kind: str = cdi.DEFAULT_KIND
    cdi_spec_dirs: str = cdi.DEFAULT_SPEC_DIRS
    metrics_listen: str = "127.0.0.1:9395"
    unhealthy_gpu_policy: str = POLICY_WITHDRAW
    fail_on_init_error: bool = True


def default_allocators() -> dict[ResourceKind, Allocator]:
    """Today's allocators; the Volcano-protocol allocator replaces the vgpu-number one."""
    return {
        ResourceKind.NUMBER: UnavailableAllocator(),
        ResourceKind.MEMORY: EmptyAllocator(),
        ResourceKind.CORES: EmptyAllocator(),
    }


def select_gpus(gpus: list[GpuInfo], cfg: EffectiveConfig) -> list[GpuInfo]:
    """The GPUs we advertise: not filtered (docs/configuration.md §3), ordered by minor number."""
    kept = [g for g in gpus if not cfg.is_filtered(g.index, g.uuid) and g.memory_supported]
    for g in gpus:
        if not g.memory_supported:  # docs/kubelet-api.md §4.1
            log.warning(
                "GPU %d (%s, %s) is excluded: NVML reports no memory of its own (unified memory), "
                "so HAMi-core cannot limit it",
                g.index,
                g.uuid,
                g.name,
            )
        elif g not in kept:
            log.info("GPU %d (%s) is excluded by filterdevices", g.index, g.uuid)
    return sorted(kept, key=lambda g: g.minor)


def build_managers(cfg: EffectiveConfig, gpus: list[GpuInfo], health: GpuHealth) -> list[ResourceManager]:
    return [ResourceManager(spec, gpus, cfg, health) for spec in resource_specs(cfg)]


def checked_gpus(cfg: EffectiveConfig, all_gpus: list[GpuInfo]) -> list[GpuInfo]:
    """GPU selection plus the 4 MiB size check for this config; raises SizeCheckError."""
    gpus = select_gpus(all_gpus, cfg)
    for report in check_listandwatch_sizes(gpus, cfg):
        log.info("vgpu-%s: worst-case ListAndWatch message %d bytes", report.kind.value, report.worst_case_bytes)
    return gpus


class PluginDaemon:
    """Owns everything the daemon runs; ``run()`` blocks until a stop signal."""

    def __init__(
        self,
        opts: PluginOptions,
        environ: Mapping[str, str] | None = None,
        allocators: Mapping[ResourceKind, Allocator] | None = None,
    ) -> None:
        self.opts = opts
        self.environ = dict(os.environ if environ is None else environ)
        self._own_allocators = allocators is None
        self.allocators = dict(allocators or default_allocators())
        self.volcano: VolcanoSide | None = None
        self.mig: MigNode | None = None  # mode mig only (vgpu/mig/node.py)
        self.stop_event = threading.Event()
        self.reload_event = threading.Event()
        self.health = GpuHealth()
        self.monitor: HealthMonitor | None = None
        self.plugins: PluginSet | None = None
        self.cfg: EffectiveConfig | None = None
        self.gpus: list[GpuInfo] = []
        self.all_gpus: list[GpuInfo] = []
        self.cdi: CdiSide | None = None  # its unresolved_devices() feeds vgpu_plugin_cdi_unresolved_devices
        self.metrics = PluginMetrics()
        self.health_metrics = HealthMetrics()
        self.server: MetricsServer | None = None
        self._nvml_started = False
        self._build_labels = buildinfo.build_labels("plugin", None, self.environ)

    # -- startup -----------------------------------------------------------------------

    def _config(self) -> EffectiveConfig:
        """The loaded config, for the parts that read it later (set by :meth:`start` first)."""
        assert self.cfg is not None
        return self.cfg

    def start(self) -> int:
        """Everything up to (not including) serving; EXIT_OK, or the exit status of the failure."""
        opts = self.opts
        log.info("vgpu plugin starting on node %s (kubelet socket %s)", opts.node_name, opts.kubelet_socket)
        if opts.unhealthy_gpu_policy not in UNHEALTHY_GPU_POLICIES:
            log.error(
                "--unhealthy-gpu-policy %r: expected one of %s",
                opts.unhealthy_gpu_policy,
                ", ".join(UNHEALTHY_GPU_POLICIES),
            )
            return EXIT_CONFIG
        try:
            self.cfg = load_config(opts.device_config, opts.node_config, opts.node_name)
            policy = DeviceListPolicy.from_settings(
                opts.device_list_strategy,
                opts.cdi_annotation_prefix,
                opts.cdi_device_name_strategy,
                opts.cdi_kind,
                opts.cdi_spec_dirs,
            )
        except (ConfigError, cdi.CdiError) as exc:
            log.error("%s", exc)
            return EXIT_CONFIG
        reason = self._open_nvml()
        if reason is not None:
            if opts.fail_on_init_error:
                log.error("NVML cannot start: %s", reason)
                return EXIT_RUNTIME
            if not self._wait_for_nvml(reason):
                return EXIT_OK  # stopped while waiting
        self._nvml_started = True
        driver = read_driver_version(opts.nvml_library)
        self._build_labels = buildinfo.build_labels("plugin", driver, self.environ)
        try:
            self.gpus = checked_gpus(self.cfg, self.all_gpus)
        except SizeCheckError as exc:
            log.error("%s", exc)
            return EXIT_RUNTIME
        if self.cfg.operating_mode == MODE_MIG:
            status = self._start_mig()
            if status != EXIT_OK:
                return status
        log.info(
            "advertising %d of %d GPU(s): %s",
            len(self.gpus),
            len(self.all_gpus),
            ", ".join(f"{g.minor}:{g.uuid} ({g.name}, {g.memory_total_mib} MiB)" for g in self.gpus) or "none",
        )
        self.health = GpuHealth(g.uuid for g in self.gpus)
        self.health_metrics.watch(self.health, self.gpus)
        try:
            self._start_monitor()
        except HealthInitError as exc:
            log.error("%s", exc)
            return EXIT_RUNTIME
        try:
            self._start_volcano()
        except VolcanoConfigError as exc:
            log.error("%s", exc)
            return EXIT_CONFIG
        self._start_cdi(policy)
        cdi_side = self.cdi
        if cdi_side is not None:
            self.metrics.add_gauge(CDI_UNRESOLVED, cdi_side.unresolved_devices)
        managers = build_managers(self.cfg, self.gpus, self.health)
        for m in managers:
            self.metrics.add_resource(m.resource_name)
        metered = {k: MeteredAllocator(a, self.metrics) for k, a in self.allocators.items()}
        self.plugins = PluginSet(opts.kubelet_socket, managers, metered)
        # One notification flips every resource (all three streams re-send together).
        self.health.subscribe(self._on_health_change)
        return EXIT_OK

    def _open_nvml(self) -> str | None:
        """Discover the GPUs and keep NVML initialised; None, or why NVML cannot serve this node."""
        try:
            self.all_gpus = discover_gpus(self.opts.nvml_library)  # its errors name the call and library
            if not self.all_gpus and not self.opts.fail_on_init_error:
                return "NVML finds no GPU on this node"
            init_nvml(self.opts.nvml_library)  # stays initialised for the health loop's lifetime
        except (NvmlError, RuntimeError) as exc:
            hint = "" if INIT_HINT in str(exc) else f"; {INIT_HINT}"
            return f"{exc}{hint}"
        return None

    def _wait_for_nvml(self, reason: str) -> bool:
        """fail-on-init-error=false: retry with backoff until NVML serves a GPU; False when stopped first."""
        log.warning(
            "NVML cannot start: %s -- not advertising any resource (fail-on-init-error is false); "
            "retrying every %.0f s to %.0f s until it does",
            reason,
            backoff.FIRST_S,
            backoff.MAX_S,
        )
        started = time.monotonic()
        for delay in backoff.retry_delays():
            if self.stop_event.wait(delay):
                return False
            again = self._open_nvml()
            if again is None:
                log.info("NVML is up after %.1f s: starting", time.monotonic() - started)
                return True
            log.debug("NVML still cannot start: %s", again)
        return False  # unreachable: the delays never end

    def _start_monitor(self) -> None:
        assert self.cfg is not None
        self.monitor = HealthMonitor(
            self.gpus,
            self.health,
            XidPolicy.from_env(self.environ),
            self.cfg.device.health_recovery_seconds,
            on_xid=self.health_metrics.xid,
        )
        self.monitor.start()

    def _start_mig(self) -> int:
        """Mode mig (docs/mig.md §5.1): MIG mode on, excluded GPUs dropped, the MIG applier ready."""
        opts = self.opts

        def rediscover() -> list[GpuInfo]:  # after a MIG mode change handles and minors may change
            assert self.cfg is not None
            self.all_gpus = discover_gpus(opts.nvml_library)
            return checked_gpus(self.cfg, self.all_gpus)

        try:
            self.mig, self.gpus = start_mig_node(opts.nvml_library, self._config, self.gpus, opts.node_name, rediscover)
        except (NvmlError, RuntimeError, SizeCheckError) as exc:
            log.error("MIG cannot start: %s", exc)
            return EXIT_RUNTIME
        return EXIT_OK

    def _start_volcano(self) -> None:
        """Node registration, pod cache and the Volcano allocator (vgpu/plugin/volcano.py)."""
        opts = self.opts
        self.volcano = VolcanoSide.create(
            VolcanoOptions(opts.node_name, opts.kubeconfig, opts.hook_path, opts.handshake, opts.unhealthy_gpu_policy),
            self._config,
            self.gpus,
            self.health,
            self.environ,
            mig=self.mig.applier if self.mig is not None else None,
        )
        if self.volcano is not None:
            self.volcano.client.observe = self.metrics.api_call
            if self.mig is not None:
                self.mig.post_events(self.volcano.allocator.events.node_event)
            if self._own_allocators:
                self.allocators = self.volcano.allocators()
            self.volcano.start()
            unhealthy = {u: False for u, ok in self.health.snapshot().items() if not ok}
            if unhealthy:  # already unhealthy at startup (e.g. its events cannot be registered)
                self.volcano.health_changed(unhealthy, self.gpus)

    def _start_cdi(self, policy: DeviceListPolicy) -> None:
        """Device-list strategies around the allocators, and the CDI spec check (docs/cdi.md §6)."""
        volcano = self.volcano

        def node_event(reason: str, message: str) -> None:  # bounded; what does not fit is retried later
            assert volcano is not None
            with volcano.client.deadline(CDI_EVENT_BUDGET_S):
                volcano.allocator.writes.node_event(reason, message)

        self.cdi = CdiSide(
            policy,
            lambda: self.gpus,
            mig_nvml=self.mig.manager.nvml if self.mig is not None else None,
            node_event=node_event if volcano is not None else None,
        )
        self.allocators = self.cdi.wrap(self.allocators)
        self.cdi.startup_check(self.mig is not None)

    def _on_health_change(self, changed: dict[str, bool]) -> None:
        if self.plugins is not None:
            for m in self.plugins.managers:
                m.refresh(changed)
        if self.volcano is not None:
            self.volcano.health_changed(changed, self.gpus)

    # -- the HTTP endpoint (docs/metrics.md §10) ------------------------------------------

    def _start_endpoint(self) -> int:
        """Serve /livez, /healthz and /metrics; EXIT_OK, or the exit status of a bad or busy address."""
        listen = self.opts.metrics_listen
        try:
            parse_listen(listen, "--metrics-listen")
            collector = PluginCollector(self.metrics, self, self.health_metrics, lambda: self._build_labels)
            self.server = MetricsServer(
                listen, registry_of(collector), self.readiness, name="plugin", flag="--metrics-listen"
            ).start()
        except ListenAddressError as exc:
            log.error("vgpu plugin: %s", exc)
            return EXIT_CONFIG
        except OSError as exc:
            log.error("vgpu plugin: cannot listen on %s (--metrics-listen): %s", listen, exc.strerror or exc)
            return EXIT_RUNTIME
        log.info("serving /healthz, /livez and /metrics on http://%s:%d", self.server.host, self.server.port)
        return EXIT_OK

    def readiness(self) -> tuple[bool, str]:
        """/healthz: ready only when every resource is registered with the kubelet and NVML is up."""
        problems = []
        if not self.nvml_up():
            if not self._nvml_started:
                problems.append("NVML is not initialised (yet)")
            else:
                error = self.monitor.wait_error if self.monitor is not None else None
                problems.append(f"NVML event wait failing: {error}")
        expected = [m.resource_name for m in self.resource_managers()]
        missing = [r for r in expected if r not in self.registered_resources()]
        if not expected:
            problems.append("not registered with the kubelet: starting up")
        elif missing:
            problems.append(f"not registered with the kubelet at {self.opts.kubelet_socket}: {', '.join(missing)}")
        if problems:
            return False, "not ready: " + "; ".join(problems)
        return True, f"ok: {', '.join(expected)} registered with the kubelet; NVML up"

    # PluginState (vgpu/plugin/metrics.py): read at scrape time.

    def resource_managers(self) -> list[ResourceManager]:
        return self.plugins.managers if self.plugins is not None else []

    def registered_resources(self) -> frozenset[str]:
        return self.plugins.registered_resources if self.plugins is not None else frozenset()

    def kubelet_restarts(self) -> int:
        return self.plugins.kubelet_restarts if self.plugins is not None else 0

    def nvml_up(self) -> bool:
        return self._nvml_started and (self.monitor is None or self.monitor.wait_error is None)

    # -- reload ------------------------------------------------------------------------

    def reload(self) -> None:
        """SIGHUP: re-read config and apply it (in place when possible); health state is kept."""
        assert self.plugins is not None
        log.info("SIGHUP: reloading configuration")
        try:
            cfg = load_config(self.opts.device_config, self.opts.node_config, self.opts.node_name)
            gpus = checked_gpus(cfg, self.all_gpus)
        except (ConfigError, SizeCheckError) as exc:
            log.error("reload failed, keeping the previous configuration: %s", exc)
            return
        if self.mig is not None:  # GPUs excluded from MIG at startup stay out until a restart
            gpus = self.mig.advertised(gpus)
        if [g.uuid for g in gpus] != [g.uuid for g in self.gpus]:
            # The watched set changed: new event registrations for the new set.
            if self.monitor is not None:
                self.monitor.stop()
            self.gpus = gpus
            self.health_metrics.watch(self.health, gpus)
            try:
                self._start_monitor()
            except HealthInitError as exc:
                log.error("%s; stopping", exc)
                self.stop_event.set()
                return
        self.cfg, self.gpus = cfg, gpus
        managers = build_managers(cfg, gpus, self.health)
        for m in managers:
            self.metrics.add_resource(m.resource_name)
        self.plugins.replace(managers)
        if self.volcano is not None:
            self.volcano.refresh_register(gpus)

    # -- run ---------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        def on_stop(signum: int, _frame: object) -> None:
            log.info("received %s: stopping", signal.Signals(signum).name)
            self.stop_event.set()

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            signal.signal(sig, on_stop)
        signal.signal(signal.SIGHUP, lambda *_: self.reload_event.set())

    def run(self) -> int:
        status = self._start_endpoint()
        if status != EXIT_OK:
            return status
        try:
            return self._run()
        finally:
            if self.server is not None:
                self.server.stop()

    def _run(self) -> int:
        status = self.start()
        if status != EXIT_OK or self.plugins is None:  # no plugins: stopped while waiting for NVML
            if status == EXIT_OK:
                log.info("vgpu plugin stopped")
            return status
        worker = threading.Thread(target=self.plugins.run, args=(self.stop_event,), name="vgpu-plugins")
        worker.start()
        try:
            while not self.stop_event.is_set():
                if self.reload_event.wait(0.5):
                    self.reload_event.clear()
                    self.reload()
                if not worker.is_alive() and not self.stop_event.is_set():
                    log.error("the device-plugin loop ended unexpectedly; exiting")
                    return EXIT_RUNTIME
        finally:
            self.stop_event.set()
            worker.join()  # stops the servers and removes our sockets
            if self.monitor is not None:
                self.monitor.stop(timeout=0)  # a daemon thread; never wait out an NVML wait at exit
            if self.volcano is not None:
                self.volcano.stop()
            if self.mig is not None:
                self.mig.close()
        log.info("vgpu plugin stopped")
        return EXIT_OK
