"""Startup of a node in mode ``mig`` (docs/mig.md §5.1): which GPUs can serve MIG, and why not.

For each GPU the plugin advertises (filterdevices already applied), in this order:

1. ``nvmlDeviceGetMigMode``: ``NOT_SUPPORTED`` → not MIG-capable → excluded.
2. The first ``knownMigGeometries`` entry whose model is a substring of the NVML name; none →
   excluded (docs/failures.md G-1: the scheduler would otherwise place hami-core pods there).
   **(our choice)** This check runs before step 3, so a card we are going to exclude anyway
   is never switched into MIG mode.
3. MIG mode off → ``nvmlDeviceSetMigMode(ENABLE)``.  Success (return and activation) → the
   devices are re-enumerated.  ``IN_USE`` (not idle), ``RESET_REQUIRED``, a pending mode or
   anything else → excluded until the plugin restarts, with the reason.
4. Resolve every profile the entry names and plan every group (docs/mig.md §6).  An unknown
   profile or an infeasible group → excluded, naming the group.  A geometry whose memory is
   larger than NVML's instance size → warning (docs/failures.md G-7).
5. Existing instances are left untouched.

Excluded GPUs are left out of every resource and of the register annotation by the caller,
which also posts one Warning Event on the Node per exclusion (the reason is the message).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.mig.errors import MigError
from vgpu.mig.manager import MigManager
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.errors import (
    NVML_ERROR_IN_USE,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_RESET_REQUIRED,
    NVML_SUCCESS,
    NvmlError,
    code_name,
)
from vgpu.nvml.mig_calls import NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE

log = logging.getLogger(__name__)

EVENT_REASON_EXCLUDED = "MIGDeviceExcluded"


@dataclass(frozen=True)
class GpuExclusion:
    uuid: str
    index: int
    name: str
    reason: str

    @property
    def message(self) -> str:
        return f"GPU {self.index} {self.uuid} ({self.name}) is excluded in mig mode: {self.reason}"


@dataclass(frozen=True)
class MigStartupReport:
    usable: tuple[str, ...]  # UUIDs ready for MIG allocations
    excluded: tuple[GpuExclusion, ...]
    warnings: tuple[str, ...]
    enabled: tuple[str, ...]  # UUIDs whose MIG mode this startup switched on

    @property
    def reenumerate(self) -> bool:
        """True when MIG mode changed: handles and minor numbers may have changed (docs/mig.md §7)."""
        return bool(self.enabled)


def _enable_reason(exc: NvmlError) -> str:
    if exc.code == NVML_ERROR_IN_USE:
        return f"cannot enable MIG mode: the GPU is not idle ({exc})"
    if exc.code == NVML_ERROR_RESET_REQUIRED:
        return f"cannot enable MIG mode without a GPU reset ({exc})"
    return f"cannot enable MIG mode: {exc}"


def memory_warnings(manager: MigManager, uuid: str) -> list[str]:
    """``knownMigGeometries <model>/<group>/<name>: memory <m> MiB exceeds NVML instance size <s> MiB``."""
    gpu = manager.gpu(uuid)
    out = []
    for group in gpu.entry.groups:
        for template in group.geometries:
            profile = gpu.catalog.by_name(template.name)
            if profile is not None and template.memory_mib > profile.memory_size_mb:
                out.append(
                    f"knownMigGeometries {gpu.model}/{group.group}/{template.name}: memory "
                    f"{template.memory_mib} MiB exceeds NVML instance size {profile.memory_size_mb} MiB"
                )
    return out


def _prepare_one(manager: MigManager, gpu: GpuInfo, enabled: list[str], warnings: list[str]) -> str | None:
    """None when the GPU is usable, else the exclusion reason."""
    nvml = manager.nvml
    try:
        handle = manager.handle(gpu.uuid)
        current, pending = nvml.get_mig_mode(handle)
    except NvmlError as exc:
        if exc.code == NVML_ERROR_NOT_SUPPORTED:
            return "the GPU is not MIG-capable (nvmlDeviceGetMigMode: NOT_SUPPORTED)"
        return f"cannot read its MIG mode: {exc}"
    if manager.config.mig_entry_for(gpu.name) is None:
        return (
            f"no knownMigGeometries entry has a model that is a substring of {gpu.name!r} "
            "(the scheduler logs 'mig type not found' for it)"
        )
    if current == NVML_DEVICE_MIG_DISABLE:
        if pending == NVML_DEVICE_MIG_ENABLE:
            return "MIG mode is enabled but pending: it takes effect only after a GPU reset"
        try:
            activation = nvml.set_mig_mode(handle, NVML_DEVICE_MIG_ENABLE)
        except NvmlError as exc:
            return _enable_reason(exc)
        if activation != NVML_SUCCESS:
            return f"MIG mode was set but not activated ({code_name(activation)}); a GPU reset is required"
        enabled.append(gpu.uuid)
        log.info("GPU %s (%s): MIG mode enabled", gpu.uuid, gpu.name)
        manager.refresh()
    try:
        state = manager.gpu(gpu.uuid)
    except (MigError, NvmlError) as exc:
        return str(exc)
    if state.plan_errors:
        group, text = next(iter(state.plan_errors.items()))
        return f"knownMigGeometries group {group} cannot be used: {text}"
    warnings.extend(w for w in memory_warnings(manager, gpu.uuid) if w not in warnings)
    return None


def prepare_mig_gpus(manager: MigManager, gpus: Sequence[GpuInfo]) -> MigStartupReport:
    """Run docs/mig.md §5.1 for ``gpus`` (the non-filtered ones); excluded GPUs are also marked in
    ``manager`` so that an allocation on them fails clearly.  Never raises for one bad GPU."""
    usable: list[str] = []
    excluded: list[GpuExclusion] = []
    enabled: list[str] = []
    warnings: list[str] = []
    for gpu in gpus:
        reason = _prepare_one(manager, gpu, enabled, warnings)
        if reason is None:
            usable.append(gpu.uuid)
            continue
        exclusion = GpuExclusion(gpu.uuid, gpu.index, gpu.name, reason)
        excluded.append(exclusion)
        manager.exclude(gpu.uuid, reason)
        log.warning("%s", exclusion.message)
    for text in warnings:
        log.warning("%s", text)
    return MigStartupReport(tuple(usable), tuple(excluded), tuple(warnings), tuple(enabled))
