"""One full sample of 8 GPUs x 16 processes: cffi native layer vs the same calls through pynvml.

Both sides fetch the same data from the same fake NVML in the same process: per device
memory info, utilisation rates, running compute processes (v3) and per-process
utilisation (since the newest timestamp seen).  The gate is the zero-copy hot path
(``Sampler.sample_into``), against nvidia-ml-py (what a monitor written against it calls: 48
NVML calls for our 32).  ``Sampler.sample`` (dataclasses) is gated against a competent ctypes
sampler making exactly our 32 calls (benchmarks/baselines/ctypes_sampler.py).  The floors of
both are benchmarks/test_nvml_floor.py.
"""

from __future__ import annotations

import pynvml
import pytest

from benchmarks.baselines.ctypes_sampler import CtypesSampler
from benchmarks.baselines.pynvml_sampler import PynvmlSampler
from benchmarks.conftest import median_time, ratio_gate, rounds
from vgpu.nvml.library import init_pynvml
from vgpu.nvml.sampler import Sampler
from vgpu.sim.nvml import fakenvml

DEVICES = 8
PROCESSES = 16


def _devices() -> list[dict]:
    out = []
    for i in range(DEVICES):
        procs = [
            {"pid": 10000 + i * 100 + k, "used_memory_mib": 256 + k, "sm_util": (5 * k) % 100} for k in range(PROCESSES)
        ]
        out.append(
            fakenvml.device(
                i, memory_used_mib=4096 + i, utilization_gpu=10 + i, utilization_memory=20 + i, processes=procs
            )
        )
    return out


@pytest.fixture
def eight_gpus(tmp_path, monkeypatch):
    fake = fakenvml.FakeNvml.create(tmp_path / "nvml", _devices())
    for key, value in fake.env.items():
        monkeypatch.setenv(key, value)
    init_pynvml(str(fake.library))
    sampler = Sampler(str(fake.library), max_processes=PROCESSES)
    try:
        yield fake, sampler
    finally:
        sampler.close()
        pynvml.nvmlShutdown()


def _same_data(sampler: Sampler, baseline: PynvmlSampler) -> None:
    """Both paths must see the same devices, memory and processes (else the race is unfair)."""
    node = sampler.sample()
    ref = baseline.sample()
    assert len(node.devices) == len(ref) == DEVICES
    for dev, (total, used, ugpu, umem, procs) in zip(node.devices, ref, strict=True):
        assert (dev.memory_total_bytes, dev.memory_used_bytes) == (total, used)
        assert (dev.utilization_gpu, dev.utilization_memory) == (ugpu, umem)
        assert [(p.pid, p.used_memory_bytes) for p in dev.processes] == [(p, m) for p, m, _ in procs]
        assert len(dev.processes) == PROCESSES and not dev.processes_truncated


def test_sample_into_vs_pynvml(benchmark, eight_gpus):
    _, sampler = eight_gpus
    baseline = PynvmlSampler()
    _same_data(sampler, baseline)
    n = rounds(2000)
    ratio_gate(
        benchmark,
        sampler.sample_into,
        baseline.sample,
        "nvml.sample_into",
        what=f"nvml sample {DEVICES} GPUs x {PROCESSES} procs (cffi zero-copy vs pynvml)",
        n=n,
    )
    benchmark.extra_info["us_per_8gpu_sample"] = benchmark.stats.stats.median * 1e6


def test_sample_dataclasses_vs_ctypes_same_calls(benchmark, eight_gpus):
    fake, sampler = eight_gpus
    baseline = CtypesSampler(str(fake.library))
    ref = PynvmlSampler().sample()
    assert [d[:4] for d in baseline.sample()] == [d[:4] for d in ref]
    n = rounds(1000)
    ratio_gate(
        benchmark,
        sampler.sample,
        baseline.sample,
        "nvml.sample_dataclasses",
        what=f"nvml sample {DEVICES} GPUs x {PROCESSES} procs (cffi + dataclasses vs ctypes, same 32 calls)",
        n=n,
        interleave=True,
    )
    # Context for the report: the C call alone, without Python-side conversion, and pynvml.
    native_only = median_time(sampler.sample_into, n)
    benchmark.extra_info["native_call_us"] = native_only * 1e6
    benchmark.extra_info["pynvml_us"] = median_time(PynvmlSampler().sample, rounds(200)) * 1e6
