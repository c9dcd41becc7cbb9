"""Dynamic MIG: geometry reconciliation through NVML (cffi), position → instance → MIG UUID.

docs/decisions.md decision 9 and docs/mig.md: the scheduler picks a group and a position per request
(``GPU-…[group-pos]``); the plugin reshapes that GPU to the group's geometry with explicit
placements, never destroys an instance that has processes, and hands the container the MIG
device of that position.  Modules:

- ``profiles``  GI profile catalog of a GPU, by name (V call; static-table fallback)
- ``plan``      the deterministic placement plan of a group (pure)
- ``existing``  what is on the GPU now (read-only NVML)
- ``reconcile`` destroy / create / roll back / resolve for one GPU
- ``manager``   per-GPU state and locks: ``MigManager.apply/resolve/lookup``
- ``startup``   mode ``mig`` startup: enable MIG mode, exclusions, memory warnings
- ``holdings``  the MIG slots held on a node and the guards of an allocation (pure)
- ``node``      what the plugin holds in mode ``mig``; its applier (guards + apply → MIG UUIDs)
- ``inventory`` MIG identity for the monitor's ``hami_mig_device_info``
"""

from vgpu.mig.errors import (
    MigApplyError,
    MigConfigError,
    MigError,
    MigGpuUnavailable,
    MigGuardError,
    MigInUseError,
    MigPositionError,
    MigResolveError,
)
from vgpu.mig.inventory import MigSlotRef, inventory, slots_of
from vgpu.mig.manager import MigGpu, MigManager
from vgpu.mig.plan import GroupPlan, PlannedInstance, describe, place, plan_group
from vgpu.mig.profiles import ProfileCatalog, ProfileInfo, resolve_catalog
from vgpu.mig.reconcile import ApplyResult, Busy, MigInstanceInfo, MigStep
from vgpu.mig.startup import GpuExclusion, MigStartupReport, prepare_mig_gpus

__all__ = [
    "ApplyResult",
    "Busy",
    "GpuExclusion",
    "GroupPlan",
    "MigApplyError",
    "MigConfigError",
    "MigError",
    "MigGpu",
    "MigGpuUnavailable",
    "MigGuardError",
    "MigInUseError",
    "MigInstanceInfo",
    "MigManager",
    "MigPositionError",
    "MigResolveError",
    "MigSlotRef",
    "MigStartupReport",
    "MigStep",
    "PlannedInstance",
    "ProfileCatalog",
    "ProfileInfo",
    "describe",
    "inventory",
    "place",
    "plan_group",
    "prepare_mig_gpus",
    "resolve_catalog",
    "slots_of",
]
