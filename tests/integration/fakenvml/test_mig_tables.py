"""Built-in MIG profile tables (docs/mig.md §3) and the default geometries (docs/mig.md §2.1, §6)."""

from __future__ import annotations

import pytest

from vgpu.sim.nvml import fakenvml

A100_CONSTANTS = [
    (0x0, 7, list(range(7)), 1),
    (0x7, 1, list(range(7)), 1),
    (0x9, 4, [0, 2, 4, 6], 2),
    (0x1, 3, [0, 2, 4], 2),
    (0x2, 2, [0, 4], 4),
    (0x3, 1, [0], 4),
    (0x4, 1, [0], 8),
]
A100_IDS = {0x0: 19, 0x7: 20, 0x9: 15, 0x1: 14, 0x2: 9, 0x3: 5, 0x4: 0}
A100_SLICES = {0x0: 1, 0x7: 1, 0x9: 1, 0x1: 2, 0x2: 3, 0x3: 4, 0x4: 7}


def a100_class(names: list[str], memory: list[int]) -> dict[int, dict]:
    """The A100-shaped table: per GI constant, name, id, slices, instances, placements, memory."""
    return {
        const: {
            "name": name,
            "id": A100_IDS[const],
            "slices": A100_SLICES[const],
            "instances": inst,
            "placements": [(s, size) for s in starts],
            "memory": mem,
        }
        for (const, inst, starts, size), name, mem in zip(A100_CONSTANTS, names, memory, strict=True)
    }


# docs/mig.md §3, row by row (constant order: 1_SLICE, 1_SLICE_REV1, 1_SLICE_REV2, 2, 3, 4, 7).
MODELS = {
    "NVIDIA A100-SXM4-40GB": a100_class(
        ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
        [4864, 4864, 9856, 9856, 19968, 19968, 40192],
    ),
    "NVIDIA A100-SXM4-80GB": a100_class(
        ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
        [9728, 9728, 19968, 19968, 40192, 40192, 80896],
    ),
    "NVIDIA H100 80GB HBM3": a100_class(
        ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
        [9984, 9984, 20096, 20096, 40448, 40448, 81152],
    ),
    "NVIDIA H200 141GB HBM3e": a100_class(
        ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
        [18432, 18432, 35840, 35840, 72704, 72704, 144384],
    ),
    "NVIDIA H20": a100_class(
        ["1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"],
        [12032, 12032, 24064, 24064, 48128, 48128, 96256],
    ),
    "NVIDIA B200": a100_class(
        ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
        [22784, 22784, 45568, 45568, 91136, 91136, 182272],
    ),
    "NVIDIA GB200": a100_class(
        ["1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"],
        [23552, 23552, 47104, 47104, 94208, 94208, 188416],
    ),
    "NVIDIA A30": {
        0x0: {
            "name": "1g.6gb",
            "id": 14,
            "slices": 1,
            "instances": 4,
            "placements": [(s, 1) for s in range(4)],
            "memory": 5836,
        },
        0x7: {
            "name": "1g.6gb+me",
            "id": 21,
            "slices": 1,
            "instances": 1,
            "placements": [(s, 1) for s in range(4)],
            "memory": 5836,
        },
        0x1: {"name": "2g.12gb", "id": 5, "slices": 2, "instances": 2, "placements": [(0, 2), (2, 2)], "memory": 11672},
        0x8: {
            "name": "2g.12gb+me",
            "id": 6,
            "slices": 2,
            "instances": 1,
            "placements": [(0, 2), (2, 2)],
            "memory": 11672,
        },
        0x3: {"name": "4g.24gb", "id": 0, "slices": 4, "instances": 1, "placements": [(0, 4)], "memory": 23344},
    },
}

MEMORY_TOTAL = {
    "NVIDIA A100-SXM4-40GB": 40960,
    "NVIDIA A100-SXM4-80GB": 81920,
    "NVIDIA H100 80GB HBM3": 81559,
    "NVIDIA H200 141GB HBM3e": 143771,
    "NVIDIA A30": 24064,
    "NVIDIA H20": 97871,
    "NVIDIA B200": 183359,
    "NVIDIA GB200": 189952,
}

# docs/mig.md §2.1 default geometries: group -> [(profile name, count)] in config order.
GEOMETRIES = {
    "NVIDIA A30": {"group1": [("1g.6gb", 4)], "group2": [("2g.12gb", 2)], "group3": [("4g.24gb", 1)]},
    "NVIDIA A100-SXM4-40GB": {
        "group1": [("1g.5gb", 7)],
        "group2": [("2g.10gb", 3), ("1g.5gb", 1)],
        "group3": [("3g.20gb", 2)],
        "group4": [("7g.40gb", 1)],
    },
    "NVIDIA A100-SXM4-80GB": {
        "group1": [("1g.10gb", 7)],
        "group2": [("2g.20gb", 3), ("1g.10gb", 1)],
        "group3": [("3g.40gb", 2)],
        "group4": [("7g.80gb", 1)],
    },
    "NVIDIA H100 80GB HBM3": {
        "group1": [("1g.10gb", 7)],
        "group2": [("2g.20gb", 3), ("1g.10gb", 1)],
        "group3": [("3g.40gb", 2)],
        "group4": [("7g.80gb", 1)],
    },
    "NVIDIA H200 141GB HBM3e": {
        "group1": [("1g.18gb", 7)],
        "group2": [("2g.35gb", 3), ("1g.18gb", 1)],
        "group3": [("3g.71gb", 2)],
        "group4": [("7g.141gb", 1)],
    },
    "NVIDIA H20": {
        "group1": [("1g.12gb", 7)],
        "group2": [("2g.24gb", 3), ("1g.12gb", 1)],
        "group3": [("3g.48gb", 2)],
        "group4": [("7g.96gb", 1)],
    },
    "NVIDIA B200": {
        "group1": [("1g.23gb", 7)],
        "group2": [("2g.45gb", 3), ("1g.23gb", 1)],
        "group3": [("3g.90gb", 2)],
        "group4": [("7g.180gb", 1)],
    },
    "NVIDIA GB200": {
        "group1": [("1g.23gb", 7)],
        "group2": [("2g.47gb", 3), ("1g.23gb", 1)],
        "group3": [("3g.93gb", 2)],
        "group4": [("7g.186gb", 1)],
    },
}

# docs/mig.md §6 plan table (position -> (profile, start, size)).
PLANS = {
    ("NVIDIA A100-SXM4-80GB", "group1"): [("1g.10gb", k, 1) for k in range(7)],
    ("NVIDIA A100-SXM4-80GB", "group2"): [("2g.20gb", 0, 2), ("2g.20gb", 2, 2), ("2g.20gb", 4, 2), ("1g.10gb", 6, 1)],
    ("NVIDIA A100-SXM4-80GB", "group3"): [("3g.40gb", 0, 4), ("3g.40gb", 4, 4)],
    ("NVIDIA A100-SXM4-80GB", "group4"): [("7g.80gb", 0, 8)],
    ("NVIDIA A30", "group2"): [("2g.12gb", 0, 2), ("2g.12gb", 2, 2)],
}

CI_FOR_SLICES = {1: 0x0, 2: 0x1, 3: 0x2, 4: 0x3, 7: 0x4}

READ_TABLE = (
    "h = p.nvmlDeviceGetHandleByIndex(0)\n"
    "def table():\n"
    "    out = {}\n"
    "    for const in range(p.NVML_GPU_INSTANCE_PROFILE_COUNT):\n"
    "        try:\n"
    "            info = p.nvmlDeviceGetGpuInstanceProfileInfo(h, const)\n"
    "        except (p.NVMLError_NotSupported, p.NVMLError_InvalidArgument):\n"
    "            continue\n"
    "        v1 = p.nvmlDeviceGetGpuInstanceProfileInfo(h, const, version=1)\n"
    "        assert (v1.id, v1.sliceCount, v1.memorySizeMB) == (info.id, info.sliceCount, info.memorySizeMB)\n"
    "        n = ctypes.c_uint(0)\n"
    "        p.nvmlDeviceGetGpuInstancePossiblePlacements(h, info.id, None, ctypes.byref(n))\n"
    "        arr = (p.c_nvmlGpuInstancePlacement_t * n.value)()\n"
    "        p.nvmlDeviceGetGpuInstancePossiblePlacements(h, info.id, arr, ctypes.byref(n))\n"
    "        out[const] = {'name': plain(info.name).removeprefix('MIG '), 'id': info.id,\n"
    "                      'slices': info.sliceCount, 'instances': info.instanceCount,\n"
    "                      'placements': [(a.start, a.size) for a in arr], 'memory': info.memorySizeMB}\n"
    "    return out\n"
)


def plan_group(groups: list[tuple[str, int]], profiles: dict[str, dict]) -> list[tuple[str, int, int]]:
    """docs/mig.md §6: lexicographically smallest non-overlapping placement per position (backtracking)."""
    positions = [name for name, count in groups for _ in range(count)]
    chosen: list[tuple[str, int, int]] = []

    def search(k: int) -> bool:
        if k == len(positions):
            return True
        for start, size in sorted(profiles[positions[k]]["placements"]):
            if all(start + size <= s or s + z <= start for _, s, z in chosen):
                chosen.append((positions[k], start, size))
                if search(k + 1):
                    return True
                chosen.pop()
        return False

    assert search(0), f"infeasible group {groups}"
    return chosen


@pytest.mark.parametrize("model", sorted(MODELS))
def test_profile_table_matches_the_spec(pynvml_child, tmp_path, model):
    fake = fakenvml.FakeNvml.create(
        tmp_path, [fakenvml.device(0, name=model, memory_total_mib=MEMORY_TOTAL[model], mig_mode=True)]
    )
    child = pynvml_child(fake)
    child.run(READ_TABLE)
    got = {int(k): dict(v, placements=[tuple(x) for x in v["placements"]]) for k, v in child.eval("table()").items()}
    assert got == MODELS[model]
    assert child.eval("p.nvmlDeviceGetMaxMigDeviceCount(h)") == (4 if model == "NVIDIA A30" else 7)


@pytest.mark.parametrize("model", sorted(GEOMETRIES))
def test_every_default_group_can_be_created_with_explicit_placements(pynvml_child, tmp_path, model):
    fake = fakenvml.FakeNvml.create(
        tmp_path, [fakenvml.device(0, name=model, memory_total_mib=MEMORY_TOTAL[model], mig_mode=True)]
    )
    child = pynvml_child(fake)
    child.run(
        READ_TABLE
        + (
            "def apply(plan):\n"
            "    made = []\n"
            "    for profile_id, start, size, ci_const in plan:\n"
            "        gi = p.nvmlDeviceCreateGpuInstanceWithPlacement(h, profile_id,\n"
            "            ctypes.byref(p.c_nvmlGpuInstancePlacement_t(start, size)))\n"
            "        ci_info = p.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, ci_const, 0)\n"
            "        ci = p.nvmlGpuInstanceCreateComputeInstance(gi, ci_info.id)\n"
            "        made.append((gi, ci))\n"
            "    result = []\n"
            "    for i in range(p.nvmlDeviceGetMaxMigDeviceCount(h)):\n"
            "        try:\n"
            "            m = p.nvmlDeviceGetMigDeviceHandleByIndex(h, i)\n"
            "        except p.NVMLError_NotFound:\n"
            "            continue\n"
            "        gi = p.nvmlDeviceGetGpuInstanceById(h, p.nvmlDeviceGetGpuInstanceId(m))\n"
            "        info = p.nvmlGpuInstanceGetInfo(gi)\n"
            "        result.append((info.profileId, info.placement.start, info.placement.size,\n"
            "                       p.nvmlDeviceGetMemoryInfo(m).total // (1 << 20)))\n"
            "    for gi, ci in reversed(made):\n"
            "        p.nvmlComputeInstanceDestroy(ci)\n"
            "        p.nvmlGpuInstanceDestroy(gi)\n"
            "    return sorted(result)\n"
        )
    )
    profiles = {v["name"]: v for v in MODELS[model].values()}
    for group, layout in GEOMETRIES[model].items():
        plan = plan_group(layout, profiles)
        if (model, group) in PLANS:
            assert plan == PLANS[(model, group)]
        request = [
            (profiles[name]["id"], start, size, CI_FOR_SLICES[profiles[name]["slices"]]) for name, start, size in plan
        ]
        created = child.eval(f"apply({request!r})")
        want = sorted([profiles[name]["id"], start, size, profiles[name]["memory"]] for name, start, size in plan)
        assert created == want, (model, group)
    assert fake.read_state()["devices"][0]["gpu_instances"] == []
