"""The daemon's CDI part: names, the Allocate wrapper and the spec check, built once at startup.

docs/cdi.md §6: with a CDI strategy the plugin checks at startup that the visible spec
directories name every device it will hand out — each advertised GPU in hami-core mode, each
MIG device that exists in mig mode (dynamic MIG creates more later; those are checked when an
Allocate returns them) — and says so in the log, as a Warning Event on the Node
(:data:`REASON_CDI_UNRESOLVED`) and in :meth:`CdiSide.unresolved_devices`, the value of the
``vgpu_plugin_cdi_unresolved_devices`` gauge.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from vgpu.nvml.device import GpuInfo
from vgpu.nvml.mig_calls import MigNvml
from vgpu.plugin.cdi import CdiNamer, DeviceListPolicy
from vgpu.plugin.cdi_specs import CdiSpecCheck
from vgpu.plugin.devices import ResourceKind
from vgpu.plugin.responses import Allocator, DeviceListAllocator
from vgpu.protocol import cdi

log = logging.getLogger(__name__)

REASON_CDI_UNRESOLVED = "VGPUCdiDeviceUnresolved"
"""Node Event: a device the plugin hands out is named by no CDI spec the runtime can see."""

NodeEvent = Callable[[str, str], None]
"""(reason, message) → a Warning Event on this Node; may raise (best effort)."""


class CdiSide:
    def __init__(
        self,
        policy: DeviceListPolicy,
        gpus: Callable[[], Sequence[GpuInfo]],
        *,
        mig_nvml: MigNvml | None = None,
        node_event: NodeEvent | None = None,
    ) -> None:
        self.policy = policy
        self.gpus = gpus
        self.mig_nvml = mig_nvml
        self.node_event = node_event
        self.check = CdiSpecCheck(policy.spec_dirs) if policy.uses_cdi else None
        self._reported: set[str] = set()

    # -- names -----------------------------------------------------------------------------

    def namer(self) -> CdiNamer:
        return CdiNamer(
            self.policy.name_strategy,
            {g.uuid: g.index for g in self.gpus()},
            self._mig_index if self.mig_nvml else None,
        )

    def name(self, device_id: str) -> str:
        return self.namer()(device_id)

    def _mig_devices(self) -> list[tuple[GpuInfo, int, str]]:
        """(parent, MIG index, MIG UUID) of every MIG device on the advertised GPUs."""
        if self.mig_nvml is None:
            return []
        out: list[tuple[GpuInfo, int, str]] = []
        for g in self.gpus():
            try:
                rows = self.mig_nvml.mig_devices(self.mig_nvml.device_by_uuid(g.uuid))
            except Exception as exc:  # noqa: BLE001 - naming is best effort; the caller reports
                log.warning("CDI: cannot list the MIG devices of %s: %s", g.uuid, exc)
                continue
            out.extend((g, r.mig_index, r.uuid) for r in rows)
        return out

    def _mig_index(self, mig_uuid: str) -> tuple[int, int] | None:
        for g, index, uuid in self._mig_devices():
            if uuid == mig_uuid:
                return g.index, index
        return None

    def startup_names(self, mig_mode: bool) -> list[str]:
        """The qualified names the plugin will hand out, as far as they exist now."""
        kind, strategy = self.policy.kind, self.policy.name_strategy
        if mig_mode:
            return [
                cdi.qualified_name(kind, cdi.mig_device_name(strategy, g.index, index, uuid))
                for g, index, uuid in self._mig_devices()
            ]
        return [cdi.qualified_name(kind, cdi.gpu_device_name(strategy, g.index, g.uuid)) for g in self.gpus()]

    # -- allocators ------------------------------------------------------------------------

    def wrap(self, allocators: Mapping[ResourceKind, Allocator]) -> dict[ResourceKind, Allocator]:
        if self.policy.is_plain_envvar:
            return dict(allocators)
        return {k: DeviceListAllocator(a, self.policy, self.name, self.handed_out) for k, a in allocators.items()}

    # -- the spec check --------------------------------------------------------------------

    def startup_check(self, mig_mode: bool) -> None:
        if self.check is None:
            return
        names = self.startup_names(mig_mode)
        self.check.expect(names)
        unresolved = self.check.unresolved()
        scan = self.check.scan()
        for problem in scan.problems:
            log.warning("CDI: %s", problem)
        if unresolved:
            self._report(unresolved)
        else:
            log.info(
                "CDI: strategies %s; all %d device name(s) resolve in %s%s",
                ",".join(self.policy.strategies),
                len(names),
                ", ".join(scan.files) or "(no spec files)",
                " (MIG devices made later are checked when an Allocate returns them)" if mig_mode else "",
            )

    def handed_out(self, names: list[str]) -> None:
        """An Allocate returned ``names``: remember them, report the unresolvable ones once each."""
        if self.check is None:
            return
        try:
            self.check.expect(names)
            missing = [n for n in self.check.unresolved(names) if n not in self._reported]
            if missing:
                self._report(missing)
        except Exception as exc:  # noqa: BLE001 - a check must never fail an Allocate
            log.warning("CDI: spec check failed: %s", exc)

    def _report(self, unresolved: list[str]) -> None:
        assert self.check is not None
        self._reported.update(unresolved)
        message = self.check.describe(unresolved)
        log.error("%s", message)
        if self.node_event is not None:
            try:
                self.node_event(REASON_CDI_UNRESOLVED, message)
            except Exception as exc:  # noqa: BLE001 - an Event is best effort; the log has it
                log.warning("cannot post the %s Event: %s", REASON_CDI_UNRESOLVED, exc)

    def unresolved_devices(self) -> int:
        """``vgpu_plugin_cdi_unresolved_devices``: 0 without a CDI strategy."""
        return 0 if self.check is None else self.check.unresolved_devices()
