"""The demo's HAMi-core "container": what it writes is what the monitor's reader sees, and it obeys
the monitor's feedback exactly as libvgpu's limiter does (docs/metrics.md §5)."""

from __future__ import annotations

import pathlib

from vgpu.hamicore.region import Region, read_region
from vgpu.plugin.api import pb
from vgpu.sim.demo.workload import CONTEXT_MIB, MIB, Duty, HamiCoreContainer, host_cache_file

UUID0 = "GPU-3027c995-aea7-5442-8f21-81a962d2a515"
UUID1 = "GPU-ef2e40e8-4d39-532b-bf69-c36c9ebcc70e"


def test_host_cache_file_follows_the_tmp_vgpu_mount():
    envs = {"CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/vgpu/abc.cache"}
    mounts = [
        pb.Mount(container_path="/usr/local/vgpu/libvgpu.so", host_path="/h/libvgpu.so", read_only=True),
        pb.Mount(container_path="/tmp/vgpu", host_path="/h/containers/uid_c", read_only=False),
    ]
    assert host_cache_file(envs, mounts) == "/h/containers/uid_c/abc.cache"
    assert host_cache_file({}, mounts) is None
    assert host_cache_file(envs, mounts[:1]) is None


def _container(tmp_path: pathlib.Path, **env: str) -> HamiCoreContainer:
    envs = {
        "NVIDIA_VISIBLE_DEVICES": f"{UUID0},{UUID1}",
        "CUDA_DEVICE_MEMORY_LIMIT_0": "8192m",
        "CUDA_DEVICE_MEMORY_LIMIT_1": "4096m",
        "CUDA_DEVICE_SM_LIMIT": "30",
        "CUDA_DEVICE_SM_LIMIT_0": "30",
        "CUDA_DEVICE_SM_LIMIT_1": "20",
        **env,
    }
    c = HamiCoreContainer("default/p", "c", "n1", envs, str(tmp_path / "r.cache"), pid=7)
    c.start()
    return c


def test_region_carries_limits_usage_and_priority(tmp_path: pathlib.Path):
    c = _container(tmp_path, CUDA_TASK_PRIORITY="0")
    try:
        snap = read_region(c.region_path)
        assert snap.layout_name == "v1.2" and snap.priority == 0 and snap.live_procs == 1
        assert [d.uuid for d in snap.devices] == [UUID0, UUID1]
        assert [d.limit_bytes for d in snap.devices] == [8192 * MIB, 4096 * MIB]
        assert [d.context_bytes for d in snap.devices] == [CONTEXT_MIB * MIB] * 2
        c.step(3.0)
        snap = read_region(c.region_path)
        for d, dev in enumerate(snap.devices):
            assert dev.used_bytes == c.used[d] and 0 < dev.used_bytes <= dev.limit_bytes
            assert 0 < dev.sm_util <= [30, 20][d] and dev.sm_util == c.sm_util[d]
        assert snap.recent_kernel == 2 and c.launches == 1
    finally:
        c.close()
    assert read_region(c.region_path).live_procs == 0  # normal exit frees the slot


def test_obeys_the_monitors_feedback(tmp_path: pathlib.Path):
    c = _container(tmp_path)
    monitor = Region.open(c.region_path, writable=True)
    layout = monitor.read().layout
    try:
        assert c.step(1.0) == [] and c.priority == 1
        monitor.write_recent_kernel(layout, 1)  # pass 1 counted it down
        notes = c.step(2.0)
        assert any("recent_kernel 2 → 1" in n for n in notes) and c.feedback.decrements == 1
        assert c.feedback.utilization_switch == 1 and c.feedback.switch_changes == 0  # libvgpu's initial value
        monitor.write_utilization_switch(layout, 0)
        assert c.step(2.5) == ["utilization_switch 1 → 0 (SM limiter off)"]
        monitor.write_recent_kernel(layout, -1)  # pass 2: a higher priority is active
        monitor.write_utilization_switch(layout, 1)
        launches = c.launches
        notes = c.step(3.0)
        assert any(n.startswith("blocked by priority") for n in notes)
        assert any("utilization_switch 0 → 1" in n for n in notes)
        assert c.launches == launches and c.sm_util == [0, 0]
        assert monitor.read().recent_kernel == -1  # it never overwrites the block
        c.step(4.0)
        assert c.launches == launches
        monitor.write_recent_kernel(layout, 0)  # released
        notes = c.step(5.0)
        assert any(n.startswith("released") for n in notes)
        assert c.launches == launches + 1 and monitor.read().recent_kernel == 2
        assert c.feedback.seen and c.snapshot()["feedback"]["times_blocked"] == 1
    finally:
        monitor.close()
        c.close()


def test_duty_cycle():
    d = Duty(busy_s=2, idle_s=1)
    assert [d.busy(t) for t in (0, 1.5, 2.5, 3.1)] == [True, True, False, True]
    assert Duty().busy(1e9)
