"""Servers, registration loop and fake kubelet together in one process (real gRPC, unix sockets).

The done-when scenarios run against the real `vgpu plugin` process in
tests/integration/plugin/; these cover the pieces' contracts with synthetic GPUs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest

from vgpu.nvml.health import GpuHealth
from vgpu.plugin.api import pb
from vgpu.plugin.daemon import build_managers, default_allocators
from vgpu.plugin.devices import ResourceKind
from vgpu.plugin.registration import Backoff, PluginSet
from vgpu.plugin.responses import EmptyAllocator
from vgpu.sim.kubelet import FakeKubelet

from .dp_helpers import make_cfg, make_gpu

NAMES = ("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")


@contextmanager
def running(plugins: PluginSet) -> Iterator[threading.Event]:
    stop = threading.Event()
    t = threading.Thread(target=plugins.run, args=(stop,), daemon=True)
    t.start()
    try:
        yield stop
    finally:
        stop.set()
        t.join(10)
        assert not t.is_alive()


def wait_until(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


@pytest.fixture
def two_gpus():
    gpus = [make_gpu(0, 1000), make_gpu(1, 500)]
    return gpus, GpuHealth(g.uuid for g in gpus)


def plugin_set(socket_dir, gpus, health, cfg=None, **kw) -> PluginSet:
    ps = PluginSet(
        os.path.join(socket_dir, "kubelet.sock"),
        build_managers(cfg or make_cfg(split=4), gpus, health),
        default_allocators(),
        **kw,
    )
    health.subscribe(lambda changed: [m.refresh(changed) for m in ps.managers])
    return ps


def test_register_list_and_call_every_rpc(socket_dir, two_gpus):
    gpus, health = two_gpus
    with FakeKubelet(socket_dir) as kubelet, running(plugin_set(socket_dir, gpus, health)):
        clients = kubelet.wait_for_plugins(NAMES, timeout=10)
        regs = {r.resource_name: r for r in kubelet.registrations}
        assert {
            n: (
                regs[n].version,
                regs[n].endpoint,
                regs[n].get_preferred_allocation_available,
                regs[n].pre_start_required,
            )
            for n in NAMES
        } == {
            NAMES[0]: ("v1beta1", "nvidia-vgpu-number.sock", True, False),
            NAMES[1]: ("v1beta1", "nvidia-vgpu-memory.sock", False, False),
            NAMES[2]: ("v1beta1", "nvidia-vgpu-cores.sock", False, False),
        }
        assert clients[NAMES[0]].allocatable() == 8
        assert clients[NAMES[1]].allocatable() == 1500
        assert clients[NAMES[2]].allocatable() == 200
        mem = clients[NAMES[1]].allocate([["0-1", "0-2"]])
        assert list(mem.container_responses) == [pb.ContainerAllocateResponse()]
        assert list(clients[NAMES[2]].allocate([[f"{gpus[0].uuid}-core-0"]]).container_responses) == [
            pb.ContainerAllocateResponse()
        ]
        with pytest.raises(grpc.RpcError) as err:
            clients[NAMES[0]].allocate([[f"{gpus[0].uuid}-0"]])
        assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED
        avail = [f"{gpus[1].uuid}-0", f"{gpus[0].uuid}-3", f"{gpus[0].uuid}-1"]
        assert clients[NAMES[0]].get_preferred_allocation(avail, [], 2) == [f"{gpus[0].uuid}-1", f"{gpus[0].uuid}-3"]
        assert clients[NAMES[0]].pre_start_container([f"{gpus[0].uuid}-1"]) == pb.PreStartContainerResponse()


def test_health_change_reaches_all_three_streams_in_one_update(socket_dir, two_gpus):
    gpus, health = two_gpus
    with FakeKubelet(socket_dir) as kubelet, running(plugin_set(socket_dir, gpus, health)):
        clients = kubelet.wait_for_plugins(NAMES, timeout=10)
        before = {n: c.updates for n, c in clients.items()}
        health.mark_unhealthy(gpus[0].uuid, "Xid 79")
        for n, c in clients.items():
            assert c.wait_for_update(before[n], 1.0), n
            assert c.updates == before[n] + 1
            bad = {i for i, h in c.devices if h == "Unhealthy"}
            assert bad and all((gpus[0].uuid in i) or i.startswith("0-") for i in bad)
            assert all(h == "Healthy" for i, h in c.devices if i not in bad)
        assert clients[NAMES[1]].allocatable() == 500


def test_kubelet_restart_and_lost_socket_trigger_reregistration(socket_dir, two_gpus):
    gpus, health = two_gpus
    health.mark_unhealthy(gpus[1].uuid, "before the restart")
    with FakeKubelet(socket_dir) as kubelet, running(plugin_set(socket_dir, gpus, health)):
        kubelet.wait_for_plugins(NAMES, timeout=10)
        for _ in range(3):
            t0 = time.monotonic()
            kubelet.restart()
            clients = kubelet.wait_for_plugins(NAMES, timeout=2.0, since=t0)
            # health survives re-registration: the first list after it already says Unhealthy
            assert clients[NAMES[1]].allocatable() == 1000
        t0 = time.monotonic()
        os.unlink(os.path.join(socket_dir, "nvidia-vgpu-memory.sock"))
        kubelet.wait_for_plugins(NAMES, timeout=2.0, since=t0)


def test_absent_kubelet_is_retried_with_backoff_then_registered_at_once(socket_dir, two_gpus):
    gpus, health = two_gpus
    ps = plugin_set(socket_dir, gpus, health, backoff=Backoff(first=0.5, cap=30))
    with running(ps):
        assert wait_until(lambda: ps.backoff.upcoming >= 4, 5)  # 0.5, 1, 2 s delays have passed or are pending
        assert not ps.registered
        assert not os.path.exists(os.path.join(socket_dir, "nvidia-vgpu-number.sock"))  # servers stopped
        t0 = time.monotonic()
        with FakeKubelet(socket_dir) as kubelet:
            kubelet.wait_for_plugins(NAMES, timeout=2.0)  # new kubelet.sock: tried at once, not after 4 s
            assert time.monotonic() - t0 < 2.0


def test_refused_registration_is_retried_without_busy_looping(socket_dir, two_gpus):
    gpus, health = two_gpus
    refuse = threading.Event()
    refuse.set()
    kubelet = FakeKubelet(socket_dir, refuse=lambda req: "not today" if refuse.is_set() else None)
    with kubelet, running(plugin_set(socket_dir, gpus, health)):
        assert wait_until(lambda: len(kubelet.registrations) >= 3, 5)
        time.sleep(1.0)  # observe the retry rate over a window
        refused = [r for r in kubelet.registrations if not r.accepted]
        assert len(refused) <= 4  # 0 s, 0.5 s, 1.5 s (+3.5 s): exponential, not a loop
        refuse.clear()
        kubelet.wait_for_plugins(NAMES, timeout=8)


def test_stop_removes_our_sockets(socket_dir, two_gpus):
    gpus, health = two_gpus
    with FakeKubelet(socket_dir) as kubelet:
        with running(plugin_set(socket_dir, gpus, health)):
            kubelet.wait_for_plugins(NAMES, timeout=10)
            assert {f for f in os.listdir(socket_dir) if f.startswith("nvidia-")} == {
                "nvidia-vgpu-number.sock",
                "nvidia-vgpu-memory.sock",
                "nvidia-vgpu-cores.sock",
            }
        assert sorted(os.listdir(socket_dir)) == ["kubelet.sock"]


def test_handler_errors_become_grpc_statuses(socket_dir, two_gpus):
    gpus, health = two_gpus

    class Broken(EmptyAllocator):
        def allocate(self, resource, request):
            raise KeyError("boom")

    ps = plugin_set(socket_dir, gpus, health)
    ps.allocators[ResourceKind.CORES] = Broken()
    with FakeKubelet(socket_dir) as kubelet, running(ps):
        clients = kubelet.wait_for_plugins(NAMES, timeout=10)
        with pytest.raises(grpc.RpcError) as err:
            clients[NAMES[2]].allocate([["x"]])
        assert err.value.code() is grpc.StatusCode.INTERNAL and "boom" in err.value.details()
        assert clients[NAMES[2]].allocate is not None and clients[NAMES[1]].allocate([["0-0"]])  # still serving


def test_the_4mib_limit_is_real_and_factor_6_fits_for_8_h200(socket_dir):
    """docs/failures.md K-1: at factor 6 the all-Unhealthy list of 8 × H200 passes the
    kubelet's default receive limit; at factor 5 (which the size check rejects) it does not."""
    gpus = [make_gpu(i, 143771, "NVIDIA H200") for i in range(8)]
    for factor, fits in ((6, True), (5, False)):
        health = GpuHealth(g.uuid for g in gpus)
        health.mark_all_unhealthy([g.uuid for g in gpus], "worst case")
        ps = plugin_set(socket_dir, gpus, health, cfg=make_cfg(factor=factor))
        with FakeKubelet(socket_dir) as kubelet, running(ps):
            if fits:
                clients = kubelet.wait_for_plugins(NAMES, timeout=20)
                assert len(clients[NAMES[1]].devices) == 8 * (143771 // 6)
                assert len(ps.managers[1].snapshot()[1]) <= 4_194_304
            else:
                assert wait_until(lambda: (c := kubelet.plugin(NAMES[1])) is not None and c.stream_error, 20)
                assert "RESOURCE_EXHAUSTED" in kubelet.plugin(NAMES[1]).stream_error


def test_reload_with_the_same_resources_updates_lists_in_place(socket_dir, two_gpus):
    """A reload that keeps names and sockets pushes the new lists over the open streams: no
    re-registration, so the kubelet never sees the resources disconnect (it would mark every device
    unhealthy and refuse pods admitted in that window)."""
    gpus, health = two_gpus
    ps = plugin_set(socket_dir, gpus, health)
    with FakeKubelet(socket_dir) as kubelet, running(ps):
        clients = kubelet.wait_for_plugins(NAMES, timeout=10)
        t0 = time.monotonic()
        ps.replace(build_managers(make_cfg(split=2, factor=10), gpus, health))
        assert clients[NAMES[0]].wait_until(lambda c: c.allocatable() == 4, 2.0)
        assert clients[NAMES[1]].wait_until(lambda c: c.allocatable() == 100 + 50, 2.0)
        assert [r for r in kubelet.registrations if r.at >= t0] == []
        assert all(kubelet.plugin(n) is clients[n] and clients[n].stream_error is None for n in NAMES)


def test_reload_that_renames_a_resource_re_registers(socket_dir, two_gpus):
    gpus, health = two_gpus
    ps = plugin_set(socket_dir, gpus, health)
    with FakeKubelet(socket_dir) as kubelet, running(ps):
        kubelet.wait_for_plugins(NAMES, timeout=10)
        t0 = time.monotonic()
        renamed = ("example.com/vgpu-number",) + NAMES[1:]
        ps.replace(build_managers(make_cfg(split=4, resource_count_name=renamed[0]), gpus, health))
        clients = kubelet.wait_for_plugins(renamed, timeout=5, since=t0)
        assert clients[renamed[0]].allocatable() == 8
