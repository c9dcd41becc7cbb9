"""The pod/request model: what a pod asks of vGPU, read once from its JSON (docs/protocol.md §4, §5.1).

Pure functions over plain pod dicts (as the pod caches hold them); no I/O.  The plugin matches
Allocate calls on it, the monitor maps containers with it, ``vgpu inspect`` reports from it:

- the three **resources** (:class:`ResourceKind`) and their configured names (:class:`ResourceNames`);
- the **vGPU containers** of a pod: ``spec.containers`` in order, filtered to those with
  ``limits[count]`` or ``limits[memory]``; the k-th owns the k-th ``;`` segment (docs/decisions.md decision 6);
- each container's **primary resource**: vgpu-number if it requests a count, else vgpu-memory;
- the scalar annotations used for matching (``vgpu-node``, ``bind-phase``, ``vgpu-time``) and the
  decoded ``devices-to-allocate``.

No decision about candidates lives here; that needs the allocator's journal and tombstones
(:mod:`vgpu.plugin.matching`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cached_property
from typing import Any

from vgpu.config.model import EffectiveConfig
from vgpu.protocol import keys
from vgpu.protocol.errors import ProtocolError
from vgpu.protocol.pod import vgpu_time_sort_key
from vgpu.protocol.pod_devices import PodDevices, decode_pod_devices


class ResourceKind(enum.Enum):
    """The three vGPU resources the kubelet allocates (docs/decisions.md decision 2)."""

    NUMBER = "number"
    MEMORY = "memory"
    CORES = "cores"

    @property
    def socket_name(self) -> str:
        """Fixed socket file names (docs/decisions.md decision 3): independent of the configured resource names."""
        return f"nvidia-vgpu-{self.value}.sock"

    @property
    def config_key(self) -> str:
        """The device-config.yaml key that names this resource (for error messages)."""
        return {
            ResourceKind.NUMBER: "resourceCountName",
            ResourceKind.MEMORY: "resourceMemoryName",
            ResourceKind.CORES: "resourceCoreName",
        }[self]

    @property
    def count_key(self) -> str:
        """The config key that sets how many IDs each GPU gets (named by the size check)."""
        return {
            ResourceKind.NUMBER: "deviceSplitCount",
            ResourceKind.MEMORY: "gpuMemoryFactor",
            ResourceKind.CORES: "deviceCoreScaling",
        }[self]


_QUANTITY_RE = re.compile(r"([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
BAD_QUANTITY = -1
"""What an unparsable or fractional limit reads as: never equal to a kubelet request size."""


def parse_whole_quantity(value: Any) -> int:
    """A Kubernetes quantity (``"2"``, ``"3k"``, ``"1Ki"``) as a whole number, else ``BAD_QUANTITY``.

    Extended resources must be whole numbers (the API server refuses fractions), so anything
    else cannot match a kubelet request.
    """
    if isinstance(value, bool):
        return BAD_QUANTITY
    if isinstance(value, int):
        return value if value >= 0 else BAD_QUANTITY
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    m = _QUANTITY_RE.fullmatch(text)
    if m is None:
        return BAD_QUANTITY
    number, suffix = m.group(1), m.group(2) or ""
    try:
        mult = Decimal(10) ** int(suffix[1:]) if suffix[:1] in ("e", "E") else _SUFFIX[suffix]
        total = Decimal(number) * mult
    except (InvalidOperation, ValueError, KeyError):
        return BAD_QUANTITY
    if total < 0 or total != total.to_integral_value():
        return BAD_QUANTITY
    return int(total)


@dataclass(frozen=True)
class ResourceNames:
    """The three kubelet resource names of this node's config (docs/decisions.md decision 2)."""

    count: str
    memory: str
    cores: str

    @classmethod
    def from_config(cls, cfg: EffectiveConfig) -> ResourceNames:
        d = cfg.device
        return cls(d.resource_count_name, d.resource_memory_name, d.resource_core_name)

    def name(self, kind: ResourceKind) -> str:
        return {ResourceKind.NUMBER: self.count, ResourceKind.MEMORY: self.memory, ResourceKind.CORES: self.cores}[kind]


@dataclass(frozen=True)
class VgpuContainer:
    """One container that requests vGPU (count or memory limit)."""

    index: int
    """k: position among the pod's vGPU containers = its segment index."""
    spec_index: int
    name: str
    limits: tuple[tuple[ResourceKind, int], ...]
    """The vGPU resources in ``limits`` with their (whole-number) values."""
    disable_control: str | None
    """The container's own ``CUDA_DISABLE_CONTROL`` env value (None when unset)."""

    def limit(self, kind: ResourceKind) -> int | None:
        for k, v in self.limits:
            if k is kind:
                return v
        return None

    def requests(self, kind: ResourceKind) -> bool:
        return self.limit(kind) is not None

    @property
    def primary(self) -> ResourceKind:
        """vgpu-number if the container requests a count, else vgpu-memory (docs/protocol.md §5.1)."""
        return ResourceKind.NUMBER if self.requests(ResourceKind.NUMBER) else ResourceKind.MEMORY

    @property
    def kinds(self) -> tuple[ResourceKind, ...]:
        """The resources whose Allocate calls belong to this container (cores never matter)."""
        return tuple(k for k, _ in self.limits if k is not ResourceKind.CORES)


def _limits(container: Mapping[str, Any]) -> Mapping[str, Any]:
    res = container.get("resources") or {}
    return res.get("limits") or {}


def _env_value(container: Mapping[str, Any], name: str) -> str | None:
    value = None
    for e in container.get("env") or ():
        if isinstance(e, Mapping) and e.get("name") == name:
            value = e.get("value", "")  # the last definition wins, as in the kubelet
    return value


def requests_vgpu(container: Mapping[str, Any], names: ResourceNames) -> bool:
    """docs/protocol.md §3.1 / §4 rule 1: a count or a memory limit (a cores-only container is not a vGPU container)."""
    lim = _limits(container)
    return names.count in lim or names.memory in lim


@dataclass(frozen=True)
class PodView:
    """The fields of one cached pod that pod matching reads."""

    uid: str
    namespace: str
    name: str
    resource_version: str
    creation: str
    annotations: Mapping[str, str]
    containers: tuple[VgpuContainer, ...]
    init_containers: tuple[VgpuContainer, ...]
    """Init containers (sidecars included) that request vGPU: the plugin refuses such pods."""
    deleting: bool
    terminal: bool
    raw: Mapping[str, Any]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def init_requests_vgpu(self) -> bool:
        return bool(self.init_containers)

    @property
    def vgpu_node(self) -> str | None:
        return self.annotations.get(keys.VGPU_NODE)

    @property
    def bind_phase(self) -> str | None:
        return self.annotations.get(keys.BIND_PHASE)

    @property
    def devices_to_allocate(self) -> str | None:
        return self.annotations.get(keys.DEVICES_TO_ALLOCATE)

    @property
    def time_key(self) -> int:
        """docs/protocol.md §5.2 step 3 rule 2: ``vgpu-time``; missing, unparsable, > 20 chars, done = +∞."""
        return vgpu_time_sort_key(self.annotations.get(keys.VGPU_TIME))

    @property
    def order_key(self) -> tuple[int, str, str]:
        """Rules 2 then 3: smallest ``vgpu-time``, oldest ``creationTimestamp``, then ``namespace/name``."""
        return (self.time_key, self.creation, self.key)

    @cached_property
    def to_allocate(self) -> PodDevices | ProtocolError:
        """``devices-to-allocate`` decoded (one segment per vGPU container), or why it cannot be.

        Decoded once per view; a view stands for one resourceVersion of the pod, so a PATCH
        (a new resourceVersion) gets a new view and a fresh decode."""
        dta = self.devices_to_allocate
        if dta is None:
            return ProtocolError(keys.DEVICES_TO_ALLOCATE, "", "missing on a pod with bind-phase=allocating")
        try:
            got = decode_pod_devices(dta)
        except ProtocolError as exc:
            return exc
        if len(got) != len(self.containers):
            return ProtocolError(
                keys.DEVICES_TO_ALLOCATE,
                "",
                f"has {len(got)} segment(s) but the pod has {len(self.containers)} container(s) requesting vGPU",
                dta,
            )
        return got


def pod_view(pod: Mapping[str, Any], names: ResourceNames) -> PodView:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}

    def vgpu_containers(items: Any) -> tuple[VgpuContainer, ...]:
        out: list[VgpuContainer] = []
        for i, c in enumerate(items or ()):
            if not isinstance(c, Mapping) or not requests_vgpu(c, names):
                continue
            lim = _limits(c)
            limits = tuple(
                (kind, parse_whole_quantity(lim[names.name(kind)]))
                for kind in (ResourceKind.NUMBER, ResourceKind.MEMORY, ResourceKind.CORES)
                if names.name(kind) in lim
            )
            out.append(
                VgpuContainer(len(out), i, str(c.get("name", "")), limits, _env_value(c, "CUDA_DISABLE_CONTROL"))
            )
        return tuple(out)

    ctrs = vgpu_containers(spec.get("containers"))
    init = vgpu_containers(spec.get("initContainers"))
    return PodView(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        creation=str(meta.get("creationTimestamp", "")),
        annotations=meta.get("annotations") or {},
        containers=ctrs,
        init_containers=init,
        deleting=bool(meta.get("deletionTimestamp")),
        terminal=status.get("phase") in ("Succeeded", "Failed"),
        raw=pod,
    )
