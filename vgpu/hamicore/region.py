"""Reader API of HAMi-core shared-region files, over the native pread-only reader.

Every cache file is written by a workload container and therefore untrusted
(docs/metrics.md §6).  The native layer (``native/region.c``) resolves a name once, to an
``O_PATH`` descriptor (no symlink followed, no device or FIFO opened), verifies that inode and
only then opens it for I/O (docs/hami-core.md §8); it accepts only regular files of the four
known sizes, preads only the header, the live slots and the tail, clamps every count, and
honours the v1.2 and interim seqlocks.  This module turns its results into immutable snapshots.

A slot caught mid-write is re-read within a small cap and otherwise skipped; a
:class:`Region` then serves the slot sums of its last consistent read (``last_good``), so a file
whose seqlocks never settle costs little and still reports its last true values
(docs/hami-core.md §8).

The only exception that leaves this API is :class:`RegionError`; its ``code`` says what
exactly is wrong.  ``RegionErrorCode.UNINITIALISED`` is not a fault: the creator has not set
the magic yet, so the caller should simply retry on its next tick (docs/hami-core.md §4.2).

A :class:`Region` is one open fd, meant to be kept across ticks (the monitor re-``fstat``s it
through :meth:`Region.stat`).  It is not thread-safe (it reuses its output buffer): one
thread at a time; the monitor's loop and HTTP threads share regions under ``Discovery.lock``.
"""

from __future__ import annotations

import enum
import logging
import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from vgpu._native import ffi, lib
from vgpu.hamicore.layouts import Layout

log = logging.getLogger(__name__)


class RegionErrorCode(enum.IntEnum):
    """One code per distinct problem (values are the native ``VGPU_REGION_E_*``)."""

    ARG = 1
    NOT_FOUND = 2
    SYMLINK = 3
    NOT_REGULAR = 4
    OPEN = 5
    RACE = 6
    SIZE = 7
    UNINITIALISED = 8
    MAGIC = 9
    VERSION = 10
    SHORT_READ = 11
    IO = 12
    LAYOUT_CHANGED = 13
    CLOSED = 100  # Python side: the Region was closed

    @property
    def transient(self) -> bool:
        """True when a later attempt may succeed without anyone fixing the file."""
        return self in (
            RegionErrorCode.UNINITIALISED,
            RegionErrorCode.SHORT_READ,
            RegionErrorCode.RACE,
            RegionErrorCode.LAYOUT_CHANGED,
        )


class RegionError(Exception):
    """A shared-region file could not be opened, read or written.

    ``str(err)`` is ``"<path>: <what is wrong>"``; ``code`` is a :class:`RegionErrorCode`,
    ``errno`` the OS error number where one applies.
    """

    def __init__(self, code: RegionErrorCode, path: str, detail: str, errno: int | None = 0):
        self.code = code
        self.path = path
        self.detail = detail
        self.errno = errno
        super().__init__(f"{path}: {detail}")


for _code in RegionErrorCode:
    if _code is not RegionErrorCode.CLOSED:
        assert getattr(lib, f"VGPU_REGION_E_{_code.name}") == _code, _code
assert lib.VGPU_REGION_LAYOUT_V1 == Layout.V1 and lib.VGPU_REGION_LAYOUT_INTERIM == Layout.INTERIM


class DeviceUsage(NamedTuple):
    """One in-container device of a region: header values and sums over the slots in use.

    (NamedTuples, not dataclasses: a monitor tick builds thousands; see benchmarks.)
    """

    vdevice_index: int  # in-container NVML index d
    uuid: str  # the NUL-terminated uuids[d]
    limit_bytes: int  # 0 = unlimited
    sm_limit: int  # percent; 100 (or 0) = unlimited
    used_bytes: int  # Σ used[d].total
    context_bytes: int  # Σ used[d].context_size
    module_bytes: int  # Σ used[d].module_size (always 0 in practice)
    data_bytes: int  # Σ used[d].data_size
    offset_bytes: int  # Σ used[d].offset (always 0 in practice)
    monitor_used_bytes: int  # Σ monitorused[d]
    sm_util: int  # Σ device_util[d].sm_util, percent (0 on the original layout)
    procs: int  # slots in use with used[d].total > 0

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON), under :data:`DEVICE_KEYS`."""
        return dict(zip(DEVICE_KEYS, self, strict=True))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceUsage:
        """The inverse of :meth:`as_dict`."""
        return cls._make(data[k] for k in DEVICE_KEYS)


# The plain-data keys of a DeviceUsage: the field ``vdevice_index`` (a NamedTuple field cannot be
# called ``index``: that is tuple.index) keeps its key ``index`` in JSON and the reference decoder.
DEVICE_KEYS: Final = ("index", *DeviceUsage._fields[1:])


class RegionSnapshot(NamedTuple):
    """A decode of one region at one moment (one native call).

    Fields from ``file_size`` to ``priority`` are in the native summary's order on purpose:
    the snapshot is built from one slice of the unpacked struct.
    """

    path: str
    layout: Layout
    major_version: int | None  # None for original/v0 (no version fields)
    minor_version: int | None
    file_size: int
    device_num_raw: int  # as stored
    device_num: int  # clamped to 16
    proc_num_raw: int  # as stored
    proc_num: int  # clamped to [0, 1024]
    live_procs: int  # slots with pid != 0 and status != 0
    skipped_slots: int  # seqlock did not settle within the retry caps this time
    sm_init_flag: int
    utilization_switch: int
    recent_kernel: int
    priority: int
    last_kernel_time: int | None  # Unix seconds; None when the layout has none
    seqlocked: bool
    limits: tuple[int, ...]  # all 16 limit[] entries, bytes
    sm_limits: tuple[int, ...]  # all 16 sm_limit[] entries, percent
    devices: tuple[DeviceUsage, ...]  # usable devices only (uuid set and printable ASCII)
    invalid_uuid_devices: tuple[int, ...]
    anomalies: tuple[str, ...]  # what was clamped or skipped, in words
    preads: int  # read syscalls spent (the fstat, when made, is not counted)
    bytes_read: int
    # True: this read was torn (skipped_slots > 0) and `devices`/`live_procs` are the Region's last
    # consistent read's; the header and tail fields are still this read's.
    last_good: bool = False

    @property
    def version(self) -> str | None:
        return None if self.major_version is None else f"{self.major_version}.{self.minor_version}"

    @property
    def layout_name(self) -> str:
        """``original``, ``v0``, ``v1.1``, ``v1.2`` or ``interim`` (an unknown v1 minor reads as v1.2)."""
        if self.layout is Layout.V1:
            return "v1.1" if self.minor_version == 1 else "v1.2"
        return self.layout.label

    @property
    def has_util(self) -> bool:
        return self.layout is not Layout.ORIGINAL

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON): nested devices become dicts too."""
        out = self._asdict()
        out["layout"] = self.layout_name
        out["version"] = self.version
        out["devices"] = [d.as_dict() for d in self.devices]
        return out


@dataclass(frozen=True, slots=True)
class SlotDevice:
    context_bytes: int
    module_bytes: int
    data_bytes: int
    offset_bytes: int
    total_bytes: int
    monitor_used_bytes: int
    sm_util: int


@dataclass(frozen=True, slots=True)
class SlotInfo:
    """One process slot in detail (for ``vgpu inspect cache``)."""

    index: int
    pid: int  # container-namespace PID; 0 = exited normally
    hostpid: int  # 0 until libvgpu detected it
    status: int  # 1 running, 2 suspended, 0 exited
    in_use: bool  # pid != 0 and status != 0
    consistent: bool  # False: the seqlock never settled, counters not read
    seqlock: int  # 0 for layouts without one
    devices: tuple[SlotDevice, ...]


def _struct_of(ctype: str, stop: str | None = None) -> struct.Struct:
    """A little-endian ``struct`` format mirroring a cffi struct, padding included.

    Unpacking the native result in one call is several times cheaper than reading cdata
    fields one by one, which dominated the cost of a read.
    """
    codes = {"int32_t": "i", "uint32_t": "I", "uint64_t": "Q"}
    fmt, pos = "<", 0
    for name, f in ffi.typeof(ctype).fields:
        if name == stop:
            break
        if f.offset > pos:
            fmt += f"{f.offset - pos}x"
        t = f.type
        if t.kind == "array":
            fmt += f"{t.length}s" if t.item.cname == "char" else f"{t.length}{codes[t.item.cname]}"
        else:
            fmt += codes[t.cname]
        pos = f.offset + ffi.sizeof(t)
    if stop is None and ffi.sizeof(ctype) > pos:
        fmt += f"{ffi.sizeof(ctype) - pos}x"  # trailing padding: iter_unpack steps by sizeof
    return struct.Struct(fmt)


_HEAD = _struct_of("vgpu_region_summary_t", stop="devices")
_DEV = _struct_of("vgpu_region_device_t")
_DEV_OFF = ffi.offsetof("vgpu_region_summary_t", "devices")
_DEV_SIZE = ffi.sizeof("vgpu_region_device_t")
assert _DEV.size == _DEV_SIZE and _HEAD.size == _DEV_OFF
# Positions in the _HEAD tuple (order of vgpu_region_summary_t).
(
    _LAYOUT,
    _MAJOR,
    _MINOR,
    _SEQLOCKED,
    _HAS_UTIL,
    _HAS_LAST_KERNEL,
    _FILE_SIZE,
    _DEVICE_NUM_RAW,
    _DEVICE_NUM,
    _PROC_NUM_RAW,
    _PROC_NUM,
    _LIVE,
    _SKIPPED,
    _SM_INIT,
    _SWITCH,
    _RECENT,
    _PRIORITY,
    _LAST_KERNEL,
    _ANOMALIES,
    _PREADS,
    _BYTES,
) = range(21)
_LAYOUTS = {int(x): x for x in Layout}
# The summary fields copied one to one into the snapshot: the same names, in the same order, in both.
_COPIED_FIELDS: Final = [
    "file_size",
    "device_num_raw",
    "device_num",
    "proc_num_raw",
    "proc_num",
    "live_procs",
    "skipped_slots",
    "sm_init_flag",
    "utilization_switch",
    "recent_kernel",
    "priority",
]
assert [n for n, _ in ffi.typeof("vgpu_region_summary_t").fields][_FILE_SIZE:_LAST_KERNEL] == _COPIED_FIELDS
assert list(RegionSnapshot._fields[4:15]) == _COPIED_FIELDS

SEQLOCK_RETRIES: int = lib.VGPU_REGION_SEQLOCK_RETRIES  # tries per slot
READ_RETRIES: int = lib.VGPU_REGION_READ_RETRIES  # tries per read, all slots together

# (anomaly bit, its text from the summary fields and the devices with a bad uuid)
_ANOMALY_TEXT: tuple[tuple[int, Callable[[tuple[Any, ...], list[int]], str]], ...] = (
    (lib.VGPU_REGION_A_DEVICE_NUM_CLAMPED, lambda h, bad: f"device_num {h[_DEVICE_NUM_RAW]} clamped to 16"),
    (lib.VGPU_REGION_A_PROC_NUM_CLAMPED, lambda h, bad: f"proc_num {h[_PROC_NUM_RAW]} clamped to 1024"),
    (lib.VGPU_REGION_A_PROC_NUM_NEGATIVE, lambda h, bad: f"proc_num {h[_PROC_NUM_RAW]} is negative; read as 0"),
    (
        lib.VGPU_REGION_A_BAD_UUID,
        lambda h, bad: "uuid of device " + ", ".join(map(str, bad)) + " is not NUL-terminated printable ASCII; skipped",
    ),
    (
        lib.VGPU_REGION_A_SLOT_SKIPPED,
        lambda h, bad: (
            f"{h[_SKIPPED]} slot(s) skipped: seqlock did not settle within the retry caps "
            f"({SEQLOCK_RETRIES} tries per slot, {READ_RETRIES} per read)"
        ),
    ),
    (lib.VGPU_REGION_A_SUM_SATURATED, lambda h, bad: "a per-device sum overflowed 64 bits and was saturated"),
    (lib.VGPU_REGION_A_UNKNOWN_MINOR, lambda h, bad: f"unknown header version 1.{h[_MINOR]}; read as v1.2"),
)


@dataclass(slots=True)
class _WarnOnce:
    """Warn once per key, for at most ``cap`` keys, then once that the rest go unlogged.

    The keys come from files (a header's minor version), so a container that writes a new one
    before every read must not get a log line, or a set entry, per read.
    """

    cap: int
    seen: set[int] = field(default_factory=set)
    full: bool = False

    def first(self, key: int) -> bool | None:
        """True: log it; None: log that logging stops now; False: stay silent."""
        if key in self.seen or self.full:
            return False
        if len(self.seen) >= self.cap:
            self.full = True
            return None
        self.seen.add(key)
        return True


UNKNOWN_MINOR_WARNINGS = 16
_unknown_minors = _WarnOnce(UNKNOWN_MINOR_WARNINGS)


def _error(err: Any, path: str) -> RegionError:
    return RegionError(
        RegionErrorCode(err.code), path, ffi.string(err.message).decode("utf-8", "replace"), err.sys_errno
    )


_uuids: dict[bytes, str] = {}  # raw uuids[d] -> text; a handful of GPUs per node


def _uuid(raw: bytes) -> str:
    text = _uuids.get(raw)
    if text is None:
        if len(_uuids) > 4096:  # containers can write anything: keep the cache bounded
            _uuids.clear()
        text = _uuids[raw] = raw[: raw.index(0)].decode("ascii")
    return text


_unpack_head = _HEAD.unpack_from
_iter_devices = _DEV.iter_unpack


def _snapshot(buf: memoryview, path: str) -> RegionSnapshot:
    """Build the snapshot from the raw bytes of a ``vgpu_region_summary_t``.

    The common case (no anomaly, a versioned layout) is built inline, with no further call;
    the rest goes through :func:`snapshot_from_summary`, which words the anomalies."""
    h = _unpack_head(buf)
    new = tuple.__new__
    devices = []
    invalid = []
    d = 0
    for dv in _iter_devices(buf[_DEV_OFF : _DEV_OFF + h[_DEVICE_NUM] * _DEV_SIZE]):
        state = dv[0]
        if state == 1:  # VGPU_REGION_UUID_VALID: NUL-terminated printable ASCII (checked in C)
            devices.append(new(DeviceUsage, (d, _uuid(dv[1])) + dv[2:]))
        elif state == 2:
            invalid.append(d)
        d += 1
    return snapshot_from_summary(h, devices, invalid, path)


def snapshot_from_summary(
    h: tuple[Any, ...], devices: list[DeviceUsage], invalid: list[int], path: str
) -> RegionSnapshot:
    """The snapshot from the summary fields ``h`` (native order) and the usable devices.

    The pure-Python reference reader of the test stand-ins builds its snapshots here too, so
    both readers describe anomalies in the same words.
    """
    new = tuple.__new__
    anomalies: tuple[str, ...] = ()
    if h[_ANOMALIES]:
        anomalies = tuple(text(h, invalid) for bit, text in _ANOMALY_TEXT if h[_ANOMALIES] & bit)
        if h[_ANOMALIES] & lib.VGPU_REGION_A_UNKNOWN_MINOR:
            first = _unknown_minors.first(h[_MINOR])
            if first:
                log.warning("%s: unknown HAMi-core header version 1.%d; reading it as v1.2", path, h[_MINOR])
            elif first is None:
                log.warning(
                    "%s: unknown HAMi-core header version 1.%d; %d unknown versions seen, the next ones are not logged",
                    path,
                    h[_MINOR],
                    UNKNOWN_MINOR_WARNINGS,
                )
    if h[_LAYOUT] >= 3:  # v1.x and interim carry version fields
        head = (path, _LAYOUTS[h[_LAYOUT]], h[_MAJOR], h[_MINOR])
    else:
        head = (path, _LAYOUTS[h[_LAYOUT]], None, None)
    return new(
        RegionSnapshot,
        head
        + h[_FILE_SIZE:_LAST_KERNEL]
        + (
            h[_LAST_KERNEL] if h[_HAS_LAST_KERNEL] else None,
            h[_SEQLOCKED] == 1,
            h[21:37],
            h[37:53],
            tuple(devices),
            tuple(invalid),
            anomalies,
            h[_PREADS],
            h[_BYTES],
            False,
        ),
    )


_read = lib.vgpu_region_read


class Region:
    """One open shared-region file.  Use :meth:`open`; close it (or use ``with``)."""

    __slots__ = (
        "path",
        "writable",
        "torn_reads",
        "_fd",
        "_out",
        "_buf",
        "_err",
        "_hint",
        "_good",
        "_raw",
        "_snap",
    )

    def __init__(self, fd: int, path: str, writable: bool):
        self._fd = fd
        self.path = path
        self.writable = writable
        self._out = ffi.new("vgpu_region_summary_t *")  # reused: one Region, one thread
        self._buf = memoryview(ffi.buffer(self._out))
        self._err = ffi.new("vgpu_region_error_t *")
        self._hint = 0  # layout of the last good read: lets the native reader skip its fstat
        self._good: RegionSnapshot | None = None  # the last read with every slot consistent
        self.torn_reads = 0  # reads with a skipped slot (their sums came from _good, if any)
        # The summary bytes of the last read and the snapshot built from them: a snapshot is a
        # function of those bytes (and the path) only, so an identical summary reuses it.
        self._raw = b""
        self._snap: RegionSnapshot | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, dir_fd: int | None = None, writable: bool = False) -> Region:
        """Open ``path`` (relative to ``dir_fd`` if given) safely: no symlink, no FIFO, regular only.

        Nothing but a verified regular file is ever opened for I/O, and the name is resolved
        once, so a name swapped meanwhile for a device node or a FIFO never gets that opened
        (docs/hami-core.md §8).  ``writable`` opens ``O_RDWR`` for the two feedback writes.
        Only the final path component is protected against symlinks; the monitor passes a
        ``dir_fd`` it opened with ``O_NOFOLLOW``.
        """
        try:
            name = os.fspath(path)
            encoded = os.fsencode(name)
        except (UnicodeError, TypeError) as exc:
            raise RegionError(RegionErrorCode.ARG, repr(path), f"unusable file name: {exc}") from None
        if b"\0" in encoded:
            raise RegionError(RegionErrorCode.ARG, repr(name), "file name contains a NUL byte")
        if dir_fd is not None and (isinstance(dir_fd, bool) or not isinstance(dir_fd, int) or dir_fd < 0):
            raise RegionError(RegionErrorCode.ARG, str(name), f"dir_fd must be an open directory fd, got {dir_fd!r}")
        err = ffi.new("vgpu_region_error_t *")
        fd = lib.vgpu_region_open(-1 if dir_fd is None else dir_fd, encoded, 1 if writable else 0, err)
        if fd < 0:
            raise _error(err, name)
        return cls(fd, name, writable)

    def fileno(self) -> int:
        if self._fd < 0:
            raise RegionError(RegionErrorCode.CLOSED, self.path, "region is closed")
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def stat(self) -> os.stat_result:
        """``fstat`` of the open fd (size and mtime, to notice a replaced or resized file)."""
        try:
            return os.fstat(self.fileno())
        except OSError as exc:
            raise RegionError(RegionErrorCode.IO, self.path, f"fstat failed: {exc.strerror}", exc.errno) from None

    def read(self) -> RegionSnapshot:
        """Decode the region now: one native call (fstat, header, tail, live slots).

        The snapshot of an unchanged summary (a file nobody wrote since the last read) is the
        previous one (they are immutable), so a steady file costs the native call only.

        A torn read (a slot whose seqlock did not settle within the caps) gets the slot sums of
        the last consistent read of this Region, marked ``last_good``; with none yet, the sums of
        the slots that did settle.
        """
        fd = self._fd
        if fd < 0:
            raise RegionError(RegionErrorCode.CLOSED, self.path, "region is closed")
        if _read(fd, self._hint, self._out, self._err) < 0:
            self._hint = 0
            raise _error(self._err, self.path)
        # The summary is what the native reader made of the file (validated, clamped), every
        # field included (counts, seqlock outcome, preads): when a writer changed anything the
        # reader reports, the bytes differ and the snapshot is rebuilt.
        raw = self._buf.tobytes()
        if raw == self._raw and self._snap is not None:
            snap = self._snap
        else:
            snap = _snapshot(self._buf, self.path)
            self._raw, self._snap = raw, snap
        self._hint = snap[1]  # layout
        if not snap[10]:  # skipped_slots
            self._good = snap
            return snap
        self.torn_reads += 1
        good = self._good
        if good is None or good.layout is not snap.layout or good.device_num != snap.device_num:
            return snap
        return snap._replace(
            devices=good.devices,
            live_procs=good.live_procs,
            anomalies=snap.anomalies + ("slot sums served from the last consistent read",),
            last_good=True,
        )

    def read_slot(self, index: int, device_num: int = 16) -> SlotInfo:
        """Slot ``index`` in detail (under the seqlock on v1.2); ``device_num`` devices listed."""
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 1024:
            raise RegionError(RegionErrorCode.ARG, self.path, f"slot index {index} is out of range [0, 1024)")
        out = ffi.new("vgpu_region_slot_t *")
        err = ffi.new("vgpu_region_error_t *")
        if lib.vgpu_region_read_slot(self.fileno(), index, out, err) < 0:
            raise _error(err, self.path)
        devices = tuple(
            SlotDevice(u.context_size, u.module_size, u.data_size, u.offset, u.total, u.monitor_used, u.sm_util)
            for u in (out.devices[d] for d in range(max(0, min(int(device_num), 16))))
        )
        return SlotInfo(
            index, out.pid, out.hostpid, out.status, bool(out.in_use), bool(out.consistent), out.seqlock, devices
        )

    def slots(self, snapshot: RegionSnapshot | None = None) -> list[SlotInfo]:
        """Every slot of the prefix ``procs[0, proc_num)``, live or not."""
        snap = snapshot or self.read()
        return [self.read_slot(i, snap.device_num) for i in range(snap.proc_num)]

    def write_utilization_switch(self, layout: Layout, value: int) -> None:
        """Store ``utilization_switch`` (4-byte pwrite), if the file still has ``layout``."""
        self._write(layout, lib.VGPU_REGION_FIELD_UTILIZATION_SWITCH, value)

    def write_recent_kernel(self, layout: Layout, value: int) -> None:
        """Store ``recent_kernel`` (4-byte pwrite), if the file still has ``layout``."""
        self._write(layout, lib.VGPU_REGION_FIELD_RECENT_KERNEL, value)

    def _write(self, layout: Layout, field: int, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
            raise RegionError(RegionErrorCode.ARG, self.path, f"value {value} does not fit an int32")
        if not self.writable:
            raise RegionError(RegionErrorCode.ARG, self.path, "region was opened read-only")
        if not isinstance(layout, int) or layout not in _LAYOUTS:
            raise RegionError(RegionErrorCode.ARG, self.path, f"unknown layout {layout!r}")
        if lib.vgpu_region_write_feedback(self.fileno(), int(layout), field, value, self._err) < 0:
            raise _error(self._err, self.path)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> Region:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass

    def __repr__(self) -> str:
        return f"Region({self.path!r}, fd={self._fd})"


def read_region(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> RegionSnapshot:
    """Open, decode and close one region file (read-only)."""
    with Region.open(path, dir_fd=dir_fd) as region:
        return region.read()
