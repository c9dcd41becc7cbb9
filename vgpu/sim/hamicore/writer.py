"""A region writer that plays libvgpu's part, for tests and ``vgpu demo``.

It creates and updates a shared-region file the way HAMi-core does (docs/hami-core.md §4–§6):
``sizeof + 1`` bytes, limits stamped from the env only when the magic is absent (an existing
file keeps its limits: "Limit inconsistency"), the magic stored last, process slots appended
at ``proc_num`` and compacted lazily (the last slot moves into the hole), usage counters
updated under the seqlock (v1.2 and interim), ``monitorused``/``sm_util`` written without it.

It uses ``pwrite`` on an fd (each syscall is ordered after the previous one), so a concurrent
reader sees the seqlock protocol exactly as with libvgpu's mapped stores.  It trusts its own
file: it is a producer for tests, not a parser of untrusted input.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from vgpu.hamicore import layouts
from vgpu.hamicore.layouts import MAGIC, MAX_DEVICES, MAX_PROCS, SEM_SIZE, USED_OFFSETS, UUID_LEN, Layout, LayoutSpec
from vgpu.hamicore.limits import TASK_PRIORITY_ENV, limits_from_env, task_priority_from_env

log = logging.getLogger(__name__)

# A pshared glibc sem_t right after sem_init(&sem, 1, 1), as found in files HAMi-core wrote:
# 64-bit value word = 1, then the `private` word = 128.
SEM_INIT_BYTES = struct.pack("<QI", 1, 128).ljust(SEM_SIZE, b"\0")


@dataclass(frozen=True)
class Variant:
    """A concrete file format: a layout plus the header version it carries."""

    name: str
    spec: LayoutSpec
    minor: int | None  # None: no version fields

    @property
    def seqlock(self) -> bool:
        """Whether writers bump the per-slot seqlock (v1.2 and the interim layout)."""
        return self.spec.slot_seqlock is not None and (self.spec.layout is Layout.INTERIM or (self.minor or 0) >= 2)


VARIANTS: dict[str, Variant] = {
    "original": Variant("original", layouts.ORIGINAL, None),
    "v0": Variant("v0", layouts.V0, None),
    "v1.1": Variant("v1.1", layouts.V1, 1),
    "v1.2": Variant("v1.2", layouts.V1, 2),
    "interim": Variant("interim", layouts.INTERIM, 1),  # mislabelled 1.1 upstream
}

_KINDS = {
    "context": USED_OFFSETS["context_size"],
    "module": USED_OFFSETS["module_size"],
    "data": USED_OFFSETS["data_size"],
}  # device_memory_t field offsets, by add_memory's kind
_TOTAL = USED_OFFSETS["total"]


class RegionWriter:
    """One process's view of a region it writes.  Use :meth:`create`; :meth:`close` when done."""

    def __init__(self, fd: int, path: str, variant: Variant):
        self._fd = fd
        self.path = path
        self.variant = variant
        self.spec = variant.spec
        self.limit_inconsistency = False
        self._dead: set[int] = set()

    # ---- creation -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        variant: str = "v1.2",
        *,
        env: Mapping[str, str] | None = None,
        now: int | None = None,
    ) -> RegionWriter:
        """Create (or attach to) ``path`` as libvgpu's first call does (docs/hami-core.md §6 steps 1–7)."""
        if variant not in VARIANTS:
            raise ValueError(f"unknown region variant {variant!r}; known: {', '.join(VARIANTS)}")
        v = VARIANTS[variant]
        spec = v.spec
        env = os.environ if env is None else env
        name = os.fspath(path)
        try:  # umask(0) + 0666: the workload may run as another user (HAMi#1090)
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            os.fchmod(fd, 0o666)
        except FileExistsError:
            fd = os.open(name, os.O_RDWR | os.O_CLOEXEC)
        writer = cls(fd, name, v)
        try:
            os.pwrite(fd, b"\0", spec.struct_size)  # extend to sizeof + 1
            os.lockf(fd, os.F_LOCK, spec.struct_size)  # [0, sizeof), from offset 0
            try:
                limits, sm_limits = limits_from_env(env)
                if writer._i32(0) != MAGIC:
                    writer._initialise(limits, sm_limits, env)
                elif (
                    writer._u64s(spec.off_limit, MAX_DEVICES) != limits
                    or writer._u64s(spec.off_sm_limit, MAX_DEVICES) != sm_limits
                ):
                    writer.limit_inconsistency = True
                    log.warning("%s: Limit inconsistency; keeping the file's limits", name)
                writer._stamp_time(now)
            finally:
                os.lockf(fd, os.F_ULOCK, spec.struct_size)
        except BaseException:
            os.close(fd)
            raise
        return writer

    def _initialise(self, limits: list[int], sm_limits: list[int], env: Mapping[str, str]) -> None:
        s = self.spec
        if self.variant.minor is not None:
            self._pwrite(4, struct.pack("<II", 1, self.variant.minor))
        self._pwrite(s.off_limit, struct.pack("<16Q", *limits))
        self._pwrite(s.off_sm_limit, struct.pack("<16Q", *sm_limits))
        self._pwrite(s.off_sem, SEM_INIT_BYTES)
        if s.off_sem_postinit is not None and (s.layout is Layout.INTERIM or self.variant.minor == 2):
            self._pwrite(s.off_sem_postinit, SEM_INIT_BYTES)
        self._pwrite(s.off_sm_init_flag, struct.pack("<i", 0))
        priority = task_priority_from_env(env.get(TASK_PRIORITY_ENV))
        self._pwrite(s.off_proc_num, struct.pack("<iiii", 0, 1, 2, priority))
        self._pwrite(0, struct.pack("<i", MAGIC))  # last store: readers wait for it

    # ---- low-level --------------------------------------------------------------------------

    def _pwrite(self, offset: int, data: bytes) -> None:
        if offset < 0 or offset + len(data) > self.spec.struct_size:
            raise ValueError(f"{self.path}: write of {len(data)} bytes at offset {offset} is outside the region")
        if os.pwrite(self._fd, data, offset) != len(data):
            raise OSError(f"{self.path}: short write at offset {offset}")

    def _pread(self, offset: int, size: int) -> bytes:
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            raise OSError(f"{self.path}: short read at offset {offset} (file truncated?)")
        return data

    def _i32(self, offset: int) -> int:
        return struct.unpack("<i", self._pread(offset, 4))[0]

    def _u64(self, offset: int) -> int:
        return struct.unpack("<Q", self._pread(offset, 8))[0]

    def _u64s(self, offset: int, n: int) -> list[int]:
        return list(struct.unpack(f"<{n}Q", self._pread(offset, 8 * n)))

    def _stamp_time(self, now: int | None) -> None:
        if self.spec.off_last_kernel_time is not None:
            self._pwrite(self.spec.off_last_kernel_time, struct.pack("<Q", int(time.time()) if now is None else now))

    @property
    def proc_num(self) -> int:
        return self._i32(self.spec.off_proc_num)

    def _slot_of(self, pid: int) -> int:
        for i in range(max(0, min(self.proc_num, MAX_PROCS))):
            if self._i32(self.spec.slot(i)) == pid:
                return i
        raise KeyError(f"pid {pid} has no slot in {self.path}")

    # ---- devices ----------------------------------------------------------------------------

    def init_devices(self, uuids: Sequence[str]) -> None:
        """What the first NVML init through libvgpu does: ``device_num`` and ``uuids[]``."""
        if len(uuids) > MAX_DEVICES:
            raise ValueError(f"at most {MAX_DEVICES} devices, got {len(uuids)}")
        for d, uuid in enumerate(uuids):
            raw = uuid.encode("ascii")
            if len(raw) >= UUID_LEN:
                raise ValueError(f"uuid {uuid!r} does not fit {UUID_LEN} bytes with its NUL")
            self._pwrite(self.spec.off_uuids + d * UUID_LEN, raw.ljust(UUID_LEN, b"\0"))
        self._pwrite(self.spec.off_device_num, struct.pack("<Q", len(uuids)))

    # ---- process slots ----------------------------------------------------------------------

    def attach(self, pid: int, *, now: int | None = None) -> int:
        """A process joins: reuse its slot, else compact dead slots and append one. Returns the slot."""
        if pid <= 0:
            raise ValueError(f"pid must be positive, got {pid}")
        try:
            i = self._slot_of(pid)
        except KeyError:
            self._compact()
            i = self.proc_num
            if i >= MAX_PROCS:
                raise OSError(f"{self.path}: all {MAX_PROCS} process slots are in use") from None
            slot = bytearray(self.spec.slot_size)
            struct.pack_into("<i", slot, 0, pid)
            struct.pack_into("<i", slot, self.spec.slot_status, 1)
            self._pwrite(self.spec.slot(i), bytes(slot))
            self._pwrite(self.spec.off_proc_num, struct.pack("<i", i + 1))
        self._stamp_time(now)
        return i

    def _compact(self) -> None:
        """Drop exited (pid 0 / status 0) and killed slots: the last slot moves into each hole."""
        s = self.spec
        n = self.proc_num
        i = 0
        while i < n:
            pid = self._i32(s.slot(i))
            status = self._i32(s.slot(i) + s.slot_status)
            if pid == 0 or status == 0 or pid in self._dead:
                self._dead.discard(pid)
                n -= 1
                if i != n:
                    self._pwrite(s.slot(i), self._pread(s.slot(n), s.slot_size))
                self._pwrite(s.slot(n), bytes(s.slot_size))
                self._pwrite(s.off_proc_num, struct.pack("<i", n))
            else:
                i += 1

    def detach(self, pid: int) -> None:
        """Normal exit: ``pid = 0``, ``status = 0``; the slot and its counters stay until compaction."""
        i = self._slot_of(pid)
        self._pwrite(self.spec.slot(i), struct.pack("<i", 0))
        self._pwrite(self.spec.slot(i) + self.spec.slot_status, struct.pack("<i", 0))

    def kill(self, pid: int) -> None:
        """SIGKILL: nothing changes in the file; the slot is reaped at the next :meth:`attach`."""
        self._slot_of(pid)
        self._dead.add(pid)

    def set_status(self, pid: int, status: int) -> None:
        """1 running, 2 suspended (SIGUSR2), as libvgpu's signal handlers do."""
        self._pwrite(self.spec.slot(self._slot_of(pid)) + self.spec.slot_status, struct.pack("<i", status))

    def set_hostpid(self, pid: int, hostpid: int) -> None:
        self._pwrite(self.spec.slot(self._slot_of(pid)) + 4, struct.pack("<i", hostpid))

    @contextmanager
    def seqlock_write(self, pid: int) -> Iterator[int]:
        """Hold the slot's seqlock odd (a write in progress); yields the slot index."""
        i = self._slot_of(pid)
        seqlock_at = self.spec.slot_seqlock  # not None whenever variant.seqlock
        if not self.variant.seqlock or seqlock_at is None:
            yield i
            return
        off = self.spec.slot(i) + seqlock_at
        odd = self._u64(off) | 1  # stays odd if a test left a write "in progress"
        self._pwrite(off, struct.pack("<Q", odd))
        try:
            yield i
        finally:
            self._pwrite(off, struct.pack("<Q", (odd + 1) % 2**64))

    def add_memory(self, pid: int, device: int, nbytes: int, kind: str = "data") -> None:
        """``add_gpu_device_memory_usage``: ``<kind>_size += n`` and ``total += n``, under the seqlock."""
        self._change_memory(pid, device, nbytes, kind)

    def free_memory(self, pid: int, device: int, nbytes: int, kind: str = "data") -> None:
        self._change_memory(pid, device, -nbytes, kind)

    def _change_memory(self, pid: int, device: int, delta: int, kind: str) -> None:
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
        if not 0 <= device < MAX_DEVICES:
            raise ValueError(f"device index {device} is out of range")
        with self.seqlock_write(pid) as i:
            base = self.spec.used(i, device)
            field = self._u64(base + _KINDS[kind])
            total = self._u64(base + _TOTAL)
            self._pwrite(base + _KINDS[kind], struct.pack("<Q", (field + delta) % 2**64))
            self._pwrite(base + _TOTAL, struct.pack("<Q", (total + delta) % 2**64))

    def set_monitor(
        self, pid: int, device: int, *, monitor_used: int | None = None, sm_util: int | None = None
    ) -> None:
        """The watcher thread's per-slot NVML samples (no seqlock, as libvgpu)."""
        i = self._slot_of(pid)
        if monitor_used is not None:
            self._pwrite(self.spec.monitorused(i, device), struct.pack("<Q", monitor_used))
        if sm_util is not None:
            self._pwrite(self.spec.sm_util(i, device), struct.pack("<Q", sm_util))

    # ---- region-wide fields -----------------------------------------------------------------

    def kernel_launch(self, *, now: int | None = None) -> None:
        """A rate-limited launch: ``recent_kernel = 2`` and ``last_kernel_time`` (if the layout has it)."""
        self._pwrite(self.spec.off_recent_kernel, struct.pack("<i", 2))
        self._stamp_time(now)

    def feedback(self) -> tuple[int, int]:
        """``(utilization_switch, recent_kernel)`` as the monitor left them."""
        sw, rk = struct.unpack("<ii", self._pread(self.spec.off_utilization_switch, 8))
        return sw, rk

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> RegionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
