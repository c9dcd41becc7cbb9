"""Which pod and container an Allocate call is for (docs/protocol.md §5.1–§5.2, docs/decisions.md decisions 5–7).

Pure functions over the pod model (:mod:`vgpu.protocol.pod_model`) and the allocator's
:class:`Journal`; no client and no I/O, so every rule is testable on plain pod dicts.

1. **Candidates** (docs/protocol.md §5.1): ``vgpu-node`` = this node, ``bind-phase=allocating``, not being
   deleted, not in a terminal phase, not tombstoned, a target container T for the resource R
   (the first vGPU container requesting R with R not yet served), ``limits[R]`` of T equal to
   the request size, and — when R is T's primary resource — a non-empty segment that, for
   vgpu-number, has exactly that many devices.
2. **Disambiguation** (docs/protocol.md §5.2 step 3), each rule skipped when it would leave nobody:
   1. vgpu-number: the segment's GPUs equal the GPUs of the kubelet's device IDs (which
      GetPreferredAllocation steered there);
   2. *(our addition)* the pod whose admission is in progress — the kubelet admits one pod at a
      time and allocates all of its containers in a row, so once a pod's first container has
      been served, the next calls belong to it while it can take them;
   3. smallest ``vgpu-time``; 4. oldest ``creationTimestamp``, then ``namespace/name``.
3. **Segment choice**: the k-th ``;`` segment belongs to the k-th container that requests vGPU
   (docs/decisions.md decision 6); only the primary resource's call (vgpu-number, or vgpu-memory for memory-only
   containers) consumes it; every other call is answered empty and **never fails** (the
   ordering rule of docs/protocol.md §5.1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field

from vgpu.config.model import MODE_HAMI_CORE
from vgpu.nvml.device import GpuInfo
from vgpu.protocol import ContainerDevice, ProtocolError, keys, segment_gpu_uuids, split_segments
from vgpu.protocol.pod_model import PodView, ResourceKind, VgpuContainer

ERR_MODE = "device mode mismatch"
ERR_INVALID = "invalid devices-to-allocate"
ERR_LIMIT = "invalid vGPU limit"

RELIST_NOBODY = "nobody waits for this call"
RELIST_MISMATCH = "the kubelet's IDs lie on GPUs no waiting pod was assigned"


@dataclass
class PodState:
    """The journal of one pod (docs/protocol.md §5.1): (vGPU-container index, resource) pairs served."""

    served: set[tuple[int, ResourceKind]] = field(default_factory=set)
    tombstoned: bool = False


class Journal:
    """What this process has served, per pod UID, and which pods are done (tombstoned)."""

    def __init__(self) -> None:
        self._pods: dict[str, PodState] = {}

    def get(self, uid: str) -> PodState | None:
        return self._pods.get(uid)

    def tombstoned(self, uid: str) -> bool:
        st = self._pods.get(uid)
        return st is not None and st.tombstoned

    def of(self, view: PodView) -> PodState:
        """The pod's state, started on first sight; entering mid-admission (after a plugin
        restart), the containers whose segments are already consumed count as served."""
        st = self._pods.get(view.uid)
        if st is None:
            st = PodState()
            dta = view.devices_to_allocate
            if dta is not None:
                segs = split_segments(dta)
                if len(segs) == len(view.containers):
                    for c in view.containers:
                        if not segs[c.index]:
                            st.served.update((c.index, k) for k in c.kinds)
            self._pods[view.uid] = st
        return st

    def tombstoned_uids(self) -> list[str]:
        return [u for u, st in self._pods.items() if st.tombstoned]

    def keep_only(self, uids: Iterable[str]) -> None:
        """Forget pods that left the cache (their journal and tombstone go too).

        Costs the journal's size when ``uids`` is a set or a dict's keys (no copy)."""
        keep = uids if isinstance(uids, Set) else set(uids)
        for uid in [u for u in self._pods if u not in keep]:
            del self._pods[uid]


@dataclass(frozen=True)
class Candidate:
    view: PodView
    target: VgpuContainer
    primary: bool
    devices: tuple[ContainerDevice, ...] = ()
    tombstone: bool = False


@dataclass(frozen=True)
class Malformed:
    """An allocating pod whose ``devices-to-allocate`` or vGPU limits cannot be used: it fails on sight."""

    view: PodView
    why: str
    """The failure text (Event and gRPC error), e.g. ``invalid vGPU limit: container c: …``."""
    meant: bool
    """Whether it would have been a primary candidate of this call."""


def target(view: PodView, st: PodState, kind: ResourceKind) -> VgpuContainer | None:
    """T: the first vGPU container requesting ``kind`` that has not been served it."""
    for c in view.containers:
        if c.requests(kind) and (c.index, kind) not in st.served:
            return c
    return None


def candidates(
    views: Sequence[PodView],
    kind: ResourceKind,
    n: int,
    node_name: str,
    journal: Journal,
    malformed: list[Malformed] | None = None,
) -> list[Candidate]:
    """Candidates for a call (R=``kind``, n) per docs/protocol.md §5.1; malformed allocating pods to ``malformed``."""
    out: list[Candidate] = []
    for v in views:
        if v.vgpu_node != node_name or v.deleting or v.terminal:
            continue
        st = journal.get(v.uid)
        if st is not None and st.tombstoned:
            # Never a primary candidate again; still recognised for a late non-primary call.
            t = target(v, st, kind)
            if t is not None and t.primary is not kind and t.limit(kind) == n:
                out.append(Candidate(v, t, False, tombstone=True))
            continue
        if v.bind_phase != keys.BIND_PHASE_ALLOCATING:
            continue
        decoded = v.to_allocate
        st = journal.of(v)
        t = target(v, st, kind)
        problem = v.limit_problem
        if problem is not None:
            # A limit no call can match (out of range, fractional, not a quantity): the pod
            # can never be served, and only it is affected (issue 15; docs/protocol.md §5.1).
            if malformed is not None and all(m.view.uid != v.uid for m in malformed):
                meant = t is not None and t.limit(kind) == n and t.primary is kind
                malformed.append(Malformed(v, f"{ERR_LIMIT}: {problem}", meant))
            continue
        init = next((c for c in v.init_containers if c.limit(kind) == n), None)
        if init is not None and not isinstance(decoded, ProtocolError):
            # The kubelet calls init containers first: this call may be one. Such pods always fail.
            out.append(Candidate(v, init, True))
            continue
        if isinstance(decoded, ProtocolError):
            if malformed is not None and all(m.view.uid != v.uid for m in malformed):
                meant = t is not None and t.limit(kind) == n and t.primary is kind
                malformed.append(Malformed(v, f"{ERR_INVALID}: {decoded}", meant))
            continue
        if t is None or t.limit(kind) != n:
            continue
        if t.primary is kind:
            devs = decoded[t.index]
            if not devs or (kind is ResourceKind.NUMBER and len(devs) != n):
                continue
            out.append(Candidate(v, t, True, devs))
        else:
            out.append(Candidate(v, t, False))
    return out


def live(cands: Iterable[Candidate]) -> list[Candidate]:
    """The candidates that may still be served (not tombstoned)."""
    return [c for c in cands if not c.tombstone]


def order(cands: Iterable[Candidate], active: str | None) -> list[Candidate]:
    """Rules 2–4: the pod in progress (UID ``active``), then smallest vgpu-time, oldest creation, name."""
    return sorted(cands, key=lambda c: (c.view.uid != active, c.tombstone, c.view.order_key))


def same_gpus(cands: Iterable[Candidate], ids: Sequence[str], gpu_of: Callable[[str], str | None]) -> list[Candidate]:
    """Rule 1: the candidates whose assigned GPUs are exactly the GPUs of the kubelet's device IDs."""
    asked = frozenset(gpu_of(i) for i in ids)
    return [c for c in cands if segment_gpu_uuids(c.devices) == asked]


def relist(
    cands: Sequence[Candidate],
    kind: ResourceKind,
    ids: Sequence[str],
    gpu_of: Callable[[str], str | None],
    active: str | None,
) -> str | None:
    """Why to re-list this node's pods once before choosing (docs/protocol.md §5.2 step 2), or None.

    :data:`RELIST_NOBODY`: no live candidate — unless this is the late non-primary call of the pod
    being admitted (e.g. vgpu-memory after its last container's vgpu-number call), which the
    kubelet's one-pod-at-a-time admission makes that container's.  :data:`RELIST_MISMATCH`: the
    pod being admitted may be newer than our watch (the other candidates are then the wrong pods);
    that LIST only guards a race, so the caller gives it the short budget.
    """
    alive = live(cands)
    if not alive:
        return None if any(c.view.uid == active for c in cands) else RELIST_NOBODY
    if kind is ResourceKind.NUMBER and not same_gpus(alive, ids, gpu_of):
        return RELIST_MISMATCH
    return None


def choose(
    cands: list[Candidate],
    kind: ResourceKind,
    ids: Sequence[str],
    gpu_of: Callable[[str], str | None],
    active: str | None,
) -> Candidate:
    """Rules 1–4 over a non-empty candidate list."""
    if len(cands) > 1 and kind is ResourceKind.NUMBER:
        same = same_gpus(cands, ids, gpu_of)
        if same:
            cands = same
    return order(cands, active)[0]


def device_problem(
    devices: Sequence[ContainerDevice], gpus: Mapping[str, GpuInfo], is_healthy: Callable[[str], bool], mode: str
) -> str | None:
    """Why this node cannot serve the assigned devices (the failure text), or None."""
    for d in devices:
        if d.uuid not in gpus:
            return f"assigned GPU {d.uuid} is not on this node"
        if not is_healthy(d.uuid):
            return f"assigned GPU {d.uuid} is unhealthy"
        if (mode == MODE_HAMI_CORE) == (d.mig is not None):
            return f"{ERR_MODE}: node mode is {mode}, device id is {d.device_id}"
    return None


def number_left(view: PodView, journal: Journal) -> list[tuple[str, int]]:
    """(container name, vgpu-number limit) of the pod's vGPU containers not yet served that resource."""
    st = journal.of(view)
    return [
        (c.name, c.limit(ResourceKind.NUMBER) or 0)
        for c in view.containers
        if c.requests(ResourceKind.NUMBER) and (c.index, ResourceKind.NUMBER) not in st.served
    ]
