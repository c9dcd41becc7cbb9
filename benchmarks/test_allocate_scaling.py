"""Allocate latency against the number of pods on this node: 100 / 1,000 / 5,000 (docs/performance.md).

The real ``VolcanoAllocator`` over the node-scoped watch cache, one simulated API server over HTTP
holding three nodes with 100, 1,000 and 5,000 finished vGPU pods each.  Every round serves a
freshly scheduled pod on each node (the full primary call: match, HAMi-core env/mounts, success
PATCH, lock release), the three nodes taking turns call by call so machine load hits them alike.
Matching reads an index of the waiting pods (:mod:`vgpu.kube.pod_views`), so the call should not
grow with the pods on the node; the gate holds 5,000 within 1.3x of 100.
"""

from __future__ import annotations

import pathlib
import statistics
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.allocate_setup import a100s, hook_dir
from benchmarks.conftest import QUICK, assert_gates, record_gate, rounds
from benchmarks.test_allocate import MEMORY, NUMBER, UUIDS, _pod
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

SIZES = (100, 1000, 5000)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    api = ApiServer(history_size=20000).start()
    store = api.store
    for size in SIZES:
        node = f"node-{size}"
        store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        for i in range(size):
            store.create("pods", _pod(f"done{size}-{i}", node, done=True), "default")
    client = KubeClient(api.client_configuration())
    tmp = pathlib.Path(tmp_path_factory.mktemp("alloc-scaling"))
    hook_dir(tmp)
    gpus = a100s(UUIDS)
    cfg = EffectiveConfig(DeviceConfig(gpu_memory_factor=10), NodeConfig())
    health = GpuHealth(UUIDS)
    managers = {s.kind: ResourceManager(s, gpus, cfg, health) for s in resource_specs(cfg)}
    retry = RetryQueue().start()
    per_node: dict[int, dict[str, Any]] = {}
    for size in SIZES:
        node = f"node-{size}"
        cache = node_pod_cache(client, node).start()
        assert cache.wait_synced(60) and len(cache.items()) == size
        per_node[size] = {
            "node": node,
            "cache": cache,
            "allocator": VolcanoAllocator(
                node_name=node,
                client=client,
                pods=cache,
                config=lambda: cfg,
                hook_path=str(tmp / "hook"),
                vgpulock_dir=str(tmp / f"vgpulock-{size}"),
                retry=retry,
            ),
            "n": 0,
            "prev": None,
        }
    yield {"api": api, "manager": managers[ResourceKind.NUMBER], "nodes": per_node}
    retry.stop()
    for n in per_node.values():
        n["cache"].stop()
    client.close()
    api.stop()


def _one_allocate(c: dict[str, Any], size: int) -> float:
    """Schedule a fresh pod on the node (untimed), then time its Allocate."""
    store, st = c["api"].store, c["nodes"][size]
    st["n"] += 1
    node, name, gpu = st["node"], f"s{size}-{st['n']}", st["n"] % 8
    store.create("pods", pod_manifest(name, [{"name": "main", "limits": {NUMBER: 1, MEMORY: 400}}]), "default")
    pod = store.bind(
        "default", name, node, scheduler_allocation(node, [[ContainerDevice(UUIDS[gpu], 400, 10)]], 1_784_884_863)
    )
    st["cache"].upsert(pod)  # as the watch would deliver it before the kubelet calls us
    if st["prev"] is not None:
        store.delete("pods", "default", st["prev"])
    st["prev"] = name
    req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[f"{UUIDS[gpu]}-0"])])
    t0 = time.perf_counter()
    resp = st["allocator"].allocate(c["manager"], req)
    dt = time.perf_counter() - t0
    assert resp.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == UUIDS[gpu]
    return dt


def test_allocate_cost_does_not_grow_with_the_pods_on_the_node(benchmark, nodes):
    n = rounds(100) if not QUICK else 15
    samples: dict[int, list[float]] = {s: [] for s in SIZES}
    for s in SIZES:  # warm-up: views built, caches steady
        _one_allocate(nodes, s)
    for _ in range(n):
        for s in SIZES:
            samples[s].append(_one_allocate(nodes, s))
    med = {s: statistics.median(v) for s, v in samples.items()}
    benchmark.pedantic(lambda: _one_allocate(nodes, 5000), rounds=3, iterations=1)
    for s in SIZES:
        benchmark.extra_info[f"allocate_ms_{s}_pods"] = med[s] * 1e3
        assert nodes["nodes"][s]["allocator"].stats.resyncs == 0
    benchmark.extra_info["scaling"] = {
        "title": "vgpu-number Allocate in process (node watch cache, HTTP PATCH to the simulated API server)",
        "columns": ["Pods on the node", "Allocate median", "vs 100 pods"],
        "rows": [[f"{s:,}", f"{med[s] * 1e3:.2f} ms", f"{med[s] / med[100]:.2f}x"] for s in SIZES],
    }
    print("\nAllocate median by pods on the node: " + ", ".join(f"{s}: {med[s] * 1e3:.2f} ms" for s in SIZES))
    r = record_gate(
        "allocate.pods_5000_vs_100",
        med[100] / med[5000],
        ours_median_s=med[5000],
        baseline_median_s=med[100],
        rounds=n,
        interleaved=True,
        **{f"median_ms_{s}": med[s] * 1e3 for s in SIZES},
    )
    assert_gates(r)
