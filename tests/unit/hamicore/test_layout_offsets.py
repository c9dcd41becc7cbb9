"""The region layouts, three ways: the tables of docs/hami-core.md §4.3–§4.5 (transcribed here), the C structs that the
native reader uses (compiled into a small program that prints offsetof/sizeof), and the Python
table the writer and the reference decoder use.  All three must agree."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

from vgpu.hamicore import layouts

NATIVE = pathlib.Path(__file__).resolve().parents[3] / "native"

# docs/hami-core.md §4.3–§4.5, transcribed.  None = the field does not exist in that layout.
SPEC_REGION = {
    #  field:             (original, v0, v1.x, interim)
    "initialized_flag": (0, 0, 0, 0),
    "major_version": (None, None, 4, 4),
    "minor_version": (None, None, 8, 8),
    "sm_init_flag": (4, 4, 12, 12),
    "owner_pid": (8, 8, 16, 16),
    "sem": (16, 16, 24, 24),
    "sem_postinit": (None, None, 2_008_920, 56),
    "device_num": (48, 48, 56, 88),
    "uuids": (56, 56, 64, 96),
    "limit": (1592, 1592, 1600, 1632),
    "sm_limit": (1720, 1720, 1728, 1760),
    "procs": (1848, 1848, 1856, 1888),
    "proc_num": (804_664, 1_197_880, 2_008_896, 2_008_928),
    "utilization_switch": (804_668, 1_197_884, 2_008_900, 2_008_932),
    "recent_kernel": (804_672, 1_197_888, 2_008_904, 2_008_936),
    "priority": (804_676, 1_197_892, 2_008_908, 2_008_940),
    "last_kernel_time": (None, None, 2_008_912, 2_008_944),
    "unused": (None, None, None, 2_008_952),
    "sizeof": (804_680, 1_197_896, 2_008_952, 2_008_984),
}
SPEC_SLOT = {
    "pid": (0, 0, 0, 0),
    "hostpid": (4, 4, 4, 4),
    "seqlock": (None, None, 1936, 8),
    "used": (8, 8, 8, 16),
    "monitorused": (648, 648, 1032, 1040),
    "device_util": (None, 776, 1160, 1168),
    "status": (776, 1160, 1928, 1936),
    "unused": (None, None, 1944, 1944),
    "sizeof": (784, 1168, 1960, 1960),
}
SPEC_DEVMEM = {"context_size": 0, "module_size": 8, "data_size": 16, "offset": 24, "total": 32}
SPEC_DEVMEM_SIZE = {"v0": 40, "v1": 64}
SPEC_DEVUTIL = {"dec_util": 0, "enc_util": 8, "sm_util": 16}
SPEC_DEVUTIL_SIZE = {"v0": 24, "v1": 48}
SPEC_FILE_SIZES = {"original": 804_681, "v0": 1_197_897, "v1": 2_008_953, "interim": 2_008_985}

LAYOUT_NAMES = ("original", "v0", "v1", "interim")
C_REGION = {
    "original": "vgpu_region_original_t",
    "v0": "vgpu_region_v0_t",
    "v1": "vgpu_region_v1_t",
    "interim": "vgpu_region_interim_t",
}
C_SLOT = {
    "original": "vgpu_slot_original_t",
    "v0": "vgpu_slot_v0_t",
    "v1": "vgpu_slot_v1_t",
    "interim": "vgpu_slot_interim_t",
}


def _c_program() -> str:
    lines = [
        "#include <stdio.h>",
        '#include "region.h"',
        '#define P(t, f) printf("%s.%s=%zu\\n", #t, #f, offsetof(t, f))',
        '#define S(t) printf("%s.sizeof=%zu\\n", #t, sizeof(t))',
        "int main(void) {",
    ]
    for k, name in enumerate(LAYOUT_NAMES):
        for field, offs in SPEC_REGION.items():
            if field != "sizeof" and offs[k] is not None:
                lines.append(f"P({C_REGION[name]}, {field});")
        lines.append(f"S({C_REGION[name]});")
        for field, offs in SPEC_SLOT.items():
            if field != "sizeof" and offs[k] is not None:
                lines.append(f"P({C_SLOT[name]}, {field});")
        lines.append(f"S({C_SLOT[name]});")
    for t in ("vgpu_devmem_v0_t", "vgpu_devmem_v1_t"):
        lines += [f"P({t}, {f});" for f in SPEC_DEVMEM] + [f"S({t});"]
    for t in ("vgpu_devutil_v0_t", "vgpu_devutil_v1_t"):
        lines += [f"P({t}, {f});" for f in SPEC_DEVUTIL] + [f"S({t});"]
    lines += ["S(vgpu_sem_t);", "return 0; }"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def c_offsets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """Compile a program against native/region.h and collect what the C compiler says."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is required to build vgpu (native/); none found on PATH"
    work = tmp_path_factory.mktemp("offsets")
    src = work / "offsets.c"
    src.write_text(_c_program())
    exe = work / "offsets"
    subprocess.run([cc, "-std=gnu11", "-Wall", "-Werror", f"-I{NATIVE}", "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split("=") for line in out.splitlines())}


@pytest.mark.parametrize("k,name", list(enumerate(LAYOUT_NAMES)))
def test_c_region_structs_match_the_spec_tables(c_offsets, k, name):
    for field, offs in SPEC_REGION.items():
        if offs[k] is not None:
            assert c_offsets[f"{C_REGION[name]}.{field}"] == offs[k], (name, field)
    for field, offs in SPEC_SLOT.items():
        if offs[k] is not None:
            assert c_offsets[f"{C_SLOT[name]}.{field}"] == offs[k], (name, "slot", field)
    assert SPEC_FILE_SIZES[name] == SPEC_REGION["sizeof"][k] + 1


def test_c_sub_structs_match_the_spec_tables(c_offsets):
    for variant in ("v0", "v1"):
        for field, off in SPEC_DEVMEM.items():
            assert c_offsets[f"vgpu_devmem_{variant}_t.{field}"] == off
        assert c_offsets[f"vgpu_devmem_{variant}_t.sizeof"] == SPEC_DEVMEM_SIZE[variant]
        for field, off in SPEC_DEVUTIL.items():
            assert c_offsets[f"vgpu_devutil_{variant}_t.{field}"] == off
        assert c_offsets[f"vgpu_devutil_{variant}_t.sizeof"] == SPEC_DEVUTIL_SIZE[variant]
    assert c_offsets["vgpu_sem_t.sizeof"] == 32


@pytest.mark.parametrize("k,spec", list(enumerate([layouts.ORIGINAL, layouts.V0, layouts.V1, layouts.INTERIM])))
def test_python_table_matches_the_spec_tables(k, spec):
    r = {f: offs[k] for f, offs in SPEC_REGION.items()}
    s = {f: offs[k] for f, offs in SPEC_SLOT.items()}
    assert spec.struct_size == r["sizeof"]
    assert spec.file_size == r["sizeof"] + 1
    assert (spec.off_sm_init_flag, spec.off_owner_pid, spec.off_sem) == (r["sm_init_flag"], r["owner_pid"], r["sem"])
    assert spec.off_sem_postinit == r["sem_postinit"]
    assert (spec.off_device_num, spec.off_uuids, spec.off_limit, spec.off_sm_limit, spec.off_procs) == (
        r["device_num"],
        r["uuids"],
        r["limit"],
        r["sm_limit"],
        r["procs"],
    )
    assert (spec.off_proc_num, spec.off_utilization_switch, spec.off_recent_kernel, spec.off_priority) == (
        r["proc_num"],
        r["utilization_switch"],
        r["recent_kernel"],
        r["priority"],
    )
    assert spec.off_last_kernel_time == r["last_kernel_time"]
    assert spec.has_version == (r["major_version"] is not None)
    assert spec.slot_size == s["sizeof"]
    assert (spec.slot_used, spec.slot_monitorused, spec.slot_util, spec.slot_status) == (
        s["used"],
        s["monitorused"],
        s["device_util"],
        s["status"],
    )
    assert spec.slot_seqlock == s["seqlock"]
    assert spec.used_size == (40 if k < 2 else 64)
    assert spec.util_size == (0 if k == 0 else 24 if k == 1 else 48)


def test_address_formulas_follow_the_spec_example():
    v1 = layouts.V1
    # docs/hami-core.md §4.5: used[d].total of slot i = 1856 + i·1960 + 8 + d·64 + 32
    for i, d in ((0, 0), (3, 1), (1023, 15)):
        assert v1.used(i, d) + 32 == 1856 + i * 1960 + 8 + d * 64 + 32
        assert v1.sm_util(i, d) == 1856 + i * 1960 + 1160 + d * 48 + 16
        assert v1.monitorused(i, d) == 1856 + i * 1960 + 1032 + 8 * d
    assert layouts.ORIGINAL.slot(1023) + layouts.ORIGINAL.slot_size == layouts.ORIGINAL.off_proc_num
    assert layouts.INTERIM.slot(1023) + layouts.INTERIM.slot_size == layouts.INTERIM.off_proc_num


def test_layout_identification_is_by_size_only():
    assert {size: layouts.spec_for_size(size).layout for size in SPEC_FILE_SIZES.values()} == {
        804_681: layouts.Layout.ORIGINAL,
        1_197_897: layouts.Layout.V0,
        2_008_953: layouts.Layout.V1,
        2_008_985: layouts.Layout.INTERIM,
    }
    for size in (0, 804_680, 804_682, 2_008_952, 2_008_954, 2_008_984, 2_008_986):
        assert layouts.spec_for_size(size) is None
