"""Property-based fuzzing of the region decoder: native and reference agree, or both refuse.

Hypothesis builds region files from a real HAMi-core file or a writer-made one of each layout,
overwrites fields at the offsets that matter (magic, versions, counts, uuids, slot liveness,
seqlocks, counters) or anywhere, and sometimes changes the size.  For every file the native reader
(``vgpu.hamicore.region``) and the independent pure-Python decoder
(``vgpu.sim.hamicore.reference``) must either decode it to the same values or refuse it with the
same error code; nothing but ``RegionError`` may escape.  Derandomized, so CI runs the same
examples every time; a failure is shrunk to a minimal file change.
"""

from __future__ import annotations

import pathlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.hamicore import scenario
from tests.unit.hamicore.scenario import assert_same
from vgpu.hamicore import layouts
from vgpu.hamicore.region import RegionError, read_region
from vgpu.sim.hamicore import reference

KNOWN_SIZES = sorted(layouts.FILE_SIZES)
SETTINGS = settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, bytes]]:
    d = tmp_path_factory.mktemp("prop-bases")
    out = [(v, scenario.standard_region(d / f"{v}.cache", v).read_bytes()) for v in scenario.VARIANTS]
    out += [(name, path.read_bytes()) for name, path in scenario.fixture_paths(d).items()]
    return out


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("prop") / "r.cache"


def _fields(spec: layouts.LayoutSpec) -> st.SearchStrategy[tuple[int, int]]:
    """(offset, size) of a field worth changing in a file of this layout."""
    slot = st.integers(0, 5)  # the writer-made files use slots 0-4; 5 is the first one past proc_num
    dev = st.integers(0, 15)
    choices = [
        st.just((0, 4)),
        st.just((spec.off_sm_init_flag, 4)),
        st.just((spec.off_device_num, 8)),
        st.just((spec.off_proc_num, 4)),
        st.just((spec.off_utilization_switch, 4)),
        st.just((spec.off_recent_kernel, 4)),
        st.just((spec.off_priority, 4)),
        st.tuples(dev, st.integers(0, 95)).map(lambda t: (spec.off_uuids + 96 * t[0] + t[1], 1)),
        dev.map(lambda d: (spec.off_limit + 8 * d, 8)),
        slot.map(lambda i: (spec.slot(i), 4)),
        slot.map(lambda i: (spec.slot(i) + spec.slot_status, 4)),
        st.tuples(slot, dev, st.integers(0, 4)).map(lambda t: (spec.used(t[0], t[1]) + 8 * t[2], 8)),
        st.tuples(slot, dev).map(lambda t: (spec.monitorused(t[0], t[1]), 8)),
        st.tuples(st.integers(0, spec.struct_size), st.integers(1, 64)),
    ]
    if spec.has_version:
        choices += [st.just((4, 4)), st.just((8, 4))]
    if spec.slot_seqlock is not None:
        seq = spec.slot_seqlock
        choices += [slot.map(lambda i: (spec.slot(i) + seq, 8))] * 3  # the seqlock rules differ by layout
    if spec.slot_util is not None:
        choices.append(st.tuples(slot, dev).map(lambda t: (spec.sm_util(t[0], t[1]), 8)))
    return st.one_of(choices)


def _value(size: int) -> st.SearchStrategy[bytes]:
    special = {
        4: [0, 1, 2, 3, 16, 17, 1024, 1025, 0x7FFFFFFF, 0xFFFFFFFF, layouts.MAGIC],
        8: [0, 1, 2, 3, 5, 16, 17, 2**63, 2**63 + 1, 2**64 - 1],
    }
    if size in special:
        fmt = "<I" if size == 4 else "<Q"
        return st.one_of(
            st.sampled_from(special[size]).map(lambda v: struct.pack(fmt, v)),
            st.binary(min_size=size, max_size=size),
        )
    return st.binary(min_size=size, max_size=size)


@st.composite
def region_images(draw: st.DrawFn, bases: list[tuple[str, bytes]]) -> tuple[str, bytes]:
    name, base = draw(st.sampled_from(bases))
    spec = layouts.spec_for_size(len(base))
    assert spec is not None
    data = bytearray(base)
    for off, size in draw(st.lists(_fields(spec), min_size=1, max_size=6)):
        val = draw(_value(size))[: max(0, len(data) - off)]
        data[off : off + len(val)] = val
    if draw(st.integers(0, 9)) == 0:  # another size: a known one (another layout) or any
        size = draw(st.one_of(st.sampled_from(KNOWN_SIZES), st.integers(0, 2_100_000)))
        data = data[:size] if size <= len(data) else data + bytes(size - len(data))
    return name, bytes(data)


@given(data=st.data())
@SETTINGS
def test_native_and_reference_agree_or_both_refuse(bases, target, data):
    name, image = data.draw(region_images(bases), label="image")
    target.write_bytes(image)
    ref = reference.decode(image) if len(image) in layouts.FILE_SIZES else {"error": "SIZE"}
    try:
        snap = read_region(target)
    except RegionError as exc:
        assert exc.code.name == ref["error"], (name, str(exc), ref["error"])
        return
    assert ref["error"] is None, (name, ref["error"], snap)
    assert_same(snap, ref)


@given(data=st.data())
@settings(SETTINGS, max_examples=150)
def test_seqlock_words_are_honoured_alike(bases, target, data):
    # Every example writes seqlock words (odd = a write in progress) into some slots: the layouts
    # differ in where the word is and whether it counts (v1.1: unused; v1.2 and interim: seqlock).
    name, base = data.draw(st.sampled_from([b for b in bases if layouts.spec_for_size(len(b[1])).slot_seqlock]))
    spec = layouts.spec_for_size(len(base))
    assert spec is not None and spec.slot_seqlock is not None
    image = bytearray(base)
    words = data.draw(st.dictionaries(st.integers(0, 5), st.integers(0, 2**64 - 1), min_size=1, max_size=6))
    for i, word in words.items():
        struct.pack_into("<Q", image, spec.slot(i) + spec.slot_seqlock, word)
    target.write_bytes(image)
    snap = read_region(target)
    assert_same(snap, reference.decode(bytes(image)))
