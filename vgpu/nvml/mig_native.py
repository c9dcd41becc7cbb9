"""Old name of :mod:`vgpu.nvml.mig_calls`, kept only for the real-driver smoke script.

``vgpu/nvml/smoke.py`` (moving to ``benchmarks/``) still imports these two names from here;
delete this module once it imports them from ``vgpu.nvml.mig_calls``.
"""
from vgpu.nvml.mig_calls import NVML_GPU_INSTANCE_PROFILE_COUNT, MigNvml

__all__ = ["NVML_GPU_INSTANCE_PROFILE_COUNT", "MigNvml"]
