"""In-process fixtures: the simulated API server over real HTTP, our client and caches, and a
``VolcanoAllocator`` over real ``ResourceManager`` objects (no NVML, no gRPC socket).

The scheduler side is played by writing the six keys of docs/protocol.md §3.2 exactly as Volcano master does
(annotations carried on the Binding), through ``vgpu.protocol.scheduler_allocation``.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from vgpu.config.model import DeviceConfig, EffectiveConfig, NodeConfig
from vgpu.kube.caches import node_pod_cache
from vgpu.kube.client import KubeClient
from vgpu.kube.retry import RetryQueue
from vgpu.kube.watchcache import WatchCache
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.health import GpuHealth
from vgpu.plugin.allocator import VolcanoAllocator
from vgpu.plugin.api import pb
from vgpu.plugin.devices import ResourceKind, resource_specs
from vgpu.plugin.resources import ResourceManager
from vgpu.protocol import ContainerDevice, scheduler_allocation
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.kubelet.admission import pod_manifest

NODE = "node-1"
NUMBER, MEMORY, CORES = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"
UUIDS = [f"GPU-{i:08x}-1111-2222-3333-44444444444{i}" for i in range(4)]


def gpu(i: int, name: str = "NVIDIA A100-SXM4-80GB", mib: int = 81920, pci: str | None = None) -> GpuInfo:
    return GpuInfo(
        index=i,
        uuid=UUIDS[i],
        name=name,
        memory_total_mib=mib,
        minor=i,
        pci_bus_id=pci or f"00000000:{0x07 + i:02X}:00.0",
        numa_node=0,
        compute_capability=(8, 0),
        mig_capable=True,
        mig_mode=False,
    )


def dev(i: int, mem: int = 1000, cores: int = 0) -> ContainerDevice:
    return ContainerDevice(UUIDS[i], mem, cores)


@dataclass
class Sim:
    api: ApiServer
    client: KubeClient
    cache: WatchCache
    allocator: VolcanoAllocator
    managers: dict[ResourceKind, ResourceManager]
    health: GpuHealth
    hook: pathlib.Path
    retry: RetryQueue
    clock: list[int] = field(default_factory=lambda: [1_784_884_863])

    @property
    def store(self):
        return self.api.store

    def schedule(
        self,
        name: str,
        containers: list[dict[str, Any]],
        devices: Sequence[Sequence[ContainerDevice]],
        *,
        vgpu_time: int | None = None,
        init: list[dict[str, Any]] = (),
        namespace: str = "default",
        lock: bool = False,
    ) -> dict[str, Any]:
        """Create a pod and bind it with the scheduler's six keys (Volcano master style)."""
        self.store.create("pods", pod_manifest(name, containers, namespace=namespace, init_containers=init), namespace)
        t = self.clock[0] if vgpu_time is None else vgpu_time
        ann = scheduler_allocation(NODE, devices, t)
        if lock:
            self.set_lock()
        return self.store.bind(namespace, name, NODE, ann)

    def bind_raw(
        self, name: str, containers: list[dict[str, Any]], annotations: dict[str, str], namespace: str = "default"
    ) -> dict[str, Any]:
        self.store.create("pods", pod_manifest(name, containers, namespace=namespace), namespace)
        return self.store.bind(namespace, name, NODE, annotations)

    def set_lock(self, value: str = "2026-08-20T02:01:03Z") -> None:
        self.store.patch("nodes", None, NODE, {"metadata": {"annotations": {"hamivgpu": value}}})

    def node_annotations(self) -> dict[str, str]:
        return dict(self.store.get("nodes", None, NODE)["metadata"].get("annotations") or {})

    def annotations(self, name: str, namespace: str = "default") -> dict[str, str]:
        return dict(self.store.get("pods", namespace, name)["metadata"].get("annotations") or {})

    def uid(self, name: str, namespace: str = "default") -> str:
        return self.store.get("pods", namespace, name)["metadata"]["uid"]

    def number_ids(self, *gpus: int, start: int = 0) -> list[str]:
        return [f"{UUIDS[g]}-{start}" for g in gpus]

    def allocate(self, kind: ResourceKind, ids: Sequence[str]) -> pb.ContainerAllocateResponse:
        req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=list(ids))])
        return self.allocator.allocate(self.managers[kind], req).container_responses[0]

    def memory_ids(self, n: int, gpu_minor: int = 0) -> list[str]:
        return [f"{gpu_minor}-{i}" for i in range(n)]

    def preferred(self, size: int, available: Sequence[str] | None = None) -> list[str]:
        m = self.managers[ResourceKind.NUMBER]
        avail = list(available) if available is not None else [i for i, _ in m.devices()]
        req = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=avail, must_include_deviceIDs=[], allocation_size=size
                )
            ]
        )
        return list(self.allocator.preferred_allocation(m, req).container_responses[0].deviceIDs)

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.store.list("events") if reason is None or e.get("reason") == reason]


def make_config(**device: Any) -> EffectiveConfig:
    return EffectiveConfig(DeviceConfig(**device), NodeConfig())


@pytest.fixture
def sim_factory(tmp_path: pathlib.Path) -> Iterator[Any]:
    made: list[Sim] = []

    def make(
        gpus: Sequence[GpuInfo] | None = None, cfg: EffectiveConfig | None = None, with_libvgpu: bool = True
    ) -> Sim:
        api = ApiServer(bookmark_interval=0.5).start()
        api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
        client = KubeClient(api.client_configuration())
        cache = node_pod_cache(client, NODE).start()
        assert cache.wait_synced(5)
        gpus = list(gpus or [gpu(0), gpu(1)])
        cfg = cfg or make_config()
        health = GpuHealth(g.uuid for g in gpus)
        managers = {s.kind: ResourceManager(s, gpus, cfg, health) for s in resource_specs(cfg)}
        hook = tmp_path / f"hook{len(made)}"
        hook.mkdir()
        if with_libvgpu:
            (hook / "libvgpu.so").write_bytes(b"fake")
        (hook / "ld.so.preload").write_text("/usr/local/vgpu/libvgpu.so")
        retry = RetryQueue(first_delay=0.02, max_delay=0.2).start()
        allocator = VolcanoAllocator(
            node_name=NODE,
            client=client,
            pods=cache,
            config=lambda: cfg,
            hook_path=str(hook),
            vgpulock_dir=str(tmp_path / "vgpulock"),
            retry=retry,
            sleep=lambda _s: None,
        )
        sim = Sim(api, client, cache, allocator, managers, health, hook, retry)
        made.append(sim)
        return sim

    yield make
    for s in made:
        s.retry.stop()
        s.cache.stop()
        s.client.close()
        s.api.stop()


@pytest.fixture
def sim(sim_factory) -> Sim:
    return sim_factory()
