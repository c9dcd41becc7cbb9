"""Allocate through gRPC on the unix socket of the real `vgpu plugin`: 100 / 1,000 / 5,000 pods on the node.

Three plugin processes (one per node, each with its fake kubelet and a fake NVML of 8 GPUs) against
one simulated API server holding 100, 1,000 and 5,000 finished vGPU pods on their nodes.  Each
round binds a fresh pod to every node as the scheduler would (``devices-to-allocate`` and the
other scheduler keys), lets the kubelet ask GetPreferredAllocation (untimed: it also lets the
plugin's watch catch up, as it does on a node), then times the kubelet's Allocate call over gRPC:
matching, HAMi-core env/mounts, the success PATCH and the lock release, in the real process.
The three nodes take turns call by call.  Gate ``allocate.grpc_5000_vs_100``: 5,000 pods within
1.3x of 100.  The rows go into the scaling table of docs/performance.md.
"""

from __future__ import annotations

import pathlib
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.conftest import QUICK, assert_gates, record_gate, rounds
from benchmarks.daemons import Daemon, wait_for
from benchmarks.test_allocate import MEMORY, NUMBER, UUIDS, _pod
from vgpu.protocol import ContainerDevice, keys, scheduler_allocation
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.kubelet.admission import pod_manifest
from vgpu.sim.nvml import fakenvml

SIZES = (100, 1000, 5000)
CORES = "volcano.sh/vgpu-cores"
DEVICE_CONFIG = "nvidia:\n  deviceSplitCount: 10\n  gpuMemoryFactor: 10\n"


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = pathlib.Path(tmp_path_factory.mktemp("grpc-alloc"))
    api = ApiServer(history_size=20000).start()
    nvml = fakenvml.FakeNvml.create(tmp / "nvml", [fakenvml.device(i, uuid=UUIDS[i]) for i in range(8)])
    hook = tmp / "hook"
    hook.mkdir()
    (hook / "libvgpu.so").write_bytes(b"\x7fELF fake libvgpu for benchmarks\n")
    (tmp / "device-config.yaml").write_text(DEVICE_CONFIG)
    kubeconfig = str(api.kubeconfig(tmp / "kubeconfig"))
    nodes: dict[int, dict[str, Any]] = {}
    try:
        for size in SIZES:
            node = f"node-{size}"
            api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
            for i in range(size):
                api.store.create("pods", _pod(f"done{size}-{i}", node, done=True), "default")
        for size in SIZES:
            node = f"node-{size}"
            sock_dir = tempfile.mkdtemp(prefix="vgpu-ga-", dir="/tmp")  # unix socket paths: <= 107 bytes
            kubelet = FakeKubelet(sock_dir).start()
            plugin = Daemon(
                [
                    "plugin",
                    "--metrics-listen",
                    "127.0.0.1:0",  # plugins run side by side: never the fixed default port
                    "--node-name",
                    node,
                    "--kubelet-socket",
                    f"{sock_dir}/kubelet.sock",
                    "--device-config",
                    str(tmp / "device-config.yaml"),
                    "--node-config",
                    str(tmp / "none.json"),
                ],
                {**nvml.env, "KUBECONFIG": kubeconfig, "HOOK_PATH": str(hook)},
                tmp / f"plugin-{size}.log",
            ).start()
            nodes[size] = {"node": node, "sock_dir": sock_dir, "kubelet": kubelet, "plugin": plugin, "n": 0}
        for st in nodes.values():
            st["plugin"].assert_running()
            st["kubelet"].wait_for_plugins((NUMBER, MEMORY, CORES), timeout=120)
            wait_for(
                lambda st=st: (api.store.get("nodes", None, st["node"])["metadata"].get("annotations") or {}).get(
                    keys.REGISTER
                ),
                120,
                "the plugin's register annotation",
                st["plugin"],
            )
        yield {"api": api, "nodes": nodes}
    finally:
        for st in nodes.values():
            st["plugin"].stop()
            st["kubelet"].stop()
            shutil.rmtree(st["sock_dir"], ignore_errors=True)
        api.stop()


def _allocate_one(c: dict[str, Any], size: int) -> float:
    store, st = c["api"].store, c["nodes"][size]
    st["n"] += 1
    node, name, gpu = st["node"], f"g{size}-{st['n']}", st["n"] % 8
    store.create("pods", pod_manifest(name, [{"name": "main", "limits": {NUMBER: 1, MEMORY: 400}}]), "default")
    store.bind(
        "default", name, node, scheduler_allocation(node, [[ContainerDevice(UUIDS[gpu], 400, 10)]], 1_784_884_863)
    )
    if st.get("prev"):
        store.delete("pods", "default", st["prev"])
    st["prev"] = name
    number = st["kubelet"].plugin(NUMBER)
    ids = [f"{UUIDS[g]}-{k}" for g in range(8) for k in range(10)]
    number.get_preferred_allocation(ids, [], 1)  # the kubelet asks first; the plugin's watch catches up
    t0 = time.perf_counter()
    resp = number.allocate([[f"{UUIDS[gpu]}-0"]])
    dt = time.perf_counter() - t0
    assert resp.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == UUIDS[gpu]
    return dt


def test_grpc_allocate_at_100_1000_5000_pods_on_the_node(benchmark, plugins):
    n = 15 if QUICK else rounds(100)
    samples: dict[int, list[float]] = {s: [] for s in SIZES}
    for s in SIZES:
        _allocate_one(plugins, s)
    for _ in range(n):
        for s in SIZES:
            samples[s].append(_allocate_one(plugins, s))
    med = {s: statistics.median(v) for s, v in samples.items()}
    benchmark.pedantic(lambda: _allocate_one(plugins, 100), rounds=3, iterations=1)
    print("\ngRPC Allocate median by pods on the node: " + ", ".join(f"{s}: {med[s] * 1e3:.2f} ms" for s in SIZES))
    benchmark.extra_info["scaling"] = {
        "title": "vgpu-number Allocate over gRPC on the unix socket, real `vgpu plugin` process",
        "columns": ["Pods on the node", "Allocate median", "vs 100 pods"],
        "rows": [[f"{s:,}", f"{med[s] * 1e3:.2f} ms", f"{med[s] / med[100]:.2f}x"] for s in SIZES],
    }
    r = record_gate(
        "allocate.grpc_5000_vs_100",
        med[100] / med[5000],
        ours_median_s=med[5000],
        baseline_median_s=med[100],
        rounds=n,
        interleaved=True,
    )
    assert_gates(r)
