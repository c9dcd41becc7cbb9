"""ListAndWatch payload for 8 × H200 (143,771 MiB) at gpuMemoryFactor 4: size and encode cost.

vgpu-memory is the big list: 8 × 35,942 = 287,536 devices.  Two costs matter:

1. Building the message from nothing (plugin start, first health state).  Ours: encode
   each GPU's block directly to wire bytes (vgpu/plugin/listwatch.py).  Baseline: the
   fastest protobuf path (``devices.add`` into one message, then SerializeToString), what a
   competent engineer would write; the Device-object-per-ID way is timed and reported too.
2. Re-sending after a health change (one GPU flips).  Ours: join the cached per-GPU
   blocks (each GPU's block is encoded once per health state).  Baseline: the fastest
   protobuf path we know (``devices.add`` into one message, then serialise), rebuilt per
   change as a plugin without a cache would.

Both results are checked byte-for-byte against protobuf before timing.

Note: at factor 4 this list (5.66 MB healthy) is over the kubelet's 4 MiB limit — the
plugin's startup size check refuses it and names factor 6
(docs/kubelet-api.md §7.2).  The benchmark uses factor 4 because the issue asks for it; it
measures encoding.
"""

from __future__ import annotations

from benchmarks.conftest import median_time, ratio_gate, rounds
from vgpu.config.model import DeviceConfig, EffectiveConfig, NodeConfig
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.health import GpuHealth
from vgpu.plugin.api import KUBELET_MAX_RECEIVE_BYTES, pb
from vgpu.plugin.devices import ResourceKind, id_blocks, resource_specs
from vgpu.plugin.listwatch import encode_ids, message_size
from vgpu.plugin.resources import ResourceManager

H200_MIB = 143_771
FACTOR = 4


def _setup():
    gpus = [
        GpuInfo(
            i,
            f"GPU-{i:08x}-6888-5063-1e4d-f2a09cfbf{i:03x}",
            "NVIDIA H200",
            H200_MIB,
            i,
            f"00000000:{0x10 + i:02X}:00.0",
            0,
            (9, 0),
            True,
            False,
        )
        for i in range(8)
    ]
    cfg = EffectiveConfig(DeviceConfig(gpu_memory_factor=FACTOR), NodeConfig())
    blocks = id_blocks(ResourceKind.MEMORY, gpus, cfg)
    return gpus, cfg, blocks


def _naive_objects(ids_and_health):
    return pb.ListAndWatchResponse(devices=[pb.Device(ID=i, health=h) for i, h in ids_and_health]).SerializeToString()


def _protobuf_add(ids_and_health):
    msg = pb.ListAndWatchResponse()
    add = msg.devices.add
    for i, h in ids_and_health:
        add(ID=i, health=h)
    return msg.SerializeToString()


def test_initial_message_encode(benchmark):
    gpus, cfg, blocks = _setup()
    all_ids = [(i, "Healthy") for b in blocks for i in b.ids()]

    def ours():
        return b"".join(encode_ids(b.ids(), True) for b in blocks)

    payload = ours()
    assert payload == _naive_objects(all_ids)
    assert len(all_ids) == 8 * (H200_MIB // FACTOR) == 287_536
    at6 = message_size(id_blocks(ResourceKind.MEMORY, gpus, cfg, factor=6), healthy=True)
    assert len(payload) > KUBELET_MAX_RECEIVE_BYTES >= at6  # why the size check asks for factor 6
    benchmark.extra_info.update({"devices": len(all_ids), "message_bytes": len(payload), "message_bytes_factor_6": at6})
    print(
        f"\nvgpu-memory initial ListAndWatch, 8 x H200 at factor {FACTOR}: {len(all_ids)} devices, "
        f"{len(payload)} bytes ({len(payload) / KUBELET_MAX_RECEIVE_BYTES:.0%} of the 4 MiB limit; "
        f"factor 6: {at6} bytes)"
    )
    assert payload == _protobuf_add(all_ids)
    ratio_gate(
        benchmark,
        ours,
        lambda: _protobuf_add(all_ids),
        "listandwatch.initial_encode",
        what="initial message: direct wire encoding vs protobuf devices.add",
        n=rounds(20),
    )
    objects_s = median_time(lambda: _naive_objects(all_ids), rounds(10))
    benchmark.extra_info["device_objects_median_s"] = objects_s
    print(f"protobuf Device object per ID (not gated): {objects_s * 1e3:.1f} ms")


def test_resend_after_health_change(benchmark):
    gpus, cfg, blocks = _setup()
    health = GpuHealth(g.uuid for g in gpus)
    memory = ResourceManager(resource_specs(cfg)[1], gpus, cfg, health)
    flip = [False]

    def ours():
        # One GPU changes state; the manager re-joins cached blocks (both states cached after the first flip).
        flip[0] = not flip[0]
        health.set({gpus[3].uuid: not flip[0]}, "bench")
        memory.refresh({gpus[3].uuid: not flip[0]})
        return memory.snapshot()[1]

    def baseline():
        state = health.snapshot()
        return _protobuf_add([(i, "Healthy" if state[b.gpu_uuid] else "Unhealthy") for b in blocks for i in b.ids()])

    ours()
    assert memory.snapshot()[1] == baseline()
    ours()
    assert memory.snapshot()[1] == baseline()
    benchmark.extra_info["message_bytes"] = len(memory.snapshot()[1])
    ratio_gate(
        benchmark,
        ours,
        baseline,
        "listandwatch.resend",
        what="health-change re-send: cached per-GPU blocks vs protobuf rebuild",
        n=rounds(30),
    )
