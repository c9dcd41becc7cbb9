"""The shipped ConfigMaps, read by the project's own config parsers and checked against the
Volcano scheduler configuration that points at them."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from vgpu.config.device_config import default_device_config
from vgpu.config.loader import parse_device_config, parse_node_config
from vgpu.config.mig_defaults import (
    DEFAULT_KNOWN_MIG_GEOMETRIES,
    NEWER_MIG_GEOMETRIES,
    SHIPPED_MIG_GEOMETRIES,
    geometries_as_data,
)
from vgpu.config.model import MODE_HAMI_CORE, MODE_MIG

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


MIG_VALUES = m.DEPLOY / "helm" / "mig-values.yaml"


def _parsed_mig_device_config(text: str, where: str):
    """The MIG device config through the real loader: it must load cleanly and equal the built-in
    defaults with exactly the shipped geometry list (docs/mig.md §2.2) -- nothing more, nothing less,
    in the same order (a card uses the first matching entry; the scheduler walks the groups in order)."""
    cfg, warnings = parse_device_config(text, where)
    assert warnings == [], where
    assert cfg.known_mig_geometries == SHIPPED_MIG_GEOMETRIES, where
    assert replace(cfg, source="") == replace(
        default_device_config(), source="", known_mig_geometries=SHIPPED_MIG_GEOMETRIES
    ), where
    return cfg


def test_mig_overlay_device_config_is_the_base_plus_the_newer_gpu_entries():
    text = _device_text(m.render("overlays/mig"))
    _parsed_mig_device_config(text, "overlays/mig device-config.yaml")
    # The patch repeats the whole file: apart from the geometries it must not drift from the base.
    overlay = yaml.safe_load(text)["nvidia"]
    base = yaml.safe_load(_device_text(m.single_file_docs()))["nvidia"]
    assert overlay.pop("knownMigGeometries") == geometries_as_data(SHIPPED_MIG_GEOMETRIES)
    assert base.pop("knownMigGeometries") == geometries_as_data(DEFAULT_KNOWN_MIG_GEOMETRIES)
    assert overlay == base


def test_mig_values_device_config_carries_exactly_the_shipped_geometries():
    # Read from the values file itself (no helm needed): the text the chart puts into the ConfigMap.
    values = yaml.safe_load(MIG_VALUES.read_text())
    _parsed_mig_device_config(values["deviceConfig"], "mig-values.yaml deviceConfig")
    # Upstream's list first, unchanged, then the newer GPUs: the same YAML data as the overlay.
    data = yaml.safe_load(values["deviceConfig"])["nvidia"]["knownMigGeometries"]
    assert data == geometries_as_data(DEFAULT_KNOWN_MIG_GEOMETRIES + NEWER_MIG_GEOMETRIES)
    assert data == yaml.safe_load(_device_text(m.render("overlays/mig")))["nvidia"]["knownMigGeometries"]


def test_the_shipped_newer_entries_match_in_order_and_do_not_shadow_each_other():
    # "H200" before "H20", "GB200" before "B200" (docs/mig.md §2.2): each model finds its own entry.
    models = [e.models for e in NEWER_MIG_GEOMETRIES]
    assert models == [("H100 80GB HBM3",), ("H200",), ("NVIDIA H20",), ("GB200",), ("B200",)]
    for name, want in [
        ("NVIDIA H100 80GB HBM3", "H100 80GB HBM3"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H20", "NVIDIA H20"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
    ]:
        first = next(e for e in SHIPPED_MIG_GEOMETRIES if any(model in name for model in e.models))
        assert want in first.models, name


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
    largest_group = max(sum(t.count for t in g.geometries) for e in SHIPPED_MIG_GEOMETRIES for g in e.groups)
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


def test_the_scheduler_reads_the_mig_geometries_from_the_mig_device_configmap():
    # The scheduler ConfigMap carries no geometries of its own: it names the device ConfigMap, so
    # with the mig overlay (or mig-values.yaml) it reads the very list the plugin loads.
    conf = _scheduler_conf()
    assert "knownMigGeometries" not in yaml.safe_dump(conf)
    args = {p["name"]: p.get("arguments") or {} for tier in conf["tiers"] for p in tier["plugins"]}["deviceshare"]
    docs = m.render("overlays/mig")
    (cm,) = [
        d
        for d in docs
        if d["kind"] == "ConfigMap"
        and d["metadata"]["name"] == args["deviceshare.KnownGeometriesCMName"]
        and d["metadata"]["namespace"] == args["deviceshare.KnownGeometriesCMNamespace"]
    ]
    _parsed_mig_device_config(cm["data"]["device-config.yaml"], "the scheduler's geometries ConfigMap")
