"""NUMA topology in ListAndWatch and its effect on GetPreferredAllocation, against the real `vgpu plugin`.

The fake NVML reports each GPU's NUMA node through nvmlDeviceGetNumaNodeId (the call discovery
makes); one GPU reports none (NOT_SUPPORTED) and has a PCI address no sysfs holds, so it has no
topology.  docs/kubelet-api.md §7.4.
"""

from __future__ import annotations

import os

import grpc

from vgpu.plugin.api import pb, pb_grpc
from vgpu.sim.nvml import fakenvml

from .conftest import NAMES, SOCKETS

NUMA = [0, 0, 1, None]


def _gpus(tmp_path):
    devices = [fakenvml.device(i, numa_node=n, pci_bus_id=f"0000FFFF:{0x10 + i:02X}:00.0") for i, n in enumerate(NUMA)]
    return fakenvml.FakeNvml.create(tmp_path / "nvml", devices)


def _first_listandwatch(socket_dir: str, socket: str) -> pb.ListAndWatchResponse:
    with grpc.insecure_channel(
        f"unix:{os.path.join(socket_dir, socket)}", options=[("grpc.max_receive_message_length", 4 << 20)]
    ) as channel:
        stream = pb_grpc.DevicePluginStub(channel).ListAndWatch(pb.Empty(), timeout=10)
        msg = next(iter(stream))
        stream.cancel()
        return msg


def test_number_and_cores_devices_carry_their_gpus_numa_node(tmp_path, kubelet, socket_dir, plugin_factory):
    nvml = _gpus(tmp_path)
    plugin_factory(nvml, device_config="nvidia:\n  deviceSplitCount: 3\n  gpuMemoryFactor: 1024\n")
    kubelet.wait_for_plugins(NAMES, timeout=30)
    uuids = [d["uuid"] for d in nvml.config["devices"]]
    for socket in SOCKETS:
        msg = _first_listandwatch(socket_dir, socket)
        assert msg.devices, socket
        for d in msg.devices:
            gpu = next(i for i, u in enumerate(uuids) if d.ID.startswith((f"{u}-", f"{i}-")))
            want = None if socket == SOCKETS[1] else NUMA[gpu]  # vgpu-memory: none (docs/kubelet-api.md §7.4)
            if want is None:
                assert not d.HasField("topology"), (socket, d.ID)
            else:
                assert [n.ID for n in d.topology.nodes] == [want], (socket, d.ID)


def test_preferred_allocation_keeps_an_open_choice_on_one_numa_node(tmp_path, kubelet, plugin_factory):
    nvml = _gpus(tmp_path)
    plugin_factory(nvml, device_config="nvidia:\n  deviceSplitCount: 3\n  gpuMemoryFactor: 1024\n")
    number = kubelet.wait_for_plugins(NAMES, timeout=30)[NAMES[0]]
    u = [d["uuid"] for d in nvml.config["devices"]]
    # One ID left on GPU 0 (node 0), three on GPU 2 (node 1): plain (minor, i) order would cross nodes.
    available = [f"{u[0]}-2", f"{u[2]}-0", f"{u[2]}-1", f"{u[2]}-2", f"{u[3]}-0"]
    assert number.get_preferred_allocation(available, [], 2) == [f"{u[2]}-0", f"{u[2]}-1"]
    # An ID the kubelet must include decides the node: the rest comes from node 0 (GPU 1), not GPU 2.
    available = [f"{u[0]}-2", f"{u[1]}-1", f"{u[2]}-0"]
    assert number.get_preferred_allocation(available, [f"{u[0]}-2"], 2) == [f"{u[0]}-2", f"{u[1]}-1"]
    # No node holds the request: plain order.
    available = [f"{u[0]}-0", f"{u[2]}-0", f"{u[3]}-0"]
    assert number.get_preferred_allocation(available, [], 3) == available
