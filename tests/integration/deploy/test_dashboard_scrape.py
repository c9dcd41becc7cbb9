"""Every metric the Grafana dashboard queries is one a real `vgpu monitor` exports.

The monitor runs as in the DaemonSet, against the fake NVML and the simulated API server, after
the real plugin allocated a pod; the test then plays HAMi-core inside that container (a v1.2
shared region in the directory the plugin mounted, with memory, SM utilization and a kernel
launch), leaves one file the monitor must reject, and makes NVML fail a utilization query on one
GPU, so that every family the dashboard shows has samples.  The dashboard's names are then
compared with the sample names of a real /metrics scrape.
"""
from __future__ import annotations

import pathlib

from prometheus_client.parser import text_string_to_metric_families

from tests.unit.deploy.test_dashboard import queried_metrics
from vgpu.hamicore.writer import RegionWriter

from .conftest import wait_until

NVML_ERROR_NOT_SUPPORTED = 3


def _play_hami_core(container, hook_path: pathlib.Path) -> RegionWriter:
    envs = container.envs
    mounts = {mnt.container_path: mnt.host_path for mnt in container.mounts}
    cache = envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"]
    assert cache.startswith("/tmp/vgpu/")
    host_file = pathlib.Path(mounts["/tmp/vgpu"]) / cache.rsplit("/", 1)[1]
    assert host_file.parent.parent == hook_path / "containers"
    region = RegionWriter.create(host_file, "v1.2", env=envs)
    region.init_devices(envs["NVIDIA_VISIBLE_DEVICES"].split(","))
    region.attach(4242)
    region.add_memory(4242, 0, 300 << 20, "context")
    region.add_memory(4242, 0, 512 << 20, "data")
    region.set_monitor(4242, 0, sm_util=37)
    region.kernel_launch()
    return region


def _sample_names(text: str) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(s.name for s in family.samples)
    return names


def test_dashboard_queries_only_metrics_a_real_monitor_exports(cluster, monitor_factory):
    from .conftest import run_allocation_flow

    container = run_allocation_flow(cluster)
    region = _play_hami_core(container, cluster.hook_path)
    try:
        bad = cluster.hook_path / "containers" / "00000000-0000-0000-0000-0000000000aa_bad"
        bad.mkdir()
        (bad / "x.cache").write_bytes(b"not a region")
        cluster.nvml.inject_error("nvmlDeviceGetUtilizationRates", NVML_ERROR_NOT_SUPPORTED, index=1)
        mon = monitor_factory(cluster)
        mon.wait_healthy(60)
        wanted = queried_metrics()
        scraped: set[str] = set()

        def complete() -> bool:
            nonlocal scraped
            scraped = _sample_names(mon.get("/metrics")[1])
            return wanted <= scraped

        try:
            wait_until(complete, 45, "every dashboard metric in the monitor's /metrics")
        except AssertionError:
            pass
        missing = sorted(wanted - scraped)
        assert not missing, f"the dashboard queries metrics the monitor does not export: {missing}"
    finally:
        region.close()
