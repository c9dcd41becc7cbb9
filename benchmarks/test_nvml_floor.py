"""The NVML sampler against its physical floor (benchmarks/floors/nvml_floor.c).

8 GPUs x 16 processes on the fake NVML.  The floor makes exactly the 32 NVML calls of a tick
(4 per device) into buffers sized once and nothing else.  Ours: ``Sampler.sample_into`` (the
zero-copy C loop, results in a cffi array) and ``Sampler.sample`` (the same plus the Python
dataclasses).  Each is timed call by call in turn with the floor; gates ``nvml.floor_sample_into``
(<= 1.5x the floor) and ``nvml.floor_sample`` (<= 3x).  `make gpu-smoke` runs the same floor
against a real driver.
"""

from __future__ import annotations

from benchmarks import floors
from benchmarks.conftest import assert_gates, interleaved_medians, median_time, record_gate, rounds
from benchmarks.test_nvml_sampler import DEVICES, PROCESSES, eight_gpus  # noqa: F401 - the fixture

__all__ = ["eight_gpus"]


def test_sampler_against_its_nvml_call_floor(benchmark, eight_gpus):  # noqa: F811 - the fixture
    fake, sampler = eight_gpus
    lib = floors.load()
    assert lib.nvml_floor_open(str(fake.library).encode()) == DEVICES
    assert lib.nvml_floor_sample() == DEVICES * PROCESSES
    n = rounds(2000)
    into_s, floor_a = interleaved_medians(sampler.sample_into, lib.nvml_floor_sample, n)
    sample_s, floor_b = interleaved_medians(sampler.sample, lib.nvml_floor_sample, rounds(1000))
    # Context: ``processes`` are built on first read; a caller reading every device's rows pays this.
    every_row_s = median_time(lambda: [d.processes for d in sampler.sample().devices], rounds(500))
    benchmark.pedantic(sampler.sample_into, rounds=5, iterations=1)
    benchmark.extra_info.update(
        {
            "sample_into_us": into_s * 1e6,
            "sample_us": sample_s * 1e6,
            "floor_us": min(floor_a, floor_b) * 1e6,
            "sample_reading_every_process_us": every_row_s * 1e6,
        }
    )
    print(
        f"\nNVML sample, {DEVICES} GPUs x {PROCESSES} procs: floor {floor_a * 1e6:.1f} us, "
        f"sample_into {into_s * 1e6:.1f} us ({into_s / floor_a:.2f}x), sample {sample_s * 1e6:.1f} us "
        f"({sample_s / floor_b:.2f}x), sample reading every process row {every_row_s * 1e6:.1f} us"
    )
    a = record_gate("nvml.floor_sample_into", floor_a / into_s, ours_median_s=into_s, baseline_median_s=floor_a)
    b = record_gate("nvml.floor_sample", floor_b / sample_s, ours_median_s=sample_s, baseline_median_s=floor_b)
    assert_gates(a, b)
