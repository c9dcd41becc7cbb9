"""The four HAMi-core shared-region layouts as plain offset tables (docs/hami-core.md §4).

These numbers are copied from the tables of docs/hami-core.md §4.3–§4.5, independently of the C structs in
``native/region.h``: tests compare the two (and a compiled C program's ``offsetof``), so
a slip in either is caught.  The writer and the reference decoder use this table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

MAGIC = 19920718  # initialized_flag, 0x012FF74E
MAX_DEVICES = 16  # CUDA_DEVICE_MAX_COUNT
MAX_PROCS = 1024  # SHARED_REGION_MAX_PROCESS_NUM
UUID_LEN = 96
SEM_SIZE = 32


class Layout(enum.IntEnum):
    """Layout family; values equal the native ``VGPU_REGION_LAYOUT_*`` codes.

    ``V1`` covers headers 1.1 and 1.2 (byte-compatible); the minor version tells which.
    """

    ORIGINAL = 1
    V0 = 2
    V1 = 3
    INTERIM = 4

    @property
    def label(self) -> str:
        return {Layout.ORIGINAL: "original", Layout.V0: "v0", Layout.V1: "v1.x", Layout.INTERIM: "interim"}[self]


@dataclass(frozen=True)
class LayoutSpec:
    """Byte offsets of one layout.  Slot-relative offsets start with ``slot_``."""

    layout: Layout
    struct_size: int
    has_version: bool
    has_util: bool
    has_last_kernel: bool
    off_sm_init_flag: int
    off_owner_pid: int
    off_sem: int
    off_sem_postinit: int | None  # interim: in the header; v1.2: the tail (off_tail)
    off_device_num: int
    off_uuids: int
    off_limit: int
    off_sm_limit: int
    off_procs: int
    slot_size: int
    slot_seqlock: int | None
    slot_used: int
    used_size: int
    slot_monitorused: int
    slot_util: int | None
    util_size: int
    slot_status: int
    off_proc_num: int
    off_utilization_switch: int
    off_recent_kernel: int
    off_priority: int
    off_last_kernel_time: int | None
    off_tail: int | None  # v1.x: unused[4] (1.1) / sem_postinit (1.2); interim: unused[4]

    @property
    def file_size(self) -> int:
        """The creator extends the file to ``sizeof(struct) + 1`` (docs/hami-core.md §4.1)."""
        return self.struct_size + 1

    def slot(self, i: int) -> int:
        return self.off_procs + i * self.slot_size

    def used(self, i: int, d: int) -> int:
        """Offset of ``procs[i].used[d]`` (its ``context_size``)."""
        return self.slot(i) + self.slot_used + d * self.used_size

    def monitorused(self, i: int, d: int) -> int:
        return self.slot(i) + self.slot_monitorused + 8 * d

    def sm_util(self, i: int, d: int) -> int:
        if self.slot_util is None:
            raise ValueError(f"the {self.layout.label} layout has no device_util")
        return self.slot(i) + self.slot_util + d * self.util_size + 16


# Field offsets inside device_memory_t (same for 40- and 64-byte variants).
USED_FIELDS = ("context_size", "module_size", "data_size", "offset", "total")
USED_OFFSETS = {name: 8 * k for k, name in enumerate(USED_FIELDS)}

ORIGINAL = LayoutSpec(
    layout=Layout.ORIGINAL,
    struct_size=804_680,
    has_version=False,
    has_util=False,
    has_last_kernel=False,
    off_sm_init_flag=4,
    off_owner_pid=8,
    off_sem=16,
    off_sem_postinit=None,
    off_device_num=48,
    off_uuids=56,
    off_limit=1592,
    off_sm_limit=1720,
    off_procs=1848,
    slot_size=784,
    slot_seqlock=None,
    slot_used=8,
    used_size=40,
    slot_monitorused=648,
    slot_util=None,
    util_size=0,
    slot_status=776,
    off_proc_num=804_664,
    off_utilization_switch=804_668,
    off_recent_kernel=804_672,
    off_priority=804_676,
    off_last_kernel_time=None,
    off_tail=None,
)
V0 = LayoutSpec(
    layout=Layout.V0,
    struct_size=1_197_896,
    has_version=False,
    has_util=True,
    has_last_kernel=False,
    off_sm_init_flag=4,
    off_owner_pid=8,
    off_sem=16,
    off_sem_postinit=None,
    off_device_num=48,
    off_uuids=56,
    off_limit=1592,
    off_sm_limit=1720,
    off_procs=1848,
    slot_size=1168,
    slot_seqlock=None,
    slot_used=8,
    used_size=40,
    slot_monitorused=648,
    slot_util=776,
    util_size=24,
    slot_status=1160,
    off_proc_num=1_197_880,
    off_utilization_switch=1_197_884,
    off_recent_kernel=1_197_888,
    off_priority=1_197_892,
    off_last_kernel_time=None,
    off_tail=None,
)
V1 = LayoutSpec(
    layout=Layout.V1,
    struct_size=2_008_952,
    has_version=True,
    has_util=True,
    has_last_kernel=True,
    off_sm_init_flag=12,
    off_owner_pid=16,
    off_sem=24,
    off_sem_postinit=2_008_920,
    off_device_num=56,
    off_uuids=64,
    off_limit=1600,
    off_sm_limit=1728,
    off_procs=1856,
    slot_size=1960,
    slot_seqlock=1936,
    slot_used=8,
    used_size=64,
    slot_monitorused=1032,
    slot_util=1160,
    util_size=48,
    slot_status=1928,
    off_proc_num=2_008_896,
    off_utilization_switch=2_008_900,
    off_recent_kernel=2_008_904,
    off_priority=2_008_908,
    off_last_kernel_time=2_008_912,
    off_tail=2_008_920,
)
INTERIM = LayoutSpec(
    layout=Layout.INTERIM,
    struct_size=2_008_984,
    has_version=True,
    has_util=True,
    has_last_kernel=True,
    off_sm_init_flag=12,
    off_owner_pid=16,
    off_sem=24,
    off_sem_postinit=56,
    off_device_num=88,
    off_uuids=96,
    off_limit=1632,
    off_sm_limit=1760,
    off_procs=1888,
    slot_size=1960,
    slot_seqlock=8,
    slot_used=16,
    used_size=64,
    slot_monitorused=1040,
    slot_util=1168,
    util_size=48,
    slot_status=1936,
    off_proc_num=2_008_928,
    off_utilization_switch=2_008_932,
    off_recent_kernel=2_008_936,
    off_priority=2_008_940,
    off_last_kernel_time=2_008_944,
    off_tail=2_008_952,
)

SPECS: dict[Layout, LayoutSpec] = {s.layout: s for s in (ORIGINAL, V0, V1, INTERIM)}
FILE_SIZES: dict[int, Layout] = {s.file_size: s.layout for s in SPECS.values()}


def spec_for_size(size: int) -> LayoutSpec | None:
    """The layout a file of ``size`` bytes has, or None (the size is the only reliable key)."""
    layout = FILE_SIZES.get(size)
    return SPECS[layout] if layout is not None else None
