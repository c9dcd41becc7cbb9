"""Stand-ins that speak the real protocols (fake NVML, kubelet, API server, Volcano scheduler, libvgpu) and the demo."""
