"""The initial vgpu-memory ListAndWatch message for 1 / 8 / 16 x H200, at factor 1 and at the size check's factor.

Ours: each GPU's block encoded straight to wire bytes (vgpu/plugin/listwatch.py), as the plugin
builds it.  Baseline: protobuf ``devices.add`` into one message, then SerializeToString (the
fastest protobuf path).  Factor 1 is what a node without ``gpuMemoryFactor`` would list (one ID
per MiB; over the kubelet's 4 MiB limit from 1 H200 on, which the plugin's startup check refuses);
the size check's factor is the smallest one that fits (docs/kubelet-api.md §7.2).  Timed call by
call in turn.  Gate ``listandwatch.factor1_vs_add`` (8 GPUs, factor 1) is a parity check; the
table goes into docs/performance.md.
"""

from __future__ import annotations

from benchmarks.conftest import QUICK, assert_gates, interleaved_medians, record_gate
from benchmarks.test_listandwatch import H200_MIB, _protobuf_add
from vgpu.config.model import DeviceConfig, EffectiveConfig, NodeConfig
from vgpu.nvml.device import GpuInfo
from vgpu.plugin.devices import ResourceKind, id_blocks
from vgpu.plugin.listwatch import encode_ids
from vgpu.plugin.sizecheck import minimum_memory_factor

GPUS = (1, 8, 16)


def _gpus(n: int) -> list[GpuInfo]:
    return [
        GpuInfo(i, f"GPU-{i:08x}-6888-5063-1e4d-f2a09cfbf{i:03x}", "NVIDIA H200", H200_MIB, i,
                f"00000000:{0x10 + i:02X}:00.0", 0, (9, 0), True, False)
        for i in range(n)
    ]  # fmt: skip


def test_initial_message_by_gpus_and_factor(benchmark):
    cfg = EffectiveConfig(DeviceConfig(gpu_memory_factor=1), NodeConfig())
    rows, gate_value = [], None
    for n in GPUS:
        gpus = _gpus(n)
        picked = minimum_memory_factor(gpus, cfg)
        assert picked is not None
        for factor in dict.fromkeys((1, picked)):
            blocks = id_blocks(ResourceKind.MEMORY, gpus, cfg, factor=factor)
            pairs = [(i, "Healthy") for b in blocks for i in b.ids()]

            def ours(blocks=blocks):
                return b"".join(encode_ids(b.ids(), True) for b in blocks)

            def baseline(pairs=pairs):
                return _protobuf_add(pairs)

            assert ours() == baseline()
            big = len(pairs) > 500_000
            reps = (2 if big else 5) if QUICK else (5 if big else 20)
            ours_s, base_s = interleaved_medians(ours, baseline, reps)
            rows.append((n, factor, factor == picked, len(pairs), len(ours()), ours_s, base_s))
            if n == 8 and factor == 1:
                gate_value = (base_s / ours_s, ours_s, base_s)
            print(f"\n{n} GPU(s), factor {factor}: {len(pairs)} IDs, ours {ours_s * 1e3:.1f} ms, "
                  f"devices.add {base_s * 1e3:.1f} ms ({base_s / ours_s:.2f}x)")  # fmt: skip
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info["scaling"] = {
        "title": "Initial vgpu-memory ListAndWatch message, H200 (143,771 MiB): ours vs protobuf `devices.add`",
        "columns": ["GPUs", "Factor", "IDs", "Message", "Ours", "devices.add", "Ratio"],
        "rows": [
            [str(n), f"{f}" + (" (size check)" if p else ""), f"{ids:,}", f"{size / 2**20:.2f} MiB",
             f"{o * 1e3:.1f} ms", f"{b * 1e3:.1f} ms", f"{b / o:.2f}x"]
            for n, f, p, ids, size, o, b in rows
        ],
    }  # fmt: skip
    assert gate_value is not None
    ratio, ours_s, base_s = gate_value
    assert_gates(record_gate("listandwatch.factor1_vs_add", ratio, ours_median_s=ours_s, baseline_median_s=base_s))
