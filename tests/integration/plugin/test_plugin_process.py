"""Done-when of the device-plugin issue, against the real `vgpu plugin` process.

Real gRPC over unix sockets, the fake NVML (vgpu/sim/nvml/fakenvml.py) and the fake kubelet
(vgpu/sim/kubelet/device_manager.py).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from vgpu.sim.nvml import fakenvml

from .conftest import NAMES, SOCKETS

A100 = 81920
A10 = 24576


def _by_gpu(client, uuid_or_minor_prefixes):
    return [h for i, h in client.devices if i.startswith(uuid_or_minor_prefixes)]


def test_registers_three_resources_with_names_endpoints_and_options(kubelet, two_gpus, plugin_factory):
    plugin_factory(two_gpus)
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    regs = {r.resource_name: r for r in kubelet.registrations}
    assert set(regs) == set(NAMES)
    for name, sock in zip(NAMES, SOCKETS, strict=True):
        r = regs[name]
        assert (r.version, r.endpoint, r.accepted) == ("v1beta1", sock, True)
        assert r.get_preferred_allocation_available is (name == NAMES[0])
        assert r.pre_start_required is False
        assert clients[name].options.get_preferred_allocation_available is (name == NAMES[0])
    assert {f for f in os.listdir(kubelet.socket_dir) if f.startswith("nvidia-")} == set(SOCKETS)


@pytest.mark.parametrize("factor", [1, 10])
def test_device_counts_for_a100_and_24gib_gpu(kubelet, two_gpus, plugin_factory, factor):
    plugin_factory(two_gpus, device_config=f"nvidia:\n  deviceSplitCount: 10\n  gpuMemoryFactor: {factor}\n")
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    uuids = [d["uuid"] for d in two_gpus.config["devices"]]
    number, memory, cores = (clients[n] for n in NAMES)
    assert [i for i, _ in number.devices] == [f"{u}-{i}" for u in uuids for i in range(10)]
    assert len(memory.devices) == A100 // factor + A10 // factor
    assert len(_by_gpu(memory, "0-")) == A100 // factor and len(_by_gpu(memory, "1-")) == A10 // factor
    assert memory.devices[-1][0] == f"1-{A10 // factor - 1}"
    assert [i for i, _ in cores.devices] == [f"{u}-core-{i}" for u in uuids for i in range(100)]
    assert all(c.allocatable() == len(c.devices) for c in (number, memory, cores))


def test_size_check_refuses_8_h200_at_factor_1_naming_factor_6(tmp_path, socket_dir, plugin_factory):
    nvml = fakenvml.FakeNvml.create(
        tmp_path / "nvml",
        [fakenvml.device(i, name="NVIDIA H200", memory_total_mib=143771, compute_capability=[9, 0]) for i in range(8)],
    )
    p = plugin_factory(nvml, device_config="nvidia:\n  gpuMemoryFactor: 1\n")
    assert p.wait_exit(60) == 1
    assert (
        "vgpu-memory ListAndWatch would be 25564984 bytes (limit 4194304); set gpuMemoryFactor to at least 6"
    ) in p.log()
    assert not any(f.startswith("nvidia-") for f in os.listdir(socket_dir))


def _healthy_everywhere(clients) -> bool:
    return all(h == "Healthy" for c in clients.values() for _, h in c.devices)


def test_xid_79_marks_exactly_that_gpu_unhealthy_in_all_three_streams_within_1s(kubelet, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus)
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks running for 2 GPU(s)", 10)
    uuid0 = two_gpus.config["devices"][0]["uuid"]
    before = {n: c.updates for n, c in clients.items()}
    t0 = time.monotonic()
    two_gpus.add_xid(0, 79)
    for n, c in clients.items():
        assert c.wait_until(
            lambda c, n=n: c.updates > before[n] and any(h == "Unhealthy" for _, h in c.devices), 1.0
        ), f"{n} did not turn GPU 0 unhealthy within 1 s"
    elapsed = time.monotonic() - t0
    for n, c in clients.items():
        mine = (uuid0, "0-")
        assert all(h == "Unhealthy" for i, h in c.devices if i.startswith(mine)), n
        assert all(h == "Healthy" for i, h in c.devices if not i.startswith(mine)), n
        assert c.updates == before[n] + 1  # one update flips all of the GPU's devices
    assert "Xid=79" in p.log()
    print(f"XID 79 -> all three streams updated in {elapsed * 1000:.0f} ms")


def test_ignored_xid_13_changes_nothing(kubelet, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus)
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks running for 2 GPU(s)", 10)
    before = {n: c.updates for n, c in clients.items()}
    two_gpus.add_xid(1, 13)
    assert p.wait_for_log("Skipping event: Xid=13", 2.0)  # the event arrived and was ignored
    assert {n: c.updates for n, c in clients.items()} == before
    assert _healthy_everywhere(clients)


def test_health_checks_disabled_ignore_xid_79(kubelet, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus, env={"DP_DISABLE_HEALTHCHECKS": "all"})
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks disabled", 10)
    before = {n: c.updates for n, c in clients.items()}
    two_gpus.add_xid(0, 79)
    # Nothing watches events, so there is nothing to wait for: observe past the 1 s SLA window.
    time.sleep(1.5)
    assert {n: c.updates for n, c in clients.items()} == before
    assert _healthy_everywhere(clients)


def test_twenty_kubelet_restarts_each_reregistered_within_2s(kubelet, two_gpus, plugin_factory):
    plugin_factory(two_gpus)
    kubelet.wait_for_plugins(NAMES, timeout=30)
    worst = 0.0
    for n in range(20):
        t0 = time.monotonic()
        kubelet.restart()  # stop, delete every socket but the checkpoint, new kubelet.sock
        clients = kubelet.wait_for_plugins(NAMES, timeout=2.0, since=t0)
        worst = max(worst, time.monotonic() - t0)
        assert all(c.allocatable() > 0 for c in clients.values()), f"restart {n}"
    print(f"20 kubelet restarts: slowest re-registration {worst * 1000:.0f} ms")


def test_losing_only_our_memory_socket_reregisters_all_three(kubelet, two_gpus, plugin_factory):
    """docs/failures.md K-3: our own socket disappearing is noticed, not only kubelet.sock."""
    plugin_factory(two_gpus)
    kubelet.wait_for_plugins(NAMES, timeout=30)
    t0 = time.monotonic()
    os.unlink(os.path.join(kubelet.socket_dir, "nvidia-vgpu-memory.sock"))
    clients = kubelet.wait_for_plugins(NAMES, timeout=2.0, since=t0)
    assert all(c.allocatable() > 0 for c in clients.values())


def test_sigterm_removes_sockets_and_exits_0(kubelet, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus)
    kubelet.wait_for_plugins(NAMES, timeout=30)
    p.proc.send_signal(signal.SIGTERM)
    assert p.wait_exit(10) == 0
    assert sorted(os.listdir(kubelet.socket_dir)) == ["kubelet.sock"]


def test_missing_node_name_and_invalid_config_exit_2(two_gpus, plugin_factory):
    p = plugin_factory(two_gpus, node_name="")
    assert p.wait_exit(30) == 2
    assert "node name is required" in p.log()
    p = plugin_factory(two_gpus, device_config="nvidia:\n  gpuMemoryFactor: 0\n")
    assert p.wait_exit(30) == 2
    assert "invalid configuration in" in p.log() and "gpuMemoryFactor" in p.log()
