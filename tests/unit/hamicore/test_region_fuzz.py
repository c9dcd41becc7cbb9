"""Fuzzing the region reader: more than 10,000 hostile files.

Every case mutates a real region file on disk (and an in-memory mirror of it), reads it through
the public API and checks that (1) nothing but RegionError escapes, (2) an error carries the
precise code the independent pure-Python decoder predicts for the same bytes, with the path in
its message, and (3) anything that decodes agrees value for value with that decoder.  Good files
are re-read between batches and must still decode to their exact values.  Seeds are fixed, so
a failure reproduces.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.unit.hamicore import scenario
from tests.unit.hamicore.scenario import assert_same
from vgpu.hamicore import layouts
from vgpu.hamicore.layouts import MAGIC
from vgpu.hamicore.region import Region, RegionError, RegionErrorCode, RegionSnapshot, read_region
from vgpu.sim.hamicore import reference

N_FIELDS = 5000
N_RESIZE = 1500
N_MAGIC = 1000
N_COUNTS = 1000
N_KINDS = 1000
N_BETWEEN_READS = 600
N_GARBAGE = 500
assert N_FIELDS + N_RESIZE + N_MAGIC + N_COUNTS + N_KINDS + N_BETWEEN_READS + N_GARBAGE >= 10_000

SPECIAL_I32 = [0, 1, 2, -1, 4, 16, 17, 1023, 1024, 1025, 2**31 - 1, -(2**31)]
SPECIAL_U64 = [0, 1, 2, 15, 16, 17, 1024, 2**31, 2**32, 2**63, 2**64 - 1]
KNOWN_SIZES = [804_681, 1_197_897, 2_008_953, 2_008_985]


class Subject:
    """A region file plus a byte-exact in-memory mirror, so the reference decoder needs no I/O."""

    def __init__(self, path, data: bytes, label: str):
        self.path = path
        self.label = label
        self.original = bytes(data)
        self.mirror = bytearray(data)
        path.write_bytes(data)
        self.expected = reference.decode(self.original)
        assert self.expected["error"] is None

    def write(self, offset: int, data: bytes) -> None:
        data = data[: max(0, len(self.mirror) - offset)]
        if not data:
            return
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.pwrite(fd, data, offset)
        finally:
            os.close(fd)
        self.mirror[offset : offset + len(data)] = data

    def resize(self, size: int) -> None:
        os.truncate(self.path, size)
        if size <= len(self.mirror):
            del self.mirror[size:]
        else:
            self.mirror.extend(bytes(size - len(self.mirror)))

    def restore(self) -> None:
        """Undo every change: size first, then the bytes that differ."""
        if len(self.mirror) != len(self.original):
            old = len(self.mirror)
            self.resize(len(self.original))
            if old < len(self.original):
                self.write(old, self.original[old:])
        diff = [
            i for i in range(0, len(self.original), 4096) if self.mirror[i : i + 4096] != self.original[i : i + 4096]
        ]
        for i in diff:
            self.write(i, self.original[i : i + 4096])
        assert self.mirror == self.original


@pytest.fixture(scope="module")
def subjects(tmp_path_factory) -> list[Subject]:
    base = tmp_path_factory.mktemp("fuzz")
    out = []
    for variant in scenario.VARIANTS:
        path = scenario.standard_region(base / f"{variant}.src", variant)
        out.append(Subject(base / f"{variant}.cache", path.read_bytes(), variant))
    for name, path in scenario.fixture_paths(base).items():
        out.append(Subject(base / f"real-{name}.cache", path.read_bytes(), name))
    return out


def check(subject: Subject, *, expect: set[RegionErrorCode] | None = None) -> RegionSnapshot | RegionErrorCode:
    """Read through the API; compare with the reference decode of the mirror."""
    ref = reference.decode(subject.mirror) if len(subject.mirror) in KNOWN_SIZES else {"error": "SIZE"}
    try:
        snap = read_region(subject.path)
    except RegionError as exc:
        assert exc.code.name == ref["error"], (subject.label, exc, ref.get("error"))
        assert str(exc).startswith(f"{subject.path}: ") and exc.detail
        if expect is not None:
            assert exc.code in expect, exc
        return exc.code
    except BaseException as exc:  # noqa: BLE001 - anything else escaping is the failure under test  # pragma: no cover
        pytest.fail(f"{subject.label}: {type(exc).__name__} escaped the reader: {exc}")
    assert_same(snap, ref)
    assert snap.device_num <= 16 and 0 <= snap.proc_num <= 1024
    assert snap.preads <= 2 + 3 * 100 * snap.proc_num + 2
    if snap.device_num_raw > 16:
        assert any("device_num" in a for a in snap.anomalies)
    if not 0 <= snap.proc_num_raw <= 1024:
        assert any("proc_num" in a for a in snap.anomalies)
    if snap.invalid_uuid_devices:
        assert any("uuid of device" in a for a in snap.anomalies)
    if expect is not None:
        assert None in expect, f"{subject.label}: expected an error in {expect}, got a snapshot"
    return snap


def check_good(subjects: list[Subject]) -> None:
    for s in subjects:
        assert s.mirror == s.original
        assert_same(read_region(s.path), s.expected)


def _rand_value(rng: random.Random, size: int) -> bytes:
    if size == 4:
        return struct.pack("<i", rng.choice(SPECIAL_I32) if rng.random() < 0.6 else rng.randrange(-(2**31), 2**31))
    if size == 8:
        return struct.pack("<Q", rng.choice(SPECIAL_U64) if rng.random() < 0.6 else rng.getrandbits(64))
    return rng.randbytes(size)


def _interesting(rng: random.Random, spec: layouts.LayoutSpec, proc_num: int) -> tuple[int, int]:
    """(offset, size) of a field worth corrupting."""
    i = rng.randrange(max(1, min(proc_num, 1024)) + 1)  # a live slot or the first dead one
    d = rng.randrange(16)
    choices = [
        (0, 4),
        (spec.off_sm_init_flag, 4),
        (spec.off_device_num, 8),
        (spec.off_uuids + d * 96 + rng.randrange(96), rng.choice([1, 4, 8])),
        (spec.off_limit + 8 * d, 8),
        (spec.off_sm_limit + 8 * d, 8),
        (spec.off_proc_num, 4),
        (spec.off_utilization_switch, 4),
        (spec.off_recent_kernel, 4),
        (spec.off_priority, 4),
        (spec.slot(i), 4),
        (spec.slot(i) + 4, 4),
        (spec.slot(i) + spec.slot_status, 4),
        (spec.used(i, d) + 8 * rng.randrange(5), 8),
        (spec.monitorused(i, d), 8),
        (rng.randrange(spec.struct_size + 1), rng.randrange(1, 17)),
    ]
    if spec.has_version:
        choices += [(4, 4), (8, 4)]
    if spec.slot_seqlock is not None:
        choices.append((spec.slot(i) + spec.slot_seqlock, 8))
    if spec.slot_util is not None:
        choices.append((spec.sm_util(i, d), 8))
    if spec.off_last_kernel_time is not None:
        choices.append((spec.off_last_kernel_time, 8))
    return rng.choice(choices)


def test_fuzz_field_mutations(subjects):
    rng = random.Random(5001)
    codes: dict[str, int] = {}
    for case in range(N_FIELDS):
        s = rng.choice(subjects)
        spec = layouts.spec_for_size(len(s.mirror))
        for _ in range(rng.randint(1, 4)):
            off, size = _interesting(rng, spec, s.expected["proc_num"])
            s.write(off, _rand_value(rng, size))
        result = check(s)
        key = result.name if isinstance(result, RegionErrorCode) else "decoded"
        codes[key] = codes.get(key, 0) + 1
        s.restore()
        if case % 500 == 0:
            check_good(subjects)
    # The mix must exercise both outcomes, not only one.
    assert codes.get("decoded", 0) > N_FIELDS // 4 and codes.get("MAGIC", 0) > 0, codes
    check_good(subjects)


def test_fuzz_truncated_and_oversized(subjects):
    rng = random.Random(5002)
    for case in range(N_RESIZE):
        s = rng.choice(subjects)
        size = rng.choice(
            [
                0,
                1,
                3,
                4,
                7,
                1847,
                1856,
                1888,
                rng.randrange(0, 2_100_000),
                len(s.original) - 1,
                len(s.original) + 1,
                len(s.original) - rng.randrange(1, 4096),
                len(s.original) + rng.randrange(1, 4096),
                rng.choice(KNOWN_SIZES),
                2**33 + rng.randrange(1000),
            ]
        )
        if size > 3_000_000:  # sparse and huge: rejected by size before any read
            os.truncate(s.path, size)
            with pytest.raises(RegionError) as info:
                read_region(s.path)
            assert info.value.code is RegionErrorCode.SIZE and str(size) in str(info.value)
            os.truncate(s.path, len(s.original))
            continue
        s.resize(size)
        result = check(s)
        if size not in KNOWN_SIZES:
            assert result is RegionErrorCode.SIZE
        s.restore()
        if case % 300 == 0:
            check_good(subjects)
    check_good(subjects)


def test_fuzz_wrong_magic(subjects):
    rng = random.Random(5003)
    for _case in range(N_MAGIC):
        s = rng.choice(subjects)
        magic = rng.choice([0, 1, -1, MAGIC + 1, MAGIC - 1, 0x4EF72F01, rng.randrange(-(2**31), 2**31)])
        if magic == MAGIC:
            magic += 1
        s.write(0, struct.pack("<i", magic))
        check(s, expect={RegionErrorCode.UNINITIALISED} if magic == 0 else {RegionErrorCode.MAGIC})
        s.restore()
    check_good(subjects)


def test_fuzz_counts_out_of_range(subjects):
    rng = random.Random(5004)
    for _case in range(N_COUNTS):
        s = rng.choice(subjects)
        spec = layouts.spec_for_size(len(s.mirror))
        device_num = rng.choice(SPECIAL_U64 + [rng.getrandbits(64), rng.randrange(17, 1000)])
        proc_num = rng.choice(SPECIAL_I32 + [rng.randrange(-(2**31), 2**31), rng.randrange(1025, 100_000)])
        s.write(spec.off_device_num, struct.pack("<Q", device_num))
        s.write(spec.off_proc_num, struct.pack("<i", proc_num))
        snap = check(s, expect={None})
        assert snap.device_num == min(device_num, 16)
        assert snap.proc_num == max(0, min(proc_num, 1024))
        s.restore()
    check_good(subjects)


class _Timeout(Exception):
    pass


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail (instead of hanging forever) if the body blocks, e.g. an open() on a FIFO."""

    def on_alarm(signum, frame):
        raise _Timeout(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_fuzz_file_kinds(subjects, tmp_path):
    rng = random.Random(5005)
    good = subjects[3]  # v1.2
    (tmp_path / "adir").mkdir()
    kinds = ["symlink-file", "symlink-dir", "symlink-dangling", "symlink-fifo", "dir", "fifo", "socket", "hardlink"]
    seen = dict.fromkeys(kinds, 0)
    sockets = []
    try:
        for case in range(N_KINDS):
            kind = kinds[case % len(kinds)]
            name = tmp_path / f"{case}-{rng.getrandbits(32):08x}.cache"
            if kind == "symlink-file":
                name.symlink_to(good.path)
            elif kind == "symlink-dir":
                name.symlink_to(tmp_path / "adir")
            elif kind == "symlink-dangling":
                name.symlink_to(tmp_path / f"missing-{case}")
            elif kind == "symlink-fifo":
                os.mkfifo(tmp_path / f"f{case}")
                name.symlink_to(tmp_path / f"f{case}")
            elif kind == "dir":
                name.mkdir()
            elif kind == "fifo":
                os.mkfifo(name)
            elif kind == "socket":
                sock = socket.socket(socket.AF_UNIX)
                sock.bind(str(name))
                sockets.append(sock)
            else:
                os.link(good.path, name)
            writable = bool(case & 1)
            with deadline(5):
                try:
                    with Region.open(name, writable=writable) as region:
                        snap = region.read()
                    result = "decoded"
                except RegionError as exc:
                    assert str(exc).startswith(f"{name}: ")
                    result = exc.code.name
            want = {
                "symlink-file": "SYMLINK",
                "symlink-dir": "SYMLINK",
                "symlink-dangling": "SYMLINK",
                "symlink-fifo": "SYMLINK",
                "dir": "NOT_REGULAR",
                "fifo": "NOT_REGULAR",
                "socket": "NOT_REGULAR",
                "hardlink": "decoded",
            }[kind]
            assert result == want, (kind, result)
            if result == "decoded":
                assert_same(snap, good.expected)  # a hard link is a regular file: nothing to tell apart
            seen[kind] += 1
            if name.is_dir() and not name.is_symlink():
                name.rmdir()
            else:
                name.unlink()
            if len(sockets) > 50:
                for sock in sockets:
                    sock.close()
                sockets.clear()
    finally:
        for sock in sockets:
            sock.close()
    assert all(n >= N_KINDS // len(kinds) for n in seen.values()), seen
    check_good(subjects)


def test_fuzz_file_changes_between_two_reads(subjects):
    rng = random.Random(5006)
    for _case in range(N_BETWEEN_READS):
        s = rng.choice(subjects)
        with Region.open(s.path, writable=True) as region:
            first = region.read()
            assert_same(first, s.expected)
            action = rng.choice(["shrink", "grow", "other-layout", "rewrite", "zero-header"])
            if action == "shrink":
                s.resize(rng.randrange(0, len(s.original)))
            elif action == "grow":
                s.resize(len(s.original) + rng.randrange(1, 100_000))
            elif action == "other-layout":
                s.resize(rng.choice([k for k in KNOWN_SIZES if k != len(s.original)]))
            elif action == "rewrite":
                spec = layouts.spec_for_size(len(s.mirror))
                s.write(spec.off_proc_num, struct.pack("<i", rng.randrange(-5, 2000)))
                s.write(spec.off_device_num, struct.pack("<Q", rng.randrange(0, 40)))
            else:
                s.write(0, bytes(64))
            # The same open fd now sees the changed file: no stale view, no crash.
            try:
                second = region.read()
            except RegionError as exc:
                ref = reference.decode(s.mirror) if len(s.mirror) in KNOWN_SIZES else {"error": "SIZE"}
                assert exc.code.name == ref["error"], (action, exc)
                if action in ("shrink", "grow"):
                    assert exc.code is RegionErrorCode.SIZE
                # A write must not land in a file that changed layout or size.
                with pytest.raises(RegionError):
                    region.write_recent_kernel(first.layout, 0)
            else:
                assert_same(second, reference.decode(s.mirror))
            s.restore()
            assert_same(region.read(), s.expected)
    check_good(subjects)


def test_fuzz_garbage_blocks(subjects):
    rng = random.Random(5007)
    for _case in range(N_GARBAGE):
        s = rng.choice(subjects)
        spec = layouts.spec_for_size(len(s.mirror))
        for _ in range(rng.randint(1, 3)):
            where = rng.choice(
                [0, spec.off_uuids, spec.off_procs, spec.off_proc_num - 512, rng.randrange(len(s.mirror))]
            )
            s.write(where, rng.randbytes(rng.randint(1, 4096)))
        if rng.random() < 0.7:  # keep the magic (and version) valid to reach the deeper checks
            s.write(0, s.original[:12])
        check(s)
        s.restore()
    check_good(subjects)
