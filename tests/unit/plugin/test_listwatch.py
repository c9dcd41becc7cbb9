"""Pre-encoded ListAndWatch payloads are byte-identical to protobuf's serialisation."""

from __future__ import annotations

import pytest

from vgpu.plugin.api import pb
from vgpu.plugin.devices import IdBlock
from vgpu.plugin.listwatch import (
    EncodedBlock,
    block_size,
    encode_ids,
    entry_size,
    message_size,
    topology_field,
    varint_len,
)


def _proto(ids, health):
    return pb.ListAndWatchResponse(devices=[pb.Device(ID=i, health=health) for i in ids]).SerializeToString()


@pytest.mark.parametrize(
    "prefix,count",
    [
        ("0-", 1),
        ("7-", 12345),
        ("GPU-8664316c-6888-5063-1e4d-f2a09cfbf180-", 10),
        ("GPU-8664316c-6888-5063-1e4d-f2a09cfbf180-core-", 150),
    ],
)
@pytest.mark.parametrize("healthy", [True, False])
def test_encoding_matches_protobuf_and_exact_size(prefix, count, healthy):
    block = IdBlock("GPU-x", prefix, count)
    data = encode_ids(block.ids(), healthy)
    assert data == _proto(block.ids(), "Healthy" if healthy else "Unhealthy")
    assert block_size(len(prefix), count, healthy) == len(data)
    assert message_size([block], healthy) == len(data)


def test_blocks_concatenate_into_one_message_with_mixed_health():
    a, b = IdBlock("A", "0-", 30), IdBlock("B", "1-", 25)
    payload = EncodedBlock(a).encoded(True) + EncodedBlock(b).encoded(False)
    msg = pb.ListAndWatchResponse.FromString(payload)
    assert [(d.ID, d.health) for d in msg.devices] == [(i, "Healthy") for i in a.ids()] + [
        (i, "Unhealthy") for i in b.ids()
    ]


def test_entry_size_equals_protobuf_for_short_and_long_ids():
    # docs/kubelet-api.md §7.1: L + 13 (Healthy) / L + 15 (Unhealthy) bytes for L <= 63.
    for length in (1, 40, 63, 200):
        for healthy, text in ((True, "Healthy"), (False, "Unhealthy")):
            real = pb.ListAndWatchResponse(devices=[pb.Device(ID="x" * length, health=text)]).ByteSize()
            assert entry_size(length, healthy) == real
    assert entry_size(40, True) == 53 and entry_size(40, False) == 55
    assert varint_len(127) == 1 and varint_len(128) == 2 and varint_len(2**21) == 4


def test_ids_longer_than_63_bytes_are_refused():
    with pytest.raises(ValueError, match="longer than 63"):
        encode_ids(["x" * 64], True)


def test_encoded_block_is_cached_per_health_state():
    blk = EncodedBlock(IdBlock("A", "0-", 100))
    assert blk.encoded(True) is blk.encoded(True)
    assert blk.encoded(False) is not blk.encoded(True)


def _proto_numa(ids, health, numa):
    topo = pb.TopologyInfo(nodes=[pb.NUMANode(ID=numa)])
    return pb.ListAndWatchResponse(
        devices=[pb.Device(ID=i, health=health, topology=topo) for i in ids]
    ).SerializeToString()


@pytest.mark.parametrize("numa", [0, 1, 127, 128, 1023, 2**40])
@pytest.mark.parametrize("healthy", [True, False])
def test_topology_encoding_matches_protobuf_and_exact_size(numa, healthy):
    block = IdBlock("GPU-x", "GPU-8664316c-6888-5063-1e4d-f2a09cfbf180-", 150, numa)
    data = EncodedBlock(block).encoded(healthy)
    assert data == _proto_numa(block.ids(), "Healthy" if healthy else "Unhealthy", numa)
    assert message_size([block], healthy) == len(data)
    assert [d.topology.nodes[0].ID for d in pb.ListAndWatchResponse.FromString(data).devices] == [numa] * 150


def test_unknown_numa_node_leaves_topology_unset():
    data = EncodedBlock(IdBlock("A", "0-", 3, None)).encoded(True)
    assert all(not d.HasField("topology") for d in pb.ListAndWatchResponse.FromString(data).devices)
    assert topology_field(None) == b""
    with pytest.raises(ValueError, match="negative"):
        topology_field(-1)
