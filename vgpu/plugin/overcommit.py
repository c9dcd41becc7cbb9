"""The plugin's guard against a scheduler that over-commits a hami-core GPU (docs/decisions.md decision 11).

Some Volcano versions lose count of a pod's second container on a GPU when they rebuild their
ledger and then place more pods there than the GPU holds (docs/scheduler-emulator.md §9.9 case 4).
HAMi-core would enforce each container's limit, and the containers would run out of memory later.
So before answering a primary Allocate for a hami-core GPU, the plugin adds up what is already
committed on each assigned GPU and refuses the assignment when memory or cores would exceed it.

What counts as committed — only what this plugin handed out:

* the containers this process served (recorded as it serves them, whatever the annotations say
  later), of pods that are not terminal, not being deleted and not failed;
* after a restart, pods of this node with ``bind-phase=success`` (written by the plugin when it
  served their last container) created before this process started: every device of their
  ``vgpu-ids-new``, all containers;
* the other containers of the pod being served (its own ``vgpu-ids-new``).

Pods still ``allocating`` that this process has not served yet do not count: their own Allocate
will count this one. The allocator passes only the pods that can hold the assigned GPUs — those
whose ``vgpu-ids-new`` names one (the pod-view index, vgpu/kube/pod_views.py) and those this
process served devices of it (:meth:`OvercommitGuard.holders`) — so a call costs the same with
100 or 5,000 pods on the node; each pod version's ``vgpu-ids-new`` is decoded once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from vgpu.protocol import ContainerDevice, keys
from vgpu.protocol.errors import ProtocolError
from vgpu.protocol.pod_devices import decode_pod_devices
from vgpu.protocol.pod_model import PodView

MAX_CORES = 100
"""Volcano's cap on the summed ``vgpu-cores`` of one GPU (docs/protocol.md §4)."""

Use = tuple[int, int]
"""(memory in gpuMemoryFactor units, cores in percent) on one GPU."""


@dataclass(frozen=True)
class Committed:
    """What other assignments hold on one GPU."""

    mem: int = 0
    cores: int = 0
    pods: tuple[str, ...] = ()


def _per_gpu(segments: Iterable[Sequence[ContainerDevice]]) -> dict[str, Use]:
    out: dict[str, Use] = {}
    for seg in segments:
        for d in seg:
            mem, cores = out.get(d.uuid, (0, 0))
            out[d.uuid] = (mem + d.usedmem, cores + d.usedcores)
    return out


@dataclass(frozen=True)
class _Entry:
    """What one pod version contributes, worked out once per (UID, resourceVersion)."""

    live: bool
    """On this node, not terminal, not being deleted."""
    failed: bool
    assigned: Mapping[str, Use] | None
    """Per GPU, from ``vgpu-ids-new``, for a ``bind-phase=success`` pod (None otherwise)."""
    segments: tuple[tuple[ContainerDevice, ...], ...] | None


def _holders(pods: Sequence[str], namespace: str) -> str:
    """Who holds the GPU, as the failing pod's Event may say it: pods of its own namespace by name
    (three at most), the others only counted — an Event must not name another tenant's pods."""
    own = [p for p in pods if p.startswith(f"{namespace}/")]
    others = len(pods) - len(own)
    parts = own[:3] + ([f"{len(own) - 3} more"] if len(own) > 3 else [])
    if others:
        parts.append(f"{others} pod(s) of other namespaces")
    return ", ".join(parts) or "nobody"


class OvercommitGuard:
    """Per-GPU commitments of this node's pods, and the check of one assignment against them.

    Called under the allocator's lock."""

    def __init__(self, node_name: str, started: datetime | None = None) -> None:
        self.node_name = node_name
        self._started = (started or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        """RFC 3339, as ``creationTimestamp``: only pods created before this process can have
        been served by an earlier one."""
        self._granted: dict[str, dict[str, Use]] = {}
        """Pod UID → per-GPU use of the containers this process served."""
        self._granted_on: dict[str, set[str]] = {}
        """GPU UUID → UIDs of :attr:`_granted` holding it."""
        self._entries: dict[str, tuple[str, _Entry]] = {}
        """Pod UID → (resourceVersion, what that version contributes)."""

    # ---- recording ------------------------------------------------------------------------

    def granted(self, uid: str, devices: Sequence[ContainerDevice]) -> None:
        """A container of pod ``uid`` was served these devices."""
        use = self._granted.setdefault(uid, {})
        for d in devices:
            mem, cores = use.get(d.uuid, (0, 0))
            use[d.uuid] = (mem + d.usedmem, cores + d.usedcores)
            self._granted_on.setdefault(d.uuid, set()).add(uid)

    def holders(self, gpus: Iterable[str]) -> set[str]:
        """UIDs of the pods this process served devices of ``gpus`` (whatever their annotations say now)."""
        out: set[str] = set()
        for g in gpus:
            out |= self._granted_on.get(g, set())
        return out

    def _entry(self, view: PodView) -> _Entry:
        got = self._entries.get(view.uid)
        if got is not None and got[0] == view.resource_version:
            return got[1]
        segments: tuple[tuple[ContainerDevice, ...], ...] | None = None
        text = view.annotations.get(keys.VGPU_IDS_NEW)
        if text is not None:
            try:
                segments = tuple(tuple(seg) for seg in decode_pod_devices(text, annotation=keys.VGPU_IDS_NEW))
            except ProtocolError:
                segments = None
        phase = view.bind_phase
        # A success pod this process did not serve counts only if an earlier plugin process
        # could have served it: created before this one started, asking for vGPU, one segment
        # per vGPU container. A pod made later with hand-written annotations does not count.
        earlier = (
            phase == keys.BIND_PHASE_SUCCESS
            and segments is not None
            and view.creation < self._started
            and 0 < len(view.containers) == len(segments)
        )
        e = _Entry(
            live=not (view.terminal or view.deleting) and view.vgpu_node == self.node_name,
            failed=phase == keys.BIND_PHASE_FAILED,
            assigned=_per_gpu(segments) if earlier and segments is not None else None,
            segments=segments,
        )
        self._entries[view.uid] = (view.resource_version, e)
        return e

    def _trim(self, alive: Collection[str]) -> None:
        """Forget pods that left the node (``alive``: the UIDs of its pods now)."""
        if len(self._entries) > 2 * len(alive) + 16:
            self._entries = {u: e for u, e in self._entries.items() if u in alive}
        if len(self._granted) > len(alive):
            self._granted = {u: g for u, g in self._granted.items() if u in alive}
            self._granted_on = {}
            for u, g in self._granted.items():
                for gpu in g:
                    self._granted_on.setdefault(gpu, set()).add(u)

    # ---- the check ------------------------------------------------------------------------

    def committed(
        self,
        views: Sequence[PodView],
        serving: PodView,
        target_index: int,
        gpus: Iterable[str],
        alive: Collection[str] | None = None,
    ) -> dict[str, Committed]:
        """For each of ``gpus``: what the other assignments on this node hold (see the module docstring).

        ``views`` must include every pod that holds one of ``gpus`` (it may hold more pods);
        ``alive`` is the UIDs of all the node's pods (default: those of ``views``)."""
        self._trim(alive if alive is not None else {v.uid for v in views})
        wanted = tuple(dict.fromkeys(gpus))
        mem = dict.fromkeys(wanted, 0)
        cores = dict.fromkeys(wanted, 0)
        pods: dict[str, list[str]] = {u: [] for u in wanted}

        def add(use: Mapping[str, Use], who: str) -> None:
            for uuid in wanted:
                got = use.get(uuid)
                if got is not None:
                    mem[uuid] += got[0]
                    cores[uuid] += got[1]
                    pods[uuid].append(who)

        granted, entries, serving_uid = self._granted, self._entries, serving.uid
        for v in views:
            uid = v.uid
            if uid == serving_uid:
                continue
            got = entries.get(uid)
            e = got[1] if got is not None and got[0] == v.resource_version else self._entry(v)
            if not e.live:
                continue
            g = granted.get(uid)
            if g is not None:
                if not e.failed:
                    add(g, v.key)
            elif e.assigned is not None:
                add(e.assigned, v.key)
        own = self._entry(serving).segments
        if own is not None:
            add(_per_gpu(s for i, s in enumerate(own) if i != target_index), f"{serving.key} (its other containers)")
        return {u: Committed(mem[u], cores[u], tuple(pods[u])) for u in wanted}

    def problem(
        self,
        views: Sequence[PodView],
        serving: PodView,
        target_index: int,
        target_name: str,
        devices: Sequence[ContainerDevice],
        capacity: Callable[[str], int],
        memory_factor: int,
        alive: Collection[str] | None = None,
    ) -> str | None:
        """The failure text when serving ``devices`` would over-commit a GPU, else None
        (``views`` and ``alive`` as for :meth:`committed`)."""
        plain = [d for d in devices if d.mig is None]
        if not plain:
            return None
        held = self.committed(views, serving, target_index, (d.uuid for d in plain), alive)
        unit = "MiB" if memory_factor == 1 else f"× {memory_factor} MiB"
        for d in plain:
            c = held[d.uuid]
            cap = capacity(d.uuid)
            if c.mem + d.usedmem <= cap and c.cores + d.usedcores <= MAX_CORES:
                continue
            who = _holders(c.pods, serving.namespace)
            return (
                f"GPU {d.uuid} would be over-committed: {c.mem} of its {cap} {unit} memory and "
                f"{c.cores} of its {MAX_CORES} % cores are already assigned ({who}); "
                f"container {target_name} asks {d.usedmem} {unit} and {d.usedcores} % — "
                "the scheduler's accounting is wrong"
            )
        return None
