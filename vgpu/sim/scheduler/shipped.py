"""The scheduler configuration this project ships, as emulator parameters (docs/scheduler-emulator.md §9.8).

``deploy/volcano-scheduler-configmap.yaml`` sets the ``deviceshare`` arguments and the device
ConfigMap (``deploy/base/device-config.yaml``) the resource names, the factor and the MIG
geometries Volcano reads. The demo runs the emulator with these by default, so it shows what a
cluster installed from ``deploy/`` does; a unit test compares the values with both files.
"""

from __future__ import annotations

from vgpu.config.device_config import default_device_config
from vgpu.sim.scheduler.model import SchedulerConfig

SHIPPED_POLICY = "binpack"
"""``deviceshare.SchedulePolicy``."""
SHIPPED_WEIGHT = 10
"""``deviceshare.ScheduleWeight``."""
SHIPPED_NODE_LOCK = False
"""``deviceshare.NodeLockEnable``."""


def shipped_scheduler_config(version: str, policy: str | None = None) -> SchedulerConfig:
    """The emulator configured as the shipped ConfigMaps configure Volcano; ``policy`` overrides
    ``deviceshare.SchedulePolicy`` (``""`` = unset)."""
    d = default_device_config()
    return SchedulerConfig(
        version=version,
        policy=SHIPPED_POLICY if policy is None else policy,
        weight=SHIPPED_WEIGHT,
        node_lock_enable=SHIPPED_NODE_LOCK,
        known_mig_geometries=d.known_mig_geometries,
        count_name=d.resource_count_name,
        memory_name=d.resource_memory_name,
        cores_name=d.resource_core_name,
        memory_percentage_name=d.resource_memory_percentage_name,
        gpu_memory_factor=d.gpu_memory_factor,
    )
