"""Stand-ins that speak the real protocols: fake NVML helper, fake kubelet, simulated API server, scheduler emulator."""
