"""Startup of a node in mode mig (docs/mig.md §5.1; docs/failures.md G-1, G-7)."""

from __future__ import annotations

from vgpu.nvml import errors
from vgpu.sim.nvml import fakenvml

from .conftest import A30, A100, device_config

UUID = [f"GPU-{i:08x}-6888-5063-1e4d-f2a09cfbf{i:03x}" for i in range(4)]


def mig_mode(child, index: int) -> list[int]:
    return child.child.eval(f"node.nvml.get_mig_mode(node.manager.handle(node.uuid({index})))")


def test_mig_mode_is_enabled_and_devices_reenumerated(mig_node):
    fake, child = mig_node([fakenvml.device(0), fakenvml.device(1)], startup=False)
    assert mig_mode(child, 0) == [0, 0]
    report = child.call("startup()")
    assert report["enabled"] == UUID[:2] and report["usable"] == UUID[:2] and report["excluded"] == {}
    assert mig_mode(child, 0) == [1, 1] and mig_mode(child, 1) == [1, 1]
    # already enabled: a restart changes nothing
    again = mig_node.restart(fake)
    assert again.startup_report["enabled"] == [] and again.startup_report["usable"] == UUID[:2]


def test_unknown_model_and_non_mig_gpu_are_excluded(mig_node):  # G-1
    devices = [
        fakenvml.device(0),
        fakenvml.device(1, name="NVIDIA H100 80GB HBM3"),
        fakenvml.device(2, name="Tesla T4", memory_total_mib=15360),
    ]
    _, child = mig_node(devices, config_text=None)  # the shipped geometries: no H100 entry
    report = child.startup_report
    assert report["usable"] == [UUID[0]]
    assert "no knownMigGeometries entry" in report["excluded"][UUID[1]]
    assert "'NVIDIA H100 80GB HBM3'" in report["excluded"][UUID[1]]
    assert "not MIG-capable" in report["excluded"][UUID[2]]
    assert mig_mode(child, 1) == [0, 0]  # a card we exclude is not switched to MIG
    blocked = child.call("apply(1, 'group1')")
    assert blocked["error"] == "MigGpuUnavailable" and "excluded from MIG" in blocked["message"]


def test_a_busy_gpu_cannot_be_switched_and_is_excluded(mig_node):
    devices = [fakenvml.device(0, processes=[{"pid": 1, "used_memory_mib": 100}]), fakenvml.device(1)]
    _, child = mig_node(devices)
    report = child.startup_report
    assert report["usable"] == [UUID[1]]
    assert report["excluded"][UUID[0]].startswith("cannot enable MIG mode: the GPU is not idle")
    assert "NVML_ERROR_IN_USE" in report["excluded"][UUID[0]]


def test_reset_required_is_excluded_with_the_reason(mig_node):
    _, child = mig_node([fakenvml.device(0, errors={"nvmlDeviceSetMigMode": errors.NVML_ERROR_RESET_REQUIRED})])
    report = child.startup_report
    assert report["usable"] == []
    assert report["excluded"][UUID[0]].startswith("cannot enable MIG mode without a GPU reset")


def test_infeasible_or_unknown_groups_exclude_the_gpu_naming_the_group(mig_node):
    entries = [
        {
            "models": ["A100-SXM4-80GB"],
            "allowedGeometries": [
                {"group": "ok", "geometries": [{"name": "1g.10gb", "memory": 9728, "count": 7}]},
                {"group": "toomany", "geometries": [{"name": "3g.40gb", "memory": 40192, "count": 3}]},
            ],
        },
        {
            "models": ["A30"],
            "allowedGeometries": [{"group": "typo", "geometries": [{"name": "5g.30gb", "memory": 30000, "count": 1}]}],
        },
    ]
    devices = [fakenvml.device(0), fakenvml.device(1, name=A30, memory_total_mib=24576)]
    _, child = mig_node(devices, config_text=device_config(entries))
    excluded = child.startup_report["excluded"]
    assert excluded[UUID[0]].startswith("knownMigGeometries group toomany cannot be used")
    assert "3 × 3g.40gb" in excluded[UUID[0]]
    assert excluded[UUID[1]].startswith("knownMigGeometries group typo cannot be used")
    assert "unknown MIG profile 5g.30gb" in excluded[UUID[1]]


def test_shipped_a30_geometry_warns_per_oversized_instance(mig_node):  # G-7
    _, child = mig_node([fakenvml.device(0, name=A30, memory_total_mib=24576)], config_text=None)
    assert child.startup_report["usable"] == [UUID[0]]
    assert child.startup_report["warnings"] == [
        "knownMigGeometries A30/group1/1g.6gb: memory 6144 MiB exceeds NVML instance size 5836 MiB",
        "knownMigGeometries A30/group2/2g.12gb: memory 12288 MiB exceeds NVML instance size 11672 MiB",
        "knownMigGeometries A30/group3/4g.24gb: memory 24576 MiB exceeds NVML instance size 23344 MiB",
    ]


def test_the_a100_80gb_shipped_geometry_fits_without_warnings(mig_node):
    _, child = mig_node([fakenvml.device(0, name=A100)], config_text=None)
    assert child.startup_report["warnings"] == []


def test_existing_instances_are_left_untouched_at_startup(mig_node):
    fake, child = mig_node()
    child.call("apply(0, 'group3')")
    before = child.call("layout(0)")
    again = mig_node.restart(fake)
    assert again.startup_report["usable"] == [UUID[0]]
    assert again.call("layout(0)") == before


def test_static_table_fallback_gives_the_same_catalog(mig_node):
    """A library without nvmlDeviceGetGpuInstanceProfileInfoV: names come from the static table,
    ids and sizes from the v1 call; the plans are the same."""
    _, child = mig_node()
    child.child.run("""
import dataclasses
from vgpu.mig.profiles import resolve_catalog
from vgpu.mig.plan import plan_group, describe
from vgpu.nvml.mig_calls import MigNvml

class NoNames(MigNvml):
    # what the native layer returns when only the v1 profile-info call exists: no name
    def gpu_instance_profile_info(self, device, profile):
        return dataclasses.replace(super().gpu_instance_profile_info(device, profile), name=None)

old = NoNames(native=node.nvml.native)
h = node.manager.handle(node.uuid(0))
static = resolve_catalog(old, h, node.gpus[0].name)
full = resolve_catalog(node.nvml, h, node.gpus[0].name)
entry = node.config.mig_entry_for(node.gpus[0].name)
""")
    assert child.child.eval("sorted({p.source for p in static.profiles})") == ["static"]
    assert child.child.eval(
        "sorted((p.name, p.profile_id, p.slice_count, p.instance_count, p.memory_size_mb, "
        "p.placements) for p in static.profiles)"
    ) == child.child.eval(
        "sorted((p.name, p.profile_id, p.slice_count, p.instance_count, p.memory_size_mb, p.placements) "
        "for p in full.profiles if not p.name.endswith(('-me', '.all')))"
    )
    assert child.child.eval("[describe(plan_group(g, static)) for g in entry.groups]") == child.child.eval(
        "[describe(plan_group(g, full)) for g in entry.groups]"
    )


def test_profiles_are_not_cached_while_nvml_reports_none(mig_node):
    """A manager that looks before MIG is available (the monitor starting first) asks again later."""
    fake, child = mig_node([fakenvml.device(0, mig_capable=False)], startup=False)
    blocked = child.call("apply(0, 'group1')")
    assert blocked["error"] == "MigResolveError" and "NVML reports no MIG profiles" in blocked["message"]
    assert child.call("lookup(0, 'group1', 0)") is None
    fake.update_device(0, mig_capable=True, mig_mode=True)
    result = child.call("apply(0, 'group1')")
    assert "error" not in result and len(result["devices"]) == 7


def test_a_reload_with_other_geometries_replans(mig_node):
    _, child = mig_node()
    child.child.run("""
from tests.integration.mig.node import _config
from vgpu.mig import MigManager, describe
current = [node.config]
m = MigManager(node.nvml, lambda: current[0], node.gpus)
before = describe(m.gpu(node.uuid(0)).plans['group2'])
current[0] = _config('''nvidia:
  knownMigGeometries:
  - models: [A100-SXM4-80GB]
    allowedGeometries:
    - group: group2
      geometries: [{name: 1g.10gb, memory: 9728, count: 1}, {name: 2g.20gb, memory: 19968, count: 3}]
''')
after = describe(m.gpu(node.uuid(0)).plans['group2'])
""")
    assert child.child.eval("before") == "0: 2g.20gb@0:2, 1: 2g.20gb@2:2, 2: 2g.20gb@4:2, 3: 1g.10gb@6:1"
    # the same instance types in another order: position 0 is now the 1g.10gb, and the search has
    # to back up until it sits at slice 6 (the 2g.20gb instances only fit at 0, 2 and 4)
    assert child.child.eval("after") == "0: 1g.10gb@6:1, 1: 2g.20gb@0:2, 2: 2g.20gb@2:2, 3: 2g.20gb@4:2"
