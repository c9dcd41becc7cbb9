"""``vgpu_build_info`` of the real `vgpu monitor` process (docs/metrics.md §10.2)."""

from __future__ import annotations

import platform

import vgpu
from tests.support.metrics_text import value


def test_build_info_names_the_version_hamicore_commit_python_and_driver(start_monitor, nvml):
    mon = start_monitor(nvml_env={**nvml.env, "VGPU_HAMICORE_COMMIT": "8c32de63"})
    body = mon.scrape().decode()
    labels = {
        "daemon": "monitor",
        "version": vgpu.__version__,
        "hamicore_commit": "8c32de63",
        "python": platform.python_version(),
        "driver_version": "550.54.15",
    }
    assert value(body, "vgpu_build_info", **labels) == 1


def test_build_info_without_nvml_or_commit_says_unknown(start_monitor):
    mon = start_monitor(nvml_env={"VGPU_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1", "FAIL_ON_INIT_ERROR": "false"})
    body = mon.scrape().decode()
    assert value(body, "vgpu_build_info", daemon="monitor", hamicore_commit="unknown", driver_version="unknown") == 1
