"""Allocate latency with 5,000 pods in the cluster (100 on this node), docs/decisions.md decision 6.

Ours: the real ``VolcanoAllocator`` reading candidates from the watch-backed cache of this node's
pods (``fieldSelector=spec.nodeName``).  Baseline, same run: the same allocator whose pod source
does what upstream does on every Allocate — a cluster-wide LIST of all pods, filtered to this node
afterwards.  Both talk HTTP to the simulated API server on 127.0.0.1 and do the full primary call:
match the pod, build the HAMi-core env/mounts, create the cache directory, PATCH the pod (success)
and release the node lock.

Each round serves a fresh single-container pod (created in-process and written through to the
cache; the previous one is deleted), so the state never drifts.  The LIST cost grows with the
cluster (JSON of 5,000 pods per call); the cache path does not.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.allocate_setup import a100s, hook_dir
from benchmarks.conftest import ratio_gate, rounds
from vgpu.config.model import DeviceConfig, EffectiveConfig, NodeConfig
from vgpu.kube.caches import node_pod_cache
from vgpu.kube.client import KubeClient
from vgpu.kube.retry import RetryQueue
from vgpu.nvml.health import GpuHealth
from vgpu.plugin.allocator import VolcanoAllocator
from vgpu.plugin.api import pb
from vgpu.plugin.devices import ResourceKind, resource_specs
from vgpu.plugin.resources import ResourceManager
from vgpu.protocol import ContainerDevice, scheduler_allocation
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.kubelet.admission import pod_manifest

NODE = "node-000"
NODES = 50
PODS = 5000
NUMBER, MEMORY, CORES = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"
UUIDS = [f"GPU-{i:08x}-aaaa-bbbb-cccc-dddddddddddd" for i in range(8)]


class ClusterListSource:
    """Upstream's way: every Allocate LISTs all pods of the cluster (then keeps this node's)."""

    def __init__(self, client: KubeClient, node: str):
        self.client = client
        self.node = node

    def items(self) -> list[dict[str, Any]]:
        return [p for p in self.client.list_pods().items if (p.get("spec") or {}).get("nodeName") == self.node]

    def resync(self) -> None:
        pass

    def upsert(self, obj: dict[str, Any]) -> bool:
        return False


class NodeListSource:
    """Current HAMi's way: every Allocate LISTs this node's pods (``fieldSelector=spec.nodeName``)."""

    def __init__(self, client: KubeClient, node: str):
        self.client = client
        self.node = node

    def items(self) -> list[dict[str, Any]]:
        return self.client.list_pods(field_selector=f"spec.nodeName={self.node}").items

    def resync(self) -> None:
        pass

    def upsert(self, obj: dict[str, Any]) -> bool:
        return False


DONE_MEMORY = 1  # 5,000 done pods on one GPU stay within its 8,192 memory units


def _pod(name: str, node: str, done: bool) -> dict[str, Any]:
    """A realistic pod: two containers (one vGPU), labels, owner, env; done pods carry success keys."""
    memory = DONE_MEMORY if done else 40
    pod = pod_manifest(
        name,
        [
            {
                "name": "main",
                "limits": {NUMBER: 1, MEMORY: memory, CORES: 0},
                "env": {"MODEL": "resnet50", "BATCH": "64"},
            },
            {"name": "sidecar", "env": {"LOG_LEVEL": "info"}},
        ],
    )
    pod["metadata"]["labels"] = {"app": "train", "job": name.rsplit("-", 1)[0], "volcano.sh/job-name": "train"}
    pod["spec"]["nodeName"] = node
    if done:
        # Up to 5,000 of them share GPU 0 of a node, within its 8192 memory units and 100 % cores
        # (the plugin refuses an over-committed GPU, docs/decisions.md decision 11).
        ann = scheduler_allocation(node, [[ContainerDevice(UUIDS[0], memory, 0)]], 1_784_884_863)
        ann.update(
            {
                "volcano.sh/bind-phase": "success",
                "volcano.sh/vgpu-time": "18446744073709551615",
                "volcano.sh/devices-to-allocate": "",
            }
        )
        pod["metadata"]["annotations"] = ann
    return pod


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    api = ApiServer(history_size=20000).start()
    store = api.store
    for n in range(NODES):
        store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{n:03d}"}})
    for i in range(PODS):
        store.create("pods", _pod(f"job{i // 8}-{i}", f"node-{i % NODES:03d}", done=True), "default")
    client = KubeClient(api.client_configuration())
    cache = node_pod_cache(client, NODE).start()
    assert cache.wait_synced(30) and len(cache.items()) == PODS // NODES
    tmp = pathlib.Path(tmp_path_factory.mktemp("alloc"))
    hook_dir(tmp)
    gpus = a100s(UUIDS)
    cfg = EffectiveConfig(DeviceConfig(gpu_memory_factor=10), NodeConfig())
    health = GpuHealth(UUIDS)
    managers = {s.kind: ResourceManager(s, gpus, cfg, health) for s in resource_specs(cfg)}
    retry = RetryQueue().start()

    def allocator(source: Any) -> VolcanoAllocator:
        return VolcanoAllocator(
            node_name=NODE,
            client=client,
            pods=source,
            config=lambda: cfg,
            hook_path=str(tmp / "hook"),
            vgpulock_dir=str(tmp / "vgpulock"),
            retry=retry,
        )

    yield {
        "api": api,
        "client": client,
        "cache": cache,
        "manager": managers[ResourceKind.NUMBER],
        "cached": allocator(cache),
        "listing": allocator(ClusterListSource(client, NODE)),
        "node_listing": allocator(NodeListSource(client, NODE)),
    }
    retry.stop()
    cache.stop()
    client.close()
    api.stop()


def _round_trip(c: dict[str, Any], allocator: VolcanoAllocator, tag: str) -> Any:
    """One Allocate of a freshly scheduled pod (creation untimed in spirit, but equal on both sides)."""
    store, counter = c["api"].store, c.setdefault("n", [0])
    counter[0] += 1
    name = f"{tag}-{counter[0]}"
    gpu = counter[0] % 8
    store.create("pods", pod_manifest(name, [{"name": "main", "limits": {NUMBER: 1, MEMORY: 400}}]), "default")
    pod = store.bind(
        "default", name, NODE, scheduler_allocation(NODE, [[ContainerDevice(UUIDS[gpu], 400, 10)]], 1_784_884_863)
    )
    c["cache"].upsert(pod)  # as the watch would deliver it before the kubelet calls us
    prev = c.get("prev")
    if prev is not None:
        store.delete("pods", "default", prev)
    c["prev"] = name
    req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[f"{UUIDS[gpu]}-0"])])
    resp = allocator.allocate(c["manager"], req)
    assert resp.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == UUIDS[gpu]
    return resp


def test_allocate_node_cache_vs_cluster_wide_list(benchmark, cluster):
    assert cluster["api"].store.count("pods") >= PODS
    ratio = ratio_gate(
        benchmark,
        lambda: _round_trip(cluster, cluster["cached"], "c"),
        lambda: _round_trip(cluster, cluster["listing"], "l"),
        "allocate.node_cache_vs_cluster_list",
        n=rounds(60),
    )
    benchmark.extra_info["pods"] = PODS
    assert cluster["cached"].stats.resyncs == 0  # the cache path never LISTs
    print(f"Allocate latency ratio (cluster LIST / node cache): {ratio:.1f}x")


def test_allocate_node_cache_vs_node_scoped_list(benchmark, cluster):
    """The competent baseline: a node-scoped LIST per Allocate, as current HAMi does."""
    ratio = ratio_gate(
        benchmark,
        lambda: _round_trip(cluster, cluster["cached"], "c"),
        lambda: _round_trip(cluster, cluster["node_listing"], "n"),
        "allocate.node_cache_vs_node_list",
        n=rounds(60),
        interleave=True,
    )
    assert cluster["cached"].stats.resyncs == 0
    print(f"Allocate latency ratio (node-scoped LIST / node cache): {ratio:.1f}x")
