"""The native layer's loader: bad paths, missing symbols, init failures, per-family errors."""

from __future__ import annotations

import pytest

from vgpu.nvml import errors
from vgpu.nvml.context import NvmlContext
from vgpu.nvml.errors import NvmlError, NvmlLibraryError
from vgpu.nvml.mig_calls import MigNvml
from vgpu.nvml.sampler import Sampler


def test_bad_library_path_names_the_path_and_the_loader_error(tmp_path):
    missing = tmp_path / "nope" / "libnvidia-ml.so.1"
    with pytest.raises(NvmlLibraryError) as info:
        NvmlContext(str(missing))
    err = info.value
    assert err.code == errors.NVML_ERROR_LIBRARY_NOT_FOUND
    assert err.library == str(missing)
    assert str(missing) in str(err)
    assert "No such file" in str(err)
    assert "NVIDIA runtime" in str(err)  # docs/health.md §6 hint


def test_missing_required_symbol_is_a_clear_error(partial_nvml):
    lib = partial_nvml("OMIT_UTILIZATION")
    with pytest.raises(NvmlLibraryError) as info:
        NvmlContext(str(lib))
    assert info.value.code == errors.NVML_ERROR_FUNCTION_NOT_FOUND
    assert "lacks required symbol nvmlDeviceGetUtilizationRates" in str(info.value)
    assert str(lib) in str(info.value)


def test_library_that_is_not_nvml_at_all(tmp_path):
    with pytest.raises(NvmlLibraryError) as info:
        NvmlContext("libc.so.6")
    assert "lacks required symbol nvmlInit_v2 (and its fallback nvmlInit)" in str(info.value)


def test_init_failure_carries_the_nvml_code_and_message(partial_nvml):
    with pytest.raises(NvmlError) as info:
        NvmlContext(str(partial_nvml("INIT_FAILS")))
    assert not isinstance(info.value, NvmlLibraryError)
    assert info.value.code == errors.NVML_ERROR_DRIVER_NOT_LOADED
    assert "Driver Not Loaded" in str(info.value)


def test_missing_optional_symbols_are_reported_not_fatal(partial_nvml):
    with NvmlContext(str(partial_nvml())) as native:
        assert native.device_count() == 2
        assert "nvmlDeviceGetComputeRunningProcesses_v3" in native.missing_symbols
        assert "nvmlDeviceGetProcessUtilization" in native.missing_symbols
        assert "nvmlDeviceCreateGpuInstanceWithPlacement" in native.missing_symbols
        assert native.error_string(errors.NVML_ERROR_GPU_IS_LOST) == "GPU is lost"


def test_sample_reports_each_family_separately(partial_nvml):
    with Sampler(str(partial_nvml()), max_processes=4) as sampler:
        node = sampler.sample()
    good, lost = node.devices
    # memory works, utilisation NOT_SUPPORTED, process calls absent from this library
    assert good.memory_rc == 0
    assert (good.memory_total_bytes, good.memory_free_bytes, good.memory_used_bytes) == (100 << 20, 60 << 20, 40 << 20)
    assert good.utilization_rc == errors.NVML_ERROR_NOT_SUPPORTED
    assert good.utilization_gpu is None and good.utilization_memory is None
    assert good.processes_rc == errors.NVML_ERROR_FUNCTION_NOT_FOUND
    assert good.processes == ()
    assert good.process_util_rc == errors.NVML_ERROR_FUNCTION_NOT_FOUND
    # a device whose handle could not be obtained reports that error everywhere
    assert lost.index == 1
    for rc in (lost.memory_rc, lost.utilization_rc, lost.processes_rc, lost.process_util_rc):
        assert rc == errors.NVML_ERROR_GPU_IS_LOST
    assert lost.memory_used_bytes is None


def test_mig_wrappers_raise_function_not_found_when_absent(partial_nvml):
    with MigNvml(str(partial_nvml())) as mig:
        dev = mig.device(0)
        with pytest.raises(NvmlError) as info:
            mig.get_mig_mode(dev)
        assert info.value.code == errors.NVML_ERROR_FUNCTION_NOT_FOUND
        assert "nvmlDeviceGetMigMode" in str(info.value)
        with pytest.raises(NvmlError) as info:
            mig.device(1)
        assert info.value.code == errors.NVML_ERROR_GPU_IS_LOST
        with pytest.raises(NvmlError) as info:
            mig.device(2)
        assert info.value.code == errors.NVML_ERROR_INVALID_ARGUMENT


def test_closed_context_refuses_calls(partial_nvml):
    sampler = Sampler(str(partial_nvml()))
    sampler.close()
    sampler.close()  # idempotent
    with pytest.raises(NvmlError) as info:
        sampler.sample()
    assert info.value.code == errors.NVML_ERROR_UNINITIALIZED


def test_max_processes_is_bounded(partial_nvml):
    with pytest.raises(ValueError):
        Sampler(str(partial_nvml()), max_processes=-1)
