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
from decimal import Context, Decimal
from functools import cached_property
from typing import Any, Final

from vgpu.config.model import EffectiveConfig
from vgpu.protocol import keys
from vgpu.protocol._fields import INT64_MAX, is_digits
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


_QUANTITY_RE = re.compile(
    r"([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?", re.ASCII
)
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
"""What an unusable limit reads as: never equal to a kubelet request size."""
LIMIT_MAX: Final = INT64_MAX
"""The largest usable limit: the kubelet reads a quantity as an int64 (``Quantity.Value()``)."""
QUANTITY_MAX_CHARS: Final = 64
"""Longer quantity text is refused unread (no int64 needs more; bounds the work one pod costs)."""
_MAX_EXPONENT: Final = 2 * QUANTITY_MAX_CHARS
"""|exponent| beyond this cannot come back into int64 range with <= 64 mantissa digits."""
_EXACT = Context(prec=4 * QUANTITY_MAX_CHARS, Emax=4 * QUANTITY_MAX_CHARS, Emin=-4 * QUANTITY_MAX_CHARS, traps=[])
"""Enough digits for every product below to be exact, so nothing rounds, overflows or raises."""


def whole_quantity(value: Any) -> int | str:
    """A Kubernetes quantity (``"2"``, ``"3k"``, ``"1Ki"``) as a whole number in ``0..LIMIT_MAX``,
    else why it is not one (a short reason, without the value).

    Extended resources must be whole numbers (the API server refuses fractions), so anything
    else cannot match a kubelet request.  Never raises: the text is length-checked before it is
    read and the exponent range-checked before it is applied, so ``1e1000000`` or 5,000 digits
    cost microseconds, not an overflow (issue 15: one pod's limit must not break the node).
    """
    if isinstance(value, bool):
        return "not a quantity"
    if isinstance(value, int):
        if value < 0:
            return "negative"
        return value if value <= LIMIT_MAX else "out of range (above 2^63-1)"
    if not isinstance(value, (str, float)):
        return "not a quantity"
    text = str(value).strip()
    if len(text) > QUANTITY_MAX_CHARS:
        return f"longer than {QUANTITY_MAX_CHARS} characters"
    if is_digits(text):
        n = int(text)
        return n if n <= LIMIT_MAX else "out of range (above 2^63-1)"
    m = _QUANTITY_RE.fullmatch(text)
    if m is None:
        return "not a Kubernetes quantity"
    number, suffix = m.group(1), m.group(2) or ""
    if Decimal(number) == 0:
        return 0
    if suffix not in _SUFFIX:  # a decimal exponent: e3, E-2
        exponent = int(suffix[1:])  # at most 64 characters: cheap, and bounded next
        if abs(exponent) > _MAX_EXPONENT:
            return "out of range (above 2^63-1)" if exponent > 0 else "not a whole number"
        total = _EXACT.multiply(Decimal(number), _EXACT.power(Decimal(10), exponent))
    else:
        total = _EXACT.multiply(Decimal(number), _SUFFIX[suffix])
    if total < 0:
        return "negative"
    if total != total.to_integral_value(context=_EXACT):
        return "not a whole number"
    if total > LIMIT_MAX:
        return "out of range (above 2^63-1)"
    return int(total)


def parse_whole_quantity(value: Any) -> int:
    """:func:`whole_quantity`, with ``BAD_QUANTITY`` for anything unusable."""
    got = whole_quantity(value)
    return BAD_QUANTITY if isinstance(got, str) else got


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
    bad_limits: tuple[str, ...] = ()
    """Why each unusable vGPU limit cannot be used (those read as ``BAD_QUANTITY`` in ``limits``),
    e.g. ``limits["volcano.sh/vgpu-memory"] = "1e1000000": out of range (above 2^63-1)``."""

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


def _text(value: Any) -> str:
    """``str(value)``, except for an int too long for ``str()`` (more than 4,300 digits raise)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an integer of {value.bit_length()} bits>"
    return str(value)


def _quoted(text: str, limit: int = 40) -> str:
    """A value as it appears in an error: quoted, cut so that 5,000 digits stay one short line."""
    if len(text) > limit:
        text = f"{text[: limit - 1]}… ({len(text)} characters)"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
    def limit_problem(self) -> str | None:
        """Why a vGPU limit of this pod can never be served (the first one), or None.

        Such a pod is never a candidate; one being allocated fails on sight, naming the limit."""
        for c in self.init_containers + self.containers:
            if c.bad_limits:
                return f"container {c.name}: {c.bad_limits[0]}"
        return None

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
            limits: list[tuple[ResourceKind, int]] = []
            bad: list[str] = []
            for kind in (ResourceKind.NUMBER, ResourceKind.MEMORY, ResourceKind.CORES):
                name = names.name(kind)
                if name not in lim:
                    continue
                got = whole_quantity(lim[name])
                if isinstance(got, str):
                    bad.append(f"limits[{_quoted(name)}] = {_quoted(_text(lim[name]))}: {got}")
                    got = BAD_QUANTITY
                limits.append((kind, got))
            out.append(
                VgpuContainer(
                    len(out),
                    i,
                    str(c.get("name", "")),
                    tuple(limits),
                    _env_value(c, "CUDA_DISABLE_CONTROL"),
                    tuple(bad),
                )
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
