"""A GPU whose memory query answers NOT_SUPPORTED (unified memory, e.g. GB10) next to a normal one,
against the real `vgpu plugin` (docs/kubelet-api.md §4.1): the plugin starts, says clearly that it
leaves that GPU out, and serves the other one."""

from __future__ import annotations

from vgpu.nvml.errors import NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_UNKNOWN
from vgpu.sim.nvml import fakenvml

from .conftest import NAMES


def _node(tmp_path):
    nvml = fakenvml.FakeNvml.create(
        tmp_path / "nvml",
        [fakenvml.device(0), fakenvml.device(1, name="NVIDIA GB10", mig_capable=False, compute_capability=[12, 1])],
    )
    return nvml


def test_unified_memory_gpu_is_excluded_clearly_and_the_rest_is_served(tmp_path, kubelet, plugin_factory):
    nvml = _node(tmp_path)
    nvml.inject_error("nvmlDeviceGetMemoryInfo", NVML_ERROR_NOT_SUPPORTED, index=1)
    p = plugin_factory(nvml, device_config="nvidia:\n  gpuMemoryFactor: 1024\n")
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    u0, u1 = (d["uuid"] for d in nvml.config["devices"])
    for client in clients.values():
        assert client.devices and not any(i.startswith((u1, "1-")) for i, _ in client.devices)
    assert all(i.startswith(u0) for i, _ in clients[NAMES[0]].devices)
    log = p.log()
    assert f"GPU 1 ({u1}, NVIDIA GB10) is excluded: NVML reports no memory of its own (unified memory)" in log
    assert "advertising 1 of 2 GPU(s)" in log and "Traceback" not in log


def test_other_memory_errors_still_stop_startup_with_a_clear_message(tmp_path, plugin_factory):
    nvml = _node(tmp_path)
    nvml.inject_error("nvmlDeviceGetMemoryInfo", NVML_ERROR_UNKNOWN, index=1)
    p = plugin_factory(nvml)
    assert p.wait_exit(30) == 1
    assert "nvmlDeviceGetMemoryInfo(device 1)" in p.log() and "Traceback" not in p.log()
