"""Error texts operators see, and the monitor's slot extraction. Pure."""

from __future__ import annotations

from vgpu.mig import MigApplyError, MigInUseError, slots_of
from vgpu.mig.inventory import MigSlotRef
from vgpu.nvml.errors import NVML_ERROR_INSUFFICIENT_RESOURCES, NvmlError

G0 = "GPU-00000000-6888-5063-1e4d-f2a09cfbf000"
G1 = "GPU-00000001-6888-5063-1e4d-f2a09cfbf001"


def test_in_use_text():
    assert str(MigInUseError(G0, 3)) == f"MIG instance GI 3 on {G0} is in use; not reshaping"
    assert str(MigInUseError(G0, 3, "2 processes")).startswith(f"MIG instance GI 3 on {G0} is in use; not reshaping (")


def test_apply_failed_text_carries_the_nvml_error():
    err = NvmlError(
        NVML_ERROR_INSUFFICIENT_RESOURCES, "Insufficient Resources", function="nvmlDeviceCreateGpuInstanceWithPlacement"
    )
    text = str(MigApplyError(G0, err))
    assert text.startswith(f"MIG apply failed on {G0}: nvmlDeviceCreateGpuInstanceWithPlacement: ")
    assert "NVML_ERROR_INSUFFICIENT_RESOURCES" in text


def test_slots_of_a_pod():
    value = f"{G0}[group2-3],NVIDIA,8000,0:{G1}[group1-0],NVIDIA,8000,0:;;{G1}[group1-1],NVIDIA,1,0:"
    assert slots_of(value) == [
        MigSlotRef(0, 0, G0, "group2", 3),
        MigSlotRef(0, 1, G1, "group1", 0),
        MigSlotRef(2, 0, G1, "group1", 1),
    ]
    assert slots_of(f"{G0},NVIDIA,8000,0:") == []  # hami-core devices are not MIG slots
    assert slots_of("") == [] and slots_of(None) == [] and slots_of("junk") == []
