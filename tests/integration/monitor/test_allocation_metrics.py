"""Allocation metrics of the real monitor, exact for a set of pods (docs/metrics.md §3.1).

The pods are in the simulated API server as the scheduler and the plugin leave them; the
monitor's pod watch decodes their ``vgpu-ids-new``.  One pod also has a HAMi-core region, so its
allocated values stand next to its used ones.  gpuMemoryFactor 2 and deviceCoreScaling 1.5 show
that the units are converted and the capacities follow the device config.
"""

from __future__ import annotations

from tests.unit.monitor.helpers import UUIDS, add_container, parse, wait_until
from vgpu.protocol import keys
from vgpu.sim.apiserver import ApiServer

from .conftest import NODE, set_phase

MIB = 1 << 20
A100 = 81920  # MiB, fakenvml.device's default
NUM, MEM, CORES = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"


def _pod(apiserver: ApiServer, name: str, containers: list[str], vgpu: dict[str, int], ids: str, phase="success"):
    specs = [
        {"name": c, "image": "x", **({"resources": {"limits": {NUM: str(vgpu[c])}}} if c in vgpu else {})}
        for c in containers
    ]
    meta = {"name": name, "namespace": "team", "annotations": {keys.VGPU_IDS_NEW: ids, keys.BIND_PHASE: phase}}
    apiserver.store.create(
        "pods",
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": NODE, "containers": specs}},
        "team",
    )
    return apiserver.store.patch("pods", "team", name, {"status": {"phase": "Running"}}, "merge", subresource="status")


def _by(rows, *keys_):
    return {tuple(lab[k] for k in keys_): v for lab, v in rows}


def test_allocation_per_gpu_and_per_container_is_exact(apiserver, start_monitor, hook, tmp_path):
    g0, g1 = UUIDS[0], UUIDS[1]
    dc = tmp_path / "device-config.yaml"
    dc.write_text("nvidia:\n  gpuMemoryFactor: 2\n  deviceCoreScaling: 1.5\n  deviceSplitCount: 4\n")
    # train: container "side" (index 0) asks for nothing; "worker" (index 1) 2 GPUs, "helper" (2) one.
    train = _pod(
        apiserver,
        "train",
        ["side", "worker", "helper"],
        {"worker": 2, "helper": 1},
        f"{g0},NVIDIA,4096,30:{g1},NVIDIA,1000,20:;{g0},NVIDIA,512,10:",
    )
    _pod(apiserver, "infer", ["main"], {"main": 1}, f"{g1},NVIDIA,2048,50:")
    _pod(apiserver, "refused", ["main"], {"main": 1}, f"{g0},NVIDIA,9999,99:", phase="failed")
    done = _pod(apiserver, "done", ["main"], {"main": 1}, f"{g0},NVIDIA,7777,77:")
    set_phase(apiserver, done, "Succeeded")
    # the worker uses 300 MiB on GPU 0 (its HAMi-core region)
    add_container(hook, train["metadata"]["uid"], "worker", procs=[(1, [300, 0])], uuids=[g0, g1])
    mon = start_monitor(extra_args=["--device-config", str(dc)])

    def ready():
        s = parse(mon.scrape())
        got = _by(s.get("hami_vgpu_memory_allocated_bytes", []), "pod", "container")
        return s if ("infer", "main") in got and s.get("hami_vgpu_memory_used_bytes") else None

    s = wait_until(ready, 15, "allocation and usage of the pods")

    gpu = ("device_uuid",)
    assert _by(s["hami_gpu_memory_allocated_bytes"], *gpu) == {
        (g0,): (4096 + 512) * 2 * MIB,
        (g1,): (1000 + 2048) * 2 * MIB,
    }
    assert _by(s["hami_gpu_core_allocated_ratio"], *gpu) == {(g0,): 40, (g1,): 70}
    assert _by(s["hami_gpu_shared_count"], *gpu) == {(g0,): 2, (g1,): 2}
    assert _by(s["hami_gpu_memory_limit_bytes"], *gpu) == {(g0,): A100 * MIB, (g1,): A100 * MIB}
    assert _by(s["hami_gpu_core_limit_ratio"], *gpu) == {(g0,): 150, (g1,): 150}
    assert _by(s["vgpu_gpu_shared_limit"], *gpu) == {(g0,): 4, (g1,): 4}
    lab = s["hami_gpu_memory_allocated_bytes"][0][0]
    assert lab == {
        "node": NODE,
        "device_uuid": g0,
        "device_index": "0",
        "device_cores": "150",
        "device_type": "NVIDIA-NVIDIA A100-SXM4-80GB",
        "zone": "vGPU",
    }

    ctr = ("pod", "container", "container_index", "device_uuid")
    assert _by(s["hami_vgpu_memory_allocated_bytes"], *ctr) == {
        ("train", "worker", "1", g0): 4096 * 2 * MIB,
        ("train", "worker", "1", g1): 1000 * 2 * MIB,
        ("train", "helper", "2", g0): 512 * 2 * MIB,
        ("infer", "main", "0", g1): 2048 * 2 * MIB,
    }
    assert _by(s["hami_vgpu_core_allocated_ratio"], *ctr) == {
        ("train", "worker", "1", g0): 30,
        ("train", "worker", "1", g1): 20,
        ("train", "helper", "2", g0): 10,
        ("infer", "main", "0", g1): 50,
    }
    # allocated next to used: the same container and GPU in both families
    used = _by(s["hami_vgpu_memory_used_bytes"], "pod", "container", "device_uuid")
    assert used[("train", "worker", g0)] == 300 * MIB
    # the legacy (HAMi scheduler) names carry the same values
    assert _by(s["GPUDeviceMemoryAllocated"], "deviceuuid") == {(g0,): 4608 * 2 * MIB, (g1,): 3048 * 2 * MIB}
    assert _by(s["GPUDeviceSharedNum"], "deviceuuid") == {(g0,): 2, (g1,): 2}
    assert _by(s["GPUDeviceCoreLimit"], "deviceuuid") == {(g0,): 150, (g1,): 150}
    assert _by(s["vGPUCoreAllocated"], "podname", "containeridx", "deviceuuid")[("infer", "0", g1)] == 50

    # the pod ends: its allocation leaves at the next scrape after the watch event
    set_phase(apiserver, train, "Succeeded")
    s = wait_until(
        lambda: (p := parse(mon.scrape())) and _by(p["hami_gpu_shared_count"], "device_uuid")[(g0,)] == 0 and p,
        10,
        "train's allocation gone",
    )
    assert _by(s["hami_gpu_memory_allocated_bytes"], "device_uuid") == {(g0,): 0, (g1,): 2048 * 2 * MIB}
