"""Resource managers (device lists, health flips) and the default allocators."""

from __future__ import annotations

import grpc
import pytest

from vgpu.nvml.health import GpuHealth
from vgpu.plugin.api import pb
from vgpu.plugin.devices import ResourceKind, resource_specs
from vgpu.plugin.preference import preferred_ids
from vgpu.plugin.resources import ResourceManager
from vgpu.plugin.responses import AllocationError, EmptyAllocator, UnavailableAllocator

from .dp_helpers import make_cfg, make_gpu


def managers(cfg, gpus, health):
    return {s.kind: ResourceManager(s, gpus, cfg, health) for s in resource_specs(cfg)}


def test_device_lists_per_resource_and_per_node_split_override():
    gpus = [make_gpu(0, 81920), make_gpu(1, 24576, "NVIDIA A10")]
    cfg = make_cfg(split=10, factor=10, node_split=4, core_scaling=1.5)
    m = managers(cfg, gpus, GpuHealth(g.uuid for g in gpus))
    number = [i for i, _ in m[ResourceKind.NUMBER].devices()]
    assert number == [f"{gpus[0].uuid}-{i}" for i in range(4)] + [f"{gpus[1].uuid}-{i}" for i in range(4)]
    assert m[ResourceKind.MEMORY].device_count() == 8192 + 2457
    assert m[ResourceKind.MEMORY].devices()[0] == ("0-0", "Healthy")
    assert m[ResourceKind.MEMORY].devices()[-1] == ("1-2456", "Healthy")
    assert m[ResourceKind.CORES].device_count() == 300
    assert m[ResourceKind.CORES].devices()[150][0] == f"{gpus[1].uuid}-core-0"
    assert [s.socket_name for s in resource_specs(cfg)] == [
        "nvidia-vgpu-number.sock",
        "nvidia-vgpu-memory.sock",
        "nvidia-vgpu-cores.sock",
    ]
    assert m[ResourceKind.NUMBER].options().get_preferred_allocation_available
    assert not m[ResourceKind.MEMORY].options().get_preferred_allocation_available
    assert not m[ResourceKind.CORES].options().pre_start_required


def test_health_change_flips_exactly_that_gpus_devices_and_bumps_the_version():
    gpus = [make_gpu(0, 1000), make_gpu(1, 1000)]
    health = GpuHealth(g.uuid for g in gpus)
    m = managers(make_cfg(), gpus, health)
    before = {k: mm.snapshot()[0] for k, mm in m.items()}
    changed = health.set({gpus[0].uuid: False}, "Xid 79")
    for k, mm in m.items():
        assert mm.refresh(changed)
        version, payload = mm.snapshot()
        assert version == before[k] + 1
        msg = pb.ListAndWatchResponse.FromString(payload)
        assert [(d.ID, d.health) for d in msg.devices] == mm.devices()
        for d in msg.devices:
            on_a = mm.locate(d.ID)[0].uuid == gpus[0].uuid
            assert d.health == ("Unhealthy" if on_a else "Healthy")
    # a change to a GPU this resource does not list is ignored
    assert not m[ResourceKind.NUMBER].refresh({"GPU-other": False})


def test_locate_parses_only_our_ids():
    gpus = [make_gpu(3, 100)]
    m = managers(make_cfg(split=5), gpus, GpuHealth([gpus[0].uuid]))
    assert m[ResourceKind.NUMBER].locate(f"{gpus[0].uuid}-4") == (gpus[0], 4)
    assert m[ResourceKind.NUMBER].locate(f"{gpus[0].uuid}-5") is None
    assert m[ResourceKind.NUMBER].locate(f"{gpus[0].uuid}-04") is None
    assert m[ResourceKind.MEMORY].locate("3-99") == (gpus[0], 99)
    assert m[ResourceKind.MEMORY].locate("3-100") is None and m[ResourceKind.MEMORY].locate("x") is None
    assert m[ResourceKind.CORES].locate(f"{gpus[0].uuid}-core-7") == (gpus[0], 7)


def test_preferred_ids_must_include_then_targets_then_order():
    key = lambda i: (int(i.split("-")[0]), int(i.split("-")[1]))  # noqa: E731
    gpu_of = lambda i: "G" + i.split("-")[0]  # noqa: E731
    avail = ["1-0", "0-2", "0-1", "2-0", "1-1"]
    assert preferred_ids(avail, [], 3, key) == ["0-1", "0-2", "1-0"]
    assert preferred_ids(avail, ["2-0"], 2, key) == ["2-0", "0-1"]
    assert preferred_ids(avail, [], 2, key, targets=["G2", "G1"], gpu_of=gpu_of) == ["2-0", "1-0"]
    assert preferred_ids(avail, ["1-1"], 2, key, targets=["G1", "G2"], gpu_of=gpu_of) == ["1-1", "2-0"]
    assert preferred_ids(avail, [], 10, key) == sorted(avail, key=key)


def test_empty_allocator_and_preferred_allocation_for_memory_and_cores():
    gpus = [make_gpu(0, 100), make_gpu(1, 100)]
    m = managers(make_cfg(split=3), gpus, GpuHealth(g.uuid for g in gpus))
    req = pb.AllocateRequest(
        container_requests=[
            pb.ContainerAllocateRequest(devices_ids=["0-1", "0-2"]),
            pb.ContainerAllocateRequest(devices_ids=["1-0"]),
        ]
    )
    resp = EmptyAllocator().allocate(m[ResourceKind.MEMORY], req)
    assert len(resp.container_responses) == 2
    assert all(r == pb.ContainerAllocateResponse() for r in resp.container_responses)
    number = m[ResourceKind.NUMBER]
    u0, u1 = gpus[0].uuid, gpus[1].uuid
    pref = UnavailableAllocator().preferred_allocation(
        number,
        pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=[f"{u1}-0", f"{u0}-2", f"{u0}-1"],
                    must_include_deviceIDs=[f"{u1}-0"],
                    allocation_size=2,
                )
            ]
        ),
    )
    assert list(pref.container_responses[0].deviceIDs) == [f"{u1}-0", f"{u0}-1"]


def test_vgpu_number_allocate_is_refused_not_faked():
    gpus = [make_gpu(0, 100)]
    number = managers(make_cfg(), gpus, GpuHealth([gpus[0].uuid]))[ResourceKind.NUMBER]
    with pytest.raises(AllocationError) as err:
        UnavailableAllocator().allocate(
            number,
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[f"{gpus[0].uuid}-0"])]),
        )
    assert err.value.code is grpc.StatusCode.UNIMPLEMENTED
    assert "volcano.sh/vgpu-number" in str(err.value) and "Volcano" in str(err.value)
