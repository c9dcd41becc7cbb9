"""The same per-tick NVML reads as the cffi sampler, made through nvidia-ml-py.

It is the baseline the sampler is measured against (benchmarks/test_nvml_sampler.py) and the
cross-check of the real-driver smoke test (benchmarks/gpu_smoke.py): what a monitor written
against nvidia-ml-py calls per tick.  Not used by the daemons.
"""

from __future__ import annotations

import pynvml


class PynvmlSampler:
    """Memory, utilisation, running processes (v3) and per-process utilisation of every device.

    nvidia-ml-py must already be initialised (``vgpu.nvml.library.init_pynvml``).
    """

    def __init__(self) -> None:
        count = pynvml.nvmlDeviceGetCount()
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.last_seen = [0] * count

    def sample(self) -> list[tuple]:
        """Per device ``(total, used, util_gpu, util_mem, [(pid, used bytes, sm util | None)])``.

        Utilisation is None where NVML says NOT_SUPPORTED (MIG-enabled GPUs).
        """
        out = []
        for i, h in enumerate(self.handles):
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            try:
                util = pynvml.nvmlDeviceGetUtilizationRates(h)
                ugpu, umem = util.gpu, util.memory
            except pynvml.NVMLError_NotSupported:
                ugpu = umem = None
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
            try:
                samples = pynvml.nvmlDeviceGetProcessUtilization(h, self.last_seen[i])
            except (pynvml.NVMLError_NotFound, pynvml.NVMLError_NotSupported):
                samples = []
            for s in samples:
                self.last_seen[i] = max(self.last_seen[i], s.timeStamp)
            sm = {s.pid: s.smUtil for s in samples}
            out.append((mem.total, mem.used, ugpu, umem, [(p.pid, p.usedGpuMemory, sm.get(p.pid)) for p in procs]))
        return out
