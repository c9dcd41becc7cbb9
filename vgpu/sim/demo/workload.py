"""The demo's "containers": libvgpu's part on the shared region, with usage that changes over time.

After the fake kubelet's Allocate, a real container runtime would start the container with the
returned env and mounts, and HAMi-core inside it would create the shared-region file named by
``CUDA_DEVICE_MEMORY_SHARED_CACHE`` in the directory mounted at ``/tmp/vgpu``.  Here
:class:`HamiCoreContainer` does exactly that on the host path the mount names, with
:class:`vgpu.sim.hamicore.writer.RegionWriter` (one fake CUDA process per container), and then, once
per :meth:`step`:

- moves device memory along a slow wave below the container's limit (a CUDA context first);
- while busy, launches kernels the way libvgpu's rate limiter does (``recent_kernel = 2``) and
  publishes an SM utilization below its ``CUDA_DEVICE_SM_LIMIT``;
- honours the monitor's priority feedback (docs/metrics.md §5): ``recent_kernel < 0`` means a
  higher-priority container is active on the same GPU, so it launches nothing until the monitor
  sets it back to 0 — and it reports every change of ``utilization_switch``/``recent_kernel``.

A MIG container (:class:`MigContainer`) has no HAMi-core: it just holds its MIG devices.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.hamicore import paths
from vgpu.hamicore.limits import TASK_PRIORITY_ENV, atoi, parse_limit, task_priority_from_env
from vgpu.sim.hamicore.writer import RegionWriter

MIB = 1 << 20
CONTEXT_MIB = 304  # what a CUDA context costs on an A100, roughly
MEMORY_PERIOD_S = 24.0
REGION_VARIANT = "v1.2"  # the layout current HAMi-core writes (docs/hami-core.md §4)


@dataclass(frozen=True)
class Duty:
    """Busy ``busy_s`` seconds, then idle ``idle_s`` seconds (``idle_s == 0``: always busy)."""

    busy_s: float = 1.0
    idle_s: float = 0.0

    def busy(self, t: float) -> bool:
        if self.idle_s <= 0:
            return True
        return (t % (self.busy_s + self.idle_s)) < self.busy_s


def host_cache_file(envs: Mapping[str, str], mounts: Sequence[Any]) -> str | None:
    """Where ``CUDA_DEVICE_MEMORY_SHARED_CACHE`` lands on the host, through the ``/tmp/vgpu`` mount."""
    cache = envs.get("CUDA_DEVICE_MEMORY_SHARED_CACHE")
    if not cache:
        return None
    for m in mounts:
        if m.container_path == paths.CONTAINER_CACHE_DIR and cache.startswith(paths.CONTAINER_CACHE_DIR + "/"):
            return os.path.join(m.host_path, cache[len(paths.CONTAINER_CACHE_DIR) + 1 :])
    return None


@dataclass
class Feedback:
    """What the monitor last left in the region, and what the demo saw of it."""

    utilization_switch: int = 0
    recent_kernel: int = 0
    decrements: int = 0  # times the monitor counted recent_kernel down (its pass 1)
    blocked_times: int = 0  # times it blocked this container (recent_kernel = -1)
    switch_changes: int = 0  # times the monitor changed utilization_switch

    @property
    def blocked(self) -> bool:
        return self.recent_kernel < 0

    @property
    def seen(self) -> bool:
        return self.decrements > 0 or self.blocked_times > 0 or self.switch_changes > 0


@dataclass
class HamiCoreContainer:
    pod: str  # namespace/name
    name: str
    node: str
    envs: dict[str, str]
    region_path: str
    pid: int
    duty: Duty = field(default_factory=Duty)
    phase: float = 0.0  # shifts the memory wave so containers differ
    writer: RegionWriter | None = None
    uuids: list[str] = field(default_factory=list)
    limits: list[int] = field(default_factory=list)  # bytes per device
    sm_limits: list[int] = field(default_factory=list)  # percent per device (0 = none)
    used: list[int] = field(default_factory=list)  # bytes per device (data + context)
    sm_util: list[int] = field(default_factory=list)
    priority: int = 1
    feedback: Feedback = field(default_factory=Feedback)
    launches: int = 0
    _wrote_two: bool = False

    kind = "hami-core"

    def start(self) -> None:
        """libvgpu's first CUDA call: create/attach the region, publish devices, allocate a context."""
        self.uuids = [u for u in self.envs.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if u]
        n = len(self.uuids)
        self.limits = [parse_limit(self.envs.get(f"CUDA_DEVICE_MEMORY_LIMIT_{i}", "0")) for i in range(n)]
        sm_default = self.envs.get("CUDA_DEVICE_SM_LIMIT", "0")
        self.sm_limits = [atoi(self.envs.get(f"CUDA_DEVICE_SM_LIMIT_{i}", sm_default)) for i in range(n)]
        self.priority = task_priority_from_env(self.envs.get(TASK_PRIORITY_ENV))
        self.writer = RegionWriter.create(self.region_path, REGION_VARIANT, env=self.envs)
        self.writer.init_devices(self.uuids)
        self.writer.attach(self.pid)
        # libvgpu starts a region with utilization_switch = 1, recent_kernel = 2 (docs/hami-core.md §6).
        self.feedback.utilization_switch, self.feedback.recent_kernel = self.writer.feedback()
        self.writer.set_hostpid(self.pid, 40000 + self.pid)
        self.used = [0] * n
        self.sm_util = [0] * n
        for d in range(n):
            self.writer.add_memory(self.pid, d, CONTEXT_MIB * MIB, "context")
            self.used[d] = CONTEXT_MIB * MIB

    def step(self, t: float) -> list[str]:
        """Advance to ``t`` seconds after start; returns what changed in the monitor's feedback."""
        w = self.writer
        if w is None:
            return []
        notes = self._read_feedback()
        busy = self.duty.busy(t) and not self.feedback.blocked
        for d in range(len(self.uuids)):
            cap = self.limits[d] or 8 << 30
            level = 0.45 + 0.25 * math.sin(2 * math.pi * t / MEMORY_PERIOD_S + self.phase)
            target = max(CONTEXT_MIB * MIB, int(cap * level) // MIB * MIB)
            delta = target - self.used[d]
            if delta > 0:
                w.add_memory(self.pid, d, delta)
            elif delta < 0:
                w.free_memory(self.pid, d, -delta)
            self.used[d] = target
            limit = self.sm_limits[d] or 100
            self.sm_util[d] = int(limit * (0.75 + 0.2 * math.sin(t / 3 + self.phase))) if busy else 0
            w.set_monitor(self.pid, d, monitor_used=self.used[d], sm_util=self.sm_util[d])
        if busy:
            w.kernel_launch()
            self.launches += 1
            self._wrote_two = True
        return notes

    def _read_feedback(self) -> list[str]:
        assert self.writer is not None
        sw, rk = self.writer.feedback()
        fb = self.feedback
        notes = []
        if self._wrote_two and 0 <= rk < 2:
            fb.decrements += 1
            if fb.decrements == 1:
                notes.append(f"monitor feedback pass: recent_kernel 2 → {rk} (this container counts as active)")
        self._wrote_two = False
        if rk < 0 and not fb.blocked:
            fb.blocked_times += 1
            notes.append(
                f"blocked by priority (recent_kernel={rk}, utilization_switch={sw}): a higher-priority "
                "container is busy on its GPU"
            )
        elif rk >= 0 and fb.blocked:
            notes.append(f"released (recent_kernel={rk}): no higher-priority work on its GPU any more")
        if sw != fb.utilization_switch:
            fb.switch_changes += 1
            notes.append(
                f"utilization_switch {fb.utilization_switch} → {sw} "
                f"({'SM limiter engaged' if sw else 'SM limiter off'})"
            )
        fb.utilization_switch, fb.recent_kernel = sw, rk
        return notes

    def usage_by_uuid(self) -> dict[str, tuple[int, int]]:
        """uuid → (memory bytes, SM %)."""
        return {u: (self.used[d], self.sm_util[d]) for d, u in enumerate(self.uuids)}

    def snapshot(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "container": self.name,
            "node": self.node,
            "kind": self.kind,
            "region": self.region_path,
            "priority": self.priority,
            "pid": self.pid,
            "devices": [
                {
                    "uuid": u,
                    "memory_used_bytes": self.used[d],
                    "memory_limit_bytes": self.limits[d],
                    "sm_util": self.sm_util[d],
                    "sm_limit": self.sm_limits[d],
                }
                for d, u in enumerate(self.uuids)
            ],
            "kernel_launches": self.launches,
            "feedback": {
                "utilization_switch": self.feedback.utilization_switch,
                "recent_kernel": self.feedback.recent_kernel,
                "decrements_seen": self.feedback.decrements,
                "times_blocked": self.feedback.blocked_times,
                "switch_changes": self.feedback.switch_changes,
            },
        }

    def close(self) -> None:
        """The process exits normally (its slot is released) and the file is closed."""
        if self.writer is not None:
            try:
                self.writer.detach(self.pid)
            except (KeyError, OSError):
                pass
            self.writer.close()
            self.writer = None


@dataclass
class MigContainer:
    pod: str
    name: str
    node: str
    envs: dict[str, str]
    mig_uuids: list[str] = field(default_factory=list)

    kind = "mig"

    def start(self) -> None:
        self.mig_uuids = [u for u in self.envs.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if u]

    def step(self, t: float) -> list[str]:
        return []

    def usage_by_uuid(self) -> dict[str, tuple[int, int]]:
        return {}

    def snapshot(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "container": self.name,
            "node": self.node,
            "kind": self.kind,
            "mig_devices": list(self.mig_uuids),
        }

    def close(self) -> None:
        pass
