"""A CDI resolver stand-in: what a container runtime with CDI does with the names it is given."""

from vgpu.sim.cdi.resolver import CdiResolver, ContainerEdits, UnresolvableCdiDevices

__all__ = ["CdiResolver", "ContainerEdits", "UnresolvableCdiDevices"]
