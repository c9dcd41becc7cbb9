"""The committed generated code must be what `make proto` produces from the .proto today."""

from __future__ import annotations

import pathlib

from grpc_tools import protoc

from vgpu.plugin.api import pb

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROTO = "vgpu/plugin/api/deviceplugin.proto"
GENERATED = ("vgpu/plugin/api/deviceplugin_pb2.py", "vgpu/plugin/api/deviceplugin_pb2_grpc.py")


def test_generated_code_is_not_stale(tmp_path):
    # Same command line as the Makefile's `proto` target, into a temp dir.
    rc = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{ROOT}",
            f"--python_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            str(ROOT / PROTO),
        ]
    )
    assert rc == 0
    for rel in GENERATED:
        fresh = (tmp_path / rel).read_text()
        committed = (ROOT / rel).read_text()
        assert committed == fresh, f"{rel} is stale: run `make proto` and commit the result"


def test_wire_names_and_field_numbers_match_the_spec():
    """A few anchors of docs/kubelet-api.md §1–§2 (the wire contract)."""
    svc = pb.DESCRIPTOR.services_by_name
    assert svc["Registration"].full_name == "v1beta1.Registration"
    assert [m.name for m in svc["DevicePlugin"].methods] == [
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    ]
    law = svc["DevicePlugin"].methods_by_name["ListAndWatch"]
    assert law.server_streaming and not law.client_streaming
    fields = {
        (m, f.name): f.number
        for m in (
            "RegisterRequest",
            "Device",
            "ContainerAllocateResponse",
            "ContainerPreferredAllocationRequest",
            "DevicePluginOptions",
        )
        for f in pb.DESCRIPTOR.message_types_by_name[m].fields
    }
    assert fields[("RegisterRequest", "options")] == 4
    assert fields[("Device", "ID")] == 1 and fields[("Device", "health")] == 2 and fields[("Device", "topology")] == 3
    assert fields[("ContainerAllocateResponse", "cdi_devices")] == 5
    assert fields[("ContainerPreferredAllocationRequest", "allocation_size")] == 3
    assert fields[("DevicePluginOptions", "get_preferred_allocation_available")] == 2
