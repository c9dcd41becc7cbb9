"""A real Prometheus scrapes the real monitor; promtool checks the exposition.

promtool's linter flags the legacy Volcano names we must keep exactly (camelCase names, the
counter ``Device_memory_desc_of_container`` without ``_total``): those, and only those, are
accepted.  With ``--no-legacy-metrics`` the exposition lints clean.
"""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import missing_program
from tests.unit.monitor.helpers import MIB, UUIDS, add_container, wait_until

from .conftest import create_pod
from .prom import Prometheus, ensure_prometheus

# promtool lint findings that are inherent to the upstream names (docs/metrics.md §2).
LEGACY_LINT = {
    'Device_memory_desc_of_container counter metrics should have "_total" suffix',
    "HostCoreUtilization metric names should be written in 'snake_case' not 'camelCase'",
    "HostGPUMemoryUsage metric names should be written in 'snake_case' not 'camelCase'",
    "vGPU_device_memory_limit_in_bytes metric names should be written in 'snake_case' not 'camelCase'",
    "vGPU_device_memory_usage_in_bytes metric names should be written in 'snake_case' not 'camelCase'",
    # HAMi scheduler's allocation names (docs/metrics.md §3.1)
    "GPUDeviceCoreAllocated metric names should be written in 'snake_case' not 'camelCase'",
    "GPUDeviceCoreLimit metric names should be written in 'snake_case' not 'camelCase'",
    "GPUDeviceMemoryAllocated metric names should be written in 'snake_case' not 'camelCase'",
    "GPUDeviceMemoryLimit metric names should be written in 'snake_case' not 'camelCase'",
    "GPUDeviceSharedNum metric names should be written in 'snake_case' not 'camelCase'",
    "vGPUCoreAllocated metric names should be written in 'snake_case' not 'camelCase'",
    "vGPUMemoryAllocated metric names should be written in 'snake_case' not 'camelCase'",
}
# The one finding of HAMi's own allocation name that the monitor keeps (docs/metrics.md §3.1, §9).
HAMI_LINT = {'hami_gpu_shared_count non-histogram and non-summary metrics should not have "_count" suffix'}


@pytest.fixture(scope="module")
def binaries() -> tuple[str, str]:
    found = ensure_prometheus()
    if isinstance(found, str):
        missing_program(found)
    return found


@pytest.fixture
def workload(apiserver, hook):
    pod = create_pod(apiserver, "trainer", namespace="ml", gpus={"main": UUIDS})
    add_container(hook, pod["metadata"]["uid"], "main", procs=[(1, [300, 30]), (2, [700, 70])], sm_util={(1, 0): 12})
    return pod


def promtool_check(promtool: str, body: bytes) -> tuple[int, set[str]]:
    proc = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=60)
    out = (proc.stdout + proc.stderr).decode()
    return proc.returncode, {line.strip() for line in out.splitlines() if line.strip()}


def test_promtool_accepts_the_exposition(binaries, workload, start_monitor):
    _, promtool = binaries
    body = start_monitor().scrape()
    rc, findings = promtool_check(promtool, body)
    assert rc == 3, findings  # 1 would be a parse error; 3 = lint findings only
    assert findings <= LEGACY_LINT | HAMI_LINT, findings - LEGACY_LINT - HAMI_LINT
    assert 'Device_memory_desc_of_container counter metrics should have "_total" suffix' in findings
    print("promtool findings (all inherent to the upstream names):", *sorted(findings), sep="\n  ")


def test_promtool_lints_clean_without_the_legacy_names(binaries, workload, start_monitor):
    _, promtool = binaries
    body = start_monitor(extra_args=["--no-legacy-metrics"]).scrape()
    rc, findings = promtool_check(promtool, body)
    assert (rc, findings) == (3, HAMI_LINT)  # HAMi's hami_gpu_shared_count, kept for compatibility


@pytest.fixture
def prometheus(binaries, tmp_path: pathlib.Path, workload, start_monitor) -> Iterator[Prometheus]:
    mon = start_monitor()
    prom = Prometheus(binaries[0], tmp_path / "prometheus", [f"127.0.0.1:{mon.port}"])
    try:
        yield prom.start()
    finally:
        prom.stop()
        print(f"--- prometheus log ---\n{prom.log()[-3000:]}")


def test_prometheus_scrapes_and_promql_returns_the_pods_memory(prometheus):
    result = wait_until(
        lambda: prometheus.query('hami_vgpu_memory_used_bytes{namespace="ml",pod="trainer"}'),
        30,
        "the pod's memory series in Prometheus",
    )
    got = {r["metric"]["vdevice_index"]: float(r["value"][1]) for r in result}
    assert got == {"0": 1000 * MIB, "1": 100 * MIB}
    assert {r["metric"]["device_uuid"] for r in result} == set(UUIDS)
    assert all(r["metric"]["zone"] == "vGPU" and r["metric"]["container"] == "main" for r in result)
    # the legacy counter arrives under its exact name
    legacy = prometheus.query('Device_memory_desc_of_container{podnamespace="ml",podname="trainer",vdeviceid="0"}')
    assert [float(r["value"][1]) for r in legacy] == [1000 * MIB]
    assert legacy[0]["metric"]["data"] == str(1000 * MIB)
    metadata = prometheus.api("metadata", metric="Device_memory_desc_of_container")
    assert metadata["Device_memory_desc_of_container"][0]["type"] == "counter"
    targets = prometheus.api("targets")["activeTargets"]
    assert [(t["health"], t["lastError"]) for t in targets] == [("up", "")]
    # an aggregate an operator would write: per-pod memory over all its GPUs
    total = prometheus.query('sum by (namespace, pod) (hami_vgpu_memory_used_bytes{pod="trainer"})')
    assert [float(r["value"][1]) for r in total] == [1100 * MIB]
