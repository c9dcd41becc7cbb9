"""How a container's device list reaches the runtime: the device-list strategies (docs/cdi.md §3).

An allocation yields the container's devices as ``NVIDIA_VISIBLE_DEVICES`` — GPU UUIDs for
hami-core (built by :func:`vgpu.hamicore.contract.build_container_contract`, the one builder of
the container env), MIG UUIDs for mig.  :class:`DeviceListPolicy` turns that list into what the
configured strategies ask for, leaving every other env var and mount (HAMi-core's ``libvgpu.so``,
``ld.so.preload``, cache directory, lock) untouched, because the kubelet applies those under any
runtime:

- ``envvar``: ``NVIDIA_VISIBLE_DEVICES=<ids>`` (the NVIDIA runtime injects the devices);
- ``volume-mounts``: ``NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices`` and one
  ``/dev/null`` mount per device under it;
- ``cdi-cri``: ``cdi_devices`` with the fully qualified CDI names;
- ``cdi-annotations``: one ``<prefix>vgpu-device-plugin_<response id>`` annotation, its value the
  comma-joined names.

With only CDI strategies ``NVIDIA_VISIBLE_DEVICES`` is not returned.  :class:`CdiNamer` names each
device as the NVIDIA Container Toolkit does (docs/cdi.md §4).
"""

from __future__ import annotations

import os
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from vgpu.plugin.api import pb
from vgpu.protocol import cdi

MigIndex = Callable[[str], tuple[int, int] | None]
"""MIG UUID → (parent GPU NVML index, MIG device index), None when NVML does not know it."""


class CdiNameError(RuntimeError):
    """A device the configured name strategy cannot name; the message is user-facing."""


@dataclass(frozen=True)
class DeviceListPolicy:
    """The validated CDI settings (docs/configuration.md §5.5; their defaults are ``PluginOptions``')."""

    strategies: tuple[str, ...]
    kind: str
    name_strategy: str
    annotation_prefix: str
    spec_dirs: tuple[str, ...]

    @classmethod
    def from_settings(
        cls, device_list_strategy: str, annotation_prefix: str, name_strategy: str, kind: str, spec_dirs: str
    ) -> DeviceListPolicy:
        """Raises :class:`vgpu.protocol.cdi.CdiError` naming the bad value."""
        cdi.parse_kind(kind)
        dirs = tuple(d.strip() for d in spec_dirs.split(",") if d.strip())
        for d in dirs:
            if not os.path.isabs(d):
                raise cdi.CdiError(f"CDI spec directory {d!r}: must be an absolute path")
        strategies = cdi.parse_strategies(device_list_strategy)
        if cdi.uses_cdi(strategies) and not dirs:
            raise cdi.CdiError("CDI spec directories: at least one is needed with a CDI strategy")
        return cls(
            strategies=strategies,
            kind=kind,
            name_strategy=cdi.parse_name_strategy(name_strategy),
            annotation_prefix=cdi.check_annotation_prefix(annotation_prefix),
            spec_dirs=dirs,
        )

    @property
    def uses_cdi(self) -> bool:
        return cdi.uses_cdi(self.strategies)

    @property
    def is_plain_envvar(self) -> bool:
        """Nothing to change: the allocation's own response is already what ``envvar`` returns."""
        return self.strategies == (cdi.ENVVAR,)

    def apply(
        self,
        resp: pb.ContainerAllocateResponse,
        names: Callable[[str], str],
        response_id: Callable[[], str] = lambda: str(uuidlib.uuid4()),
    ) -> pb.ContainerAllocateResponse:
        """``resp`` with its device list passed as the strategies say; an empty response stays empty.

        ``names`` maps a device ID (GPU or MIG UUID) to its CDI device name (unqualified).
        """
        ids = [i for i in resp.envs.get(cdi.VISIBLE_DEVICES_ENV, "").split(",") if i]
        if not ids:
            return resp
        out = pb.ContainerAllocateResponse()
        out.CopyFrom(resp)
        del out.envs[cdi.VISIBLE_DEVICES_ENV]
        qualified = [cdi.qualified_name(self.kind, names(i)) for i in ids] if self.uses_cdi else []
        if cdi.ENVVAR in self.strategies:
            out.envs[cdi.VISIBLE_DEVICES_ENV] = ",".join(ids)
        if cdi.VOLUME_MOUNTS in self.strategies:
            out.envs[cdi.VISIBLE_DEVICES_ENV] = cdi.VOLUME_MOUNTS_ROOT
            out.mounts.extend(
                pb.Mount(container_path=f"{cdi.VOLUME_MOUNTS_ROOT}/{i}", host_path=cdi.VOLUME_MOUNTS_HOST_PATH)
                for i in ids
            )
        if cdi.CDI_CRI in self.strategies:
            out.cdi_devices.extend(pb.CDIDevice(name=n) for n in qualified)
        if cdi.CDI_ANNOTATIONS in self.strategies:
            out.annotations[cdi.annotation_key(self.annotation_prefix, response_id())] = cdi.annotation_value(qualified)
        return out


def response_cdi_names(resp: pb.ContainerAllocateResponse, prefix: str) -> list[str]:
    """Every CDI name a response hands the runtime (``cdi_devices`` and ``<prefix>*`` annotations)."""
    names = [d.name for d in resp.cdi_devices]
    for key, value in resp.annotations.items():
        if key.startswith(prefix):
            names.extend(v for v in value.split(",") if v)
    return list(dict.fromkeys(names))


@dataclass
class CdiNamer:
    """Device ID → CDI device name under one name strategy (docs/cdi.md §4)."""

    strategy: str
    gpu_index: Mapping[str, int] = field(default_factory=dict)
    mig_index: MigIndex | None = None

    def __call__(self, device_id: str) -> str:
        if self.strategy == cdi.NAME_UUID:
            return cdi.check_device_name(device_id)
        if device_id.startswith("MIG-"):
            where = self.mig_index(device_id) if self.mig_index is not None else None
            if where is None:
                raise CdiNameError(
                    f"CDI name strategy index: MIG device {device_id} is not on any advertised GPU; "
                    "cannot name it <GPU index>:<MIG index>"
                )
            return cdi.mig_device_name(cdi.NAME_INDEX, where[0], where[1], device_id)
        index = self.gpu_index.get(device_id)
        if index is None:
            raise CdiNameError(f"CDI name strategy index: GPU {device_id} is not advertised on this node")
        return cdi.gpu_device_name(cdi.NAME_INDEX, index, device_id)

    def qualified(self, kind: str, device_ids: Sequence[str]) -> list[str]:
        return [cdi.qualified_name(kind, self(i)) for i in device_ids]
