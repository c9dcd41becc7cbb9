"""Simulated Kubernetes API server: real HTTP, a versioned store, watches, patches, selectors and fault injection."""

from vgpu.sim.apiserver.server import ApiServer

__all__ = ["ApiServer"]
