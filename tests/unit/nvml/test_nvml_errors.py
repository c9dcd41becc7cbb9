from vgpu.nvml import errors
from vgpu.nvml.discovery import pci_sysfs_numa_node
from vgpu.nvml.errors import NvmlError


def test_error_message_names_function_code_and_library():
    err = NvmlError(
        errors.NVML_ERROR_IN_USE,
        "In use by another client",
        function="nvmlGpuInstanceDestroy",
        library="/x/libnvidia-ml.so.1",
    )
    assert err.code == 19
    assert str(err) == (
        "nvmlGpuInstanceDestroy: In use by another client (NVML_ERROR_IN_USE) [NVML library /x/libnvidia-ml.so.1]"
    )


def test_code_names():
    assert errors.code_name(0) == "NVML_SUCCESS"
    assert errors.code_name(3) == "NVML_ERROR_NOT_SUPPORTED"
    assert errors.code_name(12345) == "NVML_ERROR_12345"


def test_sysfs_numa_node(tmp_path):
    dev = tmp_path / "bus/pci/devices/0000:07:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text("1\n")
    assert pci_sysfs_numa_node("00000000:07:00.0", tmp_path) == 1
    (dev / "numa_node").write_text("-1\n")  # the kernel's "no NUMA"
    assert pci_sysfs_numa_node("00000000:07:00.0", tmp_path) is None
    assert pci_sysfs_numa_node("00000000:08:00.0", tmp_path) is None
    assert pci_sysfs_numa_node("garbage", tmp_path) is None
