"""Fake kubelet: the device manager's end of the device-plugin API (registration, ListAndWatch, pod admission)."""

from vgpu.sim.kubelet.device_manager import FakeKubelet, PluginClient

__all__ = ["FakeKubelet", "PluginClient"]
