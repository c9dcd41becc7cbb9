"""The shipped ConfigMaps, read by the project's own config parsers and checked against the
Volcano scheduler configuration that points at them."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from vgpu.config.device_config import default_device_config
from vgpu.config.loader import parse_device_config, parse_node_config
from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES, geometries_as_data
from vgpu.config.model import MODE_HAMI_CORE, MODE_MIG, MigGeometryEntry, MigGroup, MigTemplate

from . import manifests as m

# What Volcano reads from device-config.yaml (it does not merge omitted keys with defaults).
VOLCANO_KEYS = (
    "resourceCountName",
    "resourceMemoryName",
    "resourceCoreName",
    "resourceMemoryPercentageName",
    "gpuMemoryFactor",
    "knownMigGeometries",
)


def _device_text(docs) -> str:
    return m.configmap_data(docs, "volcano-vgpu-device-config")["device-config.yaml"]


@pytest.mark.parametrize("kustomization", ["base", "overlays/volcano-1.15"])
def test_device_config_parses_cleanly_and_equals_the_built_in_defaults(kustomization):
    text = _device_text(m.render(kustomization))
    cfg, warnings = parse_device_config(text, "device-config.yaml")
    assert warnings == []
    assert replace(cfg, source="") == replace(default_device_config(), source="")
    assert cfg.known_mig_geometries == DEFAULT_KNOWN_MIG_GEOMETRIES


# docs/mig.md §2.1, "Entries worth adding": H100 80GB with NVML's instance sizes.
H100_80GB = MigGeometryEntry(
    models=("H100 80GB HBM3",),
    groups=(
        MigGroup("group1", (MigTemplate("1g.10gb", 9984, 7),)),
        MigGroup("group2", (MigTemplate("2g.20gb", 20096, 3), MigTemplate("1g.10gb", 9984, 1))),
        MigGroup("group3", (MigTemplate("3g.40gb", 40448, 2),)),
        MigGroup("group4", (MigTemplate("7g.80gb", 81152, 1),)),
    ),
)


def test_mig_overlay_device_config_is_the_base_plus_an_h100_entry():
    text = _device_text(m.render("overlays/mig"))
    cfg, warnings = parse_device_config(text, "device-config.yaml")
    assert warnings == []
    assert replace(cfg, source="") == replace(
        default_device_config(), source="", known_mig_geometries=DEFAULT_KNOWN_MIG_GEOMETRIES + (H100_80GB,)
    )
    # The patch repeats the whole file: apart from the new entry it must not drift from the base.
    overlay = yaml.safe_load(text)["nvidia"]
    base = yaml.safe_load(_device_text(m.single_file_docs()))["nvidia"]
    overlay["knownMigGeometries"] = overlay["knownMigGeometries"][:-1]
    assert overlay == base


def test_device_config_spells_out_every_key_volcano_reads():
    section = yaml.safe_load(_device_text(m.single_file_docs()))["nvidia"]
    missing = [k for k in VOLCANO_KEYS if k not in section]
    assert not missing, missing
    assert section["knownMigGeometries"] == geometries_as_data()


def test_base_node_config_has_no_overrides():
    text = m.configmap_data(m.single_file_docs(), "volcano-vgpu-node-config")["config.json"]
    node, warnings = parse_node_config(text, "config.json", "any-node")
    assert warnings == [] and not node.matched and node.operating_mode == MODE_HAMI_CORE


def test_mig_overlay_puts_its_listed_nodes_in_mig_mode_with_room_for_seven_instances():
    text = m.configmap_data(m.render("overlays/mig"), "volcano-vgpu-node-config")["config.json"]
    names = [e["name"] for e in json.loads(text)["nodeconfig"]]
    assert names
    largest_group = max(sum(t.count for t in g.geometries) for e in DEFAULT_KNOWN_MIG_GEOMETRIES for g in e.groups)
    for name in names:
        node, warnings = parse_node_config(text, "config.json", name)
        assert warnings == []
        assert node.operating_mode == MODE_MIG
        assert node.device_split_count >= largest_group
    other, _ = parse_node_config(text, "config.json", "some-other-node")
    assert other.operating_mode == MODE_HAMI_CORE


def _scheduler_conf() -> dict:
    (cm,) = m.load_docs(m.SCHEDULER_CONFIGMAP.read_text())
    assert (cm["kind"], cm["metadata"]["name"], cm["metadata"]["namespace"]) == (
        "ConfigMap",
        "volcano-scheduler-configmap",
        "volcano-system",
    )
    return yaml.safe_load(cm["data"]["volcano-scheduler.conf"])


def test_scheduler_configmap_enables_vgpu_and_points_at_our_geometries():
    conf = _scheduler_conf()
    plugins = {p["name"]: p.get("arguments") or {} for tier in conf["tiers"] for p in tier["plugins"]}
    assert "predicates" in plugins and "deviceshare" in plugins
    args = plugins["deviceshare"]
    assert args["deviceshare.VGPUEnable"] is True
    # vGPU cannot be combined with these (Volcano refuses to start).
    assert not args.get("deviceshare.GPUSharingEnable") and not args.get("deviceshare.GPUNumberEnable")
    assert args["deviceshare.SchedulePolicy"] in ("binpack", "spread")
    assert isinstance(args["deviceshare.ScheduleWeight"], int) and args["deviceshare.ScheduleWeight"] > 0
    assert isinstance(args["deviceshare.NodeLockEnable"], bool)
    cm = m.find(m.single_file_docs(), "ConfigMap", "volcano-vgpu-device-config")
    assert args["deviceshare.KnownGeometriesCMName"] == cm["metadata"]["name"]
    assert args["deviceshare.KnownGeometriesCMNamespace"] == cm["metadata"]["namespace"]
    actions = [a.strip() for a in conf["actions"].split(",")]
    assert "allocate" in actions


def test_scheduler_arguments_are_accepted_by_the_scheduler_emulator():
    from vgpu.sim.scheduler.model import SchedulerConfig

    args = {p["name"]: p.get("arguments") or {} for tier in _scheduler_conf()["tiers"] for p in tier["plugins"]}[
        "deviceshare"
    ]
    cfg = SchedulerConfig(
        version="master",
        policy=args["deviceshare.SchedulePolicy"],
        weight=args["deviceshare.ScheduleWeight"],
        node_lock_enable=args["deviceshare.NodeLockEnable"],
    )
    assert cfg.policy == args["deviceshare.SchedulePolicy"]
