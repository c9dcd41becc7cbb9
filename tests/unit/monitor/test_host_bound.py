"""A scrape never waits longer than a fixed bound on NVML; it serves the last good values and their age."""

from __future__ import annotations

import threading
import time

from vgpu.monitor.host import HostGpu, HostSource
from vgpu.nvml.sampler import Sampler

from .helpers import parse


class GatedSampler:
    """The real cffi sampler behind a gate the test can close, to make an NVML call 'hang'."""

    def __init__(self, library: str):
        self.real = Sampler(library, max_processes=0)
        self.open = threading.Event()
        self.open.set()
        self.entered = threading.Event()

    def sample(self):
        self.entered.set()
        self.open.wait()
        return self.real.sample()

    def close(self) -> None:
        self.real.close()


def test_hung_nvml_serves_last_good_values_within_the_bound(make_monitor, nvml_two_gpus):
    gated = GatedSampler(str(nvml_two_gpus.library))
    gpus = [
        HostGpu(0, "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e", "NVIDIA A100-SXM4-80GB"),
        HostGpu(1, "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c", "NVIDIA A100-SXM4-80GB"),
    ]
    host = HostSource(gated, gpus, bound_s=0.3).start()
    try:
        m = make_monitor(host=host)
        first = parse(m.render_metrics())
        assert first["HostCoreUtilization"][0][1] == 37
        gated.open.clear()  # NVML "hangs" from now on
        gated.entered.clear()
        nvml_two_gpus.update_device(0, utilization_gpu=99)
        t0 = time.monotonic()
        s = parse(m.render_metrics())
        waited = time.monotonic() - t0
        assert 0.25 <= waited < 1.0  # waited the bound once, not forever
        assert gated.entered.is_set()
        assert s["HostCoreUtilization"][0][1] == 37  # the last good value
        t0 = time.monotonic()
        s = parse(m.render_metrics())  # NVML still stuck: no second wait
        assert time.monotonic() - t0 < 0.2
        assert s["vgpu_monitor_nvml_sample_age_seconds"][0][1] >= 0.25
        assert s["vgpu_monitor_nvml_stale_serves_total"][0][1] >= 2
        gated.open.set()  # NVML recovers: the next scrape has fresh values
        deadline = time.monotonic() + 5
        while parse(m.render_metrics())["HostCoreUtilization"][0][1] != 99:
            assert time.monotonic() < deadline
    finally:
        gated.open.set()
        host.stop()


def test_sampling_exception_is_counted_and_old_values_kept(make_monitor, nvml_two_gpus):
    class Failing(GatedSampler):
        fail = False

        def sample(self):
            if self.fail:
                raise MemoryError("vnv_sample could not allocate its scratch buffers")
            return super().sample()

    sampler = Failing(str(nvml_two_gpus.library))
    host = HostSource(sampler, [HostGpu(0, "GPU-x", "NVIDIA A100-SXM4-80GB")], bound_s=0.5).start()
    try:
        m = make_monitor(host=host)
        assert parse(m.render_metrics())["HostCoreUtilization"][0][1] == 37
        sampler.fail = True
        s = parse(m.render_metrics())
        assert s["HostCoreUtilization"][0][1] == 37
        assert ({"device_index": "", "call": "sample", "code": "exception"}, 1.0) in s["vgpu_monitor_nvml_errors_total"]
    finally:
        host.stop()
