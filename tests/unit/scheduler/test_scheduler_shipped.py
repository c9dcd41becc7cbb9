"""The emulator's shipped configuration is the one in deploy/ (docs/scheduler-emulator.md §9.8)."""

from __future__ import annotations

import pathlib

import yaml

from vgpu.config.device_config import device_config_from_data
from vgpu.sim.scheduler.shipped import shipped_scheduler_config

DEPLOY = pathlib.Path(__file__).resolve().parents[3] / "deploy"


def deviceshare_arguments() -> dict:
    cm = yaml.safe_load((DEPLOY / "volcano-scheduler-configmap.yaml").read_text())
    conf = yaml.safe_load(cm["data"]["volcano-scheduler.conf"])
    for tier in conf["tiers"]:
        for plugin in tier["plugins"]:
            if plugin["name"] == "deviceshare":
                return plugin["arguments"]
    raise AssertionError("no deviceshare plugin in the shipped scheduler ConfigMap")


def test_scheduler_arguments_match_the_shipped_configmap():
    args = deviceshare_arguments()
    cfg = shipped_scheduler_config("master")
    assert args["deviceshare.VGPUEnable"] is True
    assert cfg.policy == args["deviceshare.SchedulePolicy"]
    assert cfg.weight == args["deviceshare.ScheduleWeight"]
    assert cfg.node_lock_enable == args["deviceshare.NodeLockEnable"]


def test_device_configmap_values_match():
    cm = yaml.safe_load((DEPLOY / "base" / "device-config.yaml").read_text())
    shipped, problems = device_config_from_data(yaml.safe_load(cm["data"]["device-config.yaml"]), "device-config.yaml")
    assert problems == []
    cfg = shipped_scheduler_config("v1.15", policy="spread")
    assert cfg.policy == "spread"
    assert (cfg.count_name, cfg.memory_name, cfg.cores_name, cfg.memory_percentage_name) == (
        shipped.resource_count_name,
        shipped.resource_memory_name,
        shipped.resource_core_name,
        shipped.resource_memory_percentage_name,
    )
    assert cfg.gpu_memory_factor == shipped.gpu_memory_factor
    assert cfg.known_mig_geometries == shipped.known_mig_geometries
