"""Wire encoding and exact size of ListAndWatchResponse payloads.

A ListAndWatchResponse is just its repeated ``devices`` field (number 1), so the message is
the concatenation of one encoded entry per device, and the entries of one GPU form a
contiguous block.  We encode each GPU's block once per health state and re-send a health
change by joining cached blocks: the message is never rebuilt from Device objects, which
for 8 × H200 at factor 4 means ~290,000 protobuf objects per send (see
benchmarks/test_listandwatch.py).  The bytes are identical to protobuf's serialisation
(tests/unit/plugin/test_listwatch.py checks that against the generated message classes).

Wire format per entry (docs/kubelet-api.md §7.1):
``0x0a len(device) | 0x0a len(ID) ID | 0x12 len(health) health [| 0x1a len(topology) topology]``,
where ``topology`` (docs/kubelet-api.md §7.4) names the GPU's NUMA node and is left out when the
node is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable

from vgpu.plugin.api import HEALTHY, MAX_DEVICE_ID_LENGTH, UNHEALTHY
from vgpu.plugin.devices import IdBlock

_HEALTH_FIELD = {True: b"\x12\x07" + HEALTHY.encode(), False: b"\x12\x09" + UNHEALTHY.encode()}


def varint_len(value: int) -> int:
    """Bytes of the protobuf varint encoding of a non-negative ``value``."""
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


def topology_field(numa_node: int | None) -> bytes:
    """Device field 3 (TopologyInfo with one NUMANode), or b"" when the node is unknown.

    docs/kubelet-api.md §7.4: proto3 leaves a zero ``NUMANode.ID`` out, so node 0 is the
    empty NUMANode message ``0x0a 0x00``; the bytes equal protobuf's serialisation.
    """
    if numa_node is None:
        return b""
    if numa_node < 0:
        raise ValueError(f"NUMA node {numa_node} is negative")
    node = b"" if numa_node == 0 else b"\x08" + _varint(numa_node)
    nodes = b"\x0a" + _varint(len(node)) + node
    return b"\x1a" + _varint(len(nodes)) + nodes


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def entry_size(id_len: int, healthy: bool, numa_node: int | None = None) -> int:
    """Encoded bytes of one device entry inside ListAndWatchResponse (docs/kubelet-api.md §7.1)."""
    h = len(HEALTHY) if healthy else len(UNHEALTHY)
    device_msg = 1 + varint_len(id_len) + id_len + 1 + 1 + h + len(topology_field(numa_node))
    return 1 + varint_len(device_msg) + device_msg


def block_size(prefix_len: int, count: int, healthy: bool, numa_node: int | None = None) -> int:
    """Exact encoded size of ``count`` entries ``prefix + str(i)`` without building them.

    Groups i by its number of decimal digits, so the cost is O(digits), not O(count):
    the startup size check evaluates millions of IDs per candidate factor this way.
    """
    total = 0
    lo, digits = 0, 1
    while lo < count:
        hi = min(count, 10**digits)
        total += (hi - lo) * entry_size(prefix_len + digits, healthy, numa_node)
        lo, digits = hi, digits + 1
    return total


def message_size(blocks: Iterable[IdBlock], healthy: bool = False) -> int:
    """Exact ListAndWatchResponse size for these blocks, all devices with one health."""
    return sum(block_size(len(b.prefix.encode()), b.count, healthy, b.numa_node) for b in blocks)


def encode_ids(ids: Iterable[str], healthy: bool, numa_node: int | None = None) -> bytes:
    """Encoded entries for ``ids``, all with the same health and NUMA node.

    IDs are at most 63 bytes (docs/kubelet-api.md §2) and the topology field at most 15, so every
    length fits in one varint byte and the entry can be written with fixed-size headers.
    """
    tail = _HEALTH_FIELD[healthy] + topology_field(numa_node)
    extra = 2 + len(tail)
    out = []
    for raw in map(str.encode, ids):
        if len(raw) > MAX_DEVICE_ID_LENGTH:
            raise ValueError(f"device ID {raw.decode()!r} is longer than {MAX_DEVICE_ID_LENGTH} bytes")
        out.append(b"\n%c\n%c%s%s" % (len(raw) + extra, len(raw), raw, tail))
    return b"".join(out)


class EncodedBlock:
    """One GPU's ID block, encoded lazily once per health state."""

    __slots__ = ("block", "_cache")

    def __init__(self, block: IdBlock) -> None:
        self.block = block
        self._cache: dict[bool, bytes] = {}

    def encoded(self, healthy: bool) -> bytes:
        data = self._cache.get(healthy)
        if data is None:
            data = self._cache[healthy] = encode_ids(self.block.ids(), healthy, self.block.numa_node)
        return data
