"""The Volcano side of `vgpu plugin`: API client, node registration, pod cache and the allocator.

The daemon builds one :class:`VolcanoSide` at startup when Kubernetes API access is configured
(``--kubeconfig``/``KUBECONFIG``, else the in-cluster service account) and hands its allocator
to the three gRPC servers.  Without API access the daemon still serves the kubelet, but
vgpu-number Allocate refuses (there is no pod to match) and the node is never registered — the
log says so loudly at startup.

Startup order: HAMi-core files (``ld.so.preload`` rewritten if needed, ``libvgpu.so`` checked),
pod cache LIST+WATCH (waits up to :data:`CACHE_SYNC_TIMEOUT_S` for the first LIST), node
registrar (first patch as soon as the Node is seen).

Unhealthy GPUs (docs/health.md §8): with ``--unhealthy-gpu-policy withdraw`` (the default) a GPU
marked unhealthy leaves the register annotation and comes back when it recovers, because Volcano
ignores the record's health field (docs/failures.md X-5) and would keep placing pods on it;
``report`` keeps it listed with ``health=false``.  Either way a Node Event names the GPU and why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vgpu.config.model import (
    DEFAULT_CORES_NAME,
    DEFAULT_COUNT_NAME,
    DEFAULT_MEMORY_NAME,
    MODE_HAMI_CORE,
    EffectiveConfig,
)
from vgpu.hamicore import paths
from vgpu.kube import events as ev
from vgpu.kube.caches import node_pod_cache
from vgpu.kube.client import KubeClient, KubeConfigError, in_cluster_available
from vgpu.kube.registrar import HandshakeMode, NodeRegistrar, build_register_value, warn_renamed_resources
from vgpu.kube.retry import RetryQueue
from vgpu.kube.watchcache import WatchCache
from vgpu.kube.writes import write
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.health import GpuHealth
from vgpu.plugin.allocator import VolcanoAllocator
from vgpu.plugin.devices import ResourceKind
from vgpu.plugin.mig_seam import MigApplier
from vgpu.plugin.responses import Allocator
from vgpu.protocol import keys

log = logging.getLogger(__name__)

CACHE_SYNC_TIMEOUT_S = 10.0
POLICY_WITHDRAW = "withdraw"
POLICY_REPORT = "report"
UNHEALTHY_GPU_POLICIES = (POLICY_WITHDRAW, POLICY_REPORT)


class VolcanoConfigError(Exception):
    """Explicitly requested API access that cannot work (a bad kubeconfig, a bad --handshake)."""


@dataclass(frozen=True)
class VolcanoOptions:
    node_name: str
    kubeconfig: str | None
    hook_path: str = paths.DEFAULT_HOOK_PATH
    handshake: str = HandshakeMode.AUTO.value
    unhealthy_gpu_policy: str = POLICY_WITHDRAW


class VolcanoSide:
    """Owns the API client, the pod cache, the registrar, the retry queue and the allocator."""

    def __init__(
        self,
        opts: VolcanoOptions,
        client: KubeClient,
        config: Callable[[], EffectiveConfig],
        gpus: Sequence[GpuInfo],
        health: GpuHealth,
        *,
        mig: MigApplier | None = None,
    ):
        self.opts = opts
        self.client = client
        self.config = config
        self.health = health
        self.mode = HandshakeMode.parse(opts.handshake)
        self.retry = RetryQueue()
        self.pods: WatchCache = node_pod_cache(client, opts.node_name)
        self.registrar = NodeRegistrar(client, opts.node_name, self._register_value(gpus), self.mode)
        self.allocator = VolcanoAllocator(
            node_name=opts.node_name,
            client=client,
            pods=self.pods,
            config=config,
            hook_path=opts.hook_path,
            retry=self.retry,
            mig=mig,
        )

    @classmethod
    def create(
        cls,
        opts: VolcanoOptions,
        config: Callable[[], EffectiveConfig],
        gpus: Sequence[GpuInfo],
        health: GpuHealth,
        environ: Mapping[str, str],
        *,
        mig: MigApplier | None = None,
    ) -> VolcanoSide | None:
        """None (with an error log) when no API access is configured at all."""
        try:
            HandshakeMode.parse(opts.handshake)
        except ValueError as exc:
            raise VolcanoConfigError(str(exc)) from None
        if not opts.kubeconfig and not in_cluster_available():
            log.error(
                "no Kubernetes API access (no --kubeconfig/KUBECONFIG and not running in a pod): the node "
                "is NOT registered with Volcano and vgpu-number Allocate will refuse every pod"
            )
            return None
        try:
            client = KubeClient.from_kubeconfig(opts.kubeconfig)
        except KubeConfigError as exc:
            raise VolcanoConfigError(str(exc)) from None
        log.info("Kubernetes API at %s; handshake mode %s", client.host, opts.handshake)
        return cls(opts, client, config, gpus, health, mig=mig)

    def allocators(self) -> dict[ResourceKind, Allocator]:
        return {k: self.allocator for k in ResourceKind}

    def start(self) -> None:
        cfg = self.config()
        for warning in warn_renamed_resources(
            [
                (cfg.device.resource_count_name, DEFAULT_COUNT_NAME),
                (cfg.device.resource_memory_name, DEFAULT_MEMORY_NAME),
                (cfg.device.resource_core_name, DEFAULT_CORES_NAME),
            ]
        ):
            log.warning("%s", warning)
        if cfg.operating_mode == MODE_HAMI_CORE:
            self._prepare_hami_core()
        self.retry.start()
        self.pods.start()
        if self.pods.wait_synced(CACHE_SYNC_TIMEOUT_S):
            log.info("pod cache of node %s synced: %d pod(s)", self.opts.node_name, len(self.pods.items()))
        else:
            log.warning(
                "pod cache of node %s not synced after %.0f s; Allocate will re-list on demand",
                self.opts.node_name,
                CACHE_SYNC_TIMEOUT_S,
            )
        self.registrar.start()

    def _prepare_hami_core(self) -> None:
        layout = paths.HostLayout(hook_path=self.opts.hook_path)
        try:
            if paths.ensure_ld_so_preload(layout):
                log.info("wrote %s", layout.ld_so_preload)
        except OSError as exc:
            log.error("cannot write %s: %s", layout.ld_so_preload, exc)
        try:
            paths.check_hami_core_files(layout)
        except paths.HamiCoreFilesMissing as exc:
            log.error("%s; every hami-core Allocate will fail until it is installed", exc)

    def _register_value(self, gpus: Sequence[GpuInfo]) -> str | None:
        """The register annotation for ``gpus`` under the unhealthy-GPU policy (None: no GPU to list)."""
        state = self.health.snapshot()
        if self.opts.unhealthy_gpu_policy == POLICY_WITHDRAW:
            gpus = [g for g in gpus if state.get(g.uuid, True)]
        return build_register_value(gpus, self.config(), state)

    def refresh_register(self, gpus: Sequence[GpuInfo]) -> None:
        """After a health change or a reload: the register annotation follows (patched only on change)."""
        self.registrar.set_register(self._register_value(gpus))

    def health_changed(self, changed: Mapping[str, bool], gpus: Sequence[GpuInfo]) -> None:
        """A health change: the register annotation follows, and a Node Event says what and why."""
        self.refresh_register(gpus)
        for g in gpus:
            if g.uuid in changed:
                self._health_event(g, changed[g.uuid])

    def _health_event(self, gpu: GpuInfo, healthy: bool) -> None:
        """Queued, never sent from the caller's thread: the health loop must not wait on the API."""
        withdraw = self.opts.unhealthy_gpu_policy == POLICY_WITHDRAW
        name = f"GPU {gpu.index} ({gpu.uuid})"
        if healthy:
            reason, kind = ev.REASON_GPU_RECOVERED, "Normal"
            where = f"back in {keys.REGISTER}" if withdraw else f"{keys.REGISTER} shows health=true"
            message = f"{name} is healthy again; {where}"
        else:
            reason, kind = ev.REASON_GPU_UNHEALTHY, "Warning"
            why = self.health.reason(gpu.uuid) or "marked unhealthy"
            if withdraw:
                effect = (
                    f"withdrawn from {keys.REGISTER}, so Volcano places no new pods on it "
                    "(pods already running there are not touched)"
                )
            else:
                effect = (
                    f"kept in {keys.REGISTER} with health=false (--unhealthy-gpu-policy report): Volcano may "
                    "still place pods there and their Allocate fails"
                )
            message = f"{name} is unhealthy: {why}; {effect}"
        log.log(logging.INFO if healthy else logging.WARNING, "node %s: %s", self.opts.node_name, message)
        node, events = self.opts.node_name, self.allocator.events
        write(
            f"event {reason} on node {node}",
            lambda: events.node_event(node, reason, message, kind),
            queue=self.retry,
            now=False,
        )

    def stop(self) -> None:
        self.registrar.stop()
        self.pods.stop()
        self.retry.stop()
        self.client.close()
