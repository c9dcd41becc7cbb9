"""Code that runs INSIDE a child process with the fake NVML (see conftest.py).

``Node`` owns a real ``MigManager`` over the fake library plus an independent view of the
GPU built from raw ``MigNvml`` calls, so tests check the apply against what NVML reports, not
against the code under test.  Every method returns plain data (dicts, lists) for the parent.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import threading
from typing import Any

from vgpu.config.device_config import default_device_config
from vgpu.config.loader import effective_config, parse_device_config
from vgpu.config.model import NodeConfig
from vgpu.mig import MigError, MigManager, MigStep, prepare_mig_gpus
from vgpu.mig.node import MigAllocation
from vgpu.nvml.discovery import discover_gpus
from vgpu.nvml.errors import NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, NvmlError
from vgpu.nvml.mig_calls import CI_PROFILE_FOR_SLICES, MigNvml
from vgpu.plugin.mig_seam import mig_visible_devices
from vgpu.plugin.responses import AllocationError
from vgpu.protocol.pod_model import ResourceNames, pod_view
from vgpu.sim.nvml.fakenvml import write_json_atomic

NAMES = ResourceNames("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")


def _config(device_config: str | None):
    if device_config is None:
        device = default_device_config()
    else:
        device, _ = parse_device_config(device_config, "device-config.yaml")
    return effective_config(device, NodeConfig(name="n1", operating_mode="mig", source="config.json"))


class Node:
    def __init__(self, device_config: str | None = None) -> None:
        self.config = _config(device_config)
        self.gpus = discover_gpus(None)
        self.manager = MigManager.open(None, self.config, self.gpus)
        self.nvml: MigNvml = self.manager.nvml
        self.allocation = MigAllocation(self.manager, "n1")

    def uuid(self, index: int) -> str:
        return self.gpus[index].uuid

    # ------------------------------------------------------------------ startup

    def startup(self) -> dict[str, Any]:
        report = prepare_mig_gpus(self.manager, self.gpus)
        if report.reenumerate:
            self.gpus = discover_gpus(None)
            self.manager.set_gpus(self.gpus)
        return {
            "usable": list(report.usable),
            "enabled": list(report.enabled),
            "warnings": list(report.warnings),
            "excluded": {e.uuid: e.reason for e in report.excluded},
        }

    def plans(self, index: int) -> dict[str, str]:
        from vgpu.mig import describe

        return {g: describe(p) for g, p in self.manager.gpu(self.uuid(index)).plans.items()}

    # ------------------------------------------------------------------ apply

    def apply(
        self,
        index: int,
        group: str,
        *,
        kill_at: tuple[str, int] | None = None,
        inject_at: tuple[str, int, str, int] | None = None,
    ) -> dict[str, Any]:
        """Apply; ``kill_at=(action, n)`` SIGKILLs this process right after the n-th such step,
        ``inject_at=(action, n, function, code)`` makes ``function`` fail from then on."""
        seen: dict[str, int] = {}
        steps: list[dict[str, Any]] = []

        def observer(step: MigStep) -> None:
            seen[step.action] = seen.get(step.action, 0) + 1
            steps.append(
                {
                    "action": step.action,
                    "gi": step.gpu_instance_id,
                    "ci": step.compute_instance_id,
                    "position": step.position,
                }
            )
            if kill_at and (step.action, seen[step.action]) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            if inject_at and (step.action, seen[step.action]) == inject_at[:2]:
                inject_error(inject_at[2], inject_at[3])

        try:
            result = self.manager.apply(self.uuid(index), group, observer=observer)
        except MigError as exc:
            return {"error": type(exc).__name__, "message": str(exc), "steps": steps}
        return {
            "destroyed": list(result.destroyed),
            "created": list(result.created),
            "steps": steps,
            "devices": [
                {
                    "position": d.position,
                    "profile": d.profile,
                    "start": d.placement.start,
                    "size": d.placement.size,
                    "gi": d.gpu_instance_id,
                    "ci": d.compute_instance_id,
                    "uuid": d.mig_uuid,
                }
                for d in result.devices
            ],
        }

    def apply_concurrently(self, jobs: list[tuple[int, str]]) -> list[dict[str, Any]]:
        """Run several applies at the same moment, one thread each (released by one barrier)."""
        barrier = threading.Barrier(len(jobs))
        out: list[dict[str, Any]] = [{} for _ in jobs]

        def run(k: int, index: int, group: str) -> None:
            barrier.wait()
            out[k] = self.apply(index, group)

        threads = [threading.Thread(target=run, args=(k, i, g)) for k, (i, g) in enumerate(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def allocate(self, pod: dict[str, Any], container: int, node_pods: list[dict[str, Any]]) -> dict[str, Any]:
        """The plugin's MIG path for one container of a pod object (as the allocator calls it)."""
        from vgpu.protocol import decode_pod_devices

        view = pod_view(pod, NAMES)
        devices = decode_pod_devices(view.annotations["volcano.sh/vgpu-ids-new"])[container]
        try:
            return {
                "uuids": mig_visible_devices(self.allocation, devices, view, [pod_view(p, NAMES) for p in node_pods])
            }
        except AllocationError as exc:
            return {"error": str(exc)}

    def lookup(self, index: int, group: str, position: int) -> dict[str, Any] | None:
        info = self.manager.lookup(self.uuid(index), group, position)
        return (
            None
            if info is None
            else {
                "gi": info.gpu_instance_id,
                "ci": info.compute_instance_id,
                "uuid": info.mig_uuid,
                "profile": info.profile,
            }
        )

    # ------------------------------------------------------------------ independent view (raw NVML)

    def layout(self, index: int) -> list[dict[str, Any]]:
        """Every GI (by id) with profile name, placement and CIs, read with raw NVML calls."""
        h = self.nvml.device_by_uuid(self.uuid(index))
        out = []
        for constant in range(0x12):
            try:
                prof = self.nvml.gpu_instance_profile_info(h, constant)
            except NvmlError as exc:
                if exc.code in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT):
                    continue
                raise
            for gi in self.nvml.gpu_instances(h, prof.id):
                info = self.nvml.gpu_instance_info(gi)
                cis = []
                for ci_const in range(0x9):
                    try:
                        cip = self.nvml.compute_instance_profile_info(gi, ci_const)
                    except NvmlError:
                        continue
                    cis += [
                        {
                            "id": self.nvml.compute_instance_info(c).id,
                            "full": ci_const == CI_PROFILE_FOR_SLICES[prof.slice_count],
                        }
                        for c in self.nvml.compute_instances(gi, cip.id)
                    ]
                out.append(
                    {
                        "gi": info.id,
                        "profile": prof.name.removeprefix("MIG "),
                        "start": info.placement.start,
                        "size": info.placement.size,
                        "cis": sorted(cis, key=lambda c: c["id"]),
                    }
                )
        return sorted(out, key=lambda g: g["gi"])

    def mig_devices(self, index: int) -> list[dict[str, Any]]:
        """MIG devices in NVML's MIG index order."""
        h = self.nvml.device_by_uuid(self.uuid(index))
        out = []
        for i in range(self.nvml.max_mig_device_count(h)):
            try:
                m = self.nvml.mig_device_by_index(h, i)
            except NvmlError as exc:
                if exc.code == NVML_ERROR_NOT_FOUND:
                    continue
                raise
            out.append(
                {
                    "index": i,
                    "gi": self.nvml.mig_gpu_instance_id(m),
                    "ci": self.nvml.mig_compute_instance_id(m),
                    "uuid": self.nvml.uuid(m),
                }
            )
        return out

    def create_raw(self, index: int, profile_name: str, start: int, with_ci: bool = True) -> int:
        """Create one GI (and its full CI) directly, bypassing the manager; returns the GI id."""
        h = self.nvml.device_by_uuid(self.uuid(index))
        cat = self.manager.gpu(self.uuid(index)).catalog
        prof = cat.by_name(profile_name)
        placement = next(p for p in prof.placements if p.start == start)
        gi = self.nvml.create_gpu_instance(h, prof.profile_id, placement)
        if with_ci:
            cip = self.nvml.compute_instance_profile_info(gi, prof.ci_constant)
            self.nvml.create_compute_instance(gi, cip.id)
        return self.nvml.gpu_instance_info(gi).id

    def clear(self, index: int) -> None:
        """Destroy every instance (test set-up only)."""
        h = self.nvml.device_by_uuid(self.uuid(index))
        for g in self.layout(index):
            gi = self.nvml.gpu_instance_by_id(h, g["gi"])
            for constant in range(0x9):
                try:
                    cip = self.nvml.compute_instance_profile_info(gi, constant)
                except NvmlError:
                    continue
                for ci in self.nvml.compute_instances(gi, cip.id):
                    self.nvml.destroy_compute_instance(ci)
            self.nvml.destroy_gpu_instance(gi)


def inject_error(function: str, code: int) -> None:
    """Make ``function`` answer ``code`` from now on (rewrites the fake's config atomically)."""
    path = pathlib.Path(os.environ["FAKE_NVML_CONFIG"])
    data = json.loads(path.read_text())
    data.setdefault("errors", {})[function] = code
    write_json_atomic(path, data)
