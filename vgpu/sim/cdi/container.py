"""What a container would get from the runtime, for the demo: its GPUs under any device-list strategy.

Under ``envvar`` the devices are ``NVIDIA_VISIBLE_DEVICES``; under ``volume-mounts`` the file
names under ``/var/run/nvidia-container-devices``; under a CDI strategy the resolved CDI names
(with the ``uuid`` name strategy the device part is the GPU or MIG UUID).  The simulated
containers of the demo use this list as the GPUs their NVML would see.
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.sim.cdi.resolver import CdiResolver, ContainerEdits, UnresolvableCdiDevices, names_of
from vgpu.sim.kubelet.admission import ContainerResult

VOLUME_MOUNTS_ROOT = "/var/run/nvidia-container-devices"


@dataclass
class RuntimeView:
    devices: list[str]
    cdi_names: list[str]
    edits: ContainerEdits | None = None
    error: str | None = None


def runtime_view(c: ContainerResult, resolver: CdiResolver | None) -> RuntimeView:
    env = c.envs.get("NVIDIA_VISIBLE_DEVICES", "")
    try:
        names = names_of(c.cdi_devices, c.annotations)
    except UnresolvableCdiDevices as exc:
        return RuntimeView([], [], error=str(exc))
    view = RuntimeView([], names)
    if names and resolver is not None:
        resolver.refresh()
        try:
            view.edits = resolver.resolve(names)
        except UnresolvableCdiDevices as exc:
            view.error = str(exc)
    if env == VOLUME_MOUNTS_ROOT:
        view.devices = [m.container_path.rsplit("/", 1)[1] for m in c.mounts if m.container_path.startswith(env + "/")]
    elif env:
        view.devices = [d for d in env.split(",") if d]
    elif names and view.error is None:
        view.devices = [n.partition("=")[2] for n in names]
    return view


def describe(view: RuntimeView) -> list[str]:
    """Lines for the demo: the CDI names and what the runtime made of them."""
    lines = [f"cdi   {n}" for n in view.cdi_names]
    if view.error is not None:
        lines.append(f"runtime: {view.error} (the container would not start)")
    elif view.edits is not None:
        e = view.edits
        libs = ", ".join(c.rsplit("/", 1)[-1] for _, c in e.mounts)
        lines.append(
            f"runtime: CDI resolved {len(view.cdi_names)} device(s): nodes {', '.join(e.device_nodes)}; "
            f"mounts {libs}; env {', '.join(e.env)}"
        )
    return lines
