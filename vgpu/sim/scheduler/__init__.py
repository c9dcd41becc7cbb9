"""Volcano scheduler emulator: the vGPU device plugin's scheduler side (node lock, device fit, annotations, bind)."""

from vgpu.sim.scheduler.emulator import VolcanoSchedulerEmulator
from vgpu.sim.scheduler.model import SchedulerConfig

__all__ = ["SchedulerConfig", "VolcanoSchedulerEmulator"]
