"""One resource manager per kubelet resource: its device list, health and payloads.

Imitates NVIDIA k8s-device-plugin's split: the manager computes what the resource
advertises (from the GPU list, the config and the health board); the gRPC server is a
thin layer over it.  The manager keeps the encoded ListAndWatch message of the current
health state and a version counter; streams wait for the version to move.  Managers
outlive server restarts (kubelet restarts), so the first message after a re-registration
already carries the current health (docs/health.md §4).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

from vgpu.config.model import EffectiveConfig
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.health import GpuHealth
from vgpu.plugin.api import HEALTHY, UNHEALTHY, pb
from vgpu.plugin.devices import ResourceKind, ResourceSpec, id_block, parse_index
from vgpu.plugin.listwatch import EncodedBlock

log = logging.getLogger(__name__)


class ResourceManager:
    """Device list and health of one resource over a fixed set of (non-filtered) GPUs."""

    def __init__(self, spec: ResourceSpec, gpus: Sequence[GpuInfo], cfg: EffectiveConfig, health: GpuHealth) -> None:
        self.spec = spec
        self.gpus = tuple(gpus)
        self.health = health
        self._blocks = [EncodedBlock(id_block(spec.kind, g, cfg)) for g in self.gpus]
        self._by_prefix = {b.block.prefix: (g, b.block.count) for b, g in zip(self._blocks, self.gpus, strict=True)}
        self._uuids = frozenset(g.uuid for g in self.gpus)
        self._cond = threading.Condition()
        self._version = 0
        self._health_state: dict[str, bool] = {}
        self._payload = b""
        self.refresh()

    # -- what the kubelet sees ---------------------------------------------------------

    @property
    def kind(self) -> ResourceKind:
        return self.spec.kind

    @property
    def resource_name(self) -> str:
        return self.spec.resource_name

    @property
    def socket_name(self) -> str:
        return self.spec.socket_name

    def options(self) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(
            pre_start_required=False, get_preferred_allocation_available=self.spec.preferred_allocation
        )

    def device_count(self) -> int:
        return sum(b.block.count for b in self._blocks)

    def health_counts(self) -> tuple[int, int]:
        """(healthy, unhealthy) devices of the list last advertised (for the metrics; O(#GPUs))."""
        with self._cond:
            state = self._health_state
        healthy = sum(b.block.count for b in self._blocks if state.get(b.block.gpu_uuid, True))
        return healthy, self.device_count() - healthy

    def devices(self) -> list[tuple[str, str]]:
        """(ID, health) of every device in advertised order (GPU order, then i)."""
        state = self.health.snapshot()
        out: list[tuple[str, str]] = []
        for b in self._blocks:
            h = HEALTHY if state.get(b.block.gpu_uuid, True) else UNHEALTHY
            out.extend((i, h) for i in b.block.ids())
        return out

    def locate(self, device_id: str) -> tuple[GpuInfo, int] | None:
        """The GPU and index i of one of our IDs, or None when it is not ours."""
        prefix = device_id[: device_id.rfind("-") + 1]
        found = self._by_prefix.get(prefix) if prefix else None
        if found is None:
            return None
        gpu, count = found
        i = parse_index(device_id, prefix)
        return (gpu, i) if i is not None and i < count else None

    # -- payloads and change notification ----------------------------------------------

    def refresh(self, changed: Mapping[str, bool] | None = None) -> bool:
        """Re-encode after a health change; True when this resource's list changed.

        ``changed`` is the health board's notification; changes to GPUs this resource
        does not list are ignored without re-encoding.
        """
        if changed is not None and not (self._uuids & changed.keys()):
            return False
        state = self.health.snapshot()
        mine = {u: state.get(u, True) for u in self._uuids}
        with self._cond:
            if mine == self._health_state and self._version:
                return False
            payload = b"".join(b.encoded(mine[b.block.gpu_uuid]) for b in self._blocks)
            self._health_state = mine
            self._payload = payload
            self._version += 1
            self._cond.notify_all()
        unhealthy = sorted(u for u, h in mine.items() if not h)
        log.info(
            "%s: %d devices on %d GPU(s), %d KiB per ListAndWatch message; unhealthy GPUs: %s",
            self.resource_name,
            self.device_count(),
            len(self.gpus),
            len(payload) // 1024,
            ", ".join(unhealthy) or "none",
        )
        return True

    def snapshot(self) -> tuple[int, bytes]:
        """(version, encoded ListAndWatchResponse) of the current state."""
        with self._cond:
            return self._version, self._payload

    def wait_for_update(self, version: int, timeout: float) -> tuple[int, bytes]:
        """Block until the version differs from ``version``, ``wake()`` or ``timeout``."""
        with self._cond:
            if self._version == version:
                self._cond.wait(timeout)
            return self._version, self._payload

    def wake(self) -> None:
        """Wake every waiting stream so it can notice that it should end."""
        with self._cond:
            self._cond.notify_all()
