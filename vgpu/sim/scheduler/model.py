"""Data the scheduler emulator works on: its configuration, a neutral pod view, and the per-GPU
ledger (``GPUDevice`` / ``GPUDevices`` in Volcano). Pure data, no I/O."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any

from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES
from vgpu.config.model import (
    DEFAULT_CORES_NAME,
    DEFAULT_COUNT_NAME,
    DEFAULT_MEMORY_NAME,
    DEFAULT_MEMORY_PERCENTAGE_NAME,
    MigGeometryEntry,
    MigGroup,
)
from vgpu.protocol import keys
from vgpu.sim.scheduler.versions import VersionSwitches, switches_for

POLICIES = ("", "binpack", "spread")


@dataclass(frozen=True)
class SchedulerConfig:
    """The emulator's parameters (docs/scheduler-emulator.md §9).

    Scheduler args and the ConfigMap values it would load.
    """

    version: str = "master"
    policy: str = ""
    """``deviceshare.SchedulePolicy``: ``binpack``, ``spread`` or unset."""
    weight: int = 0
    """``deviceshare.ScheduleWeight``."""
    node_lock_enable: bool = False
    """``deviceshare.NodeLockEnable``."""
    known_mig_geometries: tuple[MigGeometryEntry, ...] = DEFAULT_KNOWN_MIG_GEOMETRIES
    count_name: str = DEFAULT_COUNT_NAME
    memory_name: str = DEFAULT_MEMORY_NAME
    cores_name: str = DEFAULT_CORES_NAME
    memory_percentage_name: str | None = None
    """``None`` means "the ConfigMap is absent": the version decides (default name ≤ v1.12, empty
    from v1.13). An explicit value (``""`` included) is what the ConfigMap says."""
    gpu_memory_factor: int = 1
    tz: tzinfo = UTC
    """The scheduler's local zone: its handshake stamps and lock values use local wall time."""

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.gpu_memory_factor < 1:
            raise ValueError(f"gpu_memory_factor must be >= 1, got {self.gpu_memory_factor}")
        switches_for(self.version)  # validates the version

    @property
    def switches(self) -> VersionSwitches:
        return switches_for(self.version)

    @property
    def effective_percentage_name(self) -> str:
        sw = self.switches
        if not sw.configmap_resource_names:
            return DEFAULT_MEMORY_PERCENTAGE_NAME  # v1.9–v1.12: built in, ConfigMap or not (case 2)
        if self.memory_percentage_name is not None:
            return self.memory_percentage_name
        return DEFAULT_MEMORY_PERCENTAGE_NAME if sw.percentage_name_without_configmap else ""

    @property
    def effective_names(self) -> tuple[str, str, str]:
        """(count, memory, cores) names the version reads: the built-in ones before v1.13 (case 2)."""
        if not self.switches.configmap_resource_names:
            return DEFAULT_COUNT_NAME, DEFAULT_MEMORY_NAME, DEFAULT_CORES_NAME
        return self.count_name, self.memory_name, self.cores_name


@dataclass(frozen=True)
class ContainerView:
    """The parts of a container the scheduler reads: name and resource quantities (strings)."""

    name: str
    limits: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, str] = field(default_factory=dict)


TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodView:
    """A neutral, immutable view of a Pod (built from a ``V1Pod`` or a manifest dict)."""

    namespace: str
    name: str
    uid: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[ContainerView, ...] = ()
    node_name: str = ""
    phase: str = "Pending"
    scheduler_name: str = ""
    deleting: bool = False
    created: str = ""
    """creationTimestamp as RFC3339 text (orders the pending queue)."""
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminated(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def podgroup_key(self) -> str:
        """``namespace/<group-name>`` from the first group-name annotation present, else ``""``."""
        for k in keys.GROUP_NAME_KEYS:
            if k in self.annotations:
                return f"{self.namespace}/{self.annotations[k]}"
        return ""

    @classmethod
    def from_k8s(cls, pod: Any) -> PodView:
        """From a kubernetes-client ``V1Pod``."""
        md, spec, status = pod.metadata, pod.spec, pod.status
        ctrs = []
        for c in (spec.containers or []) if spec else []:
            res = c.resources
            ctrs.append(
                ContainerView(
                    c.name,
                    {k: str(v) for k, v in ((res.limits or {}) if res else {}).items()},
                    {k: str(v) for k, v in ((res.requests or {}) if res else {}).items()},
                )
            )
        created = md.creation_timestamp
        if isinstance(created, datetime):
            created = created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(
            namespace=md.namespace or "default",
            name=md.name or "",
            uid=md.uid or "",
            annotations=dict(md.annotations or {}),
            containers=tuple(ctrs),
            node_name=(spec.node_name or "") if spec else "",
            phase=(status.phase or "Pending") if status else "Pending",
            scheduler_name=(spec.scheduler_name or "") if spec else "",
            deleting=md.deletion_timestamp is not None,
            created=created or "",
            resource_version=md.resource_version or "",
        )


@dataclass(frozen=True)
class ContainerRequest:
    """``ContainerDeviceRequest`` of one vGPU container (docs/protocol.md §4)."""

    nums: int
    memreq: int
    mem_percentage: int
    """101 is the "unset" sentinel."""
    coresreq: int


@dataclass
class MigTypeUsage:
    """``MigTemplateUsage``: one instance type in use on a GPU and its used slot indices."""

    name: str
    memory: int
    used_index: list[int] = field(default_factory=list)


@dataclass
class MigUsage:
    """``MigInUse``: the chosen group (-1 = none yet) and the types in use."""

    index: int = -1
    usage_list: list[MigTypeUsage] = field(default_factory=list)


@dataclass
class PodUsage:
    """One pod's share of a GPU (``GPUUsage``)."""

    used_mem: int = 0
    used_core: int = 0
    podgroup_key: str = ""


@dataclass
class GpuState:
    """One GPU and its ledger (``GPUDevice``)."""

    id: int
    uuid: str
    number: int
    memory: int
    type: str
    health: bool
    mode: str = keys.MODE_HAMI_CORE
    """Per GPU: ``mig`` only for a mig record whose Type matches a geometry entry."""
    used_num: int = 0
    used_mem: int = 0
    used_core: int = 0
    pod_map: dict[str, PodUsage] = field(default_factory=dict)
    mig_template: tuple[MigGroup, ...] = ()
    mig_usage: MigUsage = field(default_factory=MigUsage)


@dataclass(frozen=True)
class Charge:
    """What the ledger holds for one device of one pod, so it can be given back exactly."""

    gpu_id: int
    mem: int
    cores: int
    mig_group: str | None = None
    mig_position: int = -1
    device: bool = True
    """False for the charge of a ``vgpu-number: 0`` container (case 5): counted, but no device."""


@dataclass
class NodeState:
    """The devices of one node (``GPUDevices``) plus which pods the ledger holds."""

    name: str
    mode: str
    gpus: list[GpuState]
    accounted: dict[str, tuple[Charge, ...]] = field(default_factory=dict)

    def gpu(self, gpu_id: int) -> GpuState | None:
        for g in self.gpus:
            if g.id == gpu_id:
                return g
        return None

    def snapshot(self) -> NodeState:
        """The Filter copy: independent counters and MIG usage (``getGPUDeviceSnapShot``)."""
        return copy.deepcopy(self)
