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
  served their last container): every device of their ``vgpu-ids-new``, all containers;
* the other containers of the pod being served (its own ``vgpu-ids-new``).

Pods still ``allocating`` that this process has not served yet do not count: their own Allocate
will count this one. The work per call is one pass over the node's pod views with O(1) per pod:
each pod version's ``vgpu-ids-new`` is decoded once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

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


class OvercommitGuard:
    """Per-GPU commitments of this node's pods, and the check of one assignment against them.

    Called under the allocator's lock."""

    def __init__(self) -> None:
        self._granted: dict[str, dict[str, Use]] = {}
        """Pod UID → per-GPU use of the containers this process served."""
        self._decoded: dict[tuple[str, str], tuple[tuple[ContainerDevice, ...], ...] | None] = {}
        """(UID, resourceVersion) → ``vgpu-ids-new`` decoded (None when it does not decode)."""

    # ---- recording ------------------------------------------------------------------------

    def granted(self, uid: str, devices: Sequence[ContainerDevice]) -> None:
        """A container of pod ``uid`` was served these devices."""
        use = self._granted.setdefault(uid, {})
        for d in devices:
            mem, cores = use.get(d.uuid, (0, 0))
            use[d.uuid] = (mem + d.usedmem, cores + d.usedcores)

    def _segments(self, view: PodView) -> tuple[tuple[ContainerDevice, ...], ...] | None:
        k = (view.uid, view.resource_version)
        if k not in self._decoded:
            text = view.annotations.get(keys.VGPU_IDS_NEW)
            got: tuple[tuple[ContainerDevice, ...], ...] | None = None
            if text is not None:
                try:
                    got = tuple(tuple(seg) for seg in decode_pod_devices(text, annotation=keys.VGPU_IDS_NEW))
                except ProtocolError:
                    got = None
            self._decoded[k] = got
        return self._decoded[k]

    def _trim(self, views: Sequence[PodView]) -> None:
        if len(self._decoded) > 2 * len(views) + 16:
            live = {(v.uid, v.resource_version) for v in views}
            self._decoded = {k: v for k, v in self._decoded.items() if k in live}
        if len(self._granted) > len(views):
            uids = {v.uid for v in views}
            self._granted = {u: g for u, g in self._granted.items() if u in uids}

    # ---- the check ------------------------------------------------------------------------

    def committed(
        self, views: Sequence[PodView], node: str, serving: PodView, target_index: int
    ) -> dict[str, Committed]:
        """Per GPU: what the other assignments on this node hold (see the module docstring)."""
        self._trim(views)
        mem: dict[str, int] = {}
        cores: dict[str, int] = {}
        pods: dict[str, list[str]] = {}

        def add(use: Mapping[str, Use], who: str) -> None:
            for uuid, (m, c) in use.items():
                mem[uuid] = mem.get(uuid, 0) + m
                cores[uuid] = cores.get(uuid, 0) + c
                pods.setdefault(uuid, []).append(who)

        for v in views:
            if v.uid == serving.uid or v.terminal or v.deleting or v.vgpu_node != node:
                continue
            phase = v.bind_phase
            granted = self._granted.get(v.uid)
            if granted is not None and phase != keys.BIND_PHASE_FAILED:
                add(granted, v.key)
            elif granted is None and phase == keys.BIND_PHASE_SUCCESS:
                segs = self._segments(v)
                if segs is not None:
                    add(_per_gpu(segs), v.key)
        own = self._segments(serving)
        if own is not None:
            add(_per_gpu(s for i, s in enumerate(own) if i != target_index), f"{serving.key} (its other containers)")
        return {u: Committed(mem[u], cores[u], tuple(pods[u])) for u in mem}

    def problem(
        self,
        views: Sequence[PodView],
        node: str,
        serving: PodView,
        target_index: int,
        target_name: str,
        devices: Sequence[ContainerDevice],
        capacity: Callable[[str], int],
        memory_factor: int,
    ) -> str | None:
        """The failure text when serving ``devices`` would over-commit a GPU, else None."""
        held = self.committed(views, node, serving, target_index)
        unit = "MiB" if memory_factor == 1 else f"× {memory_factor} MiB"
        for d in devices:
            if d.mig is not None:
                continue
            c = held.get(d.uuid, Committed())
            cap = capacity(d.uuid)
            if c.mem + d.usedmem <= cap and c.cores + d.usedcores <= MAX_CORES:
                continue
            who = ", ".join(c.pods[:3]) + (f" and {len(c.pods) - 3} more" if len(c.pods) > 3 else "")
            return (
                f"GPU {d.uuid} would be over-committed: {c.mem} of its {cap} {unit} memory and "
                f"{c.cores} of its {MAX_CORES} % cores are already assigned ({who or 'nobody'}); "
                f"container {target_name} asks {d.usedmem} {unit} and {d.usedcores} % — "
                "the scheduler's accounting is wrong"
            )
        return None
