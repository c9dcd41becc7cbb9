"""The MIG state of a node: one entry per GPU, one lock per GPU, apply and resolve.

:class:`MigManager` is the one object the plugin (Allocate) and the monitor (identity
metrics) use.  Per GPU it caches what never changes while MIG mode is on — the profile
catalog, the compute-instance profile ids — and the placement plan of every group of the
GPU's ``knownMigGeometries`` entry (recomputed when a reload changes the entry).  Every apply,
destroy and resolve on a GPU holds that GPU's lock (docs/mig.md §5); different GPUs proceed in
parallel.  All NVML calls go through the cffi layer (:class:`vgpu.nvml.mig_calls.MigNvml`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from vgpu.config.model import EffectiveConfig, MigGeometryEntry
from vgpu.mig.errors import MigConfigError, MigError, MigGpuUnavailable, MigPositionError, MigResolveError
from vgpu.mig.existing import CiProfileCache
from vgpu.mig.plan import GroupPlan, PlannedInstance, plan_group
from vgpu.mig.profiles import ProfileCatalog, resolve_catalog
from vgpu.mig.reconcile import ApplyResult, Busy, MigInstanceInfo, Observer, ResultMemo, reconcile, resolve
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.errors import NvmlError
from vgpu.nvml.mig_calls import DeviceHandle, MigNvml
from vgpu.nvml.sampler import Sampler

log = logging.getLogger(__name__)

PROCESS_ROWS = 1024  # processes read per GPU for the idle check (NVML's full count is still known)


@dataclass
class MigGpu:
    """What the manager knows about one MIG GPU."""

    uuid: str
    name: str
    entry: MigGeometryEntry
    catalog: ProfileCatalog
    plans: dict[str, GroupPlan]
    plan_errors: dict[str, str]
    ci_profiles: CiProfileCache = field(default_factory=CiProfileCache)
    memo: ResultMemo = field(default_factory=dict)  # reused result objects (reconcile.ResultMemo)

    @property
    def model(self) -> str:
        """The ``models`` entry that matched this GPU's name (first match, as the scheduler)."""
        return next((m for m in self.entry.models if m in self.name), self.entry.models[0])

    def plan(self, group: str, device_id: str | None = None) -> GroupPlan:
        plan = self.plans.get(group)
        if plan is not None:
            return plan
        if group in self.plan_errors:
            raise MigConfigError(f"GPU {self.uuid}: {self.plan_errors[group]}")
        raise MigPositionError(f"unknown MIG group/position {device_id or f'{self.uuid}[{group}-?]'}")


def slot_id(uuid: str, group: str, position: int) -> str:
    return f"{uuid}[{group}-{position}]"


class MigManager:
    """Dynamic MIG for the GPUs of one node (see the module docstring).

    ``config`` is the effective configuration, or a callable returning the current one (the
    plugin's SIGHUP reload swaps it); ``gpus`` names the node's GPUs (the geometry entry is
    matched against the NVML name).
    """

    def __init__(
        self, nvml: MigNvml, config: EffectiveConfig | Callable[[], EffectiveConfig], gpus: Sequence[GpuInfo]
    ) -> None:
        self.nvml = nvml
        self._config = config if callable(config) else (lambda: config)
        self._names: dict[str, str] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._gpus: dict[str, MigGpu] = {}
        self._catalogs: dict[str, ProfileCatalog] = {}
        self._excluded: dict[str, str] = {}
        self._meta = threading.Lock()
        self._sampler: Sampler | None = None
        self.set_gpus(gpus)

    @classmethod
    def open(
        cls, library: str | None, config: EffectiveConfig | Callable[[], EffectiveConfig], gpus: Sequence[GpuInfo]
    ) -> MigManager:
        """A manager with its own native NVML context on ``library`` (``--nvml-library``)."""
        return cls(MigNvml(library), config, gpus)

    def close(self) -> None:
        self.nvml.close()

    def __enter__(self) -> MigManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ bookkeeping

    def set_gpus(self, gpus: Sequence[GpuInfo]) -> None:
        """The node's GPUs (after discovery or re-enumeration); cached plans of others are dropped."""
        with self._meta:
            self._names = {g.uuid: g.name for g in gpus}
            for uuid in list(self._gpus):
                if uuid not in self._names:
                    self._gpus.pop(uuid, None)
                    self._catalogs.pop(uuid, None)

    def refresh(self) -> None:
        """Re-enumerate NVML devices (after a MIG mode change handles may change)."""
        with self._meta:
            self.nvml.refresh()
            self._sampler = None

    def lock(self, uuid: str) -> threading.Lock:
        """The GPU's lock: every apply, destroy and resolve on it holds this."""
        with self._meta:
            return self._locks.setdefault(uuid, threading.Lock())

    def exclude(self, uuid: str, reason: str) -> None:
        """Refuse MIG on this GPU until the process restarts (startup exclusions, docs/mig.md §5.1)."""
        with self._meta:
            self._excluded[uuid] = reason

    @property
    def config(self) -> EffectiveConfig:
        return self._config()

    def handle(self, uuid: str) -> DeviceHandle:
        return self.nvml.device_by_uuid(uuid)

    # ------------------------------------------------------------------ per-GPU state

    def gpu(self, uuid: str) -> MigGpu:
        """The GPU's MIG state, resolving profiles and plans on first use or after a reload."""
        with self.lock(uuid):
            return self._gpu_locked(uuid)

    def _gpu_locked(self, uuid: str) -> MigGpu:
        reason = self._excluded.get(uuid)
        if reason is not None:
            raise MigGpuUnavailable(f"GPU {uuid} is excluded from MIG: {reason}")
        name = self._names.get(uuid)
        if name is None:
            raise MigGpuUnavailable(f"GPU {uuid} is not a GPU of this node")
        entry = self.config.mig_entry_for(name)
        if entry is None:
            raise MigGpuUnavailable(f"no knownMigGeometries entry matches GPU {uuid} ({name})")
        cached = self._gpus.get(uuid)
        if cached is not None and cached.name == name and (cached.entry is entry or cached.entry == entry):
            return cached
        catalog = self._catalogs.get(uuid)
        if catalog is None:
            try:
                catalog = resolve_catalog(self.nvml, self.handle(uuid), name)
            except NvmlError as exc:
                raise MigResolveError(f"GPU {uuid}: cannot read its MIG profiles: {exc}") from None
            if not catalog.profiles:  # not cached: MIG mode may be switched on later (e.g. by the plugin)
                raise MigResolveError(f"GPU {uuid} ({name}): NVML reports no MIG profiles (is MIG mode enabled?)")
            self._catalogs[uuid] = catalog
        plans, errors = {}, {}
        for group in entry.groups:
            try:
                plans[group.group] = plan_group(group, catalog)
            except MigConfigError as exc:
                errors[group.group] = str(exc)
        gpu = MigGpu(
            uuid, name, entry, catalog, plans, errors, cached.ci_profiles if cached is not None else CiProfileCache()
        )
        self._gpus[uuid] = gpu
        return gpu

    def slot(self, uuid: str, group: str, position: int) -> PlannedInstance:
        """Position ``position`` of ``group`` on the GPU; ``unknown MIG group/position <id>`` otherwise."""
        gpu = self.gpu(uuid)
        device_id = slot_id(uuid, group, position)
        plan = gpu.plan(group, device_id)
        if not 0 <= position < len(plan):
            raise MigPositionError(f"unknown MIG group/position {device_id}")
        return plan.at(position)

    # ------------------------------------------------------------------ operations

    def apply(self, uuid: str, group: str, *, observer: Observer | None = None) -> ApplyResult:
        """Reshape the GPU to ``group`` (idempotent) and return every position's MIG device."""
        with self.lock(uuid):
            gpu = self._gpu_locked(uuid)
            plan = gpu.plan(group)
            try:
                handle = self.handle(uuid)
            except NvmlError as exc:
                raise MigGpuUnavailable(f"GPU {uuid}: {exc}") from None
            result = reconcile(
                self.nvml,
                handle,
                uuid,
                plan,
                gpu.catalog,
                gpu.ci_profiles,
                busy=lambda: self.busy(uuid),
                observer=observer,
                memo=gpu.memo,
            )
        if result.destroyed or result.created:
            log.info(
                "MIG %s on %s: destroyed GI %s, created positions %s",
                group,
                uuid,
                list(result.destroyed),
                list(result.created),
            )
        return result

    def resolve(self, uuid: str, group: str) -> dict[int, MigInstanceInfo]:
        """Position → MIG device of the positions of ``group`` that exist now (read-only)."""
        with self.lock(uuid):
            gpu = self._gpu_locked(uuid)
            plan = gpu.plan(group)
            try:
                return resolve(self.nvml, self.handle(uuid), uuid, plan, gpu.catalog, gpu.ci_profiles, memo=gpu.memo)
            except NvmlError as exc:
                raise MigResolveError(f"GPU {uuid}: cannot read its MIG layout: {exc}") from None

    def lookup(self, uuid: str, group: str, position: int) -> MigInstanceInfo | None:
        """The MIG device serving a slot now, or None when it cannot be resolved (never raises
        a MIG or NVML error: the monitor skips such devices, docs/metrics.md §3)."""
        try:
            return self.resolve(uuid, group).get(position)
        except (MigError, NvmlError) as exc:
            log.debug("MIG slot %s not resolvable: %s", slot_id(uuid, group, position), exc)
            return None

    def busy(self, uuid: str) -> Busy:
        """Which GPU instances have processes now, from the parent device's process list."""
        with self._meta:
            if self._sampler is None:
                self._sampler = Sampler(native=self.nvml.native, max_processes=PROCESS_ROWS)
            sampler = self._sampler
        index = self._index_of(uuid)
        if index is None:
            return Busy(frozenset(), known=False)
        sample = sampler.sample()
        if index >= len(sample.devices):
            return Busy(frozenset(), known=False)
        dev = sample.devices[index]
        if dev.processes_rc != 0:
            return Busy(frozenset(), known=False)
        gis = frozenset(p.gpu_instance_id for p in dev.processes if p.gpu_instance_id is not None)
        whole = sum(1 for p in dev.processes if p.gpu_instance_id is None)
        return Busy(gis, whole, known=not dev.processes_truncated)

    def _index_of(self, uuid: str) -> int | None:
        for index in range(self.nvml.device_count()):
            try:
                if self.nvml.uuid(self.nvml.device(index)) == uuid:
                    return index
            except NvmlError:
                continue
        return None
