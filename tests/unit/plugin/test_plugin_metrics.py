"""vgpu/plugin/metrics.py and health_metrics.py in process: what each hook counts, what a scrape shows."""

from __future__ import annotations

import grpc
import pytest

from tests.support.metrics_text import value
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.health import GpuHealth
from vgpu.plugin.api import pb
from vgpu.plugin.health_metrics import PRESET_XIDS, HealthMetrics
from vgpu.plugin.metrics import (
    CDI_UNRESOLVED,
    FAMILIES,
    MeteredAllocator,
    PluginCollector,
    PluginMetrics,
    registry_of,
)
from vgpu.plugin.responses import FAILURE_REASONS, REASON_HOST, AllocationError

R = "volcano.sh/vgpu-number"


class _Resource:
    resource_name = R

    def health_counts(self) -> tuple[int, int]:
        return 7, 3


class _State:
    registered: frozenset[str] = frozenset()

    def resource_managers(self):
        return [_Resource()]

    def registered_resources(self):
        return self.registered

    def kubelet_restarts(self):
        return 2

    def nvml_up(self):
        return True


class _Inner:
    def __init__(self, outcome):
        self.outcome = outcome

    def allocate(self, resource, request):
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    def preferred_allocation(self, resource, request):
        return pb.PreferredAllocationResponse()


def _gpu(i: int) -> GpuInfo:
    return GpuInfo(
        index=i,
        uuid=f"GPU-{i}",
        name="NVIDIA A100-SXM4-80GB",
        memory_total_mib=81920,
        minor=i,
        pci_bus_id=f"0000:0{i}:00.0",
        numa_node=None,
        compute_capability=(8, 0),
        mig_capable=True,
        mig_mode=False,
    )


def _scrape(metrics, state=None, health=None, labels=(("daemon", "plugin"),)) -> str:
    collector = PluginCollector(metrics, state or _State(), health or HealthMetrics(), lambda: labels)
    return registry_of(collector)().decode()


def test_every_family_is_named_once():
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)


def test_allocations_by_result_and_reason_and_the_histogram():
    m = PluginMetrics([R])
    req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["a"])])
    served = pb.AllocateResponse(container_responses=[pb.ContainerAllocateResponse(envs={"A": "1"})])
    empty = pb.AllocateResponse(container_responses=[pb.ContainerAllocateResponse()])
    MeteredAllocator(_Inner(served), m).allocate(_Resource(), req)
    MeteredAllocator(_Inner(empty), m).allocate(_Resource(), req)
    with pytest.raises(AllocationError):
        MeteredAllocator(_Inner(AllocationError("x", grpc.StatusCode.UNKNOWN, reason=REASON_HOST)), m).allocate(
            _Resource(), req
        )
    with pytest.raises(KeyError):
        MeteredAllocator(_Inner(KeyError("bug")), m).allocate(_Resource(), req)
    body = _scrape(m)
    assert value(body, "vgpu_plugin_allocations_total", resource=R, result="success", reason="served") == 1
    assert value(body, "vgpu_plugin_allocations_total", resource=R, result="success", reason="empty") == 1
    assert value(body, "vgpu_plugin_allocations_total", resource=R, result="failure", reason="host_setup") == 1
    assert value(body, "vgpu_plugin_allocations_total", resource=R, result="failure", reason="internal") == 1
    for reason in set(FAILURE_REASONS) - {"host_setup", "internal"}:
        assert value(body, "vgpu_plugin_allocations_total", resource=R, result="failure", reason=reason) == 0
    assert value(body, "vgpu_plugin_allocate_duration_seconds_count", resource=R) == 4
    assert value(body, "vgpu_plugin_allocate_duration_seconds_bucket", resource=R, le="+Inf") == 4


def test_writes_are_counted_reads_are_not_and_state_gauges_come_from_the_daemon():
    m = PluginMetrics()
    for verb, ok in (("patch", True), ("patch", False), ("create", True), ("get", True), ("list", False)):
        m.api_call(verb, ok)
    m.add_gauge(CDI_UNRESOLVED, lambda: 4)
    state = _State()
    state.registered = frozenset({R})
    body = _scrape(m, state, labels=(("daemon", "plugin"), ("version", "9")))
    assert value(body, "vgpu_plugin_api_writes_total", verb="patch", result="success") == 1
    assert value(body, "vgpu_plugin_api_writes_total", verb="patch", result="failure") == 1
    assert value(body, "vgpu_plugin_api_writes_total", verb="create", result="failure") == 0
    assert value(body, "vgpu_plugin_api_writes_total", verb="get", result="success") is None
    assert value(body, "vgpu_plugin_cdi_unresolved_devices") == 4
    assert value(body, "vgpu_plugin_devices", resource=R, health="healthy") == 7
    assert value(body, "vgpu_plugin_devices", resource=R, health="unhealthy") == 3
    assert value(body, "vgpu_plugin_registered", resource=R) == 1
    assert value(body, "vgpu_plugin_kubelet_restarts_total") == 2
    assert value(body, "vgpu_build_info", daemon="plugin", version="9") == 1


def test_health_metrics_follow_the_board_and_keep_counts_across_a_reload():
    now = [100.0]
    hm = HealthMetrics(clock=lambda: now[0])
    board = GpuHealth(["GPU-0", "GPU-1"])
    hm.watch(board, [_gpu(0), _gpu(1)])
    now[0] = 150.0
    board.mark_unhealthy("GPU-0", "XidCriticalError 79")
    hm.xid("GPU-0", 79)
    hm.xid("GPU-0", 999)  # a code not preset: its series appears at its first event
    hm.watch(board, [_gpu(0), _gpu(1)])  # a reload: no double subscription, counts kept
    now[0] = 200.0
    board.mark_unhealthy("GPU-0", "again")  # no change: no new stamp
    body = _scrape(PluginMetrics(), health=hm)
    assert value(body, "vgpu_gpu_healthy", uuid="GPU-0", index="0") == 0
    assert value(body, "vgpu_gpu_healthy", uuid="GPU-1", index="1") == 1
    assert value(body, "vgpu_gpu_xid_events_total", uuid="GPU-0", index="0", xid="79") == 1
    assert value(body, "vgpu_gpu_xid_events_total", uuid="GPU-0", index="0", xid="999") == 1
    assert value(body, "vgpu_gpu_xid_events_total", uuid="GPU-1", index="1", xid="999") is None
    for x in PRESET_XIDS:
        assert value(body, "vgpu_gpu_xid_events_total", uuid="GPU-1", index="1", xid=str(x)) == 0
    assert value(body, "vgpu_gpu_health_changed_timestamp_seconds", uuid="GPU-0", index="0") == 150.0
    assert value(body, "vgpu_gpu_health_changed_timestamp_seconds", uuid="GPU-1", index="1") == 100.0
