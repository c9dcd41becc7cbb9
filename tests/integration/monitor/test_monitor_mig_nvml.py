"""A MIG node through the real monitor: utilization's NOT_SUPPORTED is an answer, not an NVML error.

docs/metrics.md §4.1: the fake NVML answers NOT_SUPPORTED for the utilization of a MIG-enabled GPU,
as NVML does; the monitor shows it in ``vgpu_monitor_nvml_unsupported`` and
``vgpu_monitor_nvml_errors_total`` stays empty however often it is scraped.
"""

from __future__ import annotations

from tests.unit.monitor.helpers import UUIDS, parse, wait_until
from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import MonitorProcess


def test_mig_enabled_gpu_counts_no_nvml_errors(tmp_path, hook, kubeconfig):
    nvml = fakenvml.FakeNvml.create(
        tmp_path / "mignvml",
        [
            fakenvml.device(0, uuid=UUIDS[0], mig_mode=True, memory_used_mib=100),
            fakenvml.device(1, uuid=UUIDS[1], utilization_gpu=30),
        ],
    )
    mon = MonitorProcess(tmp_path, hook, kubeconfig, nvml_env=nvml.env)
    try:
        mon.start()
        s = wait_until(lambda: (p := parse(mon.scrape())).get("HostGPUMemoryUsage") and p, 10, "host values")
        for _ in range(5):
            s = parse(mon.scrape())
        assert s.get("vgpu_monitor_nvml_errors_total", []) == []
        assert s["vgpu_monitor_nvml_unsupported"] == [
            ({"device_index": "0", "call": "memory"}, 0.0),
            ({"device_index": "0", "call": "utilization"}, 1.0),
            ({"device_index": "1", "call": "memory"}, 0.0),
            ({"device_index": "1", "call": "utilization"}, 0.0),
        ]
        assert [lab["deviceidx"] for lab, _ in s["HostCoreUtilization"]] == ["1"]
        assert sorted(lab["deviceidx"] for lab, _ in s["HostGPUMemoryUsage"]) == ["0", "1"]
    finally:
        mon.terminate()
