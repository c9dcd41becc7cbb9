"""Stand-in for libvgpu (HAMi-core): writes shared-region files as it does, and decodes them independently."""
